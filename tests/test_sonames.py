"""NVIDIA sonames held to the row's train (buildrows.check.sonames): what the libraries NEED and what
the wheel ships, private copies renamed by auditwheel or torch's relocation included. Wheels are
made by hand (tests/cuda_tools.py): no toolchain needed."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cuda_tools import fatbin_container, fatbin_entry, make_elf, make_wheel

from buildrows.check.sonames import nvidia_soname
from tests.conftest import REPO, Result

sys.path.insert(0, str(REPO / "scripts"))
import make_check_fixtures as mcf

CODE = fatbin_container([fatbin_entry(2, 75), fatbin_entry(2, 90), fatbin_entry(1, 90)])


@pytest.mark.parametrize(
    ("name", "base", "major", "private"),
    [
        ("libcudart.so.13", "libcudart", 13, False),
        ("libcudart.so.11.0", "libcudart", 11, False),
        ("libcudart-1a2b3c4d.so.13", "libcudart", 13, True),  # auditwheel
        ("torchvision.libs/libcudart.e8e8b82a.so.12", "libcudart", 12, True),  # torch's relocation
        ("libcublasLt.so.12", "libcublasLt", 12, False),
        ("libcublasLt-0f1e2d3c.so.13.1.0", "libcublasLt", 13, True),
        ("libnvrtc-builtins.so.13.0", "libnvrtc-builtins", 13, False),
        ("libnvrtc.alt.so.13", "libnvrtc", 13, False),  # NVIDIA's alternate, not a private copy
        ("libnppial.so.12", "libnppial", 12, False),
        ("libnvJitLink.so.12", "libnvJitLink", 12, False),
        ("libcudnn.so.9", None, None, None),  # versioned apart from the toolkit
        ("libcutensor.so.2", None, None, None),
        ("libcudart.so", None, None, None),  # no major to judge
        ("libcurl.so.4", None, None, None),
        ("libcudart_static.a", None, None, None),
    ],
)
def test_which_names_are_nvidia_sonames(name: str, base: str | None, major: int | None, private: bool | None) -> None:
    s = nvidia_soname(name)
    assert ((s.base, s.major, s.private) if s else (None, None, None)) == (base, major, private)


def _check(tmp_path: Path, cli: Callable[..., Result], libs: dict[str, list[str]], train: str) -> Result:
    """A wheel whose `fx/_core.so` carries the row's device code; each member NEEDS the listed names."""
    members = {path: make_elf([(".nv_fatbin", CODE)] if path == "fx/_core.so" else [], needed=needed or ["libc.so.6"],
                              runpath=mcf.GOOD_RPATH)
               for path, needed in libs.items()}
    cu = train.replace(".", "")
    wheel = make_wheel(tmp_path / f"fx-1.0+cu{cu}-cp312-cp312-manylinux_2_28_x86_64.whl", members)
    return cli("check", str(wheel), "--archs", "7.5 9.0", "--json")


@pytest.mark.parametrize(
    ("libs", "train", "ok", "message"),
    [
        ({"fx/_core.so": ["libcudart.so.12"]}, "13.0", False,
         "fx/_core.so: links libcudart.so.12 (cudart (the CUDA runtime) of CUDA 12), but the row is CUDA 13.0, "
         "which ships libcudart.so.13: it does not load where the row's CUDA is installed; fix: build it with the "
         "CUDA 13.0 toolkit and libraries, or check the wheel against a CUDA 12.x row"),
        ({"fx/_core.so": ["libcudart.so.13", "libcufft.so.11"]}, "13.0", False,
         "fx/_core.so: links libcufft.so.11 (cuFFT of CUDA 12), but the row is CUDA 13.0, which ships libcufft.so.12"),
        ({"fx/_core.so": ["libcudart.so.13", "libcusolver.so.11"]}, "13.0", False,
         "links libcusolver.so.11 (cuSOLVER of CUDA 11/12), but the row is CUDA 13.0, which ships libcusolver.so.12"),
        ({"fx/_core.so": ["libcudart.so.12", "libnvJitLink.so.13"]}, "12.8", False,
         "links libnvJitLink.so.13 (nvJitLink of CUDA 13), but the row is CUDA 12.8, which ships libnvJitLink.so.12"),
        ({"fx/_core.so": ["libcudart.so.12", "libnppc.so.13"]}, "12.8", False,
         "links libnppc.so.13 (NPP of CUDA 13), but the row is CUDA 12.8, which ships libnppc.so.12"),
        ({"fx/_core.so": ["libcudart.so.12", "libnvjpeg.so.13"]}, "12.8", False,
         "links libnvjpeg.so.13 (nvJPEG of CUDA 13), but the row is CUDA 12.8, which ships libnvjpeg.so.12"),
        ({"fx/_core.so": ["libcudart.so.13", "libcublas.so.12", "libcublasLt.so.12"]}, "13.0", False,
         "links libcublasLt.so.12 (cuBLASLt of CUDA 12), but the row is CUDA 13.0, which ships libcublasLt.so.13"),
        ({"fx/_core.so": ["libcudart.so.11.0"]}, "12.8", False,
         "links libcudart.so.11.0 (cudart (the CUDA runtime) of CUDA 11), but the row is CUDA 12.8"),
        # auditwheel's private copy, NEEDED and shipped: reported by name, held to the train
        ({"fx/_core.so": ["libcudart-1a2b3c4d.so.12"], "fx.libs/libcudart-1a2b3c4d.so.12": []}, "13.0", False,
         "fx.libs/libcudart-1a2b3c4d.so.12: is cudart (the CUDA runtime) of CUDA 12 (a private copy of "
         "libcudart.so.12), but the row is CUDA 13.0 (libcudart.so.13): the wheel carries another train's cudart "
         "(the CUDA runtime), so its CUDA code runs as CUDA 12's, not the row's"),
        ({"fx/_core.so": ["libcudart-1a2b3c4d.so.13"], "fx.libs/libcudart-1a2b3c4d.so.13": []}, "13.0", True,
         "private copies (renamed by auditwheel or torch's relocation): fx.libs/libcudart-1a2b3c4d.so.13 "
         "(cudart (the CUDA runtime), libcudart.so.13)"),
        ({"fx/_core.so": ["libcudart.e8e8b82a.so.12"], "fx.libs/libcudart.e8e8b82a.so.12": []}, "12.8", True,
         "fx.libs/libcudart.e8e8b82a.so.12 (cudart (the CUDA runtime), libcudart.so.12)"),
        # NVIDIA's library wheels ship the library itself
        ({"fx/_core.so": ["libcudart.so.12"], "nvidia/nvjpeg/lib/libnvjpeg.so.12": []}, "12.9", True,
         "CUDA 12.9: libcudart.so.12, libnvjpeg.so.12 are CUDA 12's"),
        ({"fx/_core.so": ["libcudart.so.13", "libcufft.so.12", "libcurand.so.10", "libcusparse.so.12",
                          "libcudnn.so.9", "libcutensor.so.2"]}, "13.0", True,
         "CUDA 13.0: libcudart.so.13, libcufft.so.12, libcurand.so.10, libcusparse.so.12 are CUDA 13's"),
        ({"fx/_core.so": []}, "13.0", True,
         "no library links or ships an NVIDIA library with a versioned name"),
    ],
)
def test_soname_majors_against_the_train(libs: dict[str, list[str]], train: str, ok: bool, message: str,
                                         tmp_path: Path, cli: Callable[..., Result],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = _check(tmp_path, cli, libs, train)
    check = {c["name"]: c for c in json.loads(r.out)["checks"]}["cuda-soname-majors"]
    assert check["ok"] is ok, check
    assert any(message in d for d in check["details"]), check["details"]


def test_many_libraries_with_one_problem_give_one_line(tmp_path: Path, cli: Callable[..., Result],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    libs = {"fx/_core.so": ["libcudart.so.12"], **{f"fx/_k{i}.so": ["libcudart.so.12"] for i in range(5)}}
    r = _check(tmp_path, cli, libs, "13.0")
    check = {c["name"]: c for c in json.loads(r.out)["checks"]}["cuda-soname-majors"]
    assert check["details"][0].startswith("6 libraries (fx/_core.so, fx/_k0.so, fx/_k1.so and 3 more): links "
                                          "libcudart.so.12"), check
    assert len(check["details"]) == 1


def test_cpu_rows_and_windows_have_no_soname_check(tmp_path: Path, cli: Callable[..., Result],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    wheel = make_wheel(tmp_path / "fx-1.0-cp312-cp312-manylinux_2_28_x86_64.whl",
                       {"fx/_core.so": make_elf(needed=["libc.so.6"])}, metadata="Metadata-Version: 2.1\nName: fx\n")
    r = cli("check", str(wheel), "--json")
    assert "cuda-soname-majors" not in [c["name"] for c in json.loads(r.out)["checks"]]


@pytest.mark.parametrize(
    ("name", "base", "major", "at_13"),
    [
        ("cudart64_13.dll", "libcudart", 13, "cudart64_13.dll"),
        ("cudart64_110.dll", "libcudart", 11, "cudart64_13.dll"),  # CUDA 11's runtime carries its minor
        ("cublasLt64_12.dll", "libcublasLt", 12, "cublasLt64_13.dll"),
        ("cufft64_11.dll", "libcufft", 11, "cufft64_13.dll"),
        ("nvrtc64_120_0.dll", "libnvrtc", 12, "nvrtc64_130_0.dll"),
        ("nvJitLink_120_0.dll", "libnvJitLink", 12, "nvJitLink_130_0.dll"),
        ("nppc64_12.dll", "libnppc", 12, "nppc64_13.dll"),
        ("nvcuda.dll", None, None, None),  # the driver: no CUDA major
        ("cudnn64_9.dll", None, None, None),
        ("KERNEL32.dll", None, None, None),
    ],
)
def test_which_dll_names_are_nvidia_libraries(name: str, base: str | None, major: int | None,
                                              at_13: str | None) -> None:
    from buildrows.check.sonames import nvidia_dll

    s = nvidia_dll(name)
    assert ((s.base, s.major, s.spelled(13)) if s else (None, None, None)) == (base, major, at_13)


def test_windows_dlls_are_held_to_the_train() -> None:
    """A DLL importing CUDA 12's cuBLAS in a CUDA 13.0 row; the driver and a CUDA 13 cuFFT pass."""
    from buildrows.binaries.wheelread import LibraryInfo, WheelInfo, parse_wheel_filename
    from buildrows.check.judging import Expectation
    from buildrows.check.sonames import check_soname_majors
    from buildrows.policy.trains import Train

    name = "fx-1.0+cu130-cp312-cp312-win_amd64.whl"
    lib = LibraryInfo("fx/_core.pyd", "pe", 1, "x86_64", imports=("nvcuda.dll", "cublas64_12.dll", "cufft64_12.dll"))
    info = WheelInfo(Path(name), parse_wheel_filename(name), (), (lib,), ("fx/_core.pyd",))
    result = check_soname_majors(Expectation("windows-amd64-cu130-py312", "windows-amd64", Train(13, 0), None), info)
    assert not result.ok
    assert result.details == [
        "fx/_core.pyd: links cublas64_12.dll (cuBLAS of CUDA 12), but the row is CUDA 13.0, which ships "
        "cublas64_13.dll: it does not load where the row's CUDA is installed; fix: build it with the CUDA 13.0 "
        "toolkit and libraries, or check the wheel against a CUDA 12.x row"]
    lib = LibraryInfo("fx/_core.pyd", "pe", 1, "x86_64", delay_imports=("cufft64_12.dll",))
    info = WheelInfo(Path(name), parse_wheel_filename(name), (), (lib,), ("fx/_core.pyd",))
    result = check_soname_majors(Expectation("windows-amd64-cu130-py312", "windows-amd64", Train(13, 0), None), info)
    assert result.ok and result.details == ["CUDA 13.0: cufft64_12.dll are CUDA 13's"]


def test_a_library_of_a_major_the_train_lacks(tmp_path: Path, cli: Callable[..., Result],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """nvJitLink came with CUDA 12: a CUDA 11.8 row has none to give."""
    monkeypatch.chdir(tmp_path)
    r = _check(tmp_path, cli, {"fx/_core.so": ["libcudart.so.11.0"], "fx.libs/libnvJitLink.so.12": []}, "11.8")
    check = {c["name"]: c for c in json.loads(r.out)["checks"]}["cuda-soname-majors"]
    assert check["details"] == [
        "fx.libs/libnvJitLink.so.12: is nvJitLink of CUDA 12 (libnvJitLink.so.12), but the row is CUDA 11.8, "
        "which has no nvJitLink; fix: drop it, or check the wheel against a CUDA 12.x row"]


def test_nvidia_packages_agree_with_the_soname_majors() -> None:
    """buildrows/data/nvidia_packages.toml (which package carries which soname, for preload mode)
    and buildrows/data/cuda_sonames.toml (which soname major each CUDA major ships) state one fact
    twice: every package's versioned NVIDIA sonames must have its CUDA major's soname major."""
    from buildrows.check.nvidia import packages
    from buildrows.check.runtime import _package_major

    judged = 0
    for pkg in packages().values():
        cuda = _package_major(pkg.name)
        assert cuda is not None, pkg.name
        for soname in pkg.sonames:
            s = nvidia_soname(soname)
            if s is None:
                continue  # cuDNN, NCCL, NVSHMEM ...: versioned apart from the toolkit
            judged += 1
            assert s.expected(cuda) == s.major, f"{pkg.name}: {soname} is not CUDA {cuda}'s ({s.expected(cuda)})"
    assert judged >= 30

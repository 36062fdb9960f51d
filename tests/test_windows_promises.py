"""Every promise judged on every platform it can be made for (issue 36, item 5): a preload `extra` the
wheel does not declare fails (Linux and Windows); a win_amd64 wheel's runtime mode is judged from its
DLLs' imports (tests/pe_fixture.py: real DLLs made by MinGW) and from the reader's import tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from buildrows.binaries.wheelread import LibraryInfo, WheelInfo, parse_wheel_filename
from buildrows.check.judges import run_checks
from buildrows.check.judging import Expectation
from buildrows.policy.archs import Train, parse_arch_list
from tests.pe_fixture import build_pe_dll

T130 = Train(13, 0)
LINUX = "pkg-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
WINDOWS = "pkg-1.0-cp312-cp312-win_amd64.whl"
CUBLAS = "nvidia-cublas>=13,<14; extra == 'cu13'"


def _elf(path: str, *needed: str) -> LibraryInfo:
    return LibraryInfo(path=path, format="elf", size=1, machine="x86_64", cubins=("sm_80",), ptx=("sm_80",),
                       needed=needed)


def _dll(path: str, *imports: str) -> LibraryInfo:
    return LibraryInfo(path=path, format="pe", size=1, machine="x86_64", cubins=("sm_80",), ptx=("sm_80",),
                       imports=imports)


def _wheel(name: str, libs: list[LibraryInfo], requires: tuple[str, ...] = ()) -> WheelInfo:
    return WheelInfo(Path(name), parse_wheel_filename(name), requires, tuple(libs), tuple(lib.path for lib in libs))


def _exp(platform: str, mode: str, extra: str | None = None) -> Expectation:
    return Expectation("row", platform, T130, parse_arch_list("8.0"), machine="x86_64", mode=mode,  # type: ignore[arg-type]
                       mode_reason="loads cuBLAS itself" if mode == "preload" else "", runtime_extra=extra)


def _checks(exp: Expectation, wheel: WheelInfo) -> dict[str, tuple[bool, list[str]]]:
    return {r.name: (r.ok, r.details) for r in run_checks(exp, wheel)}


@pytest.mark.parametrize(("platform", "name", "lib"), [
    ("linux-x86_64", LINUX, _elf("pkg/_C.so", "libcublas.so.13")),
    ("windows-amd64", WINDOWS, _dll("pkg/_C.pyd", "cublas64_13.dll")),
])
def test_a_preload_extra_the_wheel_does_not_declare_fails(platform: str, name: str, lib: LibraryInfo) -> None:
    wheel = _wheel(name, [lib], (CUBLAS,))
    ok, details = _checks(_exp(platform, "preload", "cuda"), wheel)["runtime-declared"]
    assert not ok
    assert details[0] == (
        "missing: [cuda.runtime.13] extra = 'cuda', but the wheel declares no such extra (the extras its "
        "Requires-Dist names: 'cu13'): `pip install 'pkg[cuda]'` installs no NVIDIA package; fix: declare the "
        "NVIDIA packages under that extra in the project's metadata (extras_require / "
        "[project.optional-dependencies]), or set extra to the one the wheel declares ('cu13')")
    # the extra it declares: kept, on both platforms
    checks = _checks(_exp(platform, "preload", "cu13"), wheel)
    assert checks["runtime-declared"][0], checks["runtime-declared"]
    assert checks["runtime-reached"][0], checks["runtime-reached"]


def test_windows_preload_holds_imported_nvidia_dlls_to_the_declared_packages() -> None:
    wheel = _wheel(WINDOWS, [_dll("pkg/_C.pyd", "cublas64_13.dll")], ("nvidia-cublas>=13,<14; platform_system == 'Linux' and extra == 'cu13'",))
    ok, details = _checks(_exp("windows-amd64", "preload", "cu13"), wheel)["runtime-reached"]
    assert not ok
    assert details == [
        "pkg/_C.pyd imports cublas64_13.dll, which none of the NVIDIA packages the wheel declares for Windows under "
        "extra 'cu13' carries (none declared); fix: declare the package that installs it without a Linux-only "
        "marker, or optional = [\"libcublas.so.*\"] under [cuda.runtime.13] if it is loaded only when present"]


@pytest.mark.parametrize(("mode", "imports", "ok", "line"), [
    ("static", (), True, "Windows, [cuda.runtime.13] mode \"static\": the runtime is linked in: none of the 1 DLLs "
                         "imports cudart64_*.dll"),
    ("dynamic", (), True, "Windows, [cuda.runtime.13] mode \"dynamic\", which on Windows means the runtime is linked "
                          "in (Windows wheels declare no NVIDIA package for a DLL to load: the runtime package's "
                          "requirements are Linux's): none of the 1 DLLs imports cudart64_*.dll"),
    # torch brings cudart64_13.dll: only a DLL that imports torch may import it, and some DLL must import torch
    ("torch", ("cudart64_13.dll", "c10.dll", "torch_cpu.dll"), True,
     "Windows, [cuda.runtime.13] mode \"torch\": 1 of 1 DLLs import torch, which brings the CUDA runtime "
     "(cudart64_13.dll)"),
    ("torch", ("cudart64_13.dll",), False,
     "pkg/_C.pyd imports cudart64_13.dll but no torch DLL (c10.dll, torch_cpu.dll, ...): in [cuda.runtime.13] mode "
     "\"torch\" torch/lib brings cudart64_13.dll, and only a DLL that loads torch first finds it"),
    ("torch", (), False, "[cuda.runtime.13] mode is \"torch\" (torch brings the CUDA runtime), but none of the 1 DLLs "
                         "imports torch (c10.dll, torch_cpu.dll, torch_cuda.dll)"),
])
def test_windows_runtime_modes(mode: str, imports: tuple[str, ...], ok: bool, line: str) -> None:
    checks = _checks(_exp("windows-amd64", mode), _wheel(WINDOWS, [_dll("pkg/_C.pyd", *imports)]))
    got, details = checks["runtime-reached"]
    assert got is ok, details
    assert any(line in d for d in details), details
    # a torch extension's cudart import is torch's: no-cudart-import leaves it to runtime-reached
    if mode == "torch" and imports:
        assert checks["no-cudart-import"][0], checks["no-cudart-import"]


def test_real_dlls_static_and_torch(tmp_path: Path) -> None:
    """MinGW DLLs: one importing cudart64_13.dll (tests/pe_fixture.py), one importing only the driver."""
    from buildrows.binaries.looseread import read_loose

    dll = build_pe_dll(tmp_path / "a", b"", import_cudart=True, name="_C")
    (lib,) = read_loose(dll).libraries
    assert "cudart64_13.dll" in lib.imports
    wheel = _wheel(WINDOWS, [LibraryInfo(path="pkg/_C.pyd", format="pe", size=lib.size, machine=lib.machine,
                                         imports=lib.imports, cubins=("sm_80",))])
    checks = _checks(_exp("windows-amd64", "static"), wheel)
    assert not checks["no-cudart-import"][0]
    assert checks["no-cudart-import"][1] == ["pkg/_C.pyd imports cudart64_13.dll: link cudart statically so the DLL "
                                             "reaches the driver (nvcuda.dll) instead of a cudart DLL no wheel provides"]
    assert checks["runtime-reached"][1] == ["Windows, [cuda.runtime.13] mode \"static\": the runtime is linked in: 1 "
                                            "cudart64_*.dll imports, which no-cudart-import fails"]
    # the same DLL under mode torch: it imports no torch DLL, so torch's cudart64_13.dll is not found
    checks = _checks(_exp("windows-amd64", "torch"), wheel)
    assert not checks["runtime-reached"][0]
    assert "pkg/_C.pyd imports cudart64_13.dll but no torch DLL" in checks["runtime-reached"][1][0]


def test_windows_mode_none_says_what_it_cannot_judge() -> None:
    ok, details = _checks(_exp("windows-amd64", "none"), _wheel(WINDOWS, [_dll("pkg/_C.pyd", "nvcuda.dll")]))[
        "runtime-reached"]
    assert ok
    assert details == ["Windows, [cuda.runtime.13] mode \"none\": the wheel links no CUDA runtime: none of the 1 DLLs "
                       "imports cudart64_*.dll; a cudart linked in statically is not judged on Windows: a DLL's "
                       "tables name none of its entry points (cuda-host-code judges that in ELF libraries only)"]

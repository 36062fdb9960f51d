"""Build a Windows DLL carrying a fat binary, with MinGW-w64 (Debian: gcc-mingw-w64-x86-64).

The DLL gets the given bytes in a section named ``.nv_fatbin`` and, optionally, an import of
``cudart64_13.dll`` through an import library made from a one-line ``.def`` file, so tests of the
PE reader and of the Windows checks need no Windows machine and no CUDA for Windows.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

MINGW_GCC = "x86_64-w64-mingw32-gcc"
MINGW_DLLTOOL = "x86_64-w64-mingw32-dlltool"
MINGW_OBJCOPY = "x86_64-w64-mingw32-objcopy"


def mingw_available() -> bool:
    return all(shutil.which(tool) for tool in (MINGW_GCC, MINGW_DLLTOOL))


def _c_array(data: bytes) -> str:
    lines = (", ".join(str(b) for b in data[i : i + 32]) for i in range(0, len(data), 32))
    return ",\n".join(lines) or "0"


def build_pe_dll(
    out_dir: Path,
    fatbin_bytes: bytes,
    import_cudart: bool,
    *,
    name: str = "devicecode",
    long_section_names: bool = False,
) -> Path:
    """Build ``<name>.dll`` in ``out_dir``; skips the calling test when MinGW is missing.

    With ``long_section_names`` False the linker truncates the section name to ``.nv_fatb``, as
    MSVC's link.exe does for nvcc-built DLLs; with True MinGW keeps ``.nv_fatbin`` through the
    COFF string table.
    """
    if not mingw_available():
        pytest.skip(f"{MINGW_GCC}/{MINGW_DLLTOOL} not found (apt-get install gcc-mingw-w64-x86-64)")
    out_dir.mkdir(parents=True, exist_ok=True)
    size = max(len(fatbin_bytes), 1)
    source = out_dir / f"{name}.c"
    call = "cudaGetDeviceCount(&n);" if import_cudart else ""
    source.write_text(
        f"""\
__attribute__((section(".nv_fatbin"), used, aligned(8)))
const unsigned char buildrows_fatbin[{size}] = {{
{_c_array(fatbin_bytes)}
}};
extern int cudaGetDeviceCount(int *count);
__declspec(dllexport) int buildrows_probe(void) {{
    int n = 0;
    {call}
    return n + buildrows_fatbin[0];
}}
""",
        encoding="utf-8",
    )
    cmd = [MINGW_GCC, "-shared", "-O1", "-o", str(out_dir / f"{name}.dll"), str(source)]
    if import_cudart:
        definition = out_dir / "cudart64_13.def"
        definition.write_text(
            "LIBRARY cudart64_13.dll\nEXPORTS\ncudaGetDeviceCount\n", encoding="ascii"
        )
        implib = out_dir / "libcudart64_13.a"
        _run([MINGW_DLLTOOL, "-d", str(definition), "-l", str(implib)])
        cmd += [f"-L{out_dir}", "-lcudart64_13"]
    if long_section_names:
        cmd += ["-Wl,--enable-long-section-names"]
    else:
        cmd += ["-s", "-Wl,--disable-long-section-names"]
    _run(cmd)
    return out_dir / f"{name}.dll"


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")

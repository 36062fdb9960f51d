"""Build a Windows DLL carrying a fat binary, with MinGW-w64 (Debian: gcc-mingw-w64-x86-64).

The DLL gets the given bytes in a section named ``.nv_fatbin`` and, optionally, an import of
``cudart64_13.dll`` through an import library made from a one-line ``.def`` file, so tests of the
PE reader and of the Windows checks need no Windows machine and no CUDA for Windows.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from make_check_fixtures import MINGW_DLLTOOL, MINGW_GCC, mingw_available
from make_check_fixtures import build_pe_dll as _build_pe_dll

MINGW_OBJCOPY = "x86_64-w64-mingw32-objcopy"
__all__ = ["MINGW_DLLTOOL", "MINGW_GCC", "MINGW_OBJCOPY", "build_pe_dll", "mingw_available"]


def build_pe_dll(out_dir: Path, fatbin_bytes: bytes, import_cudart: bool, *, name: str = "devicecode",
                 long_section_names: bool = False) -> Path:
    """Build `<name>.dll` (scripts/make_check_fixtures.py); skips the calling test when MinGW is missing."""
    if not mingw_available():
        pytest.skip(f"{MINGW_GCC}/{MINGW_DLLTOOL} not found (apt-get install gcc-mingw-w64-x86-64)")
    return _build_pe_dll(out_dir, fatbin_bytes, import_cudart, name=name, long_section_names=long_section_names)

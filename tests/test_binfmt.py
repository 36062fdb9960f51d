"""Finding fat binaries and links in ELF and PE files, and refusing malformed ones."""

from __future__ import annotations

import contextlib
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from cuda_tools import (
    build_plain_so,
    cuobjdump_list,
    fatbin_container,
    fatbin_entry,
    find_cuobjdump,
    find_nvcc,
    make_elf,
    section_bytes,
)
from pe_fixture import MINGW_OBJCOPY, build_pe_dll, mingw_available

from buildrows.binaries.binfmt import BinaryFormatError, detect_format, read_binary
from buildrows.binaries.fatbin import DeviceCode, list_device_code

FATBIN = fatbin_container([fatbin_entry(sm=90), fatbin_entry(kind=1, sm=90, header_size=80)])


def test_hand_made_elf() -> None:
    elf = make_elf(
        [(".nv_fatbin", FATBIN), (".text", b"\x90" * 16)],
        needed=["libcudart.so.13", "libc.so.6"],
        rpath="$ORIGIN/../nvidia/cu13/lib:$ORIGIN",
        runpath="/usr/local/cuda/lib64",
    )
    info = read_binary(elf)
    assert info.format == "elf"
    assert [bytes(s) for s in info.fatbin] == [FATBIN]
    assert info.relfatbin == ()
    assert info.needed == ("libcudart.so.13", "libc.so.6")
    assert info.rpath == ("$ORIGIN/../nvidia/cu13/lib", "$ORIGIN")
    assert info.runpath == ("/usr/local/cuda/lib64",)
    assert list_device_code(info.device_code_sections[0]) == DeviceCode(("sm_90",), ("sm_90",))


def test_relocatable_fatbin_is_the_fallback() -> None:
    info = read_binary(make_elf([("__nv_relfatbin", FATBIN)]))
    assert info.fatbin == ()
    assert [bytes(s) for s in info.device_code_sections] == [FATBIN]
    both = read_binary(make_elf([("__nv_relfatbin", FATBIN), (".nv_fatbin", b"")]))
    assert [bytes(s) for s in both.device_code_sections] == [b""]


def test_accepts_memoryview_and_bytearray() -> None:
    elf = make_elf([(".nv_fatbin", FATBIN)])
    assert read_binary(memoryview(elf)).fatbin[0] == FATBIN
    assert read_binary(bytearray(elf)).fatbin[0] == FATBIN


def test_gcc_library_agrees_with_readelf(tmp_path: Path) -> None:
    lib = build_plain_so(tmp_path)
    if lib is None:
        pytest.skip("gcc not found")
    info = read_binary(lib.read_bytes())
    assert "libm.so.6" in info.needed
    assert info.rpath == ("$ORIGIN/../nvidia/cu13/lib", "/opt/elsewhere")
    assert info.runpath == ()
    assert info.fatbin == ()


@pytest.mark.integration
def test_nvcc_library_sections_match_pyelftools(tmp_path: Path) -> None:
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found on PATH")
    from cuda_tools import VARIANTS, build_variants

    rdc = next(v for v in VARIANTS if v.name == "rdc")
    lib = build_variants(nvcc, tmp_path, [rdc])["rdc"]
    info = read_binary(lib.read_bytes())
    assert [bytes(s) for s in info.fatbin] == [section_bytes(lib, ".nv_fatbin")]
    assert [bytes(s) for s in info.relfatbin] == [section_bytes(lib, "__nv_relfatbin")]
    assert "libstdc++.so.6" in info.needed


# --- malformed ELF -------------------------------------------------------------------------

ELF = make_elf([(".nv_fatbin", FATBIN)], needed=["libcudart.so.13"])
_SHOFF = 40  # e_shoff in the ELF64 header
_SHNUM = 60
_SHSTRNDX = 62


def _patch(data: bytes, offset: int, fmt: str, *values: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, *values)
    return bytes(out)


def _shoff(data: bytes) -> int:
    return int(struct.unpack_from("<Q", data, _SHOFF)[0])


def _section_header(index: int) -> int:
    return _shoff(ELF) + 64 * index


MALFORMED_ELF = [
    (b"\x7fELF", "truncated ELF identification: 4 bytes"),
    (ELF[:4] + b"\x03" + ELF[5:], "unsupported ELF class/data encoding 3/1"),
    (ELF[:40], "ELF header at offset 0x10, 48 bytes, runs past the end of the file"),
    (_patch(ELF, _SHOFF, "<Q", 2**40), "ELF section header table at offset 0x10000000000"),
    (_patch(ELF, _SHNUM, "<H", 0xFFF0), "ELF section header table at offset"),
    (_patch(ELF, _SHSTRNDX, "<H", 77), "ELF section name table index 77 is invalid"),
    (_patch(ELF, 58, "<H", 10), "ELF section header size 10 is too small"),
    # .nv_fatbin (section 1) pointing past the end
    (_patch(ELF, _section_header(1) + 32, "<Q", 2**32), "ELF section .nv_fatbin at offset 0x"),
    # the section name table's size past the end
    (_patch(ELF, _section_header(2) + 32, "<Q", 2**32), "ELF section name table at offset"),
    # PT_DYNAMIC pointing past the end
    (_patch(ELF, 64 + 56 + 8, "<Q", 2**40), "ELF dynamic segment at offset 0x10000000000"),
    (_patch(ELF, 54, "<H", 8), "ELF program header size 8 is too small"),
    (_patch(ELF, 56, "<H", 0xFFFF), "ELF program header table at offset 0x40"),
]


@pytest.mark.parametrize(("data", "message"), MALFORMED_ELF, ids=[m for _, m in MALFORMED_ELF])
def test_malformed_elf(data: bytes, message: str) -> None:
    with pytest.raises(BinaryFormatError) as info:
        read_binary(data)
    assert message in str(info.value)


def test_unknown_format() -> None:
    assert detect_format(b"\xca\xfe\xba\xbe") is None
    with pytest.raises(BinaryFormatError, match="not an ELF or PE file"):
        read_binary(b"#!/bin/sh\n")


def test_every_truncation_of_an_elf_fails_cleanly() -> None:
    for cut in range(0, len(ELF), 7):
        try:
            read_binary(ELF[:cut])
        except BinaryFormatError:
            continue
        pytest.fail(f"truncation at {cut} parsed")


def test_byte_flips_never_escape_as_other_errors() -> None:
    # Every single-byte corruption of the headers either parses or raises BinaryFormatError.
    for offset in range(len(ELF)):
        for value in (0x00, 0xFF, 0x80):
            data = bytearray(ELF)
            data[offset] = value
            with contextlib.suppress(BinaryFormatError):
                read_binary(bytes(data))


# --- PE ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_fatbin(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A real fat binary from nvcc if available, else a crafted one."""
    nvcc = find_nvcc()
    if nvcc is None:
        return FATBIN
    from cuda_tools import VARIANTS, build_variants

    mixed = next(v for v in VARIANTS if v.name == "arch_specific")
    lib = build_variants(nvcc, tmp_path_factory.mktemp("pe-src"), [mixed])["arch_specific"]
    return section_bytes(lib, ".nv_fatbin")


@pytest.mark.parametrize("long_names", [False, True], ids=["nv_fatb", "nv_fatbin"])
def test_pe_dll(tmp_path: Path, real_fatbin: bytes, long_names: bool) -> None:
    dll = build_pe_dll(tmp_path, real_fatbin, import_cudart=True, long_section_names=long_names)
    info = read_binary(dll.read_bytes())
    assert info.format == "pe"
    assert "cudart64_13.dll" in info.imports
    assert [bytes(s) for s in info.fatbin] == [real_fatbin]
    assert (info.needed, info.rpath, info.runpath) == ((), (), ())


def test_pe_dll_without_cudart(tmp_path: Path) -> None:
    dll = build_pe_dll(tmp_path, FATBIN, import_cudart=False)
    info = read_binary(dll.read_bytes())
    assert not any(name.lower().startswith("cudart") for name in info.imports)
    assert list_device_code(info.fatbin[0]) == DeviceCode(("sm_90",), ("sm_90",))


@pytest.mark.integration
def test_pe_fatbin_agrees_with_cuobjdump(tmp_path: Path, real_fatbin: bytes) -> None:
    # cuobjdump on Linux does not read PE files ("does not contain device code"), so the section
    # is cut out with MinGW's objcopy, independently of buildrows, and given to it bare.
    cuobjdump = find_cuobjdump()
    if cuobjdump is None or not mingw_available() or shutil.which(MINGW_OBJCOPY) is None:
        pytest.skip("needs cuobjdump and MinGW objcopy")
    dll = build_pe_dll(tmp_path, real_fatbin, import_cudart=True)
    raw = tmp_path / "section.fatbin"
    subprocess.run(
        [MINGW_OBJCOPY, "-O", "binary", "--only-section=.nv_fatb", str(dll), str(raw)], check=True
    )
    elf, ptx = cuobjdump_list(cuobjdump, raw)
    info = read_binary(dll.read_bytes())
    assert list_device_code(info.fatbin[0]) == DeviceCode(cubins=elf, ptx=ptx)
    assert elf  # the comparison saw something


MALFORMED_PE = [
    (b"MZ" + b"\0" * 10, "malformed PE file"),
    (b"MZ" + b"\0" * 58 + struct.pack("<I", 0x1000), "malformed PE file"),
]


@pytest.mark.parametrize(("data", "message"), MALFORMED_PE)
def test_malformed_pe(data: bytes, message: str) -> None:
    with pytest.raises(BinaryFormatError, match=message):
        read_binary(data)


def test_pe_truncations_fail_cleanly(tmp_path: Path) -> None:
    dll = build_pe_dll(tmp_path, FATBIN, import_cudart=True).read_bytes()
    for cut in range(0, len(dll), max(1, len(dll) // 200)):
        with contextlib.suppress(BinaryFormatError):
            read_binary(dll[:cut])


def test_pe_header_byte_flips_fail_cleanly(tmp_path: Path) -> None:
    dll = build_pe_dll(tmp_path, FATBIN, import_cudart=True).read_bytes()
    for offset in range(0x400):
        for value in (0x00, 0xFF):
            data = bytearray(dll)
            data[offset] = value
            with contextlib.suppress(BinaryFormatError):
                read_binary(bytes(data))

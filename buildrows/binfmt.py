"""Find the fat binary and the dynamic dependencies of a shared library held in memory.

ELF is read by hand with :mod:`struct` over a :class:`memoryview`: it touches only the ELF header,
the program and section header tables and the dynamic section, and never copies a section, so a
500 MB ``libtorch_cuda.so`` costs well under a millisecond once it is in memory (pyelftools reads
the same through a stream and copies each section it returns). PE is read with :mod:`pefile`.

Which fat binary: like ``cuobjdump`` without ``-all``, the *executable* one (``.nv_fatbin``; a PE
image truncates section names to 8 bytes, ``.nv_fatb``) when present, else the *relocatable* one
(``__nv_relfatbin``, what ``-rdc`` objects carry). ``.nvFatBinSegment`` only holds the runtime's
pointer to the fat binary and is not read.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "BinaryFormat",
    "BinaryFormatError",
    "BinaryInfo",
    "detect_format",
    "read_binary",
]

BinaryFormat = Literal["elf", "pe"]

FATBIN_SECTION: Final = ".nv_fatbin"
RELFATBIN_SECTION: Final = "__nv_relfatbin"
_PE_SECTION_NAME_MAX: Final = 8

# Bounds on what a hostile header can make us loop over.
MAX_SECTIONS: Final = 1_000_000
MAX_SEGMENTS: Final = 65_535
MAX_DYNAMIC_ENTRIES: Final = 1_000_000

_ELF_MAGIC: Final = b"\x7fELF"
_SHN_XINDEX: Final = 0xFFFF
_SHN_LORESERVE: Final = 0xFF00
_SHT_NOBITS: Final = 8
_PT_LOAD: Final = 1
_PT_DYNAMIC: Final = 2
_DT_NULL: Final = 0
_DT_NEEDED: Final = 1
_DT_STRTAB: Final = 5
_DT_STRSZ: Final = 10
_DT_RPATH: Final = 15
_DT_RUNPATH: Final = 29

_NUL = re.compile(b"\x00")

# Machines by their ELF e_machine and PE Machine numbers, in one vocabulary, so a binary can be
# compared with a wheel's platform tag (win_amd64 and manylinux_x86_64 are the same machine).
ELF_MACHINES: Final = {3: "i386", 40: "arm", 62: "x86_64", 183: "aarch64", 20: "ppc", 21: "ppc64", 22: "s390x", 243: "riscv"}
PE_MACHINES: Final = {0x14C: "i386", 0x8664: "x86_64", 0xAA64: "aarch64", 0x1C4: "arm"}


class BinaryFormatError(ValueError):
    """The bytes are not a well-formed ELF or PE file (or not one we can read)."""


@dataclass(frozen=True, slots=True)
class BinaryInfo:
    """What buildrows needs from one shared library.

    ``fatbin`` and ``relfatbin`` are views into the caller's buffer (empty when the section is
    absent); ``device_code_sections`` is the one cuobjdump reads by default.
    """

    format: BinaryFormat
    machine: str = ""  # "x86_64", "aarch64", ... (ELF_MACHINES, PE_MACHINES); "e_machine N" if unknown
    fatbin: tuple[memoryview, ...] = ()
    relfatbin: tuple[memoryview, ...] = ()
    needed: tuple[str, ...] = ()
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()
    delay_imports: tuple[str, ...] = ()

    @property
    def device_code_sections(self) -> tuple[memoryview, ...]:
        """The executable fat binary if there is one, else the relocatable one (cuobjdump's rule)."""
        return self.fatbin or self.relfatbin


def detect_format(data: bytes | bytearray | memoryview) -> BinaryFormat | None:
    """``'elf'`` or ``'pe'`` from the magic bytes, or ``None`` for anything else."""
    head = bytes(memoryview(data)[:4])
    if head == _ELF_MAGIC:
        return "elf"
    if head[:2] == b"MZ":
        return "pe"
    return None


def read_binary(data: bytes | bytearray | memoryview) -> BinaryInfo:
    """Read an ELF or PE file held in memory; malformed input raises :class:`BinaryFormatError`."""
    fmt = detect_format(data)
    if fmt == "elf":
        return _read_elf(memoryview(data).cast("B"))
    if fmt == "pe":
        return _read_pe(data)
    raise BinaryFormatError("not an ELF or PE file (unknown magic bytes)")


# --- ELF -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ElfLayout:
    """Struct formats for one ELF class and byte order."""

    header: struct.Struct  # e_type .. e_shstrndx, after e_ident
    section: struct.Struct  # name, type, offset, size, link (reordered by _section())
    segment: struct.Struct
    dyn: struct.Struct
    is64: bool


def _layout(is64: bool, order: str) -> _ElfLayout:
    if is64:
        return _ElfLayout(
            header=struct.Struct(order + "HHIQQQIHHHHHH"),
            section=struct.Struct(order + "IIQQQQIIQQ"),
            segment=struct.Struct(order + "IIQQQQQQ"),
            dyn=struct.Struct(order + "qQ"),
            is64=True,
        )
    return _ElfLayout(
        header=struct.Struct(order + "HHIIIIIHHHHHH"),
        section=struct.Struct(order + "IIIIIIIIII"),
        segment=struct.Struct(order + "IIIIIIII"),
        dyn=struct.Struct(order + "iI"),
        is64=False,
    )


_LAYOUTS: Final = {
    (1, 1): _layout(False, "<"),
    (1, 2): _layout(False, ">"),
    (2, 1): _layout(True, "<"),
    (2, 2): _layout(True, ">"),
}


def _check_range(total: int, offset: int, size: int, what: str) -> None:
    if offset < 0 or size < 0 or offset > total or size > total - offset:
        raise BinaryFormatError(
            f"{what} at offset {offset:#x}, {size} bytes, runs past the end of the file ({total} bytes)"
        )


def _cstring(view: memoryview, start: int, end: int, what: str) -> str:
    """The NUL-terminated string at ``start``, not reading past ``end``."""
    if not 0 <= start < end:
        raise BinaryFormatError(f"{what}: string offset {start:#x} outside its table")
    match = _NUL.search(view, start, end)
    if match is None:
        raise BinaryFormatError(f"{what}: string at {start:#x} is not NUL-terminated")
    return bytes(view[start : match.start()]).decode("utf-8", "surrogateescape")


def _read_elf(view: memoryview) -> BinaryInfo:
    total = len(view)
    if total < 16:
        raise BinaryFormatError(f"truncated ELF identification: {total} bytes")
    layout = _LAYOUTS.get((view[4], view[5]))
    if layout is None:
        raise BinaryFormatError(f"unsupported ELF class/data encoding {view[4]}/{view[5]}")
    _check_range(total, 16, layout.header.size, "ELF header")
    (
        _e_type,
        e_machine,
        _e_version,
        _e_entry,
        e_phoff,
        e_shoff,
        _e_flags,
        _e_ehsize,
        e_phentsize,
        e_phnum,
        e_shentsize,
        e_shnum,
        e_shstrndx,
    ) = layout.header.unpack_from(view, 16)

    sections = list(_elf_sections(view, layout, e_shoff, e_shentsize, e_shnum, e_shstrndx))
    fatbin = tuple(data for name, data in sections if name == FATBIN_SECTION)
    relfatbin = tuple(data for name, data in sections if name == RELFATBIN_SECTION)
    needed, rpath, runpath = _elf_dynamic(view, layout, e_phoff, e_phentsize, e_phnum)
    return BinaryInfo(
        format="elf",
        machine=ELF_MACHINES.get(e_machine, f"e_machine {e_machine}"),
        fatbin=fatbin,
        relfatbin=relfatbin,
        needed=needed,
        rpath=rpath,
        runpath=runpath,
    )


def _elf_sections(
    view: memoryview, layout: _ElfLayout, shoff: int, shentsize: int, shnum: int, shstrndx: int
) -> Iterator[tuple[str, memoryview]]:
    """Yield (name, contents) of the sections whose contents we may want (the fat binaries)."""
    if shoff == 0:
        return  # no section header table (allowed; cuobjdump then finds nothing either)
    total = len(view)
    if shentsize < layout.section.size:
        raise BinaryFormatError(f"ELF section header size {shentsize} is too small")
    _check_range(total, shoff, shentsize, "ELF section header table")
    first = layout.section.unpack_from(view, shoff)
    # Extended numbering: counts too large for the header live in section 0.
    if shnum == 0:
        shnum = first[5]
    if shstrndx == _SHN_XINDEX:
        shstrndx = first[6]
    if shnum > MAX_SECTIONS:
        raise BinaryFormatError(f"ELF declares {shnum} sections (more than {MAX_SECTIONS})")
    _check_range(total, shoff, shnum * shentsize, "ELF section header table")
    if shstrndx == 0 or shstrndx >= shnum or _SHN_LORESERVE <= shstrndx < _SHN_XINDEX:
        raise BinaryFormatError(f"ELF section name table index {shstrndx} is invalid")

    def header(index: int) -> tuple[int, int, int, int]:
        fields = layout.section.unpack_from(view, shoff + index * shentsize)
        # name, type, offset, size (same positions for both classes)
        return fields[0], fields[1], fields[4], fields[5]

    _, strtab_type, strtab_off, strtab_size = header(shstrndx)
    if strtab_type == _SHT_NOBITS:
        raise BinaryFormatError("ELF section name table has no contents")
    _check_range(total, strtab_off, strtab_size, "ELF section name table")
    strtab_end = strtab_off + strtab_size
    wanted = (FATBIN_SECTION.encode(), RELFATBIN_SECTION.encode())
    for index in range(1, shnum):
        name_off, sh_type, offset, size = header(index)
        start = strtab_off + name_off
        # Cheap prefix test before decoding: almost every section is not one we want.
        if not any(view[start : start + len(w) + 1] == w + b"\0" for w in wanted):
            continue
        name = _cstring(view, start, strtab_end, f"ELF section {index} name")
        if sh_type == _SHT_NOBITS:
            raise BinaryFormatError(
                f"ELF section {name} (index {index}) has no contents in the file"
            )
        _check_range(total, offset, size, f"ELF section {name}")
        yield name, view[offset : offset + size]


def _elf_dynamic(
    view: memoryview, layout: _ElfLayout, phoff: int, phentsize: int, phnum: int
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """DT_NEEDED, DT_RPATH and DT_RUNPATH, read the way the loader does: via the program headers."""
    if phoff == 0 or phnum == 0:
        return (), (), ()
    total = len(view)
    if phentsize < layout.segment.size:
        raise BinaryFormatError(f"ELF program header size {phentsize} is too small")
    if phnum > MAX_SEGMENTS:
        raise BinaryFormatError(f"ELF declares {phnum} program headers")
    _check_range(total, phoff, phnum * phentsize, "ELF program header table")
    loads: list[tuple[int, int, int]] = []  # vaddr, offset, filesz
    dynamic: tuple[int, int] | None = None
    for index in range(phnum):
        fields = layout.segment.unpack_from(view, phoff + index * phentsize)
        if layout.is64:
            p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = fields[:6]
        else:
            p_type, p_offset, p_vaddr, _paddr, p_filesz = fields[:5]
        if p_type == _PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == _PT_DYNAMIC and dynamic is None:
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        return (), (), ()
    dyn_off, dyn_size = dynamic
    _check_range(total, dyn_off, dyn_size, "ELF dynamic segment")
    entries = min(dyn_size // layout.dyn.size, MAX_DYNAMIC_ENTRIES)
    strtab_addr: int | None = None
    strsz: int | None = None
    tagged: list[tuple[int, int]] = []
    for index in range(entries):
        tag, value = layout.dyn.unpack_from(view, dyn_off + index * layout.dyn.size)
        if tag == _DT_NULL:
            break
        if tag == _DT_STRTAB:
            strtab_addr = value
        elif tag == _DT_STRSZ:
            strsz = value
        elif tag in (_DT_NEEDED, _DT_RPATH, _DT_RUNPATH):
            tagged.append((tag, value))
    if not tagged:
        return (), (), ()
    if strtab_addr is None or strsz is None:
        raise BinaryFormatError("ELF dynamic segment names libraries but has no DT_STRTAB/DT_STRSZ")
    strtab_off: int | None = None
    for vaddr, offset, filesz in loads:
        if vaddr <= strtab_addr < vaddr + filesz:
            strtab_off = strtab_addr - vaddr + offset
            break
    if strtab_off is None:
        raise BinaryFormatError(f"ELF DT_STRTAB address {strtab_addr:#x} is in no loaded segment")
    _check_range(total, strtab_off, strsz, "ELF dynamic string table")
    needed: list[str] = []
    rpath: list[str] = []
    runpath: list[str] = []
    for tag, value in tagged:
        text = _cstring(view, strtab_off + value, strtab_off + strsz, "ELF dynamic string")
        if tag == _DT_NEEDED:
            needed.append(text)
        else:
            (rpath if tag == _DT_RPATH else runpath).extend(p for p in text.split(":") if p)
    return tuple(needed), tuple(rpath), tuple(runpath)


# --- PE --------------------------------------------------------------------------------------


def _read_pe(data: bytes | bytearray | memoryview) -> BinaryInfo:
    import pefile  # imported here: only Windows wheels need it

    raw = data if isinstance(data, bytes) else bytes(data)
    view = memoryview(raw)
    try:
        pe = pefile.PE(data=raw, fast_load=True)
    except pefile.PEFormatError as exc:
        raise BinaryFormatError(f"malformed PE file: {exc.value}") from None
    try:
        fatbin: list[memoryview] = []
        relfatbin: list[memoryview] = []
        for section in pe.sections:
            name = section.Name.rstrip(b"\0").decode("ascii", "replace")
            if name.startswith("/"):
                name = _coff_long_name(pe, raw, name)
            if name in (FATBIN_SECTION, FATBIN_SECTION[:_PE_SECTION_NAME_MAX]):
                target = fatbin
            elif name in (RELFATBIN_SECTION, RELFATBIN_SECTION[:_PE_SECTION_NAME_MAX]):
                target = relfatbin
            else:
                continue
            offset = section.PointerToRawData
            # The raw size is rounded up to the file alignment; the virtual size is exact.
            size = min(section.SizeOfRawData, section.Misc_VirtualSize or section.SizeOfRawData)
            _check_range(len(raw), offset, size, f"PE section {name}")
            target.append(view[offset : offset + size])
        pe.parse_data_directories(
            directories=[
                pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"],
                pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"],
            ]
        )
        imports = tuple(_dll_name(e.dll) for e in getattr(pe, "DIRECTORY_ENTRY_IMPORT", ()))
        delay = tuple(_dll_name(e.dll) for e in getattr(pe, "DIRECTORY_ENTRY_DELAY_IMPORT", ()))
    except pefile.PEFormatError as exc:
        raise BinaryFormatError(f"malformed PE file: {exc.value}") from None
    except (struct.error, IndexError, AttributeError, TypeError) as exc:
        # pefile trusts some fields it has not range-checked; keep its failures in our type.
        raise BinaryFormatError(f"malformed PE file: {exc}") from None
    # No pe.close(): it only matters for files pefile mapped itself, and it runs gc.collect().
    machine = pe.FILE_HEADER.Machine
    return BinaryInfo(
        format="pe",
        machine=PE_MACHINES.get(machine, f"Machine {machine:#x}"),
        fatbin=tuple(fatbin),
        relfatbin=tuple(relfatbin),
        imports=imports,
        delay_imports=delay,
    )


def _dll_name(name: bytes | None) -> str:
    if not name:
        raise BinaryFormatError("PE import descriptor without a DLL name")
    return name.decode("ascii", "surrogateescape")


def _coff_long_name(pe: object, raw: bytes, name: str) -> str:
    """Resolve a ``/123`` section name through the COFF string table (as MinGW ld writes it)."""
    header = getattr(pe, "FILE_HEADER", None)
    symbols = getattr(header, "PointerToSymbolTable", 0)
    count = getattr(header, "NumberOfSymbols", 0)
    if not symbols or not name[1:].isdigit():
        return name
    table = symbols + 18 * count
    _check_range(len(raw), table, 4, "PE COFF string table")
    (table_size,) = struct.unpack_from("<I", raw, table)
    _check_range(len(raw), table, table_size, "PE COFF string table")
    return _cstring(
        memoryview(raw), table + int(name[1:]), table + table_size, f"PE section {name}"
    )

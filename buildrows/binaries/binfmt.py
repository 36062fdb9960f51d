"""Find the fat binary and the dynamic dependencies of a shared library held in memory.

ELF is read by hand with :mod:`struct` over a :class:`memoryview`: it touches only the ELF header,
the program and section header tables and the dynamic section, and never copies a section, so a
500 MB ``libtorch_cuda.so`` costs well under a millisecond once it is in memory (pyelftools reads
the same through a stream and copies each section it returns). PE is read with :mod:`pefile`.

Which fat binary: like ``cuobjdump`` without ``-all``, the *executable* one (``.nv_fatbin``; a PE
image truncates section names to 8 bytes, ``.nv_fatb``) when present, else the *relocatable* one
(``__nv_relfatbin``, what ``-rdc`` objects carry). ``.nvFatBinSegment`` only holds the runtime's
pointer to the fat binary and is not read.

The parsers read through a :class:`ByteSource` (``size`` and ``read(offset, size)``), so the same
code reads a library held whole in memory (:func:`read_binary`) and one streamed out of a wheel
whose few header ranges were kept as they passed (:mod:`buildrows.binaries.libstream`):
:func:`read_layout` returns where the fat binaries lie instead of views of them.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Literal, Protocol

__all__ = [
    "BinaryFormat",
    "BinaryFormatError",
    "BinaryInfo",
    "BinaryLayout",
    "ByteSource",
    "MemorySource",
    "detect_format",
    "read_binary",
    "read_layout",
]

BinaryFormat = Literal["elf", "pe"]

FATBIN_SECTION: Final = ".nv_fatbin"
RELFATBIN_SECTION: Final = "__nv_relfatbin"
_LONGEST_WANTED: Final = len(RELFATBIN_SECTION) + 1
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


class ByteSource(Protocol):
    """Random access to a file's bytes: all the binary parsers need."""

    @property
    def size(self) -> int:
        """The file's length in bytes."""
        ...

    def read(self, offset: int, size: int) -> bytes | memoryview:
        """Exactly ``size`` bytes from ``offset`` (the caller keeps within ``self.size``)."""
        ...


class MemorySource:
    """A :class:`ByteSource` over a buffer in memory; ``read`` returns views, never copies."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.view = memoryview(data).cast("B")

    @property
    def size(self) -> int:
        return len(self.view)

    def read(self, offset: int, size: int) -> memoryview:
        return self.view[offset : offset + size]


class BinaryFormatError(ValueError):
    """The bytes are not a well-formed ELF or PE file (or not one we can read)."""


Range = tuple[int, int]  # (offset, size) in the file


@dataclass(frozen=True, slots=True)
class BinaryLayout:
    """What buildrows needs from one shared library, with its fat binaries as file ranges.

    ``machine``: "x86_64", "aarch64", ... (ELF_MACHINES, PE_MACHINES); "e_machine N" if unknown.
    """

    format: BinaryFormat
    machine: str = ""
    fatbin: tuple[Range, ...] = ()
    relfatbin: tuple[Range, ...] = ()
    needed: tuple[str, ...] = ()
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()
    delay_imports: tuple[str, ...] = ()

    @property
    def device_code_ranges(self) -> tuple[Range, ...]:
        """The executable fat binary if there is one, else the relocatable one (cuobjdump's rule)."""
        return self.fatbin or self.relfatbin


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
    source = MemorySource(data)
    layout = read_layout(source, pe_data=data if isinstance(data, bytes) else None)
    view = source.view
    return BinaryInfo(
        format=layout.format,
        fatbin=tuple(view[o : o + n] for o, n in layout.fatbin),
        relfatbin=tuple(view[o : o + n] for o, n in layout.relfatbin),
        needed=layout.needed,
        rpath=layout.rpath,
        runpath=layout.runpath,
        imports=layout.imports,
        delay_imports=layout.delay_imports,
        machine=layout.machine,
    )


def read_layout(source: ByteSource, *, pe_data: bytes | None = None) -> BinaryLayout:
    """Read an ELF or PE file through ``source``; malformed input raises :class:`BinaryFormatError`.

    ``pe_data``: the whole file as ``bytes`` when the caller has it (pefile reads that directly).
    """
    fmt = detect_format(source.read(0, min(4, source.size)))
    if fmt == "elf":
        return _read_elf(source)
    if fmt == "pe":
        return _read_pe(source, pe_data)
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


def _cstring(source: ByteSource, start: int, end: int, what: str) -> str:
    """The NUL-terminated string at ``start``, not reading past ``end``."""
    if not 0 <= start < end:
        raise BinaryFormatError(f"{what}: string offset {start:#x} outside its table")
    parts: list[bytes] = []
    pos = start
    window = 256
    while pos < end:
        piece = source.read(pos, min(window, end - pos))
        match = _NUL.search(piece)
        if match is not None:
            parts.append(bytes(piece[: match.start()]))
            return b"".join(parts).decode("utf-8", "surrogateescape")
        parts.append(bytes(piece))
        pos += len(piece)
        window = min(window * 4, 1 << 20)
    raise BinaryFormatError(f"{what}: string at {start:#x} is not NUL-terminated")


def _read_elf(source: ByteSource) -> BinaryLayout:
    total = source.size
    if total < 16:
        raise BinaryFormatError(f"truncated ELF identification: {total} bytes")
    ident = source.read(0, 16)
    layout = _LAYOUTS.get((ident[4], ident[5]))
    if layout is None:
        raise BinaryFormatError(f"unsupported ELF class/data encoding {ident[4]}/{ident[5]}")
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
    ) = layout.header.unpack(source.read(16, layout.header.size))

    sections = list(_elf_sections(source, layout, e_shoff, e_shentsize, e_shnum, e_shstrndx))
    fatbin = tuple(where for name, where in sections if name == FATBIN_SECTION)
    relfatbin = tuple(where for name, where in sections if name == RELFATBIN_SECTION)
    needed, rpath, runpath = _elf_dynamic(source, layout, e_phoff, e_phentsize, e_phnum)
    return BinaryLayout(
        format="elf",
        machine=ELF_MACHINES.get(e_machine, f"e_machine {e_machine}"),
        fatbin=fatbin,
        relfatbin=relfatbin,
        needed=needed,
        rpath=rpath,
        runpath=runpath,
    )


def _elf_sections(
    source: ByteSource, layout: _ElfLayout, shoff: int, shentsize: int, shnum: int, shstrndx: int
) -> Iterator[tuple[str, Range]]:
    """Yield (name, (offset, size)) of the sections whose contents we may want (the fat binaries)."""
    if shoff == 0:
        return  # no section header table (allowed; cuobjdump then finds nothing either)
    total = source.size
    if shentsize < layout.section.size:
        raise BinaryFormatError(f"ELF section header size {shentsize} is too small")
    _check_range(total, shoff, shentsize, "ELF section header table")
    first = layout.section.unpack(source.read(shoff, layout.section.size))
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
        fields = layout.section.unpack(source.read(shoff + index * shentsize, layout.section.size))
        # name, type, offset, size (same positions for both classes)
        return fields[0], fields[1], fields[4], fields[5]

    _, strtab_type, strtab_off, strtab_size = header(shstrndx)
    if strtab_type == _SHT_NOBITS:
        raise BinaryFormatError("ELF section name table has no contents")
    _check_range(total, strtab_off, strtab_size, "ELF section name table")
    strtab_end = strtab_off + strtab_size
    wanted = (FATBIN_SECTION.encode() + b"\0", RELFATBIN_SECTION.encode() + b"\0")
    for index in range(1, shnum):
        name_off, sh_type, offset, size = header(index)
        start = strtab_off + name_off
        # Cheap prefix test before decoding: almost every section is not one we want.
        if start >= total:
            continue
        head = source.read(start, min(_LONGEST_WANTED, total - start))
        if not any(head[: len(w)] == w for w in wanted):
            continue
        name = _cstring(source, start, strtab_end, f"ELF section {index} name")
        if sh_type == _SHT_NOBITS:
            raise BinaryFormatError(
                f"ELF section {name} (index {index}) has no contents in the file"
            )
        _check_range(total, offset, size, f"ELF section {name}")
        yield name, (offset, size)


def _elf_dynamic(
    source: ByteSource, layout: _ElfLayout, phoff: int, phentsize: int, phnum: int
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """DT_NEEDED, DT_RPATH and DT_RUNPATH, read the way the loader does: via the program headers."""
    if phoff == 0 or phnum == 0:
        return (), (), ()
    total = source.size
    if phentsize < layout.segment.size:
        raise BinaryFormatError(f"ELF program header size {phentsize} is too small")
    if phnum > MAX_SEGMENTS:
        raise BinaryFormatError(f"ELF declares {phnum} program headers")
    _check_range(total, phoff, phnum * phentsize, "ELF program header table")
    loads: list[tuple[int, int, int]] = []  # vaddr, offset, filesz
    dynamic: tuple[int, int] | None = None
    for index in range(phnum):
        fields = layout.segment.unpack(source.read(phoff + index * phentsize, layout.segment.size))
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
    table = source.read(dyn_off, entries * layout.dyn.size)
    for index in range(entries):
        tag, value = layout.dyn.unpack_from(table, index * layout.dyn.size)
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
        text = _cstring(source, strtab_off + value, strtab_off + strsz, "ELF dynamic string")
        if tag == _DT_NEEDED:
            needed.append(text)
        else:
            (rpath if tag == _DT_RPATH else runpath).extend(p for p in text.split(":") if p)
    return tuple(needed), tuple(rpath), tuple(runpath)


# --- PE --------------------------------------------------------------------------------------


_PE_MAX_READ: Final = 16 << 20


class _LazyBytes:
    """What pefile reads of ``data=``: length, slices and ``find``, served from a :class:`ByteSource`.

    pefile with ``fast_load`` reads only headers and the import tables, so a library streamed
    from a wheel needs only those ranges, not the whole file in memory.
    """

    def __init__(self, source: ByteSource) -> None:
        self.source = source

    def __len__(self) -> int:
        return self.source.size

    def __getitem__(self, key: int | slice) -> int | bytes:
        size = self.source.size
        if isinstance(key, int):
            index = key + size if key < 0 else key
            if not 0 <= index < size:
                raise IndexError("index out of range")
            return bytes(self.source.read(index, 1))[0]
        start, stop, step = key.indices(size)
        if step != 1:
            raise TypeError("only contiguous slices are supported")
        if stop - start > _PE_MAX_READ:
            # pefile keeps the headers as data[:first section's offset]: a section pointer at 600 MB made that
            # 600 MB, copied twice (1.9 GB, issue 37). Headers and import tables are KBs in any real DLL.
            raise BinaryFormatError(f"malformed PE file: its headers or tables would span {stop - start} bytes from "
                                    f"offset {start:#x} (more than {_PE_MAX_READ >> 20} MiB)")
        return bytes(self.source.read(start, stop - start)) if stop > start else b""

    def find(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        start, end, _ = slice(start, end).indices(self.source.size)
        if end <= start:
            return -1
        found = bytes(self.source.read(start, end - start)).find(sub)
        return found + start if found >= 0 else -1


def _read_pe(source: ByteSource, raw: bytes | None) -> BinaryLayout:
    import pefile  # imported here: only Windows wheels need it

    data: bytes | _LazyBytes = raw if raw is not None else _LazyBytes(source)
    try:
        pe = pefile.PE(data=data, fast_load=True)
    except pefile.PEFormatError as exc:
        raise BinaryFormatError(f"malformed PE file: {exc.value}") from None
    except (struct.error, IndexError, AttributeError, TypeError) as exc:
        raise BinaryFormatError(f"malformed PE file: {exc}") from None
    try:
        fatbin: list[Range] = []
        relfatbin: list[Range] = []
        for section in pe.sections:
            name = section.Name.rstrip(b"\0").decode("ascii", "replace")
            if name.startswith("/"):
                name = _coff_long_name(pe, source, name)
            if name in (FATBIN_SECTION, FATBIN_SECTION[:_PE_SECTION_NAME_MAX]):
                target = fatbin
            elif name in (RELFATBIN_SECTION, RELFATBIN_SECTION[:_PE_SECTION_NAME_MAX]):
                target = relfatbin
            else:
                continue
            offset = section.PointerToRawData
            # The raw size is rounded up to the file alignment; the virtual size is exact.
            size = min(section.SizeOfRawData, section.Misc_VirtualSize or section.SizeOfRawData)
            _check_range(source.size, offset, size, f"PE section {name}")
            target.append((offset, size))
        pe.parse_data_directories(
            directories=[
                pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"],
                pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"],
            ]
        )
        imports = tuple(_dll_name(e.dll) for e in getattr(pe, "DIRECTORY_ENTRY_IMPORT", ()))
        delay = tuple(_dll_name(e.dll) for e in getattr(pe, "DIRECTORY_ENTRY_DELAY_IMPORT", ()))
        machine = PE_MACHINES.get(pe.FILE_HEADER.Machine, f"Machine {pe.FILE_HEADER.Machine:#x}")
    except pefile.PEFormatError as exc:
        raise BinaryFormatError(f"malformed PE file: {exc.value}") from None
    except (struct.error, IndexError, AttributeError, TypeError) as exc:
        # pefile trusts some fields it has not range-checked; keep its failures in our type.
        raise BinaryFormatError(f"malformed PE file: {exc}") from None
    # No pe.close(): it only matters for files pefile mapped itself, and it runs gc.collect().
    return BinaryLayout(
        format="pe",
        machine=machine,
        fatbin=tuple(fatbin),
        relfatbin=tuple(relfatbin),
        imports=imports,
        delay_imports=delay,
    )


def _dll_name(name: bytes | None) -> str:
    if not name:
        raise BinaryFormatError("PE import descriptor without a DLL name")
    return name.decode("ascii", "surrogateescape")


def _coff_long_name(pe: object, source: ByteSource, name: str) -> str:
    """Resolve a ``/123`` section name through the COFF string table (as MinGW ld writes it)."""
    header = getattr(pe, "FILE_HEADER", None)
    symbols = getattr(header, "PointerToSymbolTable", 0)
    count = getattr(header, "NumberOfSymbols", 0)
    if not symbols or not name[1:].isdigit():
        return name
    table = symbols + 18 * count
    _check_range(source.size, table, 4, "PE COFF string table")
    (table_size,) = struct.unpack("<I", source.read(table, 4))
    _check_range(source.size, table, table_size, "PE COFF string table")
    return _cstring(source, table + int(name[1:]), table + table_size, f"PE section {name}")

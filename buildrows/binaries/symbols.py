"""The dynamic symbols of ELF libraries: what each imports, exports and names.

``imported_symbols`` reads the undefined symbols of a library held in memory (the torch-ABI judges).
``read_dynamic_symbols`` reads, through a :class:`buildrows.binaries.binfmt.ByteSource`, what the
dynamic linker needs to load a library: its soname and NEEDED entries, its undefined non-weak symbols
with the version and file each asks for, and the symbols it exports, from the section header table,
``.dynsym``, its string table, ``.dynamic`` and the GNU version sections only, never the whole file
(``libtorch_cpu.so`` is 426 MB; its symbol sections are a few tens). ``wheel_library_symbols`` streams
a wheel's libraries once each and also scans their strings for ``lib*.so.N`` names (what a library may
dlopen) and the CUDA runtime's entry points (a host-side CUDA library). Kept apart from binfmt's
streaming reader: only the load and torch judges need symbols. These readers report; buildrows.check
judges.
"""

from __future__ import annotations

import re
import struct
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Final, NamedTuple

from buildrows.binaries.binfmt import BinaryFormatError, ByteSource
from buildrows.binaries.dynstream import MAX_SYMBOL_SECTION, MAX_VERSION_ENTRIES
from buildrows.binaries.exportset import ExportSet
from buildrows.binaries.symtab import read_dynsym

if TYPE_CHECKING:
    from buildrows.binaries.inflate import MemberStream

__all__ = [
    "DynamicSymbols",
    "FileSource",
    "Import",
    "imported_symbols",
    "library_symbols",
    "read_dynamic_symbols",
]

_SHT_DYNSYM = 11


def imported_symbols(data: bytes | bytearray | memoryview) -> tuple[str, ...]:
    """Names of the undefined symbols of an ELF file's .dynsym, in table order; () if not ELF."""
    view = memoryview(data)
    return imported_symbols_from(lambda at, n: bytes(view[at:at + n]), len(view))


def imported_symbols_from(read: Callable[[int, int], bytes], size: int) -> tuple[str, ...]:
    """:func:`imported_symbols` through ``read(offset, size)``: only the headers, the section table,
    .dynsym and its strings are read, never the whole file (a wheel member streams)."""
    head = read(0, min(size, 64))
    if len(head) < 16 or head[:4] != b"\x7fELF":
        return ()
    is64, order = head[4] == 2, "<" if head[5] == 1 else ">"
    hdr = struct.Struct(order + ("HHIQQQIHHHHHH" if is64 else "HHIIIIIHHHHHH"))
    if len(head) < 16 + hdr.size:
        raise BinaryFormatError("truncated ELF header")
    fields = hdr.unpack_from(head, 16)
    shoff, shentsize, shnum = fields[5], fields[10], fields[11]
    sec = struct.Struct(order + ("IIQQQQIIQQ" if is64 else "IIIIIIIIII"))
    sym = struct.Struct(order + ("IBBHQQ" if is64 else "IIIBBH"))
    if shnum and (shentsize < sec.size or shoff < 0 or shoff + shnum * shentsize > size):
        raise BinaryFormatError("the section header table runs past the end of the file")
    table = read(shoff, shnum * shentsize) if shnum else b""

    def section(i: int) -> tuple[int, int, int, int]:
        if i < 0 or i >= shnum:
            raise BinaryFormatError(f"section header {i} runs past the end of the file")
        s = sec.unpack_from(table, i * shentsize)
        # (type, offset, size, link): the offset/size fields sit at 4/5 in both classes
        return s[1], s[4], s[5], s[6]

    out: list[str] = []
    for i in range(shnum):
        kind, offset, length, link = section(i)
        if kind != _SHT_DYNSYM:
            continue
        _, str_off, str_size, _ = section(link)
        if offset + length > size or str_off + str_size > size:
            raise BinaryFormatError(".dynsym or its string table runs past the end of the file")
        entries = read(offset, length)
        if str_size > STRING_WINDOW:  # TensorFlow's 87 MB: streamed past once, never held (binaries.dynstream)
            from buildrows.binaries.dynstream import stream_strings

            keys = []
            for n, at in enumerate(range(sym.size, length - sym.size + 1, sym.size)):
                entry = sym.unpack_from(entries, at)
                name_off, shndx = (entry[0], entry[3]) if is64 else (entry[0], entry[5])
                if shndx == 0 and name_off != 0:
                    keys.append(name_off << 24 | n)
            names = sorted((key & 0xFFFFFF, raw) for key, raw in stream_strings(read, str_off, str_size, sorted(keys)))
            out += [raw.decode("utf-8", "surrogateescape") for _, raw in names]
            continue
        strings = read(str_off, str_size)
        for at in range(sym.size, length - sym.size + 1, sym.size):  # entry 0 is null
            entry = sym.unpack_from(entries, at)
            name_off, shndx = (entry[0], entry[3]) if is64 else (entry[0], entry[5])
            if shndx != 0 or name_off == 0:
                continue  # defined here, or nameless
            end = strings.find(b"\0", name_off)
            out.append(strings[name_off:end if end >= 0 else None].decode("utf-8", "surrogateescape"))
    return tuple(out)


# --- What a library exports, imports and names, for "would it load" (buildrows.check.loading) ------------
#
# Read through a ByteSource from the section header table: only .dynsym, its string table, .dynamic and
# the GNU version sections are read, never the whole file. A library in a wheel streams past once (its
# strings scanned as they pass, checkpoints kept), and those few sections are inflated again from the
# nearest checkpoint (buildrows.binaries.inflate.MemberStream); a library on disk is read where they lie.

_SHT_DYNAMIC = 6
_SHT_GNU_VERDEF = 0x6FFFFFFD
_SHT_GNU_VERNEED = 0x6FFFFFFE
_SHT_GNU_VERSYM = 0x6FFFFFFF
_DT_NEEDED = 1
_DT_SONAME = 14
_STB_GLOBAL, _STB_WEAK, _STB_GNU_UNIQUE = 1, 2, 10
_STV_HIDDEN, _STV_INTERNAL = 2, 1
_VERSYM_HIDDEN = 0x8000
# Bounds on what a hostile header can make us read or loop over (kept in dynstream, which reads them too).
HEAD: Final = 1 << 16
# Names a library may pass to dlopen ("libcublas.so.12"), and signs that it calls the CUDA runtime or driver
# itself (cudart linked in statically carries its entry points' names and dlopens "libcuda.so.1").
_SONAME_STRING = re.compile(rb"lib[A-Za-z0-9_+-]{1,64}\.so\.[0-9]{1,4}")
CUDA_MARKERS: Final = ("__cudaRegisterFatBinary", "cudaGetDeviceCount", "cudaLaunchKernel")
# One literal prefix ("cuda"), so the search runs at memory speed (an alternation of literals does not).
_MARKER = re.compile(rb"cuda(?:RegisterFatBinary|GetDeviceCount|LaunchKernel)")
MAX_STRINGS: Final = 512
_OVERLAP: Final = 96


class Import(NamedTuple):
    """One undefined, non-weak dynamic symbol: its name, and the version and file it asks for (GNU
    symbol versioning, e.g. ``memcpy`` GLIBC_2.14 from libc.so.6), if any. A named tuple: a wheel's
    libraries import some 12,000 names, made in one C loop (``tuple.__new__``), not a call each."""

    name: str
    version: str | None = None
    file: str | None = None


@dataclass(frozen=True, slots=True)
class DynamicSymbols:
    """What the dynamic linker reads of one ELF library to load it.

    ``exported``: the names it defines for others (global or weak, visible), each also as
    ``name@VERSION`` when versioned; ``versioned_only`` (names exported only under a hidden version)
    are left out of the bare names. ``sonames_named``: ``lib*.so.N`` strings anywhere in the file (what
    it may dlopen); ``cuda_markers``: which of :data:`CUDA_MARKERS` it carries (empty unless scanned).
    """

    soname: str | None
    needed: tuple[str, ...]
    imports: tuple[Import, ...]
    exported: ExportSet  # ``name in exported``; held as hashes (buildrows.binaries.exportset)
    sonames_named: tuple[str, ...] = ()
    cuda_markers: tuple[str, ...] = ()
    scanned: bool = False  # whether the strings were scanned (a library streamed from a wheel)
    versioned: bool = False  # it defines symbol versions (.gnu.version_d)

    def defines(self, name: str, version: str | None) -> bool:
        """Whether a reference to ``name`` (at ``version``, if versioned) binds here: a versioned
        reference needs that version where the library defines versions (the loader's rule; a
        library without versions satisfies any)."""
        if version is not None and self.versioned:
            return self.exported.has_versioned(name, version)
        return name in self.exported


#: The largest string table read whole (torch's libtorch_cpu.so: 5 MB). A larger one (TensorFlow's
#: libtensorflow_cc.so.2: 87 MB) streams past once instead (buildrows.binaries.dynstream), so memory
#: is bounded by this window, not by the symbol count; both give the same answer.
STRING_WINDOW: Final = 16 << 20


def read_dynamic_symbols(source: ByteSource) -> DynamicSymbols | None:
    """The dynamic symbols of an ELF file read through ``source``; None when it is not ELF. A string
    table over :data:`STRING_WINDOW` streams past once, never held whole (buildrows.binaries.dynstream)."""
    from buildrows.binaries.dynstream import dynsym_string_table_size, read_symbols_streaming

    if dynsym_string_table_size(source) <= STRING_WINDOW:
        return _read_whole_strings(source)
    got = read_symbols_streaming(source)
    if got is None:
        return None
    soname, needed, imports, exported, versioned = got
    return DynamicSymbols(soname, needed, tuple(map(tuple.__new__, repeat(Import), imports)), exported,
                          versioned=versioned)


def _read_whole_strings(source: ByteSource) -> DynamicSymbols | None:
    """:func:`read_dynamic_symbols` with the string tables read whole (they are at most
    :data:`STRING_WINDOW`): the fast way where memory allows."""
    head = bytes(source.read(0, min(64, source.size)))
    if len(head) < 16 or head[:4] != b"\x7fELF":
        return None
    is64, order = head[4] == 2, "<" if head[5] == 1 else ">"
    hdr = struct.Struct(order + ("HHIQQQIHHHHHH" if is64 else "HHIIIIIHHHHHH"))
    if len(head) < 16 + hdr.size:
        raise BinaryFormatError("truncated ELF header")
    fields = hdr.unpack_from(head, 16)
    shoff, shentsize, shnum = fields[5], fields[10], fields[11]
    sec = struct.Struct(order + ("IIQQQQIIQQ" if is64 else "IIIIIIIIII"))
    if shnum == 0 or shentsize < sec.size or shoff + shnum * shentsize > source.size or shnum > 65_535:
        raise BinaryFormatError("no readable section header table (the dynamic symbols cannot be found)")
    table = bytes(source.read(shoff, shnum * shentsize))
    sections = []
    for i in range(shnum):
        s = sec.unpack_from(table, i * shentsize)
        sections.append((s[1], s[4], s[5], s[6]))  # type, offset, size, link

    by_type = {kind: i for i, (kind, *_rest) in reversed(list(enumerate(sections)))}
    # Every section needed, read in file order: a member inflated again from its checkpoints goes
    # forward once instead of jumping back and forth between the start and the end of the file.
    needs = {by_type[t] for t in (_SHT_DYNAMIC, _SHT_GNU_VERNEED, _SHT_GNU_VERDEF, _SHT_DYNSYM, _SHT_GNU_VERSYM)
             if t in by_type}
    needs |= {sections[i][3] for i in needs if i != by_type.get(_SHT_GNU_VERSYM) and 0 <= sections[i][3] < shnum}
    got: dict[int, bytes] = {}

    def fetch(i: int) -> bytes:
        kind, offset, size, _ = sections[i]
        if size > MAX_SYMBOL_SECTION or offset + size > source.size:
            raise BinaryFormatError(f"section {i} (type {kind:#x}) runs past the end of the file or is too large")
        return bytes(source.read(offset, size))

    for i in sorted(needs, key=lambda i: sections[i][1]):
        got[i] = fetch(i)

    def read(i: int) -> bytes:
        return got[i] if i in got else fetch(i)

    def string(strings: bytes, at: int) -> str:
        end = strings.find(b"\0", at)
        return strings[at:end if end >= 0 else None].decode("utf-8", "surrogateescape")

    strtabs: dict[int, bytes] = {}

    def strtab(i: int) -> bytes:
        if not 0 <= i < len(sections):
            raise BinaryFormatError(f"a section links string table {i}, which does not exist")
        if i not in strtabs:
            strtabs[i] = read(i)
        return strtabs[i]

    soname, needed = None, []
    if _SHT_DYNAMIC in by_type:
        i = by_type[_SHT_DYNAMIC]
        dyn = struct.Struct(order + ("qQ" if is64 else "iI"))
        data, names = read(i), strtab(sections[i][3])
        for at in range(0, len(data) - dyn.size + 1, dyn.size):
            tag, val = dyn.unpack_from(data, at)
            if tag == 0:
                break
            if tag == _DT_NEEDED:
                needed.append(string(names, val))
            elif tag == _DT_SONAME:
                soname = string(names, val)
    # version index -> (version name, file) of what this library needs; -> name of what it defines
    wants: dict[int, tuple[str, str]] = {}
    if _SHT_GNU_VERNEED in by_type:
        i = by_type[_SHT_GNU_VERNEED]
        data, names = read(i), strtab(sections[i][3])
        at, count = 0, 0
        while at + 16 <= len(data) and count < MAX_VERSION_ENTRIES:
            _, cnt, file_off, aux, nxt = struct.unpack_from(order + "HHIII", data, at)
            file = string(names, file_off)
            a = at + aux
            for _ in range(cnt):
                if a + 16 > len(data):
                    break
                _, _, other, name_off, anext = struct.unpack_from(order + "IHHII", data, a)
                wants[other & 0x7FFF] = (string(names, name_off), file)
                count += 1
                if not anext:
                    break
                a += anext
            if not nxt:
                break
            at += nxt
    defines: dict[int, str] = {}
    if _SHT_GNU_VERDEF in by_type:
        i = by_type[_SHT_GNU_VERDEF]
        data, names = read(i), strtab(sections[i][3])
        at, count = 0, 0
        while at + 20 <= len(data) and count < MAX_VERSION_ENTRIES:
            _, _, ndx, cnt, _, aux, nxt = struct.unpack_from(order + "HHHHIII", data, at)
            if cnt and at + aux + 8 <= len(data):
                defines[ndx] = string(names, struct.unpack_from(order + "I", data, at + aux)[0])
            count += 1
            if not nxt:
                break
            at += nxt
    imports: tuple[Import, ...] = ()
    exported = array("q")  # the hashes of the exported names (ExportSet: 8 bytes each, not a str in a set)
    if _SHT_DYNSYM in by_type:
        i = by_type[_SHT_DYNSYM]
        versym = read(by_type[_SHT_GNU_VERSYM]) if _SHT_GNU_VERSYM in by_type else b""
        defines_raw = {k: v.encode("utf-8", "surrogateescape") for k, v in defines.items()}
        found, exported = read_dynsym(read(i), strtab(sections[i][3]), versym, order, is64, wants, defines_raw)
        imports = tuple(map(tuple.__new__, repeat(Import), found))
    return DynamicSymbols(soname, tuple(needed), imports, ExportSet(exported), versioned=bool(defines))


class FileSource:
    """A :class:`ByteSource` over a file on disk: reads where asked, holds nothing."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._size = path.stat().st_size

    @property
    def size(self) -> int:
        return self._size

    def read(self, offset: int, size: int) -> bytes:
        with self.path.open("rb") as fp:
            fp.seek(offset)
            return fp.read(size)


def _whole_string(data: bytes, start: int, end: int) -> bool:
    """Whether data[start:end] is a whole C string (a NUL or the section's start before it, a NUL
    after it): the entry point's own name, as a statically linked cudart's name table holds it, and
    not a longer name that contains it (Clang's `__cudaRegisterFatBinaryEnd`, its CUDA driver's)."""
    return start >= 0 and (start == 0 or data[start - 1] == 0) and end < len(data) and data[end] == 0


class _StringScan:
    """Scans pieces of a file in order for soname strings and CUDA markers (a few bytes of overlap)."""

    def __init__(self, markers: bool = True) -> None:
        self.tail = b""
        self.sonames: dict[str, None] = {}
        self.markers: dict[str, None] = {}
        self.want_markers = markers

    def feed(self, piece: bytes) -> None:
        data = self.tail + piece
        if len(self.sonames) < MAX_STRINGS:
            for m in _SONAME_STRING.finditer(data):
                self.sonames[m.group().decode("ascii")] = None
        if self.want_markers and len(self.markers) < len(CUDA_MARKERS):
            for m in _MARKER.finditer(data):
                name = m.group().decode("ascii")
                full = "__" + name if name == "cudaRegisterFatBinary" else name
                if _whole_string(data, m.end() - len(full), m.end()):
                    self.markers[full] = None
        self.tail = data[-_OVERLAP:]


_SHF_WRITE, _SHF_ALLOC, _SHF_EXECINSTR = 0x1, 0x2, 0x4
_SHT_PROGBITS, _SHT_STRTAB = 1, 3


def string_ranges(source: ByteSource) -> list[tuple[int, int]]:
    """(offset, size) of the sections a library's string literals live in: read-only data that is
    loaded (`.rodata*`: what it passes to dlopen, the CUDA runtime's entry-point names when cudart is
    linked in statically) and the loaded string tables (`.dynstr`). Never code, writable data or
    device code (`.nv_fatbin`, the bulk of a CUDA library): the scan reads a few MB, not the file."""
    head = bytes(source.read(0, min(64, source.size)))
    if len(head) < 16 or head[:4] != b"\x7fELF":
        return []
    is64, order = head[4] == 2, "<" if head[5] == 1 else ">"
    hdr = struct.Struct(order + ("HHIQQQIHHHHHH" if is64 else "HHIIIIIHHHHHH"))
    if len(head) < 16 + hdr.size:
        return []
    fields = hdr.unpack_from(head, 16)
    shoff, shentsize, shnum, shstrndx = fields[5], fields[10], fields[11], fields[12]
    sec = struct.Struct(order + ("IIQQQQIIQQ" if is64 else "IIIIIIIIII"))
    if shnum == 0 or shentsize < sec.size or shoff + shnum * shentsize > source.size or shnum > 65_535 \
            or shstrndx >= shnum:
        return []
    table = bytes(source.read(shoff, shnum * shentsize))
    sections = [sec.unpack_from(table, i * shentsize) for i in range(shnum)]
    names_at, names_size = sections[shstrndx][4], sections[shstrndx][5]
    if names_at + names_size > source.size or names_size > 1 << 20:
        return []
    names = bytes(source.read(names_at, names_size))
    out = []
    for name_at, kind, flags, _addr, offset, size, *_rest in sections:
        end = names.find(b"\0", name_at)
        name = names[name_at:end if end >= 0 else None]
        if not flags & _SHF_ALLOC or flags & (_SHF_WRITE | _SHF_EXECINSTR) or name.startswith(b".nv"):
            continue
        strings = (kind == _SHT_PROGBITS and name.startswith(b".rodata")) or kind == _SHT_STRTAB
        if strings and offset + size <= source.size:
            out.append((offset, size))
    return out


#: What one step of the string scan reads and searches. Smaller pieces were tried (256 KiB, so that a regular
#: expression holds the GIL for less): a range that was not kept then inflates again four times as often
#: (TensorFlow's check went from 8 to 33 s).
_SCAN_PIECE: Final = 1 << 20


def scan_strings(source: ByteSource, markers: bool = True) -> _StringScan:
    """The soname strings and CUDA markers in a library's string sections (:func:`string_ranges`)."""
    strings = _StringScan(markers=markers)
    for offset, size in string_ranges(source):
        at = offset
        while at < offset + size:
            piece = bytes(source.read(at, min(_SCAN_PIECE, offset + size - at)))
            if not piece:
                break
            strings.feed(piece)
            at += len(piece)
        strings.tail = b""  # sections are not contiguous: no match spans two
    return strings


def library_symbols(path: Path, *, scan: bool = False) -> DynamicSymbols | None:
    """A library on disk (a torch install's ``torch/lib``): its sections read where they lie."""
    with path.open("rb") as fp:
        if fp.read(4) != b"\x7fELF":
            return None
    got = read_dynamic_symbols(FileSource(path))
    if got is None or not scan:
        return got
    return _with_strings(got, scan_strings(FileSource(path)))


def _with_strings(got: DynamicSymbols, strings: _StringScan) -> DynamicSymbols:
    return DynamicSymbols(got.soname, got.needed, got.imports, got.exported,
                          tuple(strings.sonames)[:MAX_STRINGS], tuple(strings.markers), scanned=True,
                          versioned=got.versioned)


_SMALL_READ: Final = 256 << 10


class _StreamedSource:
    """A :class:`ByteSource` over a member that streamed past once: its head kept, the rest inflated
    again from the nearest checkpoint on demand."""

    def __init__(self, stream: MemberStream, head: bytes) -> None:
        self.stream = stream
        self.head = head
        self.small: dict[tuple[int, int], bytes] = {}

    @property
    def size(self) -> int:
        return self.stream.size

    def read(self, offset: int, size: int) -> bytes:
        if offset + size <= len(self.head):
            return self.head[offset:offset + size]
        if size > _SMALL_READ:
            return self.stream.read(offset, size)
        # The ELF header, the section table and the section names: read by the symbol reader and
        # the string scan alike, inflated once.
        got = self.small.get((offset, size))
        if got is None:
            got = self.small[(offset, size)] = self.stream.read(offset, size)
        return got


def passed_symbols(stream: MemberStream, markers: bool, *, scan: bool = True) -> DynamicSymbols | None:
    """The dynamic symbols (and, with ``scan``, the strings; the CUDA runtime's entry points too with
    ``markers``) of a library that streamed past: its sections inflate again from the checkpoints."""
    source = _StreamedSource(stream, b"")
    got = read_dynamic_symbols(source)
    if got is not None and scan:  # its string sections only, inflated again like the symbols
        got = _with_strings(got, scan_strings(source, markers=markers))
    return got

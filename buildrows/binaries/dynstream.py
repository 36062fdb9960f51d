"""A library's dynamic symbols read with its string table streaming past once, never held whole.

``.dynstr`` is where a library's symbol names live: 87 MB in TensorFlow 2.21's
``libtensorflow_cc.so.2`` (483,000 symbols). Reading it whole (and joining its inflated pieces)
made ``check`` peak at 582 MB. Here the structures that point into it are read first (``.dynamic``,
the GNU version sections, ``.dynsym`` and ``.gnu.version``: a few bytes per symbol), every offset
they name is sorted (an ``array`` of ``offset << 24 | entry``), and the string table then streams
past once, 1 MiB at a time, each name taken as its offset comes by. Exported names become hashes
at once (:class:`buildrows.binaries.exportset.ExportSet`); only imported names are kept as strings.
Memory: ``.dynsym`` and its version table, 8 bytes per symbol, a piece; not the names.
The result equals reading every section whole (``symbols.read_dynamic_symbols``' contract).
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable, Iterable, Iterator
from typing import Final

from buildrows.binaries.binfmt import BinaryFormatError, ByteSource
from buildrows.binaries.exportset import ExportSet

# Bounds on what a hostile header can make the symbol readers read or loop over.
MAX_SYMBOL_SECTION: Final = 256 << 20
MAX_VERSION_ENTRIES: Final = 1_000_000

__all__ = ["PIECE", "dynsym_string_table_size", "read_symbols_streaming", "stream_strings"]

PIECE: Final = 1 << 20
_SHIFT: Final = 24
_MASK: Final = (1 << _SHIFT) - 1
_SMALL: Final = _MASK  # the entry number marking an offset asked for by .dynamic or a version section
_BUCKET: Final = 23
_SHT_DYNSYM, _SHT_DYNAMIC = 11, 6
_SHT_GNU_VERDEF, _SHT_GNU_VERNEED, _SHT_GNU_VERSYM = 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
_DT_NEEDED, _DT_SONAME = 1, 14
_STB_GLOBAL, _STB_WEAK, _STB_GNU_UNIQUE = 1, 2, 10
_STV_HIDDEN, _STV_INTERNAL = 2, 1
_VERSYM_HIDDEN = 0x8000


def stream_strings(read: Callable[[int, int], bytes], start: int, size: int,
                   keys: Iterable[int]) -> Iterator[tuple[int, bytes]]:
    """``(key, the NUL-terminated string at key >> 24)`` for each of the sorted ``keys``, reading the
    table ``[start, start + size)`` forward once, a piece at a time (a string that runs past a piece
    takes the next ones; one that runs past the table ends there, as slicing a whole table would)."""
    buf = b""
    buf_at = 0  # table offset of buf[0]; buf covers [buf_at, read_to)
    read_to = 0
    for key in keys:
        at = key >> _SHIFT
        if at >= size:
            yield key, b""
            continue
        rel = at - buf_at
        if rel >= len(buf):  # past what was read: skip the gap, never read
            buf, buf_at, rel = b"", at, 0
            read_to = max(read_to, at)
        end = buf.find(b"\0", rel)
        while end < 0 and read_to < size:
            piece = read(start + read_to, min(PIECE, size - read_to))
            if not piece:
                raise BinaryFormatError("the string table is cut short")
            buf, buf_at = buf[rel:] + piece, at  # the bytes behind are done with: trimmed only here
            rel = 0
            read_to += len(piece)
            end = buf.find(b"\0")
        yield key, buf[rel:end if end >= 0 else None]


def dynsym_string_table_size(source: ByteSource) -> int:
    """The size of the string table ``.dynsym`` names its symbols in; 0 when there is none or the
    file is not a readable ELF (the caller's reader then says why)."""
    head = bytes(source.read(0, min(64, source.size)))
    if len(head) < 64 or head[:4] != b"\x7fELF":
        return 0
    is64, order = head[4] == 2, "<" if head[5] == 1 else ">"
    hdr = struct.Struct(order + ("HHIQQQIHHHHHH" if is64 else "HHIIIIIHHHHHH"))
    if len(head) < 16 + hdr.size:
        return 0
    fields = hdr.unpack_from(head, 16)
    shoff, shentsize, shnum = fields[5], fields[10], fields[11]
    sec = struct.Struct(order + ("IIQQQQIIQQ" if is64 else "IIIIIIIIII"))
    if shnum == 0 or shentsize < sec.size or shoff + shnum * shentsize > source.size or shnum > 65_535:
        return 0
    table = bytes(source.read(shoff, shnum * shentsize))
    for i in range(shnum):
        s = sec.unpack_from(table, i * shentsize)
        if s[1] == _SHT_DYNSYM and 0 <= s[6] < shnum:
            return int(sec.unpack_from(table, s[6] * shentsize)[5])
    return 0


def read_symbols_streaming(source: ByteSource) -> tuple[str | None, tuple[str, ...], list[tuple[str, str | None, str | None]],
                                                         ExportSet, bool] | None:
    """(soname, NEEDED, imports as (name, version, file), exports, whether it defines versions) of
    the ELF file in ``source``; None when it is not ELF. See the module's docstring."""

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
    users = [by_type[t] for t in (_SHT_DYNAMIC, _SHT_GNU_VERNEED, _SHT_GNU_VERDEF, _SHT_DYNSYM) if t in by_type]
    for i in users:
        if not 0 <= sections[i][3] < shnum:
            raise BinaryFormatError(f"a section links string table {sections[i][3]}, which does not exist")

    def fetch(i: int) -> bytes:
        kind, offset, size, _ = sections[i]
        if size > MAX_SYMBOL_SECTION or offset + size > source.size:
            raise BinaryFormatError(f"section {i} (type {kind:#x}) runs past the end of the file or is too large")
        return bytes(source.read(offset, size))

    # The structures, in file order (a member inflated again goes forward once); not the string tables.
    wanted = sorted({*users, *([by_type[_SHT_GNU_VERSYM]] if _SHT_GNU_VERSYM in by_type else [])},
                    key=lambda i: sections[i][1])
    got = {i: fetch(i) for i in wanted}
    # string table -> keys (offset << 24 | entry; entry _SMALL for the few names the other sections ask)
    # Bucketed by 8 MiB of the table, so that sorting holds one bucket's keys as Python ints at a time.
    keys: dict[int, dict[int, array]] = {}  # type: ignore[type-arg]

    def want(strtab: int, offset: int, entry: int = _SMALL) -> None:
        buckets = keys.setdefault(strtab, {})
        bucket = buckets.get(offset >> _BUCKET)
        if bucket is None:
            bucket = buckets[offset >> _BUCKET] = array("q")
        bucket.append(offset << _SHIFT | entry)

    dyn_entries: list[tuple[int, int]] = []
    if _SHT_DYNAMIC in by_type:
        i = by_type[_SHT_DYNAMIC]
        dyn = struct.Struct(order + ("qQ" if is64 else "iI"))
        data = got[i]
        for at in range(0, len(data) - dyn.size + 1, dyn.size):
            tag, val = dyn.unpack_from(data, at)
            if tag == 0:
                break
            if tag in (_DT_NEEDED, _DT_SONAME):
                dyn_entries.append((tag, val))
                want(sections[i][3], val)
    need_refs: list[tuple[int, int, int]] = []  # (version index, name offset, file offset)
    if _SHT_GNU_VERNEED in by_type:
        i = by_type[_SHT_GNU_VERNEED]
        data = got[i]
        at, count = 0, 0
        while at + 16 <= len(data) and count < MAX_VERSION_ENTRIES:
            _, cnt, file_off, aux, nxt = struct.unpack_from(order + "HHIII", data, at)
            want(sections[i][3], file_off)
            a = at + aux
            for _ in range(cnt):
                if a + 16 > len(data):
                    break
                _, _, other, name_off, anext = struct.unpack_from(order + "IHHII", data, a)
                need_refs.append((other & 0x7FFF, name_off, file_off))
                want(sections[i][3], name_off)
                count += 1
                if not anext:
                    break
                a += anext
            if not nxt:
                break
            at += nxt
    def_refs: list[tuple[int, int]] = []  # (version index, name offset)
    if _SHT_GNU_VERDEF in by_type:
        i = by_type[_SHT_GNU_VERDEF]
        data = got[i]
        at, count = 0, 0
        while at + 20 <= len(data) and count < MAX_VERSION_ENTRIES:
            _, _, ndx, cnt, _, aux, nxt = struct.unpack_from(order + "HHHHIII", data, at)
            if cnt and at + aux + 8 <= len(data):
                name_off = struct.unpack_from(order + "I", data, at + aux)[0]
                def_refs.append((ndx, name_off))
                want(sections[i][3], name_off)
            count += 1
            if not nxt:
                break
            at += nxt
    sym = struct.Struct(order + ("IBBHQQ" if is64 else "IIIBBH"))
    fields_at = (0, 1, 2, 3) if is64 else (0, 3, 4, 5)
    dynsym = got.get(by_type[_SHT_DYNSYM], b"") if _SHT_DYNSYM in by_type else b""
    count = len(dynsym) // sym.size
    if count > _MASK:
        raise BinaryFormatError(".dynsym has more entries than can be read")
    versym = got.get(by_type[_SHT_GNU_VERSYM], b"") if _SHT_GNU_VERSYM in by_type else b""
    vers = array("H", versym[:min(count, len(versym) // 2) * 2])
    if order != ("<" if array("H", b"\x01\x00")[0] == 1 else ">"):
        vers.byteswap()
    nvers = len(vers)
    if _SHT_DYNSYM in by_type:
        strtab = sections[by_type[_SHT_DYNSYM]][3]
        view = memoryview(dynsym)[sym.size:count * sym.size]
        for n, entry in enumerate(sym.iter_unpack(view), 1):
            name_off, info, other, shndx = (entry[fields_at[0]], entry[fields_at[1]], entry[fields_at[2]],
                                            entry[fields_at[3]])
            if name_off == 0:
                continue
            bind = info >> 4
            if shndx == 0:
                if bind == _STB_WEAK:
                    continue  # a weak reference may stay unresolved
            elif bind not in (_STB_GLOBAL, _STB_WEAK, _STB_GNU_UNIQUE) or (other & 3) in (_STV_HIDDEN, _STV_INTERNAL):
                continue
            want(strtab, name_off, n)
    # Each string table streams past once; the names the other sections ask for are kept (a few).
    small: dict[tuple[int, int], bytes] = {}
    imports: list[tuple[int, str, int]] = []  # (entry, name, version index)
    plain = array("q")
    versioned, versioned_at = array("q"), array("H")  # the hash of the name, its version index
    for strtab, buckets in keys.items():
        kind, offset, size, _ = sections[strtab]
        if offset + size > source.size or size > MAX_SYMBOL_SECTION:
            raise BinaryFormatError(f"section {strtab} (type {kind:#x}) runs past the end of the file or is too large")
        ordered = (key for b in sorted(buckets) for key in sorted(buckets.pop(b)))
        for key, raw in stream_strings(lambda at, n: bytes(source.read(at, n)), offset, size, ordered):
            n = key & _MASK
            if n == _SMALL:
                small[(strtab, key >> _SHIFT)] = raw
                continue
            entry = sym.unpack_from(dynsym, n * sym.size)
            shndx = entry[fields_at[3]]
            ver = vers[n] if n < nvers else 1
            if shndx == 0:
                imports.append((n, raw.decode("utf-8", "surrogateescape"), ver & 0x7FFF))
                continue
            if (ver & 0x7FFF) > 1:
                versioned.append(hash(raw))
                versioned_at.append(ver & 0x7FFF)
            if not ver & _VERSYM_HIDDEN:
                plain.append(hash(raw))  # the default version: unversioned references bind to it

    def text(strtab_of: int, at: int) -> str:
        return small.get((sections[strtab_of][3], at), b"").decode("utf-8", "surrogateescape")

    soname, needed = None, []
    if _SHT_DYNAMIC in by_type:
        for tag, val in dyn_entries:
            if tag == _DT_NEEDED:
                needed.append(text(by_type[_SHT_DYNAMIC], val))
            else:
                soname = text(by_type[_SHT_DYNAMIC], val)
    wants = {idx: (text(by_type[_SHT_GNU_VERNEED], name_off), text(by_type[_SHT_GNU_VERNEED], file_off))
             for idx, name_off, file_off in need_refs}
    defines = {idx: text(by_type[_SHT_GNU_VERDEF], name_off) for idx, name_off in def_refs}
    for h, idx in zip(versioned, versioned_at, strict=True):
        version = defines.get(idx)
        if version is not None:
            plain.append(hash((h, version.encode("utf-8", "surrogateescape"))))
    imports.sort()  # table order, as the linker lists them
    none: tuple[str | None, str | None] = (None, None)
    out = [(name, *wants.get(ver, none)) for _, name, ver in imports]
    return soname, tuple(needed), out, ExportSet(plain), bool(defines)

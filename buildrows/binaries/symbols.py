"""The undefined dynamic symbols an ELF library imports (its .dynsym entries with no section).

Kept apart from binfmt's streaming reader: only the torch checks need symbols, so a wheel is read
for them only when a policy asks (one library in memory at a time).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from pathlib import Path

from buildrows.binaries.binfmt import BinaryFormatError

__all__ = ["imported_symbols", "wheel_imported_symbols"]

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
        strings = read(str_off, str_size)
        entries = read(offset, length)
        for at in range(sym.size, length - sym.size + 1, sym.size):  # entry 0 is null
            entry = sym.unpack_from(entries, at)
            name_off, shndx = (entry[0], entry[3]) if is64 else (entry[0], entry[5])
            if shndx != 0 or name_off == 0:
                continue  # defined here, or nameless
            end = strings.find(b"\0", name_off)
            out.append(strings[name_off:end if end >= 0 else None].decode("utf-8", "surrogateescape"))
    return tuple(out)


def wheel_imported_symbols(wheel: Path, members: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """member -> its imported symbols, for the ELF members named: each streams through the
    check's reader (buildrows.binaries.wheelread.member_reader), one at a time, so memory is
    .dynsym and its strings, never a library (init --from-wheel held 1.95 GB for NVIDIA's
    cuDNN wheel when it read each library whole)."""
    from buildrows.binaries.wheelread import member_reader

    out: dict[str, tuple[str, ...]] = {}
    for member in members:
        read, size = member_reader(wheel, member)
        out[member] = imported_symbols_from(read, size)
    return out

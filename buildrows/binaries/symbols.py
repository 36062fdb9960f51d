"""The undefined dynamic symbols an ELF library imports (its .dynsym entries with no section).

Kept apart from binfmt's streaming reader: only the torch checks need symbols, so a wheel is read
for them only when a policy asks (one library in memory at a time).
"""

from __future__ import annotations

import struct
import zipfile
from collections.abc import Iterable
from pathlib import Path

from buildrows.binaries.binfmt import BinaryFormatError

__all__ = ["imported_symbols", "wheel_imported_symbols"]

_SHT_DYNSYM = 11


def imported_symbols(data: bytes | bytearray | memoryview) -> tuple[str, ...]:
    """Names of the undefined symbols of an ELF file's .dynsym, in table order; () if not ELF."""
    view = memoryview(data)
    if len(view) < 16 or bytes(view[:4]) != b"\x7fELF":
        return ()
    is64, order = view[4] == 2, "<" if view[5] == 1 else ">"
    hdr = struct.Struct(order + ("HHIQQQIHHHHHH" if is64 else "HHIIIIIHHHHHH"))
    if len(view) < 16 + hdr.size:
        raise BinaryFormatError("truncated ELF header")
    fields = hdr.unpack_from(view, 16)
    shoff, shentsize, shnum = fields[5], fields[10], fields[11]
    sec = struct.Struct(order + ("IIQQQQIIQQ" if is64 else "IIIIIIIIII"))
    sym = struct.Struct(order + ("IBBHQQ" if is64 else "IIIBBH"))

    def section(i: int) -> tuple[int, int, int, int]:
        at = shoff + i * shentsize
        if at < 0 or at + sec.size > len(view):
            raise BinaryFormatError(f"section header {i} runs past the end of the file")
        s = sec.unpack_from(view, at)
        # (type, offset, size, link): the offset/size fields sit at 4/5 in both classes
        return s[1], s[4], s[5], s[6]

    out: list[str] = []
    for i in range(shnum):
        kind, offset, size, link = section(i)
        if kind != _SHT_DYNSYM:
            continue
        _, str_off, str_size, _ = section(link)
        if offset + size > len(view) or str_off + str_size > len(view):
            raise BinaryFormatError(".dynsym or its string table runs past the end of the file")
        strings = bytes(view[str_off:str_off + str_size])
        for at in range(offset + sym.size, offset + size - sym.size + 1, sym.size):  # entry 0 is null
            entry = sym.unpack_from(view, at)
            name_off, shndx = (entry[0], entry[3]) if is64 else (entry[0], entry[5])
            if shndx != 0 or name_off == 0:
                continue  # defined here, or nameless
            end = strings.find(b"\0", name_off)
            out.append(strings[name_off:end if end >= 0 else None].decode("utf-8", "surrogateescape"))
    return tuple(out)


def wheel_imported_symbols(wheel: Path, members: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """member -> its imported symbols, for the ELF members named (read one at a time)."""
    out: dict[str, tuple[str, ...]] = {}
    with zipfile.ZipFile(wheel) as zf:
        for member in members:
            out[member] = imported_symbols(zf.read(member))
    return out

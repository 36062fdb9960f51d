"""A library's ``.dynsym`` read in bulk: its imports, and the hashes of the names it exports.

The load check asks every library of a wheel what it exports (``libtorch_cpu.so``: 75,000 names of
some 70 bytes). Read one entry at a time in Python, that loop was most of the whole check's time
beyond inflating (issue 38). Here each step is one C loop over the whole table: the entries become
an ``array`` of 32-bit words, whose columns are the name offsets and the (binding, visibility,
section) word; the few distinct words are classified once; ``itertools.compress`` keeps the
exporting entries' name offsets, and ``map`` finds each name's end, slices and hashes it. Only what
is rare goes through Python one at a time: imports (a few thousand), and the exports of a library
that defines symbol versions under other than its base version (``libstdc++``). The answer is the entry-by-entry reading's, which the tests hold it to.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable
from itertools import compress, islice, repeat
from operator import add, and_
from typing import Final

__all__ = ["read_dynsym"]

#: Names per C loop. A C loop holds the GIL from start to end: the inflating workers, which need it for
#: a moment between chunks, would wait for the whole table (tens of ms). A step is some 0.5 ms.
STEP: Final = 1024

_STB_GLOBAL, _STB_WEAK, _STB_GNU_UNIQUE = 1, 2, 10
_STV_HIDDEN, _STV_INTERNAL = 2, 1
_VERSYM_HIDDEN = 0x8000


def _words(data: bytes | memoryview, typecode: str, swap: bool) -> array[int]:
    out: array[int] = array(typecode)
    out.frombytes(data)
    if swap:
        out.byteswap()
    return out


Imported = tuple[str, "str | None", "str | None"]


def read_dynsym(data: bytes, names: bytes, versym: bytes, order: str, is64: bool,
                wants: dict[int, tuple[str, str]], defines: dict[int, bytes]) -> tuple[list[Imported], array[int]]:
    """(imports, hashes of the exported names) of a ``.dynsym`` (``data``) and its string table.

    ``wants``: version index -> (version, file) of what the library needs (``.gnu.version_r``);
    ``defines``: version index -> version name of what it defines (``.gnu.version_d``). The imports are
    (name, version, file) of the undefined non-weak symbols, in table order. The hashes are
    ``hash(name)`` of every exported name under its default version, and ``hash((hash(name), version))``
    of every name exported under a version (buildrows.binaries.exportset)."""
    esize = 24 if is64 else 16
    entries = len(data) // esize
    exported: array[int] = array("q")
    imports: list[Imported] = []
    if entries <= 1:
        return imports, exported
    swap = (order == "<") != (sys.byteorder == "little")
    words = _words(memoryview(data)[:entries * esize], "I", swap)
    stride = esize // 4
    offsets = words[stride::stride]  # entry 0 is the null entry
    flags = words[stride + (1 if is64 else 3)::stride]  # st_info, st_other, st_shndx in one word
    vers = _words(memoryview(versym)[:2 * min(entries, len(versym) // 2)], "H", swap) if versym else array("H")
    nvers = len(vers)

    imported: set[int] = set()
    exporting: set[int] = set()
    for word in set(flags):
        if order == "<":
            info, other, shndx = word & 0xFF, (word >> 8) & 0xFF, word >> 16
        else:
            info, other, shndx = word >> 24, (word >> 16) & 0xFF, word & 0xFFFF
        bind = info >> 4
        if shndx == 0:
            if bind != _STB_WEAK:  # a weak reference may stay unresolved
                imported.add(word)
        elif bind in (_STB_GLOBAL, _STB_WEAK, _STB_GNU_UNIQUE) and (other & 3) not in (_STV_HIDDEN, _STV_INTERNAL):
            exporting.add(word)

    # Imports, in table order: each column kept for the importing entries, the nameless dropped; names
    # found, sliced and decoded, and versions looked up, in C loops (a wheel's libraries import some
    # 12,000 names).
    if not names.endswith(b"\0"):  # a NUL after the last name: find never answers -1 for a name inside
        names += b"\0"           # the table (the entry-by-entry reading's names[at:None]); past it, b"" either way
    find: Callable[[bytes, int], int] = names.find
    if nvers < entries:
        vers.extend(repeat(1, entries - nvers))  # an entry without a version entry reads as 1 (global)
    importing = bytes(map(imported.__contains__, flags))  # a byte an entry: 0 or 1 (compress takes either)
    at = list(compress(offsets, importing))
    named = list(map(bool, at))  # 0: nameless
    at = list(compress(at, named))
    versions = map(wants.get, map(and_, compress(compress(vers[1:], importing), named), repeat(0x7FFF)),
                   repeat((None, None)))
    for lo in range(0, len(at), STEP):
        part = at[lo:lo + STEP]
        texts = map(bytes.decode, map(names.__getitem__, map(slice, part, map(find, repeat(b"\0"), part))),
                    repeat("utf-8"), repeat("surrogateescape"))
        imports.extend(map(add, zip(texts), islice(versions, len(part))))

    if not exporting:
        return imports, exported
    exporting_at = bytes(map(exporting.__contains__, flags))
    # Some exported name is versioned, or hidden (imports name the versions they need: not these)
    if max(compress(vers[1:], exporting_at), default=0) > 1:
        for n in compress(range(1, entries), exporting_at):
            at_n = offsets[n - 1]
            if at_n == 0:
                continue
            ver = vers[n]
            end = find(b"\0", at_n)
            raw = names[at_n:end]
            version = defines.get(ver & 0x7FFF)
            if version is not None and (ver & 0x7FFF) > 1:
                exported.append(hash((hash(raw), version)))
            if not ver & _VERSYM_HIDDEN:
                exported.append(hash(raw))  # the default version: unversioned references bind to it
        return imports, exported
    # Each exported name: its end found, sliced, hashed, in C loops.
    starts = filter(None, compress(offsets, exporting_at))  # 0: nameless; never a list (memory)
    while part := list(islice(starts, STEP)):
        exported.extend(map(hash, map(names.__getitem__, map(slice, part, map(find, repeat(b"\0"), part)))))
    return imports, exported

"""The bulk ``.dynsym`` reader (buildrows.binaries.symtab, issue 38) gives the entry-by-entry answer:
random tables of both ELF classes and byte orders, read both ways."""

from __future__ import annotations

import random
import struct

import pytest

from buildrows.binaries.symtab import read_dynsym

_BINDS = (0, 1, 2, 10, 3)  # local, global, weak, GNU unique, and one no loader knows


def _entry_by_entry(data: bytes, names: bytes, versym: bytes, order: str, is64: bool,
                    wants: dict[int, tuple[str, str]], defines: dict[int, bytes]) -> tuple[list[tuple[str, str | None, str | None]], set[int]]:
    """The reading symtab replaced, one entry at a time (the oracle)."""
    sym = struct.Struct(order + ("IBBHQQ" if is64 else "IIIBBH"))
    count = len(data) // sym.size
    vers = struct.unpack_from(f"{order}{min(count, len(versym) // 2)}H", versym) if versym else ()
    imports: list[tuple[str, str | None, str | None]] = []
    exported: set[int] = set()
    for n in range(1, count):
        fields = sym.unpack_from(data, n * sym.size)
        name_off, info, other, shndx = (fields[0], fields[1], fields[2], fields[3]) if is64 else \
            (fields[0], fields[3], fields[4], fields[5])
        if name_off == 0:
            continue
        bind, ver = info >> 4, vers[n] if n < len(vers) else 1
        end = names.find(b"\0", name_off)
        raw = names[name_off:end if end >= 0 else None]
        if shndx == 0:
            if bind != 2:
                wanted = wants.get(ver & 0x7FFF)
                imports.append((raw.decode("utf-8", "surrogateescape"), *wanted) if wanted else
                               (raw.decode("utf-8", "surrogateescape"), None, None))
            continue
        if bind not in (1, 2, 10) or (other & 3) in (1, 2):
            continue
        version = defines.get(ver & 0x7FFF)
        if version is not None and (ver & 0x7FFF) > 1:
            exported.add(hash((hash(raw), version)))
        if not ver & 0x8000:
            exported.add(hash(raw))
    return imports, exported


def _table(rng: random.Random, order: str, is64: bool, versioned: bool, terminated: bool) -> tuple[bytes, bytes, bytes]:
    words = [f"_ZN{rng.randrange(10**6)}name{'x' * rng.randrange(40)}".encode() for _ in range(rng.randrange(1, 300))]
    names = b"\0" + b"\0".join(words) + (b"\0" if terminated else b"")
    starts = [i + 1 for i, b in enumerate(names[1:]) if names[i] == 0]
    sym = struct.Struct(order + ("IBBHQQ" if is64 else "IIIBBH"))
    entries = [b"\0" * sym.size]
    versions = [0]
    for _ in range(rng.randrange(0, 400)):
        pick = rng.random()
        # a name's start; inside a name (tail merging); nameless; past the table
        at = rng.choice(starts) if pick < 0.8 else rng.randrange(len(names)) if pick < 0.93 else \
            0 if pick < 0.97 else len(names) + rng.randrange(5)
        info = rng.choice(_BINDS) << 4 | rng.randrange(4)
        other, shndx = rng.randrange(4), rng.choice((0, 0, 1, 12, 0xFFF1))
        entries.append(sym.pack(at, info, other, shndx, 0, 0) if is64 else sym.pack(at, 0, 0, info, other, shndx))
        versions.append(rng.choice((1, 1, 1, 2, 3, 0x8003)) if versioned else rng.choice((0, 1)))
    versym = struct.pack(f"{order}{len(versions)}H", *versions)
    if rng.random() < 0.2:
        versym = versym[:rng.randrange(len(versym) + 1)]  # shorter than the table: the rest read as 1
    return b"".join(entries), names, versym


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("is64", [True, False])
def test_bulk_reading_equals_reading_entry_by_entry(order: str, is64: bool) -> None:
    rng = random.Random(f"{order}{is64}")
    wants = {2: ("GLIBC_2.14", "libc.so.6"), 3: ("V_2", "libv.so.1")}
    for case in range(150):
        versioned = case % 3 == 0
        data, names, versym = _table(rng, order, is64, versioned, terminated=case % 7 != 0)
        defines = {1: b"libself.so", 2: b"V_1", 3: b"V_2"} if versioned else {}
        imports, exported = read_dynsym(data, names, versym if case % 5 else b"", order, is64, wants, defines)
        want_imports, want_exported = _entry_by_entry(data, names, versym if case % 5 else b"", order, is64,
                                                      wants, defines)
        assert imports == want_imports, case
        assert set(exported) == want_exported, case


def test_a_table_of_the_null_entry_alone_or_cut_mid_entry() -> None:
    assert read_dynsym(b"\0" * 24, b"\0", b"", "<", True, {}, {}) == ([], read_dynsym(b"", b"", b"", "<", True, {}, {})[1])
    one = struct.pack("<IBBHQQ", 1, 1 << 4, 0, 5, 0, 0)
    imports, exported = read_dynsym(b"\0" * 24 + one + b"\0" * 7, b"\0f\0", b"", "<", True, {}, {})
    assert imports == [] and list(exported) == [hash(b"f")]

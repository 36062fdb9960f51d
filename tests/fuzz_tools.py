"""Mutation helpers shared by the hypothesis fuzz tests (tests/test_fuzz_*.py) and scripts/fuzz_all.py.

Plain functions of a `random.Random`, so the large run replays exactly from its seed and the
tests can drive the same mutators from hypothesis' `randoms()`.
"""

from __future__ import annotations

import copy
import io
import random
import struct
import warnings
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_POLICY = REPO / "tests" / "data" / "policies" / "executorch" / "buildrows.toml"
GENERATOR_DIR = REPO / "tests" / "data" / "generator"

# Values that have broken parsers before: wrong types, odd digits, near-misses of valid tokens.
INTERESTING_VALUES: list[Any] = [
    None, True, False, 0, -1, 2**63, 1e308, 1.5, float("inf"), "", " ", "\n", "\x00",
    "3.12", "3.12\n", "3.1٣", "²", "13.0", "cu130", "cu13.0", "13", "١٣.٠", "9.0+ptx", "9.0+PTX", "9.O",
    "sm_90", "sm_1000", "native", "all", "Auto", "7.5 8.0 9.0", "12.0a 10.0f", "90;100;120", "+PTX", "newest",
    "none", "a" * 10000, "linux-x86_64", "windows-amd64", "cmake-presets", "setup.py", "{cuda}", "{cu}",
    "nvidia-cuda-runtime>=13,<14", "nvidia-cuda-runtime>=>13", "'; rm -rf /", "$(touch PWNED)",
    [], [None], ["13.0"], ["13.0", "13.0"], ["9.0", 1], ["9.0 10.0", "12.0"], [[["deep"]]],
    {}, {"x": 1}, {"trains": ["13.0"], "archs": "9.0"}, {"trains": "13.0"}, {"platform": "linux-aarch64", "reason": ""},
]


def interesting(rng: random.Random) -> Any:
    v = rng.choice(INTERESTING_VALUES)
    return copy.deepcopy(v)


def random_value(rng: random.Random, depth: int = 0) -> Any:
    """A TOML-shaped value (tables have string keys)."""
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return interesting(rng)
    if kind == 1:
        return rng.randint(-(2**64), 2**64)
    if kind == 2:
        return rng.random() * 10**rng.randint(-5, 5)
    if kind == 3:
        return random_text(rng)
    if kind == 4:
        return rng.choice([True, False])
    if kind == 5:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = ["trains", "archs", "ptx", "image", "cache", "cpu", "versions", "excluded", "runtime", "requirements",
            "library-dir", "platform", "reason", "cuda", "python", "name", "driver", "source-dir", "cuda-option",
            "linux-x86_64", "13", "12", "x"]
    return {rng.choice(keys) if rng.random() < 0.8 else random_text(rng): random_value(rng, depth + 1)
            for _ in range(rng.randrange(4))}


_ALPHABET = "0123456789.;, +PTXptxafsmcu_-\n\t'\"$`(){}[]=<>\\O١²Ｏ\x00\u2019é"


def random_text(rng: random.Random, n: int | None = None) -> str:
    n = rng.randrange(24) if n is None else n
    return "".join(rng.choice(_ALPHABET) for _ in range(n))


def paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside nested dicts and lists."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += paths(v, (*prefix, i))
    return out


def mutate_doc(doc: Any, rng: random.Random, rounds: int = 3) -> Any:
    """Replace, delete or add values at random paths of a nested dict (a deep copy is returned)."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, rounds)):
        ps = [p for p in paths(doc) if p]
        if not ps:
            return random_value(rng)
        p = rng.choice(ps)
        parent = doc
        for k in p[:-1]:
            parent = parent[k]
        op = rng.randrange(4)
        if op == 0:
            parent[p[-1]] = random_value(rng)
        elif op == 1:
            parent[p[-1]] = interesting(rng)
        elif op == 2:
            del parent[p[-1]]
        elif isinstance(parent, dict):
            parent[rng.choice([random_text(rng), "archs", "ptx", "trains", "cpu", "cuda"])] = random_value(rng)
        else:
            parent.append(random_value(rng))
    return doc


def mutate_bytes(data: bytes, rng: random.Random, rounds: int = 4) -> bytes:
    """Byte flips, truncation, duplication, insertion of interesting integers."""
    b = bytearray(data)
    for _ in range(rng.randint(1, rounds)):
        if not b:
            b += rng.randbytes(rng.randrange(64))
            continue
        op = rng.randrange(7)
        i = rng.randrange(len(b))
        if op == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[i] = rng.randrange(256)
        elif op == 2:
            del b[rng.randrange(len(b)):]  # truncate
        elif op == 3:
            j = min(len(b), i + rng.randrange(1, 64))
            b[i:i] = b[i:j]  # duplicate a run
        elif op == 4:
            del b[i:i + rng.randrange(1, 64)]
        elif op == 5:
            width = rng.choice([2, 4, 8])
            value = rng.choice([0, 1, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 2**63 - 1, 2**64 - 1,
                                len(data), len(data) + 1, len(data) * 2])
            value &= (1 << (8 * width)) - 1
            b[i:i + width] = value.to_bytes(width, "little")
        else:
            b[i:i] = rng.randbytes(rng.randrange(1, 16))
    return bytes(b)


def mutate_text(text: str, rng: random.Random) -> str:
    """Line-level and character-level edits of TOML/JSON text."""
    lines = text.splitlines(keepends=True)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        if not lines:
            lines = [random_text(rng) + "\n"]
        i = rng.randrange(len(lines))
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(i, lines[rng.randrange(len(lines))])
        elif op == 2:
            line = lines[i]
            j = rng.randrange(len(line) + 1)
            lines[i] = line[:j] + random_text(rng, rng.randrange(1, 6)) + line[j:]
        elif op == 3:
            line = lines[i]
            j = rng.randrange(len(line) + 1)
            lines[i] = line[:j] + line[j + rng.randrange(1, 6):]
        elif op == 4:
            lines[i], lines[-1 - i] = lines[-1 - i], lines[i]
        else:
            lines = lines[: rng.randrange(len(lines) + 1)]
    return "".join(lines)


# --- ELF ---------------------------------------------------------------------------------------

def elf_header_fields(data: bytes) -> dict[str, int]:
    """Offsets of the 64-bit little-endian ELF header fields a mutator aims at."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    return {"shoff": shoff, "shentsize": shentsize, "shnum": shnum, "shstrndx": shstrndx,
            "phoff": phoff, "phentsize": phentsize, "phnum": phnum}


def mutate_elf(data: bytes, rng: random.Random) -> bytes:
    """Structure-aware ELF mutations: header counts, section sizes/offsets past the end or overlapping,
    plus a round of plain byte mutations."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2:
        return mutate_bytes(data, rng)
    b = bytearray(data)
    h = elf_header_fields(data)
    op = rng.randrange(8)
    huge = rng.choice([0xFFFF, 0x7FFF, 0xFFFFFFFF, 2**63, 2**64 - 1, len(data), len(data) - 1, len(data) + 8])
    if op == 0:
        struct.pack_into("<H", b, 0x3C, rng.choice([0, 1, h["shnum"] + 1, 0xFFFF]))  # e_shnum
    elif op == 1:
        struct.pack_into("<H", b, 0x3E, rng.choice([0, h["shnum"], 0xFFFF, rng.randrange(0x10000)]))  # e_shstrndx
    elif op == 2:
        struct.pack_into("<Q", b, 0x28, huge & (2**64 - 1))  # e_shoff
    elif op == 3:
        struct.pack_into("<H", b, 0x3A, rng.choice([0, 1, 8, 0x40 - 1, 0x41, 0xFFFF]))  # e_shentsize
    elif op in (4, 5, 6) and h["shnum"] and h["shoff"] + h["shnum"] * 64 <= len(data):
        i = rng.randrange(h["shnum"])
        base = h["shoff"] + i * 64
        if op == 4:  # sh_size past the end / huge
            struct.pack_into("<Q", b, base + 0x20, huge & (2**64 - 1))
        elif op == 5:  # sh_offset past the end, or onto another section (overlap)
            j = rng.randrange(h["shnum"])
            other, = struct.unpack_from("<Q", data, h["shoff"] + j * 64 + 0x18)
            struct.pack_into("<Q", b, base + 0x18, rng.choice([other, huge & (2**64 - 1), 0]))
        else:  # sh_link / sh_name / sh_type / sh_entsize
            field, fmt = rng.choice([(0x28, "<I"), (0x00, "<I"), (0x04, "<I"), (0x38, "<Q")])
            struct.pack_into(fmt, b, base + field, rng.randrange(2**31) if rng.random() < 0.5 else rng.choice([0, 1, 3, 0xFFFFFFFF]))
    elif op == 7 and h["phnum"] and h["phoff"] + h["phnum"] * 56 <= len(data):
        i = rng.randrange(h["phnum"])
        base = h["phoff"] + i * 56
        struct.pack_into("<Q", b, base + rng.choice([0x08, 0x20, 0x28]), huge & (2**64 - 1))
    out = bytes(b)
    return mutate_bytes(out, rng, 2) if rng.random() < 0.5 else out


# --- fatbin ------------------------------------------------------------------------------------

FATBIN_MAGIC = 0xBA55ED50


def mutate_fatbin(data: bytes, rng: random.Random) -> bytes:
    """Container and entry header fields: sizes past the end, zero, huge; then byte noise."""
    b = bytearray(data)
    if len(b) >= 16 and struct.unpack_from("<I", b, 0)[0] == FATBIN_MAGIC:
        op = rng.randrange(4)
        if op == 0:  # container size
            struct.pack_into("<Q", b, 8, rng.choice([0, 1, len(b), len(b) * 4, 2**63, 2**64 - 1]))
        elif op == 1 and len(b) >= 16 + 16:  # first entry: header size / entry size
            off = 16 + rng.choice([4, 8])
            fmt = "<I" if off == 20 else "<Q"
            struct.pack_into(fmt, b, off, rng.choice([0, 1, 0x40, 0xFFFFFFFF, len(b)]) & (2**32 - 1 if fmt == "<I" else 2**64 - 1))
        elif op == 2:  # container header size
            struct.pack_into("<H", b, 6, rng.choice([0, 1, 16, 0xFFFF]))
        else:
            return mutate_bytes(bytes(b), rng)
    return mutate_bytes(bytes(b), rng, 2) if rng.random() < 0.5 else bytes(b)


# --- wheels ------------------------------------------------------------------------------------

def wheel_bytes(members: list[tuple[str, bytes]], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buf, "w", compression=compression, compresslevel=1) as z:
        warnings.simplefilter("ignore")  # duplicate names are made on purpose
        for name, data in members:
            z.writestr(zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0)), data, compress_type=compression)
    return buf.getvalue()


def lie_about_sizes(zipdata: bytes, rng: random.Random) -> bytes:
    """Rewrite central-directory sizes so members claim up to 4 GiB (or ZIP64 sentinels)."""
    b = bytearray(zipdata)
    i = 0
    while True:
        i = b.find(b"PK\x01\x02", i)
        if i < 0 or i + 46 > len(b):
            break
        if rng.random() < 0.7:
            claim = rng.choice([0xFFFFFFFF, 0xFFFFFFFE, 2**31, 1 << 30, 0])
            struct.pack_into("<I", b, i + 24, claim)  # uncompressed size
            if rng.random() < 0.5:
                struct.pack_into("<I", b, i + 20, rng.choice([claim, 0, 1]))  # compressed size
        if rng.random() < 0.2:
            struct.pack_into("<I", b, i + 42, rng.choice([0xFFFFFFFF, len(b), 2**31]))  # local header offset
        i += 4
    return bytes(b)


def mutate_wheel(members: list[tuple[str, bytes]], rng: random.Random) -> bytes:
    """Hostile variants of a wheel: odd member names, duplicates, lies in the central directory,
    truncation, and byte noise inside members (an ELF inside is mutated as an ELF)."""
    ms = list(members)
    op = rng.randrange(9)
    if op == 0 and ms:
        ms.append(rng.choice(ms))  # duplicate name
    elif op == 1 and ms:
        i = rng.randrange(len(ms))
        prefix = rng.choice(["../", "../../", "/", "/etc/", "C:/", "C:\\", "a/../../", "./", "\\\\srv\\x\\", ""])
        ms[i] = (prefix + ms[i][0], ms[i][1])
    elif op == 2 and ms:
        i = rng.randrange(len(ms))
        name, data = ms[i]
        ms[i] = (name, mutate_elf(data, rng) if data[:4] == b"\x7fELF" else mutate_bytes(data, rng))
    elif op == 3 and ms:
        i = rng.randrange(len(ms))
        ms[i] = (rng.choice(["", "/", "x" * 300, "a\x00b.so", "lib/\u2028.so", ms[i][0] + "/"]), ms[i][1])
    elif op == 4:
        ms = [m for m in ms if rng.random() < 0.6]
    data = wheel_bytes(ms, compression=rng.choice([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))
    if op == 5:
        data = lie_about_sizes(data, rng)
    elif op == 6:
        data = data[: rng.randrange(len(data) + 1)]
    elif op == 7:
        data = mutate_bytes(data, rng)
    return data


# --- streaming vs in-memory readers (issue 16) ---------------------------------------------------

def library_in_memory(data: bytes) -> tuple[Any, ...]:
    """What the in-memory reader (wheelread.describe_library: binfmt.read_binary, then
    fatbin.list_device_code) says of a library: its LibraryInfo, or the error (type and message)."""
    from buildrows.binaries.binfmt import BinaryFormatError
    from buildrows.binaries.fatbin import FatbinError
    from buildrows.binaries.wheelread import describe_library

    try:
        info = describe_library("lib.so", data)
    except (BinaryFormatError, FatbinError) as e:
        return ("error", type(e).__name__, str(e))
    return ("ok", info)


def library_streamed(data: bytes, rng: random.Random, tmp: Path, *, deflated: bool = True) -> tuple[Any, ...]:
    """The same, read by buildrows.binaries.libstream from a deflate stream in random-sized chunks, with
    random input chunks and checkpoint spacing (so that re-reads start from random checkpoints)."""
    import zlib

    from buildrows.binaries.binfmt import BinaryFormatError
    from buildrows.binaries.fatbin import FatbinError
    from buildrows.binaries.inflate import MemberStream
    from buildrows.binaries.libraries import _describe
    from buildrows.binaries.libstream import read_streamed

    path = tmp / "member.bin"
    if deflated:
        packer = zlib.compressobj(rng.choice([0, 1, 6, 9]), zlib.DEFLATED, -15)
        path.write_bytes(packer.compress(data) + packer.flush())
    else:
        path.write_bytes(data)
    # Chunks down to a byte, but never more than ~2000 of them (the cases stay quick).
    floor = len(data) // 2000
    out_chunk = max(floor, rng.choice([1, 2, 3, 7, 8, 63, 64, 65, 100, 4096, 1 << 20, rng.randint(1, 9000)]))
    in_chunk = max(floor // 2, rng.choice([1, 5, 64, 97, 4096, 1 << 18]))
    stream = MemberStream(
        lambda: path.open("rb"), 0, path.stat().st_size, len(data), zlib.crc32(data), deflated=deflated,
        out_chunk=out_chunk, in_chunk=in_chunk, checkpoint_interval=rng.choice([1, 100, 4096, 1 << 16, 1 << 23]),
    )
    try:
        lib = read_streamed(stream)
    except (BinaryFormatError, FatbinError) as e:
        return ("error", type(e).__name__, str(e))
    return ("ok", _describe("lib.so", len(data), lib.layout, lib.device_code, lib.relocatable))

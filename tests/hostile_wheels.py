"""Hostile wheels and policies, generated from templates and seeds (issue 37), and the runner
that replays them through `buildrows` in a forked child, measuring each one's time and peak RSS.

Nothing here is committed as a file: every case is written by its builder into a directory the
test owns. A case is `(name, files, argv, allowed exit codes, expected message)`; the runner
(`tests/hostile_server.py`, one Python process that imports buildrows once, then forks one child per
case) gives each child a wall-clock limit and reports its exit code, seconds and `ru_maxrss`.
"""

from __future__ import annotations

import io
import json
import os
import random
import struct
import subprocess
import sys
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SERVER = REPO / "tests" / "hostile_server.py"


@dataclass
class Case:
    """One hostile input: files to write (relative path -> bytes, or a writer), the command line,
    the exit codes it may end with, and text its output must contain (when not None)."""

    name: str
    argv: list[str]
    files: dict[str, bytes | Callable[[Path], None]] = field(default_factory=dict)
    codes: tuple[int, ...] = (0, 2, 3, 5)
    expect: str | None = None
    timeout: float = 30.0  # the wall-clock kill: a hang; budgets are held on CPU time (a shared machine inflates wall time)


# --- wheel building blocks ----------------------------------------------------------------------

def elf(needed: tuple[str, ...] = ("libc.so.6",), machine: int = 62) -> bytes:
    """A minimal ELF64 shared object (the fixture the check tests use), for `machine` (62: x86_64)."""
    from tests.cuda_tools import make_elf

    data = bytearray(make_elf(needed=list(needed)))
    struct.pack_into("<H", data, 18, machine)
    return bytes(data)


def zipped(members: list[tuple[str, bytes]], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression, compresslevel=1) as z:
        for name, data in members:
            z.writestr(zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0)), data, compress_type=compression)
    return buf.getvalue()


def metadata(name: str = "hx", version: str = "1.0", requires: tuple[str, ...] = (), extra: str = "") -> bytes:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
             *(f"Requires-Dist: {r}" for r in requires)]
    return ("\n".join(lines) + "\n" + extra + "\n\nA description.\n").encode()


WHEEL_FILE = b"Wheel-Version: 1.0\nGenerator: hostile\nRoot-Is-Purelib: false\nTag: cp312-cp312-linux_x86_64\n"


def wheel(dist_info: str = "hx-1.0", meta: bytes | None = None, members: list[tuple[str, bytes]] | None = None,
          *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A wheel holding `members`, then `<dist_info>.dist-info/{METADATA,WHEEL,RECORD}`."""
    name, _, version = dist_info.rpartition("-")
    out = list(members if members is not None else [("hx/__init__.py", b"")])
    out += [(f"{dist_info}.dist-info/METADATA", meta if meta is not None else metadata(name, version)),
            (f"{dist_info}.dist-info/WHEEL", WHEEL_FILE), (f"{dist_info}.dist-info/RECORD", b"")]
    return zipped(out, compression=compression)


CP = "cp312-cp312-linux_x86_64"


def check(whl: str, *more: str) -> list[str]:
    return ["check", whl, *more]


# --- bombs ----------------------------------------------------------------------------------------

def marker_bomb(clauses: int) -> bytes:
    """A METADATA whose one `Requires-Dist` marker has `clauses` `extra == ...` alternatives."""
    marker = " or ".join(f'extra == "e{i}"' for i in range(clauses))
    extras = "".join(f"Provides-Extra: e{i}\n" for i in range(min(clauses, 50)))
    return metadata(requires=(f"nvidia-cuda-runtime>=13; {marker}", 'numpy; extra == "e1"'), extra=extras.rstrip("\n"))


def big_metadata(size: int, folded: bool) -> bytes:
    """A METADATA of `size` bytes: a long description, or (`folded`) one header folded over many lines."""
    head = b"Metadata-Version: 2.1\nName: hx\nVersion: 1.0\n"
    if folded:
        return head + b"Summary: x\n" + b" folded continuation line\n" * (size // 26) + b"\nA description.\n"
    return head + b"\nA description.\n" + b"y" * size


def pe_bomb(pointer: int = 600 << 20, sections: int = 1200) -> bytes:
    """A PE32+ DLL of `pointer` + 1 MB (zeros: it deflates to some 600 KB) whose `sections` section
    headers all map the import directory's RVA, each from its own file offset near `pointer`, so a
    reader that keeps each section's bytes for the import tables keeps gigabytes."""
    out = bytearray(0x400)
    out[:2] = b"MZ"
    struct.pack_into("<I", out, 0x3C, 0x80)
    out[0x80:0x84] = b"PE\0\0"
    opt_size = 240
    struct.pack_into("<HHIIIHH", out, 0x84, 0x8664, sections, 0, 0, 0, opt_size, 0x2022)
    opt = 0x98
    struct.pack_into("<H", out, opt, 0x20B)
    struct.pack_into("<I", out, opt + 16, 0x1000)  # entry
    struct.pack_into("<Q", out, opt + 24, 0x180000000)  # image base
    struct.pack_into("<II", out, opt + 32, 0x1000, 0x200)  # section / file alignment
    struct.pack_into("<I", out, opt + 56, 0x10000000)  # size of image
    struct.pack_into("<I", out, opt + 60, 0x400)  # size of headers
    struct.pack_into("<I", out, opt + 108, 16)  # number of data directories
    struct.pack_into("<II", out, opt + 112 + 8, 0x2000, 0x100)  # the import directory
    table = opt + opt_size
    needed = table + 40 * sections
    if len(out) < needed:
        out.extend(bytes(needed - len(out)))
    for i in range(sections):
        name = b".nv_fatb" if i % 2 == 0 else f".s{i}".encode()
        struct.pack_into("<8sIIIIIIHHI", out, table + 40 * i, name.ljust(8, b"\0"), 0x800000, 0x1000,
                         0x800000, pointer + (i % 256) * 0x1000, 0, 0, 0, 0, 0x40000040)
    out.extend(bytes(pointer + (1 << 20) - len(out)))
    return bytes(out)


def fatbin_bomb(containers: int) -> bytes:
    """`containers` empty fat-binary containers back to back (16 bytes each: magic, version 1,
    header size 16, no entries)."""
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 0) * containers


def _gf2_times(mat: list[int], vec: int) -> int:
    out = 0
    i = 0
    while vec:
        if vec & 1:
            out ^= mat[i]
        vec >>= 1
        i += 1
    return out


def crc32_of_zeros(n: int) -> int:
    """CRC-32 of `n` zero bytes in O(log n) (zlib's crc32_combine operator), for members too
    large to checksum in a test."""
    if n <= 1 << 16:
        return zlib.crc32(bytes(n))
    odd = [0xEDB88320] + [1 << i for i in range(31)]  # the operator for one zero bit
    even = [_gf2_times(odd, odd[i]) for i in range(32)]  # two zero bits
    odd = [_gf2_times(even, even[i]) for i in range(32)]  # four
    # Appending n zero bytes to a CRC register: crc(zeros(n)) = ~op(~0) ^ ... computed on the raw register.
    reg = 0xFFFFFFFF
    length = n
    while True:
        even = [_gf2_times(odd, odd[i]) for i in range(32)]
        if length & 1:
            reg = _gf2_times(even, reg)
        length >>= 1
        if not length:
            break
        odd = [_gf2_times(even, even[i]) for i in range(32)]
        if length & 1:
            reg = _gf2_times(odd, reg)
        length >>= 1
        if not length:
            break
    return reg ^ 0xFFFFFFFF


def sparse_zero_wheel(path: Path, size: int, member: str = "hx/_zeros.so") -> None:
    """A wheel storing `member` as `size` zero bytes, uncompressed (zip64), written as a sparse
    file: a few KB on disk whatever `size` is."""
    name = member.encode()
    crc = crc32_of_zeros(size)
    local_extra = struct.pack("<HHQQ", 1, 16, size, size)
    local = struct.pack("<4s5H3I2H", b"PK\x03\x04", 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF,
                        len(name), len(local_extra)) + name + local_extra
    others = [("hx-1.0.dist-info/METADATA", metadata()), ("hx-1.0.dist-info/WHEEL", WHEEL_FILE),
              ("hx-1.0.dist-info/RECORD", b"")]
    with path.open("wb") as fp:
        records = []
        for n, data in others:  # the small members first: every local header offset stays under 4 GB
            offset = fp.tell()
            nb = n.encode()
            fp.write(struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, 0, 0, 0x21, zlib.crc32(data), len(data),
                                 len(data), len(nb), 0) + nb + data)
            records.append((nb, offset, zlib.crc32(data), len(data)))
        records.append((name, fp.tell(), crc, size))
        fp.write(local)
        fp.seek(size, os.SEEK_CUR)
        cd_start = fp.tell()
        for nb, offset, c, sz in records:
            big = sz >= 0xFFFFFFFF
            extra = struct.pack("<HHQQ", 1, 16, sz, sz) if big else b""
            fp.write(struct.pack("<4s4B4HL2L5H2L", b"PK\x01\x02", 45, 3, 45, 0, 0, 0, 0, 0x21, c,
                                 0xFFFFFFFF if big else sz, 0xFFFFFFFF if big else sz, len(nb), len(extra), 0, 0, 0,
                                 0o644 << 16, offset) + nb + extra)
        cd_end = fp.tell()
        fp.write(struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, len(records), len(records),
                             cd_end - cd_start, cd_start))
        fp.write(struct.pack("<4sLQL", b"PK\x06\x07", 0, cd_end, 1))
        fp.write(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(records), len(records), cd_end - cd_start,
                             0xFFFFFFFF, 0))


def nested_json(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


# --- policies ---------------------------------------------------------------------------------------

POLICY_HEAD = """\
[project]
name = "hx"
driver = "cmake-presets"

[[platforms.linux-x86_64.cuda]]
trains = ["13.0"]
archs = "9.0"
"""


def dotted_key_policy(parts: int) -> bytes:
    return (POLICY_HEAD + "\n[x]\n" + ".".join(f"k{i % 10}" for i in range(parts)) + " = 1\n").encode()


def nested_array_policy(depth: int) -> bytes:
    return (POLICY_HEAD + "\n[x]\ny = " + "[" * depth + "1" + "]" * depth + "\n").encode()


# --- the corpus -----------------------------------------------------------------------------------------

def name_cases() -> Iterator[tuple[str, str, str, str | None]]:
    """(case, file name's dist-version[-build], .dist-info's dist-version, expected refusal or None):
    the normalisation cases pip and installer apply (PEP 503 names, PEP 440 versions, build tags)."""
    yield "case", "Hx-1.0", "hx-1.0", None
    yield "dash-underscore", "hx_pkg-1.0", "hx-pkg-1.0", None
    yield "dot-underscore", "hx_pkg-1.0", "hx.pkg-1.0", None
    yield "runs-of-separators", "hx_pkg-1.0", "hx__pkg-1.0", None
    yield "version-zero-padded", "hx-1.0", "hx-1.0.0", None
    yield "version-rc-spelling", "hx-1.0rc1", "hx-1.0c1", None
    yield "version-leading-v", "hx-1.0", "hx-v1.0", None
    yield "build-tag", "hx-1.0-1", "hx-1.0", None
    yield "local-version", "hx-1.0+cu130", "hx-1.0+cu130", None
    yield "other-name", "hx-1.0", "hy-1.0", "does not match the wheel's name"
    yield "prefix-name", "hx-1.0", "hxtra-1.0", "does not match the wheel's name"
    yield "other-version", "hx-1.0", "hx-1.1", "does not match the wheel's name"
    yield "local-dropped", "hx-1.0+cu130", "hx-1.0", "does not match the wheel's name"
    yield "post-release", "hx-1.0", "hx-1.0.post1", "does not match the wheel's name"
    yield "build-tag-in-dist-info", "hx-1.0-1", "hx-1.0-1", "does not match the wheel's name"


def corpus(seed: int = 37, size: int = 320) -> list[Case]:
    """The generated corpus: every template once, then seeded variants until `size` cases."""
    rng = random.Random(seed)
    cases: list[Case] = []
    for label, file_part, dist_part, refusal in name_cases():
        whl = f"{file_part}-{CP}.whl"
        dist_name, _, dist_version = dist_part.rpartition("-")
        more = ("--archs", "9.0") if "+cu" in file_part else ()
        cases.append(Case(f"name-{label}", check(whl, *more), {whl: wheel(dist_part, metadata(dist_name, dist_version))},
                          codes=(5,) if refusal else (0, 5), expect=refusal))
    templates: list[Callable[[random.Random, int], Case]] = [
        _two_dist_info, _file_and_dir, _meta_version, _meta_name, _pure_native, _marker, _metadata_size,
        _fatbin, _pe, _many_libs, _unicode_local, _mutated, _nested_record, _policy_keys, _row_names,
    ]
    n = 0
    while len(cases) < size:
        template = templates[n % len(templates)]
        cases.append(template(rng, n))
        n += 1
    return cases


def _two_dist_info(rng: random.Random, n: int) -> Case:
    whl = f"hx-1.0-{CP}.whl"
    other = rng.choice(["hx-0.9", "evil-6.6", "HX-1.0", "hx_extra-1.0"])
    data = wheel("hx-1.0", members=[("hx/__init__.py", b""), (f"{other}.dist-info/METADATA", metadata())])
    return Case(f"two-dist-info-{n}", check(whl), {whl: data}, codes=(5,), expect="more than one .dist-info")


def _file_and_dir(rng: random.Random, n: int) -> Case:
    whl = f"hx-1.0-{CP}.whl"
    stem = rng.choice(["hx/x", "hx", "hx/a/b", "hx-1.0.data/purelib/p"])
    members = [(stem, b"file"), (f"{stem}/inner.py", b"")]
    rng.shuffle(members)
    return Case(f"file-and-dir-{n}", check(whl), {whl: wheel(members=members)}, codes=(5,),
                expect="both a file and a directory")


def _meta_version(rng: random.Random, n: int) -> Case:
    local = rng.choice(["cu130", "cu128", "cpu", "rocm6"])
    whl = f"hx-0.1.0+{local}-{CP}.whl"
    meta_version = rng.choice(["0.1.0", "0.1.1", f"0.1.0+{local}x", "0.2"])
    data = wheel(f"hx-0.1.0+{local}", metadata(version=meta_version))
    return Case(f"metadata-version-{n}", check(whl), {whl: data}, codes=(5,),
                expect=f"METADATA says Version {meta_version}")


def _meta_name(rng: random.Random, n: int) -> Case:
    whl = f"hx-1.0-{CP}.whl"
    name = rng.choice(["hy", "hx-extra", "h"])
    return Case(f"metadata-name-{n}", check(whl), {whl: wheel("hx-1.0", metadata(name=name))}, codes=(5,),
                expect=f"METADATA says Name {name}")


def _pure_native(rng: random.Random, n: int) -> Case:
    whl = "hx-1.0-py3-none-any.whl"
    machine, label = rng.choice([(62, "x86_64"), (183, "aarch64")])
    member = rng.choice(["hx/_core.so", "hx/_core.cpython-312-x86_64-linux-gnu.so", "hx/libs/libx.so.1"])
    more = rng.choice([[], ["--cuda", "13.0", "--archs", "9.0"]])
    return Case(f"pure-native-{n}", check(whl, *more), {whl: wheel(members=[(member, elf(machine=machine))])},
                codes=(5,), expect=f"{member} (ELF {label})")


def _marker(rng: random.Random, n: int) -> Case:
    clauses = rng.choice([100, 400, 1000, 2500])
    whl = f"hx-1.0-{CP}.whl"
    return Case(f"marker-{clauses}-{n}", check(whl), {whl: wheel(meta=marker_bomb(clauses))})


def _metadata_size(rng: random.Random, n: int) -> Case:
    folded = rng.random() < 0.5
    size = rng.choice([2 << 20, 9 << 20, 20 << 20])
    whl = f"hx-1.0-{CP}.whl"
    big = size > 16 << 20 or folded  # past the whole cap, or past the headers' 1 MiB
    return Case(f"metadata-{size >> 20}mb{'-folded' if folded else ''}-{n}", check(whl),
                {whl: wheel(meta=big_metadata(size, folded))}, codes=(2,) if big else (0, 2, 5),
                expect="METADATA is" if big else None)


def _fatbin(rng: random.Random, n: int) -> Case:
    count = rng.choice([1000, 1000, 20_000, 20_000, 300_000])  # past 262,144 containers a fat binary is refused
    whl = f"hx-1.0-{CP}.whl"
    name = rng.choice(["hx/k.fatbin", "hx/kernels.bin"])
    return Case(f"fatbin-{count}-{n}", check(whl), {whl: wheel(members=[(name, fatbin_bomb(count))])})


def _pe(rng: random.Random, n: int) -> Case:
    whl = "hx-1.0-cp312-cp312-win_amd64.whl"
    pointer = rng.choice([1 << 20, 8 << 20, 32 << 20])
    sections = rng.choice([4, 64, 1200])
    return Case(f"pe-pointers-{pointer >> 20}mb-{sections}-{n}", check(whl),
                {whl: wheel(members=[("hx/_core.pyd", pe_bomb(pointer, sections))])})


def _many_libs(rng: random.Random, n: int) -> Case:
    count = rng.choice([50, 500, 2000])
    whl = f"hx-1.0-{CP}.whl"
    lib = elf()
    return Case(f"libs-{count}-{n}", check(whl), {whl: wheel(members=[(f"hx/m{i}.so", lib) for i in range(count)])})


def _unicode_local(rng: random.Random, n: int) -> Case:
    local = rng.choice(["cu١٣٠", "cu１３０", "cu13٠", "cu²³"])
    whl = f"hx-1.0+{local}-{CP}.whl"
    return Case(f"unicode-local-{n}", check(whl), {whl: wheel(f"hx-1.0+{local}")}, codes=(2,),
                expect="not a valid wheel file name")


def _mutated(rng: random.Random, n: int) -> Case:
    from tests.fuzz_tools import mutate_wheel

    whl = f"hx-1.0-{CP}.whl"
    members = [("hx/__init__.py", b"x = 1\n"), ("hx/_core.so", elf()), ("hx-1.0.dist-info/METADATA", metadata()),
               ("hx-1.0.dist-info/WHEEL", WHEEL_FILE), ("hx-1.0.dist-info/RECORD", b"")]
    return Case(f"mutated-{n}", check(whl), {whl: mutate_wheel(members, rng)})


def _nested_record(rng: random.Random, n: int) -> Case:
    whl = f"hx-1.0-{CP}.whl"
    depth = rng.choice([2000, 50_000])
    data = wheel(members=[("hx/__init__.py", b""), ("hx-1.0.dist-info/buildrows.json", nested_json(depth))])
    return Case(f"nested-record-{depth}-{n}", check(whl), {whl: data})


def _policy_keys(rng: random.Random, n: int) -> Case:
    kind = rng.choice(["dotted-20000", "dotted-100000", "array-1000", "array-5000"])
    what, _, count = kind.partition("-")
    text = dotted_key_policy(int(count)) if what == "dotted" else nested_array_policy(int(count))
    return Case(f"policy-{kind}-{n}", ["--config", "buildrows.toml", "rows"], {"buildrows.toml": text}, codes=(2,),
                expect="buildrows.toml")


def _row_names(rng: random.Random, n: int) -> Case:
    name = rng.choice(["linux-x86_64-a\\nlinux-x86_64-cu130-py312", "linux-x86_64-x\\ry", "linux-x86_64-tab\\there"])
    text = (POLICY_HEAD + f'\n[python]\nversions = ["3.12"]\n[empty."{name}"]\nplatform = "linux-x86_64"\n'
            'reason = "not built"\n').encode()
    return Case(f"row-name-{n}", ["--config", "buildrows.toml", "rows"], {"buildrows.toml": text}, codes=(2,),
                expect="has characters a row name cannot have")


# --- the runner ----------------------------------------------------------------------------------------

@dataclass
class Outcome:
    name: str
    rc: int
    seconds: float
    rss_mb: float
    output: str
    cpu: float = 0.0


def write_case(case: Case, where: Path) -> None:
    where.mkdir(parents=True, exist_ok=True)
    for rel, content in case.files.items():
        if callable(content):
            content(where / rel)
        else:
            (where / rel).write_bytes(content)


def run_cases(cases: list[Case], root: Path, *, code_root: Path = REPO) -> list[Outcome]:
    """Run every case through `buildrows` (the package under `code_root`: this tree, or another
    checkout for a before/after table), one forked child each, in the order given."""
    jobs = []
    for i, case in enumerate(cases):
        where = root / f"{i:04d}"
        write_case(case, where)
        jobs.append({"name": case.name, "argv": case.argv, "cwd": str(where), "out": str(where / "output.txt"),
                     "timeout": case.timeout})
    env = dict(os.environ, PYTHONPATH=f"{code_root}{os.pathsep}{REPO}", NO_COLOR="1", GITHUB_ACTIONS="")
    proc = subprocess.run([sys.executable, str(SERVER)], input="\n".join(json.dumps(j) for j in jobs) + "\n",
                          capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"the hostile-case server failed:\n{proc.stderr[-4000:]}")
    outcomes = []
    for job, line in zip(jobs, proc.stdout.splitlines(), strict=True):
        r = json.loads(line)
        outcomes.append(Outcome(job["name"], r["rc"], r["seconds"], r["rss_mb"],
                                Path(job["out"]).read_text(errors="replace"), r["cpu"]))
    return outcomes


# --- the cases, each with its budget ---------------------------------------------------------

@dataclass
class Budget:
    seconds: float
    rss_mb: float


def replay_cases() -> list[tuple[Case, Budget]]:
    """Issue 37's reproductions (items 9-12), each with the budget docs/wheel-check.md states."""
    whl = f"hx-1.0-{CP}.whl"
    out: list[tuple[Case, Budget]] = [
        (Case("marker-10000-extras", check(whl), {whl: wheel(meta=marker_bomb(10_000))}), Budget(5, 200)),
        (Case("metadata-60mb", check(whl), {whl: wheel(meta=big_metadata(60 << 20, False))}, codes=(2,),
              expect="METADATA is"), Budget(5, 200)),
        (Case("metadata-60mb-folded", check(whl), {whl: wheel(meta=big_metadata(60 << 20, True))}, codes=(2,),
              expect="METADATA is"), Budget(5, 200)),
        (Case("pe-pointers-600mb", check("hx-1.0-cp312-cp312-win_amd64.whl"),
              {"hx-1.0-cp312-cp312-win_amd64.whl": wheel(members=[("hx/_core.pyd", pe_bomb())])}), Budget(5, 200)),
        (Case("fatbin-4m-containers", check(whl), {whl: wheel(members=[("hx/k.fatbin", fatbin_bomb(4 << 20))])}),
         Budget(10, 200)),
        (Case("so-7gb-zeros", check(whl), {whl: lambda p: sparse_zero_wheel(p, 7 << 30)}, codes=(2,),
              expect="hx/_zeros.so: not an ELF or PE file", timeout=60),
         Budget(5, 200)),
        (Case("so-10000-tiny", check(whl), {whl: wheel(members=[(f"hx/m{i}.so", elf()) for i in range(10_000)])},
              timeout=60), Budget(30, 300)),
        (Case("local-version-unicode-digits", check(f"hx-1.0+cu١٣٠-{CP}.whl"),
              {f"hx-1.0+cu١٣٠-{CP}.whl": wheel("hx-1.0+cu١٣٠")}, codes=(2,),
              expect="not a valid wheel file name"), Budget(2, 150)),
        (Case("record-nested-100000", check(whl),
              {whl: wheel(members=[("hx/__init__.py", b""), ("hx-1.0.dist-info/buildrows.json", nested_json(100_000))])},
              codes=(0, 2, 5)), Budget(2, 150)),
        (Case("policy-dotted-20000", ["--config", "buildrows.toml", "rows"], {"buildrows.toml": dotted_key_policy(20_000)},
              codes=(2,), expect="buildrows.toml"), Budget(2, 150)),
        (Case("policy-dotted-100000", ["--config", "buildrows.toml", "rows"],
              {"buildrows.toml": dotted_key_policy(100_000)}, codes=(2,), expect="buildrows.toml"), Budget(2, 150)),
        (Case("policy-arrays-1000-deep", ["--config", "buildrows.toml", "rows"],
              {"buildrows.toml": nested_array_policy(1000)}, codes=(2,), expect="buildrows.toml"), Budget(2, 150)),
    ]
    return out

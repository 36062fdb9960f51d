"""The streaming library reader (buildrows.binaries.libstream, .fatscan, .inflate): whatever the chunking, the
same answer as the in-memory readers; bytes that only look like a fat binary never count; memory
stays flat while a large library streams past."""

from __future__ import annotations

import random
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import pytest
from cuda_tools import fatbin_container, fatbin_entry, make_elf, make_wheel
from fuzz_tools import library_in_memory, library_streamed

from buildrows.binaries import inflate
from buildrows.binaries.fatscan import MAGIC, FatbinScanner
from buildrows.binaries.inflate import MemberStream, inflater_module
from buildrows.binaries.wheelread import LibraryInfo

REAL = fatbin_container([fatbin_entry(2, 80), fatbin_entry(2, 90), fatbin_entry(1, 90),
                         fatbin_entry(2, 100, flags=0x100011)])
SECOND = fatbin_container([fatbin_entry(2, 120, payload=b"\x11" * 40), fatbin_entry(1, 120, flags=0x200011)])
# A container header with plausible sizes: what a false positive in other data would look like.
DECOY = fatbin_container([fatbin_entry(2, 75), fatbin_entry(1, 75)])
CHUNKINGS = 25


def _same_everywhere(data: bytes, tmp_path: Path, seed: int = 0) -> tuple[object, ...]:
    expected = library_in_memory(data)
    rng = random.Random(seed)
    for _ in range(CHUNKINGS):
        assert library_streamed(data, rng, tmp_path, deflated=rng.random() < 0.8) == expected
    return expected


def _info(data: bytes, tmp_path: Path) -> LibraryInfo:
    result = _same_everywhere(data, tmp_path)
    assert result[0] == "ok", result
    info = result[1]
    assert isinstance(info, LibraryInfo)
    return info


def _code(data: bytes, tmp_path: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    info = _info(data, tmp_path)
    return info.cubins, info.ptx


def test_ptx_isa_is_read_the_same_streamed_and_in_memory(tmp_path: Path) -> None:
    """Each PTX entry's ISA (which train wrote it) comes from its header, whatever the chunking."""
    fatbin = fatbin_container([fatbin_entry(2, 80), fatbin_entry(1, 80, version=(8, 7)),
                               fatbin_entry(1, 120, version=(9, 0))])
    lib = make_elf([(".nv_fatbin", fatbin)], needed=["libcudart.so.13"])
    info = _info(lib, tmp_path)
    assert (info.ptx, info.ptx_isa) == (("sm_80", "sm_120"), ((8, 7), (9, 0)))


def _note(release: str, tool: bytes = b"ptxas", first: int = 2, desc_size: int | None = None) -> bytes:
    """A cubin's toolkit note (.note.nv.tkinfo) as ptxas and nvlink write it."""
    strings = [b"", tool, f"Cuda compilation tools, release {release}, V{release}.88".encode(), b"Build cuda_x",
               b"-arch sm_80 -m 64 "]
    offsets, at = [], 0
    for s in strings:
        offsets.append(at)
        at += len(s) + 1
    desc = struct.pack("<6I", first, *offsets[:5]) + b"".join(s + b"\0" for s in strings)
    desc += b"\0" * (-len(desc) % 4)
    return struct.pack("<III", 12, len(desc) if desc_size is None else desc_size, 2000) + b"NVIDIA Corp\0" + desc


def _cubin(*parts: bytes) -> bytes:
    body = b"\x7fELF" + b"\x5a" * 60 + b"".join(p + b"\x33" * 37 for p in parts)
    return body + b"\0" * (-len(body) % 8)


def test_cubin_toolkit_notes_are_read_the_same_streamed_and_in_memory(tmp_path: Path) -> None:
    """An uncompressed cubin's toolkit notes (the newest of a linked cubin's) date it, whatever the chunking;
    compressed cubins and PTX are not read; malformed notes are skipped."""
    fatbin = fatbin_container([
        fatbin_entry(2, 80, payload=_cubin(_note("12.8"), _note("12.9", b"nvlink", first=129)), version=(1, 8)),
        fatbin_entry(2, 86, payload=_cubin(_note("13.0")), version=(1, 7)),  # ELF ABI 1.7: not searched
        fatbin_entry(2, 90, flags=0x2011, payload=_cubin(_note("13.0")), version=(1, 8)),  # LZ4: never inflated
        fatbin_entry(1, 90, version=(8, 7), payload=_cubin(_note("13.0"))),  # PTX
        # an oversized descriptor, a tool version that is not a release, then a good note
        fatbin_entry(2, 100, payload=_cubin(_note("13.0", desc_size=9000), _note("x.y"), _note("12.6")),
                     version=(1, 8)),
        fatbin_entry(2, 120, payload=_cubin(b"no note here"), version=(1, 8)),
        # a note whose descriptor runs past the cubin's end
        fatbin_entry(2, 75, payload=_cubin()[:-8] + _note("12.4")[:40], version=(1, 8)),
    ])
    lib = make_elf([(".nv_fatbin", fatbin)], needed=["libcudart.so.12"])
    info = _info(lib, tmp_path)
    assert info.cubins == ("sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "sm_75")
    assert info.cubin_toolkits == ((12, 9), (12, 6))


def test_several_containers_and_padding_across_every_boundary(tmp_path: Path) -> None:
    fatbin = REAL + b"\0" * 24 + SECOND + b"\0" * 8
    lib = make_elf([(".nv_fatbin", fatbin)], needed=["libcudart.so.13"], runpath="$ORIGIN/../nvidia/cu13/lib")
    info = _info(lib, tmp_path)
    assert (info.cubins, info.ptx) == (("sm_80", "sm_90", "sm_100a", "sm_120"), ("sm_90", "sm_120f"))
    assert info.machine == "x86_64"
    assert info.needed == ("libcudart.so.13",)


@pytest.mark.parametrize("where", ["other section", "inside a payload", "after the section", "spanning into it"])
def test_bytes_that_look_like_a_fat_binary_never_count(tmp_path: Path, where: str) -> None:
    if where == "other section":
        sections = [(".rodata", b"\x01" * 40 + DECOY + b"\x02" * 8), (".nv_fatbin", REAL)]
    elif where == "inside a payload":
        sections = [(".nv_fatbin", fatbin_container([fatbin_entry(2, 86, payload=DECOY + b"\0" * 8)]) + REAL)]
    elif where == "after the section":
        sections = [(".nv_fatbin", REAL), (".data", DECOY)]
    else:  # a decoy whose declared size runs over the start of the real fat binary
        decoy = bytearray(DECOY)
        struct.pack_into("<Q", decoy, 8, len(DECOY) + 64)
        sections = [(".rodata", bytes(decoy)), (".nv_fatbin", REAL)]
    cubins, ptx = _code(make_elf(sections), tmp_path)
    assert "sm_75" not in cubins + ptx


def test_section_starting_with_zeros_or_garbage_answers_like_the_in_memory_reader(tmp_path: Path) -> None:
    assert _code(make_elf([(".nv_fatbin", b"\0" * 16 + REAL)]), tmp_path)[0] == ("sm_80", "sm_90", "sm_100a")
    assert _code(make_elf([(".nv_fatbin", b"\0" * 64)]), tmp_path) == ((), ())
    bad = _same_everywhere(make_elf([(".nv_fatbin", b"\0" * 8 + b"junk" * 4 + REAL)]), tmp_path)
    assert bad[:2] == ("error", "FatbinError") and "bad container magic" in str(bad[2])
    truncated = _same_everywhere(make_elf([(".nv_fatbin", REAL[:-8])]), tmp_path)
    assert truncated[:2] == ("error", "FatbinError")


def test_relocatable_fat_binary_alone_and_beside_the_executable_one(tmp_path: Path) -> None:
    assert _code(make_elf([("__nv_relfatbin", SECOND)]), tmp_path) == (("sm_120",), ("sm_120f",))
    both = _info(make_elf([("__nv_relfatbin", SECOND), (".nv_fatbin", REAL)]), tmp_path)
    assert (both.cubins, both.relocatable_ptx) == (("sm_80", "sm_90", "sm_100a"), ("sm_120f",))


def test_wheel_reports_machine_and_relocatable_code(tmp_path: Path) -> None:
    from buildrows.binaries.wheelread import read_wheel

    lib = make_elf([("__nv_relfatbin", SECOND), (".nv_fatbin", REAL)], needed=["libcudart.so.13"])
    wheel = make_wheel(tmp_path / "demo-1.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl", {"demo/x.so": lib})
    (info,) = read_wheel(wheel).libraries
    assert info.machine == "x86_64"
    assert info.relocatable_ptx == ("sm_120f",)
    assert info.ptx == ("sm_90",)


def test_scanner_chains_containers_only_from_the_section_start() -> None:
    data = b"\x07" * 5 + REAL + b"\0" * 3 + SECOND
    scanner = FatbinScanner(len(data))
    for i in range(0, len(data), 7):
        scanner.feed(i, data[i : i + 7])
    scanner.finish()
    whole = scanner.device_code(5, len(data) - 5)
    assert whole is not None and whole.cubins == ("sm_80", "sm_90", "sm_100a", "sm_120")
    assert scanner.device_code(0, len(data)) is None  # starts with non-zero bytes: the re-read decides
    assert scanner.device_code(5, len(REAL) - 1) is None  # the container runs past the section


def test_scanner_finds_headers_straddling_chunks() -> None:
    data = b"\x01" * 3 + REAL
    for cut in range(1, len(MAGIC) + 3):
        scanner = FatbinScanner(len(data))
        scanner.feed(0, data[:cut])
        scanner.feed(cut, data[cut:])
        scanner.finish()
        assert scanner.device_code(3, len(REAL)) is not None, cut


@pytest.mark.parametrize("deflated", [True, False])
def test_member_stream_reads_any_range_again(tmp_path: Path, deflated: bool) -> None:
    rng = random.Random(16)
    data = bytes(rng.getrandbits(8) for _ in range(20000)) * 20 + b"\0" * 100000
    path = tmp_path / "m"
    path.write_bytes(zlib.compress(data, 6)[2:-4] if deflated else data)
    stream = MemberStream(lambda: path.open("rb"), 0, path.stat().st_size, len(data), zlib.crc32(data),
                          deflated=deflated, out_chunk=3000, in_chunk=1000, checkpoint_interval=50000)
    assert b"".join(piece for _, piece in stream.chunks()) == data
    assert len(stream.checkpoints) > 5 or not deflated
    for _ in range(40):
        start = rng.randrange(len(data))
        size = rng.randrange(1, 70000)
        assert stream.read(start, size) == data[start : start + size]


def test_inflater_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    assert inflater_module("zlib") is zlib
    monkeypatch.setitem(sys.modules, "zlib_ng", None)  # not installed: the standard library
    assert inflater_module() is zlib
    with pytest.raises(ImportError):
        inflater_module("zlib-ng")
    monkeypatch.setenv("BUILDROWS_INFLATER", "zlib")
    assert inflater_module() is zlib
    assert inflate.INFLATER.__name__ in ("zlib", "zlib_ng.zlib_ng")


def test_memory_stays_flat_while_a_large_library_streams(tmp_path: Path) -> None:
    """A 160 MiB library in a wheel: reading it raises peak memory by a few MiB, not by its size."""
    payload = random.Random(7).randbytes(1 << 13) * (160 << 7)  # 160 MiB; repeats inflate quickly
    fatbin = fatbin_container([fatbin_entry(2, 90, payload=payload), fatbin_entry(1, 90)])
    lib = make_elf([(".nv_fatbin", fatbin)], needed=["libcudart.so.13"])
    wheel = make_wheel(tmp_path / "demo-1.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl", {"demo/big.so": lib})
    del lib, payload, fatbin
    script = textwrap.dedent(f"""
        import resource, sys
        from buildrows.binaries.wheelread import read_wheel
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        (lib,) = read_wheel({str(wheel)!r}).libraries
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024
        print(lib.cubins, lib.ptx, lib.needed, grown)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert out[:3] == ["('sm_90',)", "('sm_90',)", "('libcudart.so.13',)"]
    assert int(out[3]) < 48, f"peak memory grew by {out[3]} MiB for a 160 MiB library"


def test_few_candidates_are_live_whatever_the_bytes() -> None:
    # Headers everywhere, each claiming a large container: the search jumps over what the first
    # one covers, so the live set stays tiny instead of growing with the input.
    fake = MAGIC + struct.pack("<Q", 1 << 20)
    data = REAL + fake * 5000 + b"\0" * (1 << 20)
    scanner = FatbinScanner(len(data))
    most = 0
    for i in range(0, len(data), 4096):
        scanner.feed(i, data[i : i + 4096])
        most = max(most, len(scanner.live))
    scanner.finish()
    assert most <= 2
    # The first decoy's entries turn out malformed after its inside was jumped over: re-read.
    assert scanner.lossy and scanner.device_code(0, len(REAL)) is None


def test_scanner_distrusts_a_skipped_container_that_turns_out_malformed() -> None:
    # The search jumps over a container's inside while its entries are read; when a later entry
    # is malformed, what it jumped over went unsearched: every answer is then a re-read.
    inner = REAL
    outer = bytearray(fatbin_container([fatbin_entry(2, 86, payload=inner), fatbin_entry(2, 87)]))
    struct.pack_into("<I", outer, 16 + 64 + len(inner) + 4, 8)  # second entry: header size 8 (< 64)
    data = bytes(outer)
    scanner = FatbinScanner(len(data))
    for i in range(0, len(data), 16):
        scanner.feed(i, data[i : i + 16])
    scanner.finish()
    assert scanner.lossy
    assert scanner.device_code(16 + 64, len(inner)) is None


@pytest.mark.parametrize(("deflated", "message"), [(True, "compressed data is truncated"),
                                                   (False, "member changed while it was read")])
def test_member_changed_before_a_re_read(tmp_path: Path, deflated: bool, message: str) -> None:
    data = random.Random(3).randbytes(300000)
    path = tmp_path / "m"
    path.write_bytes(zlib.compress(data, 1)[2:-4] if deflated else data)
    stream = MemberStream(lambda: path.open("rb"), 0, path.stat().st_size, len(data), zlib.crc32(data),
                          deflated=deflated, checkpoint_interval=1 << 30)
    assert b"".join(piece for _, piece in stream.chunks()) == data
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(inflate.InflateError, match=message):
        stream.read(200000, 100)


@pytest.mark.parametrize("flags", [4, 5, 6], ids=["read-only", "read+execute", "read+write"])
@pytest.mark.parametrize("order", ["fatbin-first", "fatbin-last"])
def test_fat_binary_in_any_segment_and_any_section_order_streams(flags: int, order: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """NVIDIA's libraries and CuPy's put .nv_fatbin in the read+execute segment: it is recognised while
    streaming there too (never read whole into memory), with the in-memory reader's answer."""
    from buildrows.binaries import libstream

    big = fatbin_container([fatbin_entry(2, 80, payload=b"\x5a" * (3 << 20)), fatbin_entry(2, 90), fatbin_entry(1, 90)])
    text = (".text", random.Random(3).randbytes(1 << 20))
    sections = [(".nv_fatbin", big), text] if order == "fatbin-first" else [text, (".nv_fatbin", big)]
    data = make_elf(sections, needed=["libcudart.so.13"], load_flags=flags)
    assert _code(data, tmp_path) == (("sm_80", "sm_90"), ("sm_90",))

    def whole(section: bytes) -> object:
        raise AssertionError(f"a {len(section)}-byte section was read whole")

    monkeypatch.setattr(libstream, "list_device_code", whole)
    path = tmp_path / "lib.bin"
    for deflated in (True, False):
        packer = zlib.compressobj(6, zlib.DEFLATED, -15)
        path.write_bytes(packer.compress(data) + packer.flush() if deflated else data)
        stream = MemberStream(lambda: path.open("rb"), 0, path.stat().st_size, len(data), zlib.crc32(data),
                              deflated=deflated, out_chunk=1 << 16, checkpoint_interval=1 << 20)
        lib = libstream.read_streamed(stream)
        assert (lib.device_code.cubins, lib.device_code.ptx) == (("sm_80", "sm_90"), ("sm_90",))


@pytest.mark.parametrize("deflated", [True, False])
def test_member_stream_gives_any_range_in_pieces(tmp_path: Path, deflated: bool) -> None:
    data = random.Random(5).randbytes(3 << 20)
    path = tmp_path / "m.bin"
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    path.write_bytes(packer.compress(data) + packer.flush() if deflated else data)
    stream = MemberStream(lambda: path.open("rb"), 0, path.stat().st_size, len(data), zlib.crc32(data),
                          deflated=deflated, out_chunk=1 << 16, checkpoint_interval=1 << 20)
    for _ in stream.chunks():
        pass
    for offset, size in [(0, 10), (12345, 2 << 20), (len(data) - 5, 100), (1 << 20, 1)]:
        pieces = list(stream.read_pieces(offset, size))
        assert b"".join(p for _, p in pieces) == data[offset : offset + size]
        assert all(len(p) <= 1 << 16 for _, p in pieces)
        assert [o for o, _ in pieces] == [offset + sum(len(p) for _, p in pieces[:i]) for i in range(len(pieces))]


def test_reads_further_on_go_on_from_where_the_last_stopped(tmp_path: Path) -> None:
    """The load check's re-reads (section table, symbol sections, string sections) come in file order:
    each goes on from where the last one stopped, instead of inflating again from the checkpoint before
    it; a read back, or a partial read stopped early, is still right."""
    rng = random.Random(27)
    data = rng.randbytes(1 << 19) * 6
    path = tmp_path / "m.bin"
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    path.write_bytes(packer.compress(data) + packer.flush())
    stream = MemberStream(lambda: path.open("rb"), 0, path.stat().st_size, len(data), zlib.crc32(data),
                          deflated=True, out_chunk=1 << 14, checkpoint_interval=1 << 30)  # one checkpoint: the start
    for _ in stream.chunks():
        pass
    inflated = 0
    run = stream._run

    def counting(*args: object, **kwargs: object) -> object:
        nonlocal inflated
        for pos, piece in run(*args, **kwargs):  # type: ignore[arg-type]
            inflated += len(piece)
            yield pos, piece

    stream._run = counting  # type: ignore[method-assign]
    ranges = [(1000, 50), (1020, 100), (200_000, 10), (1 << 20, 4096), (3 << 20, 1 << 16), (len(data) - 10, 10)]
    for offset, size in ranges:
        assert stream.read(offset, size) == data[offset:offset + size]
    # forward: the whole member at most once (plus the chunk each read stops inside), not once per read
    assert inflated <= len(data) + len(ranges) * (1 << 14), inflated
    for offset, size in [(5, 10), (1 << 20, 3), (4 << 20, 1 << 17), (100, 1 << 18)]:  # back and forth
        assert stream.read(offset, size) == data[offset:offset + size]
    pieces = stream.read_pieces(2 << 20, 1 << 18)
    next(pieces)
    pieces.close()  # a reader that stops early leaves the cursor at the end of the piece it took
    assert stream.read((2 << 20) + 5, 1 << 15) == data[(2 << 20) + 5:(2 << 20) + 5 + (1 << 15)]


def test_pass_inflater_without_copy_reads_again_from_the_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ISA-L's inflater cannot be copied: a stream inflated with it keeps no checkpoint but the
    start, and a range asked for afterwards still comes back right (inflated again from the start,
    or on from where the last read stopped)."""
    isal_zlib = pytest.importorskip("isal.isal_zlib")
    assert inflate.pass_inflater() is isal_zlib
    monkeypatch.setitem(sys.modules, "isal", None)  # not installed: the copyable inflater
    assert inflate.pass_inflater() is inflate.inflater_module()
    with pytest.raises(ImportError):
        inflate.pass_inflater("isal")
    monkeypatch.setenv("BUILDROWS_INFLATER", "zlib")
    assert inflate.pass_inflater() is zlib
    monkeypatch.undo()
    rng = random.Random(27)
    data = bytes(rng.getrandbits(8) if i % 7 == 0 else 65 + i % 23 for i in range(300_000))
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    path = tmp_path / "member"
    path.write_bytes(packer.compress(data) + packer.flush())
    stream = MemberStream(lambda: path.open("rb"), 0, path.stat().st_size, len(data), zlib.crc32(data),
                          deflated=True, module=isal_zlib, out_chunk=3000, in_chunk=1000, checkpoint_interval=50000)
    assert b"".join(piece for _, piece in stream.chunks()) == data
    assert len(stream.checkpoints) == 1  # nothing to copy
    for start in sorted(rng.randrange(len(data)) for _ in range(10)):
        assert stream.read(start, 5000) == data[start : start + 5000]
    assert stream.read(100, 10) == data[100:110]  # behind the cursor: from the start again


@pytest.mark.parametrize("module_name", ["isal.isal_zlib", "zlib"])
@pytest.mark.parametrize(("case", "message"), [
    ("good", None),
    ("crc", "CRC-32 mismatch"),
    ("longer", "inflates to 300000 bytes, declares 300010"),
    ("shorter", "inflates to more than its declared 299990 bytes"),
    ("cut", "deflate stream ends early|compressed data is truncated"),
    ("corrupt", "corrupt deflate data"),
    ("trailing", None),  # bytes after the deflate stream, inside the member: zipfile (pip) ignores them
    ("trailing-crc", "CRC-32 mismatch"),
])
def test_the_pass_checks_size_and_crc_with_either_inflater(tmp_path: Path, module_name: str, case: str,
                                                           message: str | None) -> None:
    """ISA-L's pass reads a deflated member as a gzip member's body, its CRC-32 and size in a trailer made from
    the zip's headers, so that ISA-L checks them as it inflates (issue 38); every lie is refused in the words
    the stdlib's pass uses."""
    module = pytest.importorskip(module_name)
    data = random.Random(5).randbytes(100000) * 3
    raw = zlib.compress(data, 6)[2:-4]
    size, crc = len(data), zlib.crc32(data)
    if case == "crc":
        crc ^= 1
    elif case == "longer":
        size += 10
    elif case == "shorter":
        size -= 10
    elif case == "cut":
        raw = raw[: len(raw) // 2]
    elif case == "corrupt":
        raw = b"\x07" + raw[1:]  # a first block of the reserved type 3
    elif case.startswith("trailing"):
        raw += b"0123456789abcdef" * 4
        crc ^= case == "trailing-crc"
    path = tmp_path / "m"
    path.write_bytes(raw)
    stream = MemberStream(lambda: path.open("rb"), 0, len(raw), size, crc, deflated=True, module=module,
                          out_chunk=7000, in_chunk=3000)
    if message is None:
        assert b"".join(piece for _, piece in stream.chunks()) == data
        assert stream.read(123456, 1000) == data[123456:124456]  # a re-read after the pass
        return
    with pytest.raises(inflate.InflateError, match=message):
        for _ in stream.chunks():
            pass

"""The string scan begun while a library still streams (issue 38, round 8): `scan_ahead` scans the read-only
segment after the code in whole pieces as its pages pass, and `scan_strings` goes on from the last whole piece
inside the range that starts there. The answer must be the whole scan's, whatever the ahead scan covered."""

from __future__ import annotations

import io
import random
import shutil
import subprocess
import zlib
from pathlib import Path

import pytest
from cuda_tools import make_elf

from buildrows.binaries.symbols import _SCAN_PIECE, scan_ahead, scan_strings, string_ranges


class _Memory:
    def __init__(self, data: bytes) -> None:
        self.data = data

    @property
    def size(self) -> int:
        return len(self.data)

    def read(self, offset: int, size: int) -> bytes:
        return self.data[offset:offset + size]


def _rodata(size: int, seed: int) -> bytes:
    """Random bytes with sonames and CUDA markers planted across every piece boundary (a match split by one
    is found through the scan's overlap), and one marker inside a longer name (not a whole string)."""
    rng = random.Random(seed)
    data = bytearray(rng.randbytes(size))
    for k in range(1, size // _SCAN_PIECE + 1):
        for shift, text in ((-20, b"libcublas.so.13"), (-60, b"libnvrtc.so.12"), (3, b"libfoo_%d.so.1" % k)):
            at = k * _SCAN_PIECE + shift
            if at > 0 and at + len(text) + 1 < size:
                data[at - 1:at + len(text) + 1] = b"\0" + text + b"\0"
    for at, text in ((_SCAN_PIECE - 9, b"cudaLaunchKernel"), (2 * _SCAN_PIECE + 100, b"__cudaRegisterFatBinaryEnd")):
        if at + len(text) + 1 < size:
            data[at - 1:at + len(text) + 1] = b"\0" + text + b"\0"
    return bytes(data)


@pytest.mark.parametrize("size", [3 * _SCAN_PIECE, 3 * _SCAN_PIECE + 12_345, (5 * _SCAN_PIECE) // 2])
@pytest.mark.parametrize("markers", [True, False])
def test_a_scan_begun_ahead_answers_as_the_whole_scan(size: int, markers: bool) -> None:
    library = _Memory(make_elf([(".rodata", _rodata(size, size))]))
    (start, length), = [r for r in string_ranges(library) if r[1] == size]
    whole = scan_strings(library, markers=markers)
    assert "libcublas.so.13" in whole.sonames and "libfoo_2.so.1" in whole.sonames
    assert list(whole.markers) == (["cudaLaunchKernel"] if markers else [])

    # Past the range's end the ahead scan reads other bytes: any piece it took from there would show.
    beyond = bytearray(library.data)
    beyond[start + length:start + length] = b"\0libBOGUS.so.9\0" * 200

    def peek_until(pieces: int):  # type: ignore[no-untyped-def]
        def peek(at: int, n: int) -> bytes | None:
            return bytes(beyond[at:at + n]) if at + n <= start + pieces * _SCAN_PIECE else None
        return peek

    for pieces in range(0, size // _SCAN_PIECE + 3):
        ahead = scan_ahead(peek_until(pieces), start, start + 8 * _SCAN_PIECE)
        got = scan_strings(library, markers=markers, ahead=ahead)
        assert (list(got.sonames), list(got.markers)) == (list(whole.sonames), list(whole.markers)), pieces
    # An ahead scan that guessed another start is not used.
    wrong = scan_ahead(lambda at, n: b"\0libWRONG.so.1\0".ljust(n, b"\0"), start + 1, start + 8 * _SCAN_PIECE)
    assert list(scan_strings(library, markers=markers, ahead=wrong).sonames) == list(whole.sonames)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_the_gathering_pass_starts_the_scan_where_rodata_starts(tmp_path: Path) -> None:
    """The gathering pass calls `ahead` once the read-only segment after the code has passed, with its kept
    extent, which starts where the linker put .rodata (a library built here, 3 MB of it): the ahead scan's
    pieces are then the string scan's own."""
    from buildrows.binaries import libstream
    from buildrows.binaries.inflate import MemberStream

    (tmp_path / "big.c").write_text(
        'const char blob[3145728] = "libcublas.so.13";\nconst char *get(void) { return blob; }\n', encoding="utf-8")
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(tmp_path / "libbig.so"), str(tmp_path / "big.c")],
                   check=True)
    lib = (tmp_path / "libbig.so").read_bytes()
    calls: list[tuple[int, int]] = []
    stream = MemberStream(lambda: io.BytesIO(lib), 0, len(lib), len(lib), zlib.crc32(lib), deflated=False)
    libstream.read_streamed(stream, gather=True, ahead=lambda source, a, b: calls.append((a, b)))
    rodata = [r for r in string_ranges(_Memory(lib)) if r[1] >= 3 << 20]
    assert len(rodata) == 1 and len(calls) == 1
    assert calls[0][0] == rodata[0][0] and calls[0][1] >= rodata[0][0] + _SCAN_PIECE
    # And the check's reading takes it: the pieces it scanned ahead are reused, the answer the same.
    got = libstream.read_streamed(MemberStream(lambda: io.BytesIO(lib), 0, len(lib), len(lib), zlib.crc32(lib),
                                               deflated=False), gather=True)
    assert got.source is not None
    ahead = scan_ahead(got.source.peek, *calls[0])
    assert len(ahead.after) >= 2
    plain = scan_strings(_Memory(lib))
    assert "libcublas.so.13" in plain.sonames
    assert list(scan_strings(got.source, ahead=ahead).sonames) == list(plain.sonames)

"""Inflate one zip member in bounded chunks, and read any range of it again later.

Which inflater, by measurement (``scripts/bench_check.py`` on PyTorch 2.14.1's CUDA wheel, 988 MiB
of libraries, one thread, CPU seconds, median of 3, on a shared 2-core machine): streaming 1 MiB at a
time with CRC-32, stdlib zlib 1.88, zlib-ng 1.10, ISA-L 1.05; one call per library with the output
whole in memory (846 MiB peak), libdeflate 1.60, ISA-L 1.66, zlib-ng 1.70 (faulting in the large
output costs more than libdeflate saves). libdeflate has no streaming interface at all, so bounded
memory rules it out; ISA-L streams 5-15% faster than zlib-ng but its decompress objects cannot be
copied, which the re-reads below need. zlib-ng has the standard library's interface (``copy``
included) and releases the GIL: it is used when installed (a dependency where it has wheels), the
standard library otherwise. A library that streams past once and is not read again (the reader
alone: ``archs --from-wheel``, the listing) inflates with ISA-L (:data:`PASS_INFLATER`): on
PyTorch's wheel 12% less CPU for the whole reader; were a range asked for after all, it inflates
again from the member's start. That pass reads the member's deflate data as the body of a gzip member
whose trailer is the zip's CRC-32 and size, so that ISA-L checks them as it inflates, with no CRC call
beside it: on two cores, while the symbol thread parses, every call that gives up the GIL waits to take
it back, and a library's pass slept twice as long as it ran (issue 38, round 8).

A :class:`MemberStream` yields the member's bytes chunk by chunk, checks its size and CRC-32, and
keeps a copy of the inflater's state every :data:`CHECKPOINT_INTERVAL` bytes of output (some 40 KB
each), so that :meth:`MemberStream.read` can give back any range afterwards by inflating again from
the nearest checkpoint before it: at most one interval of extra work, never the whole member. A
re-read leaves its inflater where it stopped, so the next read further on goes on from there: the
load check reads a library's section table, symbol and string sections in file order, and a library
inflates again once at most (on PyTorch's CUDA wheel, 118 MB re-inflated instead of 420 MB; 2 MiB
between checkpoints, some 20 MB of them for its 988 MB of libraries).
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, Final, Protocol

__all__ = [
    "CHECKPOINT_INTERVAL",
    "INFLATER",
    "PASS_INFLATER",
    "InflateError",
    "MemberStream",
    "inflater_module",
    "pass_inflater",
]

OUT_CHUNK: Final = 1 << 20
IN_CHUNK: Final = 1 << 18
CHECKPOINT_INTERVAL: Final = 2 << 20
_ISAL_ZLIB: Final = "isal.isal_zlib"
#: A gzip member's header with no name, time or extra field (RFC 1952): ISA-L's pass reads a zip member's deflate
#: data as the body of a gzip member, to check its CRC-32 as it inflates (MemberStream._inflate_checked).
_GZIP_HEADER: Final = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


class _Decompress(Protocol):
    eof: bool
    unconsumed_tail: bytes

    def decompress(self, data: bytes, max_length: int = ...) -> bytes: ...

    def copy(self) -> _Decompress: ...


def inflater_module(name: str | None = None) -> Any:
    """The zlib-compatible module to inflate with: ``zlib_ng.zlib_ng`` when importable, else ``zlib``.

    ``name`` forces one (``"zlib"`` or ``"zlib-ng"``); the environment variable
    ``BUILDROWS_INFLATER`` does the same for a whole run (benchmarks compare them).
    """
    name = name or os.environ.get("BUILDROWS_INFLATER") or "auto"
    if name in ("auto", "zlib-ng"):
        try:
            from zlib_ng import zlib_ng
        except ImportError:
            if name == "zlib-ng":
                raise
        else:
            return zlib_ng
    return zlib


INFLATER: Final = inflater_module()


def pass_inflater(name: str | None = None) -> Any:
    """The module to inflate with where a member streams past once and is not read again: ISA-L's
    ``isal.isal_zlib`` when importable (its inflater cannot be copied, so a stream inflated with it
    keeps no checkpoints, and a re-read, should one come, inflates again from the member's start),
    else :data:`INFLATER`.

    ``name`` (or ``BUILDROWS_INFLATER``) forces one, as for :func:`inflater_module`: ``"isal"``, or
    ``"zlib"`` / ``"zlib-ng"`` for every stream."""
    name = name or os.environ.get("BUILDROWS_INFLATER") or "auto"
    if name in ("auto", "isal"):
        try:
            from isal import isal_zlib
        except ImportError:
            if name == "isal":
                raise
        else:
            return isal_zlib
    return inflater_module(None if name == "isal" else name)


PASS_INFLATER: Final = pass_inflater()


def _crc32_of(module: Any) -> Callable[[bytes, int], int]:
    """The CRC-32 a stream inflated by ``module`` checks its output with: zlib-ng's wherever zlib-ng is
    the inflater (the fastest of the three on 1 MiB pieces: 14 GB/s against ISA-L's 11 and zlib's 3.3,
    a few percent of an ISA-L pass), else ``module``'s own. Every one releases the GIL."""
    return INFLATER.crc32 if INFLATER is not zlib else module.crc32  # type: ignore[no-any-return]


class InflateError(ValueError):
    """The member's data is not what its headers declare (size, CRC-32, deflate stream)."""


@dataclass(frozen=True, slots=True)
class _Cursor:
    """Where the last re-read stopped: its live inflater (used once, then replaced), the compressed
    bytes it has not consumed yet, and the last piece it gave (at ``piece_at``), which a read that
    begins inside it takes from here."""

    out_pos: int  # output offset of the next byte the inflater gives
    in_pos: int  # file offset of the next compressed byte to read
    state: Any
    data: bytes  # read from the file, not consumed yet
    piece_at: int
    piece: bytes


@dataclass(frozen=True, slots=True)
class _Checkpoint:
    out_pos: int  # output offset the state below continues from
    in_pos: int  # file offset of the next compressed byte to feed
    state: _Decompress | None  # None: a fresh inflater at the start of the member


class MemberStream:
    """One member's data, ``compressed`` bytes at ``data_start`` in ``fp``, ``deflated`` or stored.

    Iterate once (:meth:`chunks`) for ``(offset, bytes)`` pieces in order; afterwards
    :meth:`read` returns any range again. ``fp`` must stay open while the stream is used.
    """

    def __init__(
        self,
        open_file: Callable[[], BinaryIO],
        data_start: int,
        compressed: int,
        size: int,
        crc: int,
        *,
        deflated: bool,
        module: Any = None,
        out_chunk: int = OUT_CHUNK,
        in_chunk: int = IN_CHUNK,
        checkpoint_interval: int = CHECKPOINT_INTERVAL,
    ) -> None:
        self.open_file = open_file
        self.data_start = data_start
        self.compressed = compressed
        self.size = size
        self.crc = crc
        self.deflated = deflated
        self.module = module or INFLATER
        self._crc32 = _crc32_of(self.module)
        self.out_chunk = out_chunk
        self.in_chunk = in_chunk
        self.interval = checkpoint_interval
        self.checkpoints: list[_Checkpoint] = [_Checkpoint(0, data_start, None)]
        self._cursor: _Cursor | None = None
        self._lock = threading.Lock()
        self._eof = False

    def chunks(self) -> Iterator[tuple[int, bytes]]:
        """Yield ``(offset, data)`` in order; raise :class:`InflateError` when the data lies."""
        with self.open_file() as fp:
            if not self.deflated:
                yield from self._stored(fp)
                return
            yield from self._inflate(fp)

    def _stored(self, fp: BinaryIO) -> Iterator[tuple[int, bytes]]:
        fp.seek(self.data_start)
        pos = 0
        crc = 0
        while pos < self.size:
            piece = fp.read(min(self.out_chunk, self.size - pos))
            if not piece:
                raise InflateError("stored data is truncated")
            crc = self._crc32(piece, crc)
            yield pos, piece
            pos += len(piece)
        if crc != self.crc:
            raise InflateError("CRC-32 mismatch (corrupt archive)")

    def _inflate(self, fp: BinaryIO) -> Iterator[tuple[int, bytes]]:
        if getattr(self.module, "__name__", "") == _ISAL_ZLIB:
            yield from self._inflate_checked(fp)
            return
        crc = 0
        end = 0
        for pos, piece in self._run(fp, self.checkpoints[0], record=True):
            crc = self._crc32(piece, crc)
            yield pos, piece
            end = pos + len(piece)
        if not self._eof:
            raise InflateError("deflate stream ends early (truncated or corrupt)")
        if end != self.size:
            raise InflateError(f"inflates to {end} bytes, declares {self.size}")
        if crc != self.crc:
            raise InflateError("CRC-32 mismatch (corrupt archive)")

    def _inflate_checked(self, fp: BinaryIO) -> Iterator[tuple[int, bytes]]:
        """The pass with ISA-L (:data:`PASS_INFLATER`): the member's deflate data framed as a gzip member,
        a fixed header before it and the zip's CRC-32 and size as its trailer, so that ISA-L checks the
        CRC-32 as it inflates. No CRC call beside the inflater, each of which gives up the GIL and waits to
        take it back from the symbol thread (issue 38: under the whole check, a library's pass on a
        worker slept three times as long as it ran); the leftover input stays in the inflater (no
        ``unconsumed_tail`` copied each call). ISA-L's inflater cannot be copied: no checkpoints."""
        from isal import igzip_lib

        isal_error: Any = igzip_lib.IsalError  # its stubs do not declare it an exception
        size = self.size
        inflater = igzip_lib.IgzipDecompressor(flag=igzip_lib.DECOMP_GZIP)
        trailer = struct.pack("<II", self.crc, size & 0xFFFFFFFF)
        fp.seek(self.data_start)
        left = self.compressed
        pos = 0
        data = _GZIP_HEADER
        ended = False  # every compressed byte and the trailer fed
        try:
            while not inflater.eof:
                if not data and inflater.needs_input:
                    if left:
                        data = fp.read(min(left, self.in_chunk))
                        if not data:
                            raise InflateError("compressed data is truncated")
                        left -= len(data)
                    elif not ended:
                        data, ended = trailer, True
                    else:
                        break
                # Bounded: a member that inflates past its declared size stops one byte over it.
                piece = inflater.decompress(data, min(self.out_chunk, size + 1 - pos))
                data = b""
                if piece:
                    if pos + len(piece) > size:
                        raise InflateError(f"inflates to more than its declared {size} bytes")
                    yield pos, piece
                    pos += len(piece)
        except isal_error as exc:
            if "checksum" not in str(exc):
                raise InflateError(f"corrupt deflate data: {exc}") from None
            if ended:  # every byte inflated, and the trailer made of the zip's headers does not match
                if pos != size:
                    raise InflateError(f"inflates to {pos} bytes, declares {size}") from None
                raise InflateError("CRC-32 mismatch (corrupt archive)") from None
            # The deflate stream ended before the member's compressed bytes did, and what followed it was read as
            # the trailer: bytes after the stream, which zipfile (and so pip) ignores, as the other inflaters do.
            # Rare: the member inflates again without the trailer, the rest of it given from there.
            failed = True
        else:
            failed = False
        if failed:
            yield from self._finish_plain(fp, pos)
            return
        if not inflater.eof:
            raise InflateError("deflate stream ends early (truncated or corrupt)")
        if pos != size:
            raise InflateError(f"inflates to {pos} bytes, declares {size}")
        self._eof = True

    def _finish_plain(self, fp: BinaryIO, given: int) -> Iterator[tuple[int, bytes]]:
        """The member inflated again from its start with a plain inflater, the output past ``given`` (what the
        checked pass gave already) yielded, and checked as the other inflaters' pass checks it."""
        crc = 0
        end = 0
        for at, piece in self._run(fp, self.checkpoints[0], record=False):
            crc = self._crc32(piece, crc)
            end = at + len(piece)
            if end > given:
                yield max(at, given), piece[max(given - at, 0):]
        if not self._eof:
            raise InflateError("deflate stream ends early (truncated or corrupt)")
        if end != self.size:
            raise InflateError(f"inflates to {end} bytes, declares {self.size}")
        if crc != self.crc:
            raise InflateError("CRC-32 mismatch (corrupt archive)")

    def _run(self, fp: BinaryIO, start: _Checkpoint | _Cursor, *, record: bool) -> Iterator[tuple[int, bytes]]:
        """Inflate from ``start`` to the end of the stream, never past the declared size.

        A re-read (``record`` false) leaves a :class:`_Cursor` where it stopped, so that the next
        read further on continues from there instead of from a checkpoint before it."""
        module = self.module
        size = self.size
        if isinstance(start, _Cursor):
            inflater, data = start.state, start.data
        else:
            inflater = start.state.copy() if start.state is not None else module.decompressobj(-15)
            data = b""
        in_pos = start.in_pos
        left = self.compressed - (in_pos - self.data_start)
        fp.seek(in_pos)
        pos = start.out_pos
        next_checkpoint = pos + self.interval
        self._eof = False
        try:
            while not inflater.eof:
                if not data and left:
                    data = fp.read(min(left, self.in_chunk))
                    if not data:
                        raise InflateError("compressed data is truncated")
                    left -= len(data)
                    in_pos += len(data)
                before = len(data)
                # Bounded: a member that inflates past its declared size stops one byte over it.
                piece = inflater.decompress(data, min(self.out_chunk, size + 1 - pos))
                data = inflater.unconsumed_tail
                if piece:
                    if pos + len(piece) > size:
                        raise InflateError(f"inflates to more than its declared {size} bytes")
                    yield pos, piece
                    pos += len(piece)
                elif len(data) == before:
                    break  # nothing consumed, nothing produced: the input ran out
                if record and pos >= next_checkpoint and not inflater.eof and hasattr(inflater, "copy"):
                    # The state continues with the input it has not consumed yet: the unconsumed
                    # tail is the last bytes read, so the file offset alone says where it starts.
                    self.checkpoints.append(_Checkpoint(pos, in_pos - len(data), inflater.copy()))
                    next_checkpoint = pos + self.interval
        except module.error as exc:
            raise InflateError(f"corrupt deflate data: {exc}") from None
        except GeneratorExit:
            if not record:
                # The reader stopped at a yield, ``piece`` given but not yet counted in ``pos``: the
                # inflater goes on from the end of that piece, and the piece is kept.
                with self._lock:
                    self._cursor = _Cursor(pos + len(piece), in_pos, inflater, data, pos, piece)
            raise
        self._eof = inflater.eof

    def release(self) -> None:
        """Drop the checkpoints and the re-read cursor (some 40 KB each, every interval of output):
        for a member whose ranges were read already. A later :meth:`read` still works, inflating
        again from the member's start."""
        with self._lock:
            del self.checkpoints[1:]
            self._cursor = None

    def read(self, offset: int, size: int) -> bytes:
        """``size`` bytes from ``offset`` of the member, inflated again from the nearest checkpoint.

        Call after :meth:`chunks` ran to the end (the member's size and CRC are then known good).
        """
        return b"".join(piece for _, piece in self.read_pieces(offset, size))

    def read_pieces(self, offset: int, size: int) -> Iterator[tuple[int, bytes]]:
        """``(offset, bytes)`` pieces of ``[offset, offset + size)`` in order, inflated again from the
        nearest checkpoint and never held together: a range as large as the member costs a chunk of
        memory, not its size. Call after :meth:`chunks` ran to the end."""
        end = min(offset + size, self.size)
        if offset >= end:
            return
        got = offset
        with self.open_file() as fp:
            if not self.deflated:
                fp.seek(self.data_start + offset)
                while got < end:
                    piece = fp.read(min(self.out_chunk, end - got))
                    if not piece:
                        break
                    yield got, piece
                    got += len(piece)
            else:
                point: _Checkpoint | _Cursor = max((c for c in self.checkpoints if c.out_pos <= offset),
                                                   key=lambda c: c.out_pos)
                with self._lock:
                    cursor, self._cursor = self._cursor, None
                if cursor is not None and cursor.piece_at <= offset and cursor.out_pos >= point.out_pos:
                    # Further on from where the last read stopped, and no checkpoint nearer: go on from there.
                    if cursor.piece and offset < cursor.piece_at + len(cursor.piece):
                        part = cursor.piece[offset - cursor.piece_at:end - cursor.piece_at]
                        yield offset, part
                        got = offset + len(part)
                    point = cursor
                for pos, piece in (() if got >= end else self._run(fp, point, record=False)):
                    if pos + len(piece) > offset:
                        lo = max(offset - pos, 0)
                        part = piece[lo : end - pos]
                        yield pos + lo, part
                        got = pos + lo + len(part)
                    if pos + len(piece) >= end:
                        break
        if got != end:
            raise InflateError("member changed while it was read")

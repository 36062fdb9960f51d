"""The zip's central directory, read and checked: its members (zip64 included), names that climb out of the wheel,
and each member's local header checked against it before the member streams.

The zip is treated as hostile: member names that climb out of the wheel, duplicate names, local
headers that disagree with the central directory, sizes beyond a cap or beyond the file, and
members that inflate to anything but their declared size and CRC are refused with a
:class:`WheelError` naming the member.
"""

from __future__ import annotations

import functools
import os
import re
import struct
import threading
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Final

from buildrows.binaries.inflate import InflateError, MemberStream

DEFAULT_MAX_MEMBER_SIZE: Final = 8 * 2**30
MAX_MEMBERS: Final = 1_000_000

_LOCAL_HEADER = struct.Struct("<4s5H3I2H")
_LOCAL_MAGIC: Final = b"PK\x03\x04"
_FLAG_ENCRYPTED: Final = 0x1
_FLAG_UTF8: Final = 0x800
_DRIVE = re.compile(r"^[A-Za-z]:")
# deflate cannot expand its input more than ~1032:1; a member claiming more is lying about its size.
_MAX_DEFLATE_RATIO: Final = 1032


class WheelError(ValueError):
    """The wheel cannot be read safely; ``member`` names the offending zip member, if any."""

    def __init__(self, wheel: str, message: str, member: str | None = None) -> None:
        self.wheel = wheel
        self.member = member
        where = f"{wheel}: {member}" if member is not None else wheel
        super().__init__(f"{where}: {message}")


@dataclass(slots=True)
class _Member:
    """One central-directory record: the fields of :class:`_Member` the reader uses."""

    filename: str
    orig_filename: str
    header_offset: int
    compress_size: int
    file_size: int
    CRC: int
    compress_type: int
    flag_bits: int


@dataclass(frozen=True, slots=True)
class _Directory:
    """A wheel's central directory, checked (:func:`_checked_members`), with the file it was read from."""

    key: tuple[str, int, int, int]  # (path, size, mtime_ns, inode): the same file, unchanged
    infos: list[_Member]
    names: tuple[str, ...]


_LAST_DIRECTORY: list[_Directory] = []
_DIRECTORY_LOCK = threading.Lock()
_EOCD = struct.Struct("<4s4H2LH")
_EOCD_MAGIC: Final = b"PK\x05\x06"
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_LOCATOR_MAGIC: Final = b"PK\x06\x07"
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")
_ZIP64_EOCD_MAGIC: Final = b"PK\x06\x06"
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")
# The same record, only the fields the reader keeps: signature, flags, method, CRC-32, sizes, the three
# lengths, the local header's offset (versions, times, disk number and attributes skipped).
_CENTRAL_USED = struct.Struct("<4s4xHH4xLLLHHH8xL")
_CENTRAL_MAGIC: Final = b"PK\x01\x02"
_MAX_COMMENT: Final = 65535


def _directory(wheel: Path) -> _Directory:
    """The wheel's central directory, read and checked once per process while the file is
    unchanged: `check` asks for it to refuse a bad archive before judging the name, then to read
    the wheel, then for the build record; PyTorch's has 13,000-26,000 members."""
    try:
        st = wheel.stat()
    except OSError as exc:
        raise WheelError(str(wheel), f"cannot open as a zip archive: {exc}") from None
    key = (str(wheel.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    with _DIRECTORY_LOCK:
        if _LAST_DIRECTORY and _LAST_DIRECTORY[0].key == key:
            return _LAST_DIRECTORY[0]
    infos = _checked_members(wheel, _read_central_directory(wheel))
    directory = _Directory(key, infos, tuple(i.filename for i in infos))
    with _DIRECTORY_LOCK:
        _LAST_DIRECTORY[:] = [directory]
    return directory


def _read_central_directory(wheel: Path) -> list[_Member]:
    """Every central-directory record, zip64 included, in one read of the directory (about 5x
    faster than :class:`zipfile.ZipFile`, which builds a full ZipInfo per member)."""

    def bad(reason: str) -> WheelError:
        return WheelError(str(wheel), f"cannot open as a zip archive: {reason}")

    try:
        with wheel.open("rb") as fp:
            size = fp.seek(0, os.SEEK_END)
            tail_len = min(size, _EOCD.size + _MAX_COMMENT)
            fp.seek(size - tail_len)
            tail = fp.read(tail_len)
            at = tail.rfind(_EOCD_MAGIC, 0, max(len(tail) - _EOCD.size + len(_EOCD_MAGIC), 0))
            if at < 0:
                raise bad("File is not a zip file (no end of central directory record)")
            eocd_pos = size - tail_len + at
            _, disk, cd_disk, _n_disk, count, cd_size, cd_offset, _comment = _EOCD.unpack_from(tail, at)
            end_pos = eocd_pos
            if count == 0xFFFF or cd_size == 0xFFFFFFFF or cd_offset == 0xFFFFFFFF:
                loc_at = at - _ZIP64_LOCATOR.size
                if loc_at < 0 or tail[loc_at:loc_at + 4] != _ZIP64_LOCATOR_MAGIC:
                    raise bad("zip64 end of central directory locator missing")
                _, _, eocd64_offset, _ = _ZIP64_LOCATOR.unpack_from(tail, loc_at)
                end_pos = eocd_pos - _ZIP64_LOCATOR.size - _ZIP64_EOCD.size
                if end_pos < 0:
                    raise bad("truncated zip64 end of central directory record")
                fp.seek(end_pos)
                record = fp.read(_ZIP64_EOCD.size)
                if len(record) != _ZIP64_EOCD.size or record[:4] != _ZIP64_EOCD_MAGIC:
                    raise bad("bad zip64 end of central directory record")
                (_, _, _, _, disk, cd_disk, _n_disk, count, cd_size, cd_offset) = _ZIP64_EOCD.unpack(record)
                del eocd64_offset
            if disk != 0 or cd_disk != 0:
                raise bad("multi-disk archives are not supported")
            if count > MAX_MEMBERS:
                raise WheelError(str(wheel), f"{count} members (more than {MAX_MEMBERS})")
            # Data prepended to the archive (a self-extractor) shifts every offset, as zipfile allows.
            shift = end_pos - cd_size - cd_offset
            if shift < 0 or cd_size > end_pos:
                raise bad("the central directory lies outside the file")
            fp.seek(cd_offset + shift)
            data = fp.read(cd_size)
    except OSError as exc:
        raise bad(str(exc)) from None
    if len(data) != cd_size:
        raise bad("truncated central directory")
    members: list[_Member] = []
    pos = 0
    unpack = _CENTRAL_USED.unpack_from  # the fields read, the others skipped (fewer objects a record)
    head = _CENTRAL.size
    new = _Member
    while pos + head <= cd_size:
        magic, flags, method, crc, csize, fsize, name_len, extra_len, comment_len, offset = unpack(data, pos)
        if magic != _CENTRAL_MAGIC:
            raise bad("bad magic number for central directory")
        pos += head
        raw = data[pos:pos + name_len]
        end = pos + name_len + extra_len
        pos = end + comment_len
        if pos > cd_size:
            raise bad("truncated central directory record")
        if raw.isascii():  # nearly every wheel's names: the same in both encodings, and fastest
            name = raw.decode("ascii")
        else:
            try:
                name = raw.decode("utf-8" if flags & _FLAG_UTF8 else "cp437")
            except UnicodeDecodeError:
                raise bad(f"member name {raw!r} is flagged UTF-8 but is not") from None
        if fsize == 0xFFFFFFFF or csize == 0xFFFFFFFF or offset == 0xFFFFFFFF:
            fsize, csize, offset = _zip64_sizes(data[end - extra_len:end], fsize, csize, offset, bad)
        members.append(new(name, name, offset + shift, csize, fsize, crc, method, flags))
    if len(members) != count:
        raise bad(f"the central directory holds {len(members)} records, its end record says {count}")
    return members


def _zip64_sizes(extra: bytes, fsize: int, csize: int, offset: int,
                 bad: Callable[[str], WheelError]) -> tuple[int, int, int]:
    """The 64-bit sizes and offset of a zip64 extra field (id 1), for the fields that overflowed."""
    at = 0
    while at + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, at)
        body = extra[at + 4:at + 4 + length]
        if tag == 1:
            values = list(struct.unpack_from(f"<{len(body) // 8}Q", body)) if len(body) >= 8 else []
            try:
                if fsize == 0xFFFFFFFF:
                    fsize = values.pop(0)
                if csize == 0xFFFFFFFF:
                    csize = values.pop(0)
                if offset == 0xFFFFFFFF:
                    offset = values.pop(0)
            except IndexError:
                raise bad("corrupt zip64 extra field") from None
            return fsize, csize, offset
        at += 4 + length
    raise bad("zip64 sizes without a zip64 extra field")


def _unsafe_name_reason(name: str) -> str | None:
    if not name:
        return "empty member name"
    if "\0" in name:
        return "member name contains a NUL byte"
    if "\\" in name:
        return "member name contains a backslash"
    if name.startswith("/") or _DRIVE.match(name):
        return "absolute member name"
    if ".." in name.split("/"):
        return "member name climbs out of the wheel ('..')"
    return None


def _checked_members(wheel: Path, infos: list[_Member]) -> list[_Member]:
    """The archive's members after the name checks that apply to the whole wheel."""
    if len(infos) > MAX_MEMBERS:
        raise WheelError(str(wheel), f"{len(infos)} members (more than {MAX_MEMBERS})")
    names = [info.filename for info in infos]
    if len(set(names)) != len(names):
        seen: set[str] = set()
        for name in names:
            if name in seen:
                raise WheelError(str(wheel), "duplicate member name", name)
            seen.add(name)
    joined = "\n".join(names)
    # Substring tests over all names at once (C speed) find any name that might be unsafe; only
    # then is each name looked at closely (_unsafe_name_reason decides).
    if (not all(names) or joined.count("\n") != len(names) - 1 or "\0" in joined or "\\" in joined
            or ".." in joined or ":" in joined or joined.startswith("/") or "\n/" in joined):
        for name in names:
            reason = _unsafe_name_reason(name)
            if reason is not None:
                raise WheelError(str(wheel), reason, name)
    return infos


def _plausible(info: _Member, archive_size: int | None) -> bool:
    """Whether the archive could hold what the member claims (its sizes are not checked yet)."""
    if archive_size is not None and info.compress_size > archive_size:
        return False
    if info.compress_type == zipfile.ZIP_STORED:
        return info.file_size == info.compress_size
    return info.file_size <= info.compress_size * _MAX_DEFLATE_RATIO + 64


def _member_stream(wheel: Path, info: _Member, max_size: int, module: Any = None) -> MemberStream:
    """A stream of one member's data, after checking its headers against the central directory;
    ``module`` inflates it (:data:`~buildrows.binaries.inflate.INFLATER` when None)."""
    member = info.filename

    def fail(message: str) -> WheelError:
        return WheelError(str(wheel), message, member)

    size = info.file_size
    if size > max_size:
        raise fail(f"declares {size} bytes, more than the {max_size}-byte limit")
    if info.flag_bits & _FLAG_ENCRYPTED:
        raise fail("is encrypted")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise fail(f"uses compression method {info.compress_type} (wheels use stored or deflate)")
    if info.compress_type == zipfile.ZIP_STORED and info.compress_size != size:
        raise fail(f"is stored with {info.compress_size} bytes but declares {size}")
    if not _plausible(info, None):
        raise fail(f"declares {size} bytes from {info.compress_size} compressed bytes, more than deflate can produce")
    with wheel.open("rb", buffering=0) as fp:
        archive_size = fp.seek(0, os.SEEK_END)
        if info.header_offset < 0 or info.header_offset + _LOCAL_HEADER.size > archive_size:
            raise fail("local header lies past the end of the archive (truncated?)")
        fp.seek(info.header_offset)
        header = fp.read(_LOCAL_HEADER.size)
        magic, *_, name_len, extra_len = _LOCAL_HEADER.unpack(header)
        if magic != _LOCAL_MAGIC:
            raise fail("bad local header signature")
        raw_name = fp.read(name_len)
    local_name = raw_name.decode("utf-8" if info.flag_bits & _FLAG_UTF8 else "cp437", "replace")
    if local_name != info.orig_filename:
        raise fail(f"local header names {local_name!r}, the central directory disagrees")
    data_start = info.header_offset + _LOCAL_HEADER.size + name_len + extra_len
    left = info.compress_size
    if left > archive_size - data_start:
        raise fail(
            f"compressed data ({left} bytes at {data_start:#x}) runs past the end"
            f" of the archive ({archive_size} bytes; truncated?)"
        )
    return MemberStream(
        functools.partial(_open_binary, wheel),
        data_start,
        info.compress_size,
        size,
        info.CRC,
        deflated=info.compress_type == zipfile.ZIP_DEFLATED,
        module=module,
    )


def _open_binary(path: Path) -> BinaryIO:
    return path.open("rb")


def _read_member(wheel: Path, info: _Member, max_size: int) -> bytes:
    """One member's data, whole (for small members: METADATA)."""
    stream = _member_stream(wheel, info, max_size)
    try:
        return b"".join(piece for _, piece in stream.chunks())
    except InflateError as exc:
        raise WheelError(str(wheel), str(exc), info.filename) from None


def members_named(path: str | os.PathLike[str], names: Iterable[str]) -> list[_Member]:
    """The central-directory records of the members named, in the zip's order, from the directory
    already read for this wheel (one pass per process while the file is unchanged)."""
    wanted = set(names)
    return [i for i in _directory(Path(path)).infos if i.filename in wanted]


def member_reader(path: str | os.PathLike[str], member: str,
                  max_member_size: int = DEFAULT_MAX_MEMBER_SIZE) -> tuple[Callable[[int, int], bytes], int]:
    """``(read(offset, size), size)`` for one member: it streams once (size and CRC checked,
    checkpoints kept), then each range is inflated again from the nearest checkpoint. Memory is
    the ranges asked for, never the member (what the symbol readers use)."""
    wheel = Path(path)
    for info in _directory(wheel).infos:
        if info.filename == member:
            break
    else:
        raise WheelError(str(wheel), "no such member", member)
    stream = _member_stream(wheel, info, max_member_size)
    try:
        for _ in stream.chunks():
            pass
    except InflateError as exc:
        raise WheelError(str(wheel), str(exc), member) from None

    def read(offset: int, size: int) -> bytes:
        try:
            return stream.read(offset, size)
        except InflateError as exc:
            raise WheelError(str(wheel), str(exc), member) from None

    return read, stream.size

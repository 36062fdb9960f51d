"""Read a wheel's shared libraries, name and metadata straight from the zip, never touching disk.

Each library is inflated once, in bounded chunks, and read as it streams past
(:mod:`buildrows.binaries.libstream`): fat binaries are recognised in passing, header ranges are kept, the
library itself never is, so memory stays flat whatever the library's size. Inflating is the
whole cost; the inflater (:mod:`buildrows.binaries.inflate`, zlib-ng when installed) releases the GIL, so
libraries are read on a few threads, largest first.

The zip is treated as hostile: member names that climb out of the wheel, duplicate names, local
headers that disagree with the central directory, sizes beyond a cap or beyond the file, and
members that inflate to anything but their declared size and CRC are refused with a
:class:`WheelError` naming the member.
"""

from __future__ import annotations

import email.message
import email.parser
import email.policy
import functools
import os
import re
import struct
import threading
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Final

from buildrows.binaries.binfmt import BinaryFormat, BinaryFormatError, BinaryLayout, read_binary
from buildrows.binaries.fatbin import MAX_CONTAINERS, DeviceCode, FatbinError
from buildrows.binaries.fatbin import list_device_code as _fatbin_device_code
from buildrows.binaries.fatscan import FatbinScanner
from buildrows.binaries.inflate import PASS_INFLATER, InflateError, MemberStream
from buildrows.binaries.kernelfiles import (
    PREFIX,
    CubinError,
    KernelFile,
    KernelKind,
    cubin_code,
    ptx_isa,
    ptx_targets,
    sniff,
)
from buildrows.binaries.kernelfiles import worth_sniffing as _worth_sniffing
from buildrows.binaries.libstream import read_streamed

__all__ = [
    "DEFAULT_MAX_MEMBER_SIZE",
    "KernelFile",
    "LibraryInfo",
    "WheelError",
    "WheelInfo",
    "WheelName",
    "check_archive",
    "describe_library",
    "is_shared_library",
    "iter_libraries",
    "list_device_code",
    "member_names",
    "parse_wheel_filename",
    "read_dist_info_member",
    "read_wheel",
]

DEFAULT_MAX_MEMBER_SIZE: Final = 8 * 2**30
# METADATA is read whole, then its headers parsed: bounded so a hostile one costs at most this much
# (issue 37: 60 MB took 57 s and 815 MB, 2.2 GB folded). The largest METADATA on PyPI we know of is
# well under 1 MB (a long README); docs/wheel-check.md states the budget.
MAX_METADATA_SIZE: Final = 16 * 2**20
MAX_METADATA_HEADERS: Final = 2**20
MAX_MEMBERS: Final = 1_000_000
DEFAULT_WORKERS: Final = 4  # capped by the CPU count; each costs a few MB, not a library

_LIBRARY_NAME = re.compile(r"\.(?:so(?:\.\d+)*|dll|pyd)$", re.IGNORECASE)
_LOCAL_HEADER = struct.Struct("<4s5H3I2H")
_LOCAL_MAGIC: Final = b"PK\x03\x04"
_FLAG_ENCRYPTED: Final = 0x1
_FLAG_UTF8: Final = 0x800
_DRIVE = re.compile(r"^[A-Za-z]:")
# deflate cannot expand its input more than ~1032:1; a member claiming more is lying about its size.
_MAX_DEFLATE_RATIO: Final = 1032

#: The build record's member in `.dist-info/` (written by buildrows.check.record, read here).
RECORD_NAME: Final = "buildrows.json"


class WheelError(ValueError):
    """The wheel cannot be read safely; ``member`` names the offending zip member, if any."""

    def __init__(self, wheel: str, message: str, member: str | None = None) -> None:
        self.wheel = wheel
        self.member = member
        where = f"{wheel}: {member}" if member is not None else wheel
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True, slots=True)
class WheelName:
    """The parts of a wheel's file name (PEP 427), tags split on ``.``."""

    distribution: str
    version: str
    build: str | None
    python_tags: tuple[str, ...]
    abi_tags: tuple[str, ...]
    platform_tags: tuple[str, ...]

    @property
    def local_version(self) -> str | None:
        """The local version label (``cu130`` in ``2.9.0+cu130``), if any."""
        _, plus, local = self.version.partition("+")
        return local if plus else None


@dataclass(frozen=True, slots=True)
class LibraryInfo:
    """Device code and dynamic dependencies of one shared library in a wheel.

    ``cubins`` and ``ptx`` list architectures as ``cuobjdump --list-elf``/``--list-ptx`` name
    them, in file order with repeats (a library built from several objects repeats them).
    ``machine``: ``x86_64``, ``aarch64``... (ELF ``e_machine``, PE ``Machine``; see
    :data:`buildrows.binaries.binfmt.ELF_MACHINES`).
    """

    path: str
    format: BinaryFormat
    size: int
    machine: str = ""
    cubins: tuple[str, ...] = ()
    ptx: tuple[str, ...] = ()
    needed: tuple[str, ...] = ()
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()
    delay_imports: tuple[str, ...] = ()
    # PTX that only the relocatable fat binary (``__nv_relfatbin``) holds while an executable one
    # exists: what separable compilation leaves, and what the runtime never JIT-compiles.
    relocatable_ptx: tuple[str, ...] = ()
    # The PTX ISA version of each ``ptx`` entry (same order; for kernel files judged as one unit, every file's,
    # while ``ptx`` names each architecture once): which toolkit wrote it, which driver JITs it.
    ptx_isa: tuple[tuple[int, int], ...] = ()
    # The toolkit release (12, 9) each uncompressed cubin's toolkit note records (those with one).
    cubin_toolkits: tuple[tuple[int, int], ...] = ()

    @property
    def has_device_code(self) -> bool:
        """Whether the library carries any cubin or PTX."""
        return bool(self.cubins or self.ptx)

    @property
    def rpaths(self) -> tuple[str, ...]:
        """DT_RPATH then DT_RUNPATH entries (ELF); empty for PE."""
        return self.rpath + self.runpath


@dataclass(frozen=True, slots=True)
class WheelInfo:
    """What ``buildrows check`` needs from a wheel."""

    path: Path
    name: WheelName
    requires_dist: tuple[str, ...]
    libraries: tuple[LibraryInfo, ...]
    members: tuple[str, ...]
    build_record: bytes | None = None  # ``.dist-info/buildrows.json`` (buildrows.check.record), if any
    # Device code in members that are not shared libraries (cubins, fat binaries, PTX text,
    # host ELF objects): buildrows.binaries.kernelfiles.
    kernels: tuple[KernelFile, ...] = ()


def _usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: `taskset`, a container's cpuset), not the machine's."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def is_shared_library(member: str) -> bool:
    """Whether a member name looks like a shared library (``.so``, ``.so.N``, ``.dll``, ``.pyd``)."""
    low = member.lower()
    if ".so" not in low and low[-4:] not in (".dll", ".pyd"):
        return False  # nearly every member of a large wheel: no regex
    return _LIBRARY_NAME.search(member) is not None


def parse_wheel_filename(filename: str) -> WheelName:
    """Split ``dist-version[-build]-python-abi-platform.whl``; a bad name raises :class:`WheelError`."""
    if not filename.endswith(".whl"):
        raise WheelError(filename, "not a wheel file name (no .whl suffix)")
    parts = filename[: -len(".whl")].split("-")
    if len(parts) not in (5, 6) or not all(parts):
        raise WheelError(
            filename,
            "not a wheel file name: expected 'name-version[-build]-python-abi-platform.whl'",
        )
    build = parts[2] if len(parts) == 6 else None
    if build is not None and not build[0].isdigit():
        raise WheelError(filename, f"build tag {build!r} must start with a digit")
    python, abi, platform = parts[-3:]
    _pip_accepts(filename)
    return WheelName(
        distribution=parts[0],
        version=parts[1],
        build=build,
        python_tags=tuple(python.split(".")),
        abi_tags=tuple(abi.split(".")),
        platform_tags=tuple(platform.split(".")),
    )


def _pip_accepts(filename: str) -> None:
    """Refuse a name pip refuses (packaging's own rules: a PEP 503 name, a PEP 440 version in ASCII
    digits, a build tag of digits first), so that nothing downstream meets a version in Arabic-Indic digits."""
    from packaging.utils import InvalidWheelFilename
    from packaging.utils import parse_wheel_filename as pip_rules

    try:
        pip_rules(filename)
    except InvalidWheelFilename as e:
        raise WheelError(filename, f"not a valid wheel file name, so pip refuses it: {e}") from None


def read_wheel(
    path: str | os.PathLike[str],
    *,
    max_member_size: int = DEFAULT_MAX_MEMBER_SIZE,
    workers: int | None = None,
    keep_for_symbols: bool = False,
) -> WheelInfo:
    """Read a wheel's name, ``Requires-Dist`` and every shared library's device code and links.

    ``keep_for_symbols``: also scan each ELF library's strings as it streams past and keep its
    stream (checkpoints, not data) so that the load check's symbol reader
    (:func:`buildrows.binaries.wheelsymbols.wheel_library_symbols`) inflates only the symbol sections
    again, not every library a second time (:func:`passed_library`)."""
    wheel = Path(path)
    name = parse_wheel_filename(wheel.name)
    directory = _directory(wheel)
    infos = directory.infos
    requires = _requires_dist(wheel, infos, name)
    record = _dist_info_member(wheel, infos, name, RECORD_NAME)
    libs = [i for i in infos if is_shared_library(i.filename)]
    with _PASSED_LOCK:
        _PASSED.clear()
        _PASSED_FOR[:] = [directory.key] if keep_for_symbols else []
    if (workers if workers is not None else min(DEFAULT_WORKERS, _usable_cpus())) > 1:
        # The kernel files are sniffed while the libraries inflate (the inflaters release the GIL):
        # on PyTorch's wheel, 13,000 members' first bytes, a tenth of a second off the wall time.
        with ThreadPoolExecutor(max_workers=1) as side:
            pending = side.submit(read_kernels, wheel, max_member_size=max_member_size, workers=workers)
            try:
                libraries = tuple(_read_libraries(wheel, libs, max_member_size, workers))
            except BaseException:
                pending.cancel()
                raise
            kernels = pending.result()
    else:
        libraries = tuple(_read_libraries(wheel, libs, max_member_size, workers))
        kernels = read_kernels(wheel, max_member_size=max_member_size, workers=workers)
    return WheelInfo(
        path=wheel,
        name=name,
        requires_dist=requires,
        libraries=libraries,
        members=directory.names,
        build_record=record,
        kernels=kernels,
    )


def check_archive(path: str | os.PathLike[str]) -> None:
    """Refuse (:class:`WheelError`) a file that is not a zip archive or whose member names are unsafe:
    the central directory only, nothing inflated (what `check` tries before it judges the name)."""
    _directory(Path(path))


def member_names(path: str | os.PathLike[str]) -> tuple[str, ...]:
    """Every member's name, in the zip's order (the central directory, read once per process)."""
    return _directory(Path(path)).names


def read_dist_info_member(path: str | os.PathLike[str], filename: str) -> bytes | None:
    """One small file of the wheel's ``.dist-info`` (``buildrows.json``, say), or None if absent."""
    wheel = Path(path)
    name = parse_wheel_filename(wheel.name)
    return _dist_info_member(wheel, _directory(wheel).infos, name, filename)


def _dist_info_member(wheel: Path, infos: list[_Member], name: WheelName, filename: str) -> bytes | None:
    """``<dist>-<version>.dist-info/FILENAME`` (the one beside the wheel's METADATA), if present."""
    metadata = [i.filename for i in infos if i.filename.count("/") == 1 and i.filename.endswith(".dist-info/METADATA")]
    expected = f"{name.distribution}-{name.version}.dist-info/METADATA"
    chosen = expected if expected in metadata else (metadata[0] if len(metadata) == 1 else None)
    if chosen is None:
        return None
    target = chosen.rsplit("/", 1)[0] + "/" + filename
    for info in infos:
        if info.filename == target:
            return _read_metadata(wheel, info)
    return None


def iter_libraries(
    path: str | os.PathLike[str],
    *,
    max_member_size: int = DEFAULT_MAX_MEMBER_SIZE,
    workers: int | None = None,
) -> Iterator[LibraryInfo]:
    """Yield a :class:`LibraryInfo` for each shared library, in the zip's order."""
    wheel = Path(path)
    libs = [i for i in _directory(wheel).infos if is_shared_library(i.filename)]
    yield from _read_libraries(wheel, libs, max_member_size, workers)


def list_device_code(
    path: str | os.PathLike[str], *, max_member_size: int = DEFAULT_MAX_MEMBER_SIZE
) -> dict[str, LibraryInfo]:
    """Every shared library of a wheel, by member name."""
    return {lib.path: lib for lib in iter_libraries(path, max_member_size=max_member_size)}


# --- zip handling ----------------------------------------------------------------------------


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
    unpack = _CENTRAL.unpack_from
    head = _CENTRAL.size
    while pos + head <= cd_size:
        (magic, _cv, _cs, _ev, _r, flags, method, _t, _d, crc, csize, fsize,
         name_len, extra_len, comment_len, _ds, _ia, _ea, offset) = unpack(data, pos)
        if magic != _CENTRAL_MAGIC:
            raise bad("bad magic number for central directory")
        pos += head
        raw = data[pos:pos + name_len]
        extra = data[pos + name_len:pos + name_len + extra_len]
        pos += name_len + extra_len + comment_len
        if pos > cd_size:
            raise bad("truncated central directory record")
        try:
            # ASCII (nearly every wheel's names) reads the same in both encodings, and fastest.
            name = raw.decode("ascii") if raw.isascii() else raw.decode("utf-8" if flags & _FLAG_UTF8 else "cp437")
        except UnicodeDecodeError:
            raise bad(f"member name {raw!r} is flagged UTF-8 but is not") from None
        if fsize == 0xFFFFFFFF or csize == 0xFFFFFFFF or offset == 0xFFFFFFFF:
            fsize, csize, offset = _zip64_sizes(extra, fsize, csize, offset, bad)
        members.append(_Member(name, name, offset + shift, csize, fsize, crc, method, flags))
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


@dataclass(frozen=True, slots=True)
class PassedLibrary:
    """An ELF library as it streamed past in :func:`read_wheel`: its stream (checkpoints kept, so a
    range inflates again from the nearest one: the symbol and string sections are read that way)."""

    stream: MemberStream
    # Its dynamic symbols and strings, read by the worker right after the pass (CUDA runtime markers
    # scanned when ``markers``: a library without device code), or None: read when asked.
    symbols: Any = None
    markers: bool = False


_PASSED: dict[str, PassedLibrary] = {}
_PASSED_FOR: list[tuple[str, int, int, int]] = []  # the directory key of the wheel they belong to
_PASSED_LOCK = threading.Lock()


def passed_library(path: str | os.PathLike[str], member: str) -> PassedLibrary | None:
    """The library ``member`` of this wheel as :func:`read_wheel` (``keep_for_symbols``) streamed
    it, if it did and the file is unchanged."""
    key = _directory(Path(path)).key
    with _PASSED_LOCK:
        return _PASSED.get(member) if [key] == _PASSED_FOR else None


def _library_info(wheel: Path, info: _Member, max_size: int) -> LibraryInfo:
    # A library whose symbols are read again after the pass keeps checkpoints (zlib-ng's copyable
    # inflater); one that streams past once inflates with the fastest inflater there is (ISA-L).
    stream = _member_stream(wheel, info, max_size, None if _PASSED_FOR else PASS_INFLATER)
    try:
        lib = read_streamed(stream)
    except InflateError as exc:
        raise WheelError(str(wheel), str(exc), info.filename) from None
    except (BinaryFormatError, FatbinError) as exc:
        raise WheelError(str(wheel), str(exc), info.filename) from exc
    described = _describe(info.filename, info.file_size, lib.layout, lib.device_code, lib.relocatable)
    if _PASSED_FOR and lib.layout.format == "elf":
        # The load check's symbols and strings, read here, in this worker, while the other workers
        # still inflate their libraries: only those sections inflate again, from the checkpoints.
        markers = not described.has_device_code
        symbols = _passed_symbols(stream, markers)
        if symbols is not None:
            stream.release()  # read: its checkpoints are not held for the rest of the check
        with _PASSED_LOCK:
            _PASSED[info.filename] = PassedLibrary(stream, symbols, markers)
    return described


def _passed_symbols(stream: MemberStream, markers: bool) -> Any:
    """The dynamic symbols and strings of a library that streamed past, or None where reading them
    fails: the load check reads them again when it asks, and words the error there."""
    from buildrows.binaries.symbols import passed_symbols

    try:
        return passed_symbols(stream, markers)
    except (InflateError, BinaryFormatError):
        return None


def describe_library(path: str, data: bytes | bytearray | memoryview) -> LibraryInfo:
    """A :class:`LibraryInfo` for one library held in memory (a loose file, say).

    Malformed input raises :class:`BinaryFormatError` or :class:`FatbinError`. Wheel members are
    read streaming instead (:mod:`buildrows.binaries.libstream`), with the same result.
    """
    binary = read_binary(data)
    code = _device_code(binary.device_code_sections)
    # Else the relocatable one was read above, as cuobjdump does.
    relocatable = _device_code(binary.relfatbin) if binary.fatbin else DeviceCode()
    layout = BinaryLayout(
        format=binary.format,
        machine=binary.machine,
        needed=binary.needed,
        rpath=binary.rpath,
        runpath=binary.runpath,
        imports=binary.imports,
        delay_imports=binary.delay_imports,
    )
    return _describe(path, len(data), layout, code, relocatable)


def _device_code(sections: tuple[memoryview, ...]) -> DeviceCode:
    cubins: list[str] = []
    ptx: list[str] = []
    isa: list[tuple[int, int]] = []
    toolkits: list[tuple[int, int]] = []
    for section in sections:
        code = _fatbin_device_code(section)
        cubins.extend(code.cubins)
        ptx.extend(code.ptx)
        isa.extend(code.ptx_isa)
        toolkits.extend(code.cubin_toolkits)
    return DeviceCode(cubins=tuple(cubins), ptx=tuple(ptx), ptx_isa=tuple(isa), cubin_toolkits=tuple(toolkits))


def _describe(path: str, size: int, layout: BinaryLayout, code: DeviceCode, relocatable: DeviceCode) -> LibraryInfo:
    return LibraryInfo(
        path=path,
        format=layout.format,
        size=size,
        machine=layout.machine,
        cubins=code.cubins,
        ptx=code.ptx,
        ptx_isa=code.ptx_isa,
        cubin_toolkits=code.cubin_toolkits,
        needed=layout.needed,
        rpath=layout.rpath,
        runpath=layout.runpath,
        imports=layout.imports,
        delay_imports=layout.delay_imports,
        relocatable_ptx=tuple(p for p in relocatable.ptx if p not in code.ptx),
    )


def _read_libraries(
    wheel: Path, libs: list[_Member], max_size: int, workers: int | None
) -> Iterator[LibraryInfo]:
    if workers is None:
        workers = min(DEFAULT_WORKERS, _usable_cpus())
    if workers <= 1 or len(libs) <= 1:
        for info in libs:
            yield _library_info(wheel, info, max_size)
        return
    # Largest first, so one big library does not start last and run alone.
    order = sorted(range(len(libs)), key=lambda i: libs[i].compress_size, reverse=True)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {i: pool.submit(_library_info, wheel, libs[i], max_size) for i in order}
        try:
            for i in range(len(libs)):
                yield futures[i].result()
        finally:
            for future in futures.values():
                future.cancel()


def _requires_dist(wheel: Path, infos: list[_Member], name: WheelName) -> tuple[str, ...]:
    """``Requires-Dist`` values of the wheel's ``.dist-info/METADATA``."""
    candidates = [
        i
        for i in infos
        if i.filename.count("/") == 1 and i.filename.endswith(".dist-info/METADATA")
    ]
    if not candidates:
        raise WheelError(str(wheel), "no .dist-info/METADATA")
    if len(candidates) > 1:
        expected = f"{name.distribution}-{name.version}.dist-info/METADATA"
        candidates = [i for i in candidates if i.filename == expected]
        if len(candidates) != 1:
            raise WheelError(str(wheel), f"several .dist-info/METADATA and none is {expected}")
    info = candidates[0]
    data = _read_metadata(wheel, info)
    message = metadata_headers(data, str(wheel), info.filename)
    return tuple(str(value).strip() for value in message.get_all("Requires-Dist") or ())


def _read_metadata(wheel: Path, info: _Member) -> bytes:
    """A small `.dist-info` file whole (METADATA, the build record), refused past :data:`MAX_METADATA_SIZE`."""
    if info.file_size > MAX_METADATA_SIZE:
        raise WheelError(str(wheel), f"{info.filename.rsplit('/', 1)[-1]} is {info.file_size} bytes, more than the "
                         f"{MAX_METADATA_SIZE >> 20} MiB a wheel's metadata may take here", info.filename)
    return _read_member(wheel, info, MAX_METADATA_SIZE)


def metadata_headers(data: bytes, wheel: str, member: str) -> email.message.Message:
    """The header section of a METADATA file (up to its first blank line: the description after it is
    never parsed), at most :data:`MAX_METADATA_HEADERS` bytes of it."""
    end = min((i for i in (data.find(b"\n\n"), data.find(b"\r\n\r\n")) if i >= 0), default=len(data))
    if end > MAX_METADATA_HEADERS:
        raise WheelError(wheel, f"METADATA is {end} bytes of headers, more than the {MAX_METADATA_HEADERS >> 20} MiB "
                         "its fields may take here", member)
    parser = email.parser.BytesHeaderParser(policy=email.policy.compat32)
    return parser.parsebytes(data[:end + 1])


# --- device code outside shared libraries ----------------------------------------------------

# A cubin at most this large is inflated whole to read its headers; a larger one streams once
# (size and CRC checked) and its header ranges are inflated again from the nearest checkpoint.
_WHOLE_CUBIN: Final = 4 << 20
# A fat binary its containers do not explain is read whole so the in-memory reader words the error.
_WHOLE_FATBIN: Final = 256 << 20


def read_kernels(
    path: str | os.PathLike[str],
    *,
    max_member_size: int = DEFAULT_MAX_MEMBER_SIZE,
    workers: int | None = None,
) -> tuple[KernelFile, ...]:
    """Device code in the members that are not shared libraries, in the zip's order
    (:mod:`buildrows.binaries.kernelfiles`): each candidate's first bytes decide, so a member
    that carries none is never inflated in full."""
    wheel = Path(path)
    candidates = [i for i in _directory(wheel).infos
                  if _worth_sniffing(i.filename, i.file_size) and not is_shared_library(i.filename)]
    if not candidates:
        return ()
    sniffed = _sniff_members(wheel, candidates)
    if workers is None:
        workers = min(DEFAULT_WORKERS, _usable_cpus())
    tasks = [(info, kind, prefix) for info, kind, prefix in sniffed if kind is not None]
    if workers <= 1 or len(tasks) <= 1:
        found = [_kernel_file(wheel, info, kind, prefix, max_member_size) for info, kind, prefix in tasks]
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            found = list(pool.map(lambda t: _kernel_file(wheel, t[0], t[1], t[2], max_member_size), tasks))
    return tuple(k for k in found if k is not None)


def _sniff_members(
    wheel: Path, infos: list[_Member]
) -> list[tuple[_Member, KernelKind | None, bytes]]:
    """Each member's kind from its first :data:`PREFIX` bytes, in one pass over the file (by
    offset). Members stored encrypted or with another method than stored/deflate carry no
    device code the runtime could load, and are left out."""
    out: list[tuple[_Member, KernelKind | None, bytes]] = []
    with wheel.open("rb") as fp:
        archive_size = fp.seek(0, os.SEEK_END)
        for info in sorted(infos, key=lambda i: i.header_offset):
            if info.flag_bits & _FLAG_ENCRYPTED or info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                continue
            member = info.filename
            if info.header_offset < 0 or info.header_offset + _LOCAL_HEADER.size > archive_size:
                raise WheelError(str(wheel), "local header lies past the end of the archive (truncated?)", member)
            fp.seek(info.header_offset)
            magic, *_, name_len, extra_len = _LOCAL_HEADER.unpack(fp.read(_LOCAL_HEADER.size))
            if magic != _LOCAL_MAGIC:
                raise WheelError(str(wheel), "bad local header signature", member)
            raw_name = fp.read(name_len)
            if raw_name.decode("utf-8" if info.flag_bits & _FLAG_UTF8 else "cp437", "replace") != info.orig_filename:
                raise WheelError(str(wheel), "local header names another member than the central directory", member)
            fp.seek(extra_len, os.SEEK_CUR)
            want = min(PREFIX, info.file_size)
            if info.compress_type == zipfile.ZIP_STORED:
                prefix = fp.read(want)
            else:
                prefix = _inflate_prefix(fp, info.compress_size, want)
            out.append((info, sniff(prefix), prefix))
    order = {id(info): n for n, info in enumerate(infos)}
    out.sort(key=lambda t: order[id(t[0])])  # back in the zip's order
    return out


def _inflate_prefix(fp: BinaryIO, compressed: int, want: int) -> bytes:
    """The first ``want`` bytes of a deflated member (corrupt data gives what inflated, which
    :func:`sniff` then does not recognise; a member read in full is checked then)."""
    inflater = zlib.decompressobj(-15)
    out = b""
    left = compressed
    try:
        while len(out) < want and left and not inflater.eof:
            data = fp.read(min(left, 2 * PREFIX))
            if not data:
                break
            left -= len(data)
            out += inflater.decompress(data, want - len(out))
    except zlib.error:
        pass
    return out[:want]


def _kernel_file(wheel: Path, info: _Member, kind: KernelKind, prefix: bytes, max_size: int) -> KernelFile | None:
    """Read one member :func:`sniff` recognised; None for a host ELF without device code."""
    member = info.filename
    if kind == "ptx":  # its header names the target and the ISA; the text itself is not needed
        return KernelFile(member, kind, info.file_size, ptx=ptx_targets(prefix), ptx_isa=ptx_isa(prefix))
    stream = _member_stream(wheel, info, max_size)
    try:
        if kind == "elf":
            try:
                lib = read_streamed(stream)
            except BinaryFormatError:
                return None  # not a host binary the loader could map (a data file that starts like one)
            if not (lib.device_code.cubins or lib.device_code.ptx):
                return None
            host = lib.device_code
            return KernelFile(member, kind, info.file_size, cubins=host.cubins, ptx=host.ptx, ptx_isa=host.ptx_isa,
                              cubin_toolkits=host.cubin_toolkits)
        if kind == "cubin":
            if info.file_size <= _WHOLE_CUBIN:
                data = b"".join(piece for _, piece in stream.chunks())
                arch, toolkit = cubin_code(lambda at, n: data[at:at + n], len(data))
            else:
                for _ in stream.chunks():  # size and CRC checked, checkpoints kept
                    pass
                arch, toolkit = cubin_code(stream.read, stream.size)
            return KernelFile(member, kind, info.file_size, cubins=(arch,),
                              cubin_toolkits=(toolkit,) if toolkit is not None else ())
        scanner = FatbinScanner(stream.size)
        scanner.limit_to([(0, stream.size)])
        for pos, piece in stream.chunks():
            scanner.feed(pos, piece)
        scanner.finish()
        code = scanner.device_code(0, stream.size)
        if scanner.too_many:
            raise FatbinError(f"more than {MAX_CONTAINERS} containers; refusing to read further")
        if code is None:  # not explained by its containers: the in-memory reader words why
            if stream.size > _WHOLE_FATBIN:
                raise FatbinError(f"not a well-formed fat binary ({stream.size} bytes its containers do not explain)")
            code = _fatbin_device_code(stream.read(0, stream.size))
        return KernelFile(member, kind, info.file_size, cubins=code.cubins, ptx=code.ptx, ptx_isa=code.ptx_isa,
                          cubin_toolkits=code.cubin_toolkits)
    except InflateError as exc:
        raise WheelError(str(wheel), str(exc), member) from None
    except (BinaryFormatError, FatbinError, CubinError) as exc:
        raise WheelError(str(wheel), f"{kind}: {exc}", member) from exc


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

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

import email.parser
import email.policy
import functools
import os
import re
import struct
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

from buildrows.binaries.binfmt import BinaryFormat, BinaryFormatError, BinaryLayout, read_binary
from buildrows.binaries.fatbin import DeviceCode, FatbinError
from buildrows.binaries.fatbin import list_device_code as _fatbin_device_code
from buildrows.binaries.inflate import InflateError, MemberStream
from buildrows.binaries.libstream import read_streamed

__all__ = [
    "DEFAULT_MAX_MEMBER_SIZE",
    "LibraryInfo",
    "WheelError",
    "WheelInfo",
    "WheelName",
    "check_archive",
    "describe_library",
    "is_shared_library",
    "iter_libraries",
    "list_device_code",
    "parse_wheel_filename",
    "read_dist_info_member",
    "read_wheel",
]

DEFAULT_MAX_MEMBER_SIZE: Final = 8 * 2**30
MAX_METADATA_SIZE: Final = 64 * 2**20
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

#: The build record's member in `.dist-info/` (written by buildrows.build.record, read here).
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
    # The PTX ISA version of each ``ptx`` entry (same order): which toolkit wrote it, which driver JITs it.
    ptx_isa: tuple[tuple[int, int], ...] = ()

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
    build_record: bytes | None = None  # ``.dist-info/buildrows.json`` (buildrows.build.record), if any


def is_shared_library(member: str) -> bool:
    """Whether a member name looks like a shared library (``.so``, ``.so.N``, ``.dll``, ``.pyd``)."""
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
    return WheelName(
        distribution=parts[0],
        version=parts[1],
        build=build,
        python_tags=tuple(python.split(".")),
        abi_tags=tuple(abi.split(".")),
        platform_tags=tuple(platform.split(".")),
    )


def read_wheel(
    path: str | os.PathLike[str],
    *,
    max_member_size: int = DEFAULT_MAX_MEMBER_SIZE,
    workers: int | None = None,
) -> WheelInfo:
    """Read a wheel's name, ``Requires-Dist`` and every shared library's device code and links."""
    wheel = Path(path)
    name = parse_wheel_filename(wheel.name)
    with _open_zip(wheel) as zf:
        infos = _checked_members(wheel, zf)
        requires = _requires_dist(wheel, infos, name)
        record = _dist_info_member(wheel, infos, name, RECORD_NAME)
        libs = [i for i in infos if is_shared_library(i.filename)]
        libraries = tuple(_read_libraries(wheel, libs, max_member_size, workers))
    return WheelInfo(
        path=wheel,
        name=name,
        requires_dist=requires,
        libraries=libraries,
        members=tuple(i.filename for i in infos),
        build_record=record,
    )


def check_archive(path: str | os.PathLike[str]) -> None:
    """Refuse (:class:`WheelError`) a file that is not a zip archive or whose member names are unsafe:
    the central directory only, nothing inflated (what `check` tries before it judges the name)."""
    wheel = Path(path)
    with _open_zip(wheel) as zf:
        _checked_members(wheel, zf)


def read_dist_info_member(path: str | os.PathLike[str], filename: str) -> bytes | None:
    """One small file of the wheel's ``.dist-info`` (``buildrows.json``, say), or None if absent."""
    wheel = Path(path)
    name = parse_wheel_filename(wheel.name)
    with _open_zip(wheel) as zf:
        return _dist_info_member(wheel, _checked_members(wheel, zf), name, filename)


def _dist_info_member(wheel: Path, infos: list[zipfile.ZipInfo], name: WheelName, filename: str) -> bytes | None:
    """``<dist>-<version>.dist-info/FILENAME`` (the one beside the wheel's METADATA), if present."""
    metadata = [i.filename for i in infos if i.filename.count("/") == 1 and i.filename.endswith(".dist-info/METADATA")]
    expected = f"{name.distribution}-{name.version}.dist-info/METADATA"
    chosen = expected if expected in metadata else (metadata[0] if len(metadata) == 1 else None)
    if chosen is None:
        return None
    target = chosen.rsplit("/", 1)[0] + "/" + filename
    for info in infos:
        if info.filename == target:
            return _read_member(wheel, info, MAX_METADATA_SIZE)
    return None


def iter_libraries(
    path: str | os.PathLike[str],
    *,
    max_member_size: int = DEFAULT_MAX_MEMBER_SIZE,
    workers: int | None = None,
) -> Iterator[LibraryInfo]:
    """Yield a :class:`LibraryInfo` for each shared library, in the zip's order."""
    wheel = Path(path)
    with _open_zip(wheel) as zf:
        libs = [i for i in _checked_members(wheel, zf) if is_shared_library(i.filename)]
    yield from _read_libraries(wheel, libs, max_member_size, workers)


def list_device_code(
    path: str | os.PathLike[str], *, max_member_size: int = DEFAULT_MAX_MEMBER_SIZE
) -> dict[str, LibraryInfo]:
    """Every shared library of a wheel, by member name."""
    return {lib.path: lib for lib in iter_libraries(path, max_member_size=max_member_size)}


# --- zip handling ----------------------------------------------------------------------------


def _open_zip(wheel: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(wheel)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise WheelError(str(wheel), f"cannot open as a zip archive: {exc}") from None


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


def _checked_members(wheel: Path, zf: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    """The archive's members after the name checks that apply to the whole wheel."""
    infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:
        raise WheelError(str(wheel), f"{len(infos)} members (more than {MAX_MEMBERS})")
    seen: set[str] = set()
    for info in infos:
        reason = _unsafe_name_reason(info.filename)
        if reason is not None:
            raise WheelError(str(wheel), reason, info.filename)
        if info.filename in seen:
            raise WheelError(str(wheel), "duplicate member name", info.filename)
        seen.add(info.filename)
    return infos


def _plausible(info: zipfile.ZipInfo, archive_size: int | None) -> bool:
    """Whether the archive could hold what the member claims (its sizes are not checked yet)."""
    if archive_size is not None and info.compress_size > archive_size:
        return False
    if info.compress_type == zipfile.ZIP_STORED:
        return info.file_size == info.compress_size
    return info.file_size <= info.compress_size * _MAX_DEFLATE_RATIO + 64


def _member_stream(wheel: Path, info: zipfile.ZipInfo, max_size: int) -> MemberStream:
    """A stream of one member's data, after checking its headers against the central directory."""
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
    )


def _open_binary(path: Path) -> BinaryIO:
    return path.open("rb")


def _read_member(wheel: Path, info: zipfile.ZipInfo, max_size: int) -> bytes:
    """One member's data, whole (for small members: METADATA)."""
    stream = _member_stream(wheel, info, max_size)
    try:
        return b"".join(piece for _, piece in stream.chunks())
    except InflateError as exc:
        raise WheelError(str(wheel), str(exc), info.filename) from None


def _library_info(wheel: Path, info: zipfile.ZipInfo, max_size: int) -> LibraryInfo:
    stream = _member_stream(wheel, info, max_size)
    try:
        lib = read_streamed(stream)
    except InflateError as exc:
        raise WheelError(str(wheel), str(exc), info.filename) from None
    except (BinaryFormatError, FatbinError) as exc:
        raise WheelError(str(wheel), str(exc), info.filename) from exc
    return _describe(info.filename, info.file_size, lib.layout, lib.device_code, lib.relocatable)


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
    for section in sections:
        code = _fatbin_device_code(section)
        cubins.extend(code.cubins)
        ptx.extend(code.ptx)
        isa.extend(code.ptx_isa)
    return DeviceCode(cubins=tuple(cubins), ptx=tuple(ptx), ptx_isa=tuple(isa))


def _describe(path: str, size: int, layout: BinaryLayout, code: DeviceCode, relocatable: DeviceCode) -> LibraryInfo:
    return LibraryInfo(
        path=path,
        format=layout.format,
        size=size,
        machine=layout.machine,
        cubins=code.cubins,
        ptx=code.ptx,
        ptx_isa=code.ptx_isa,
        needed=layout.needed,
        rpath=layout.rpath,
        runpath=layout.runpath,
        imports=layout.imports,
        delay_imports=layout.delay_imports,
        relocatable_ptx=tuple(p for p in relocatable.ptx if p not in code.ptx),
    )


def _read_libraries(
    wheel: Path, libs: list[zipfile.ZipInfo], max_size: int, workers: int | None
) -> Iterator[LibraryInfo]:
    if workers is None:
        workers = min(DEFAULT_WORKERS, os.cpu_count() or 1)
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


def _requires_dist(wheel: Path, infos: list[zipfile.ZipInfo], name: WheelName) -> tuple[str, ...]:
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
    data = _read_member(wheel, info, MAX_METADATA_SIZE)
    parser = email.parser.BytesHeaderParser(policy=email.policy.compat32)
    message = parser.parsebytes(data)
    return tuple(str(value).strip() for value in message.get_all("Requires-Dist") or ())

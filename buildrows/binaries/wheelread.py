"""Read a wheel's shared libraries, name and metadata straight from the zip, never touching disk.

The entry points: :func:`read_wheel` and the wheel as a whole; each part has its own module, and its
names are importable from here too: the central directory, read and checked
(:mod:`buildrows.binaries.zipdir`), the name and the `.dist-info` (:mod:`buildrows.binaries.distinfo`),
the shared libraries, streamed on a few threads (:mod:`buildrows.binaries.libraries`), and kernel files
(:mod:`buildrows.binaries.kernelread`).

The zip is treated as hostile: member names that climb out of the wheel, duplicate names, local
headers that disagree with the central directory, sizes beyond a cap or beyond the file, and
members that inflate to anything but their declared size and CRC are refused with a
:class:`WheelError` naming the member.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from buildrows.binaries.distinfo import MAX_METADATA_HEADERS as MAX_METADATA_HEADERS
from buildrows.binaries.distinfo import MAX_METADATA_SIZE as MAX_METADATA_SIZE
from buildrows.binaries.distinfo import RECORD_NAME as RECORD_NAME
from buildrows.binaries.distinfo import WheelName as WheelName
from buildrows.binaries.distinfo import _dist_info_member, _requires_dist
from buildrows.binaries.distinfo import metadata_headers as metadata_headers
from buildrows.binaries.distinfo import parse_wheel_filename as parse_wheel_filename
from buildrows.binaries.distinfo import read_dist_info_member as read_dist_info_member
from buildrows.binaries.kernelfiles import KernelFile as KernelFile
from buildrows.binaries.kernelread import read_kernels as read_kernels
from buildrows.binaries.libraries import (
    _PASSED,
    _PASSED_FOR,
    _PASSED_LOCK,
    _read_libraries,
    _usable_cpus,
    collections_paused,
)
from buildrows.binaries.libraries import DEFAULT_WORKERS as DEFAULT_WORKERS
from buildrows.binaries.libraries import LibraryInfo as LibraryInfo
from buildrows.binaries.libraries import PassedLibrary as PassedLibrary
from buildrows.binaries.libraries import describe_library as describe_library
from buildrows.binaries.libraries import is_shared_library as is_shared_library
from buildrows.binaries.libraries import iter_libraries as iter_libraries
from buildrows.binaries.libraries import list_device_code as list_device_code
from buildrows.binaries.libraries import passed_library as passed_library
from buildrows.binaries.zipdir import DEFAULT_MAX_MEMBER_SIZE as DEFAULT_MAX_MEMBER_SIZE
from buildrows.binaries.zipdir import MAX_MEMBERS as MAX_MEMBERS
from buildrows.binaries.zipdir import WheelError as WheelError
from buildrows.binaries.zipdir import _directory
from buildrows.binaries.zipdir import _member_stream as _member_stream
from buildrows.binaries.zipdir import member_reader as member_reader
from buildrows.binaries.zipdir import members_named as members_named

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
    with collections_paused():
        return _read_wheel(Path(path), max_member_size, workers, keep_for_symbols=keep_for_symbols)


def _read_wheel(wheel: Path, max_member_size: int, workers: int | None, *, keep_for_symbols: bool) -> WheelInfo:
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

"""A full disk is the machine's failure, not a bug in buildrows: one message naming the full file
system's path and how much is free, exit 4 (as an external command's failure; docs/building.md)."""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path

from buildrows.errors import ExternalFailure

#: The errors of a write that found no room: no space (ENOSPC), a quota reached (EDQUOT), a file
#: past the file system's largest (EFBIG).
FULL = frozenset(e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None), errno.EFBIG) if e is not None)


class DiskFull(ExternalFailure):
    """No space left where the build writes (exit 4)."""

    title = "disk full"


def is_disk_full(e: BaseException) -> bool:
    """Whether `e` (or what it was raised from) is a write that found no room."""
    seen: BaseException | None = e
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, OSError) and seen.errno in FULL:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def free_bytes(path: Path) -> int | None:
    """Bytes free for this user on the file system of `path` (its nearest existing parent)."""
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        st = os.statvfs(p)
    except (OSError, AttributeError):  # AttributeError: Windows has no statvfs
        return None
    return st.f_bavail * st.f_frsize


def _size(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} GB"


def full_path(e: BaseException, places: Sequence[Path] = ()) -> Path | None:
    """The path the failed write named; else the one of `places` with the least room."""
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, OSError) and seen.filename:
            return Path(os.fsdecode(seen.filename))
        seen = seen.__cause__ or seen.__context__
    known = [(free, p) for p in places if (free := free_bytes(p)) is not None]
    return min(known)[1] if known else None


def disk_full(e: BaseException, doing: str, places: Sequence[Path] = ()) -> DiskFull:
    """The error to report for a write that found no room while `doing` ("while stamping X")."""
    path = full_path(e, places)
    if path is None:
        where = "a file system this build writes to"
        fix = "free space where the build writes (the project's build/, the wheel directory, BUILDROWS_CACHE)"
    else:
        free = free_bytes(path)
        where = f"{path}" + (f" ({_size(free)} free on its file system)" if free is not None else "")
        fix = f"free space on the file system of {path.parent if path.suffix else path}, or build elsewhere"
    return DiskFull(f"no space left on the device {doing}: {where}; nothing half-written was kept\n"
                    f"    fix: {fix}, then run the same command again")

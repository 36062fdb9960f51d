"""The wheel directory shared by processes: placing a wheel without losing one, and clearing what a
killed build left there.

Two `buildrows build` processes may share a wheel directory (two checkouts with one `--wheel-dir`,
two invocations at once). Placing a wheel is a check and a move; between the two another process
may place a wheel of the same name, and a plain rename would replace it silently. So placement
holds an exclusive lock on the wheel directory itself (fcntl.flock on its descriptor: no file is
added to it), and the move is a hard link, which never replaces a file (where links are not
available, a rename under the lock; Windows' rename never replaces either).

A row builds into a directory of its own under ``.buildrows-staging/`` (and stamping writes into a
``.buildrows-stamp-*`` scratch directory). Each such directory holds ``.owner``, locked by the
process working in it for as long as it does, and removed by that process before it lets go. A
later run finds a ``.owner`` nobody holds only where its process was killed (SIGKILL, a power
cut) and after the steps it started have ended too (they inherit the lock): that directory, with
whatever half-written or unchecked wheel it holds, is removed, never placed. A directory without ``.owner`` was left on purpose (a refused wheel its error names) and is
kept.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from buildrows.process.lock import pass_on
from buildrows.ui import UI

#: The lock file in each working directory (staging, stamping scratch).
OWNER = ".owner"
STAGING = ".buildrows-staging"
STAMP_PREFIX = ".buildrows-stamp-"


def _flock(fd: int, blocking: bool) -> bool:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        return True
    except BlockingIOError:
        return False


@contextmanager
def placing(directory: Path) -> Iterator[None]:
    """Hold the wheel directory's lock (other buildrows processes placing into it wait)."""
    if sys.platform == "win32":  # no flock; os.rename and os.link never replace a file there
        yield
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        _flock(fd, blocking=True)
        yield
    finally:
        os.close(fd)  # releases the lock


def place(source: Path, target: Path) -> bool:
    """Move `source` to `target` unless `target` exists (then False, and nothing moved). Call it
    while `placing` the target's directory."""
    try:
        os.link(source, target)
    except FileExistsError:
        return False
    except OSError:  # no hard links on this file system: a rename, which the lock keeps exclusive
        if target.exists():
            return False
        try:
            os.rename(source, target)  # replaces nothing on Windows; the lock covers the others
        except FileExistsError:
            return False
        return True
    source.unlink()
    return True


class Owned:
    """A working directory this process holds (see the module's docstring); `release` when done."""

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path, self._fd = path, fd

    def release(self) -> None:
        """Mark the directory as no longer worked in (removes `.owner`, then lets its lock go)."""
        if self._fd is None:
            return
        with suppress(OSError):
            (self.path / OWNER).unlink(missing_ok=True)
        pass_on(self._fd, on=False)
        os.close(self._fd)
        self._fd = None


def owned_dir(parent: Path, prefix: str) -> Owned:
    """A fresh directory under `parent` whose `.owner` this process holds locked; it is never
    visible unlocked while the process lives (locked under a temporary name, then renamed)."""
    parent.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    if sys.platform == "win32":
        return Owned(path, None)
    fd = os.open(path / (OWNER + ".tmp"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _flock(fd, blocking=True)
        os.rename(path / (OWNER + ".tmp"), path / OWNER)
    except BaseException:
        os.close(fd)
        raise
    pass_on(fd)  # the steps hold it too: a killed build's directory stays while they still write there
    return Owned(path, fd)


def _abandoned(directory: Path) -> bool:
    """Whether the directory's `.owner` exists and no living process holds it."""
    owner = directory / OWNER
    try:
        fd = os.open(owner, os.O_RDONLY)
    except OSError:
        return False  # no owner: left on purpose, or being created
    try:
        if not _flock(fd, blocking=False):
            return False  # its process is working in it
        try:
            # The owner unlinks `.owner` before it lets go: the same file still there means it died.
            return os.stat(owner).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False
    finally:
        os.close(fd)


def clean(wheel_dir: Path) -> list[Path]:
    """Remove what killed builds left in the wheel directory: staging directories and stamping
    scratch whose process is gone (a half-written wheel, or a complete one never checked). Returns
    what was removed. A directory someone is working in, or one left on purpose, stays."""
    if sys.platform == "win32":
        return []
    candidates: list[Path] = []
    try:
        candidates += [p for p in wheel_dir.glob(STAMP_PREFIX + "*") if p.is_dir()]
        staging = wheel_dir / STAGING
        if staging.is_dir():
            for d in staging.iterdir():
                if d.is_dir():
                    candidates += [d, *[p for p in d.glob(STAMP_PREFIX + "*") if p.is_dir()]]
    except OSError:
        return []
    removed = []
    for d in candidates:
        if d.exists() and _abandoned(d):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    with suppress(OSError):
        (wheel_dir / STAGING).rmdir()  # when nothing else is left in it
    return removed


def clean_saying(wheel_dir: Path, ui: UI) -> None:
    """`clean`, each removal said."""
    for left in clean(wheel_dir):
        ui.info(f"  removed {left}: a killed build's unfinished wheel (never checked, never placed)")


def place_keeping_earlier(wheel: Path, final_dir: Path, who: str) -> tuple[Path, Path | None]:
    """Put `wheel` into `final_dir` under its name, never over a file, with the directory's lock held
    by the caller (`placing`). The same content already there: `wheel` is dropped. A different file
    of that name: it is kept, moved aside into `.buildrows/earlier-<time>/` of the directory first.
    Returns the placed wheel and where an earlier one went (or None). `who` names the wheel in the
    refusal when a file appears between the moves (another program writing here)."""
    import time

    from buildrows.errors import Refused
    from buildrows.provision.wheel_dirs import aside_root

    target = final_dir / wheel.name
    if target.exists() and same_wheel(wheel, target):
        wheel.unlink()
        return target, None
    if place(wheel, target):
        return target, None
    stamp = time.strftime("earlier-%Y%m%d-%H%M%S")
    aside = aside_root(final_dir) / stamp / wheel.name
    n = 1
    while aside.exists():
        n += 1
        aside = aside_root(final_dir) / f"{stamp}-{n}" / wheel.name
    aside.parent.mkdir(parents=True, exist_ok=True)
    if not place(target, aside) or not place(wheel, target):
        raise Refused(f"{who}'s wheel {wheel.name} could not be placed in {final_dir} without replacing a file; it "
                      f"stays at {wheel}\n    fix: build into a --wheel-dir no other program writes to")
    return target, aside


def same_wheel(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two wheels hold the same members with the same content and file modes, in any zip
    timestamps, compression or member order: a rebuild of the same sources is the same wheel."""
    import filecmp
    import zipfile

    if filecmp.cmp(a, b, shallow=False):  # streams: wheels may be a gigabyte
        return True
    try:
        with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
            ia = {i.filename: i for i in za.infolist()}
            ib = {i.filename: i for i in zb.infolist()}
            if ia.keys() != ib.keys():
                return False
            for name, info in ia.items():
                other = ib[name]
                if (info.file_size != other.file_size or info.CRC != other.CRC
                        or (info.external_attr >> 16) != (other.external_attr >> 16)):
                    return False
                with za.open(name) as fa, zb.open(name) as fb:
                    while True:
                        chunk = fa.read(1 << 20)
                        if chunk != fb.read(1 << 20):
                            return False
                        if not chunk:
                            break
    except (zipfile.BadZipFile, OSError, ValueError):
        return False
    return True

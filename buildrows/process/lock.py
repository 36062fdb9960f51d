"""One build at a time per build tree: a second `buildrows build` of the same row waits.

Two builds of one row share its tree (`build/skbuild-ROW`): run together, one of them dies in
CMake's compiler identification or, worse, both pass with files the other half wrote. So each row
build holds an exclusive lock (fcntl.flock; msvcrt on Windows) on `build/.buildrows-ROW.lock`
beside its tree, taken before anything is written there. A second build of the row waits for the
first, saying so (which process holds it, since when), and then builds in the tree the first left
(incremental, so it costs little); Ctrl-C stops the wait. The lock is the operating system's: a
build that dies releases it, and a lock file left behind holds nothing - once the steps it
started have ended too (they inherit it: a killed build's compilers never run beside the next).

Waiting, rather than refusing, is the choice: a script or CI step that starts the same row twice
gets two good builds instead of a failure to retry by hand.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from buildrows.ui import UI

POLL = 0.2  # seconds between attempts while waiting
#: The descriptors of the locks this process holds, which its steps inherit (`inherited`).
_HELD: set[int] = set()


def pass_on(fd: int, on: bool = True) -> None:
    """Have the steps started from now on inherit the lock `fd` (or no longer, `on=False`)."""
    if on:
        _HELD.add(fd)
    else:
        _HELD.discard(fd)


def inherited() -> tuple[int, ...]:
    """The lock descriptors a step is started with: should buildrows be killed (SIGKILL), its steps
    run on in their own process groups, and the lock they hold keeps the next build of the tree
    waiting until they end, instead of building beside them. Released as always when buildrows
    lets go (an flock is the open file's, shared with the children's copies)."""
    return tuple(sorted(_HELD)) if sys.platform != "win32" else ()


def _try_lock(fh: IO[str]) -> bool:
    if sys.platform == "win32":
        import msvcrt

        try:
            fh.seek(0)
            msvcrt.locking(fh.fileno(), msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined,unused-ignore]
            return True
        except OSError:
            return False
    import fcntl

    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False


def _unlock(fh: IO[str]) -> None:
    try:
        if sys.platform == "win32":
            import msvcrt

            fh.seek(0)
            msvcrt.locking(fh.fileno(), msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined,unused-ignore]
        else:
            import fcntl

            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    except OSError:
        pass


def _gone(holder: str) -> bool:
    """Whether the lock file names a process of this machine that no longer runs."""
    words = holder.split()
    if sys.platform == "win32":  # os.kill(pid, 0) would end the process there
        return False
    if len(words) < 4 or words[0] != "pid" or not words[1].isdigit() or words[3].rstrip(",") != socket.gethostname():
        return False
    try:
        os.kill(int(words[1]), 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's, or no kill(pid, 0) here (Windows): it may run
        return False
    return False


def lock_path(build_root: Path, key: str) -> Path:
    return build_root / f".buildrows-{key}.lock"


@contextmanager
def holding(path: Path, what: str, ui: UI) -> Iterator[None]:
    """Hold the lock at `path` for the body; wait (saying so) while another build holds it."""
    from buildrows.errors import Interrupted
    from buildrows.process import progress
    from buildrows.process.progress import duration

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", encoding="utf-8") as fh:
        if not _try_lock(fh):
            try:
                holder = path.read_text(encoding="utf-8").strip() or "another process"
            except OSError:
                holder = "another process"
            if _gone(holder):
                ui.info(f"  waiting: the buildrows that built {what} ({holder}) was killed, and the steps it started "
                        f"still run, holding its lock {path}; this build starts when they end (Ctrl-C stops waiting)")
            else:
                ui.info(f"  waiting: {what} is being built by another buildrows ({holder}); this build starts when "
                        f"that one ends (lock {path}; Ctrl-C stops waiting)")
            start = time.monotonic()
            while not _try_lock(fh):
                if progress.INTERRUPTED.is_set():
                    raise Interrupted(f"stopped by the user while waiting for the other build of {what}")
                time.sleep(POLL)
            ui.info(f"  the other build of {what} ended after {duration(time.monotonic() - start)} of waiting; "
                    "building now")
        try:
            fh.seek(0)
            fh.truncate()
            fh.write(f"pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%H:%M:%S')}\n")
            fh.flush()
        except OSError:
            pass
        _HELD.add(fh.fileno())
        try:
            yield
        finally:
            _HELD.discard(fh.fileno())
            _unlock(fh)

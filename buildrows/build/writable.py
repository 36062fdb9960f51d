"""Before a long build: every directory it will write is a directory it can write.

A wheel directory under /proc, a path that is a file, or one without permission used to end a
finished build with `internal error: FileNotFoundError` (exit 1). `require_writable` says so
before anything is compiled: exit 2, the path, what is wrong with it, and the option or variable
that changes it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from buildrows.errors import BadInput


def require_writable(path: Path, what: str, fix: str) -> None:
    """Create `path` (and its parents) when missing and write a file into it, or raise BadInput.
    What it created to find out is removed again: a build refused later leaves nothing behind."""
    problem = _problem(path)
    if problem is not None:
        raise BadInput(f"{what} {path} {problem}\n    fix: {fix}")


def _problem(path: Path) -> str | None:
    # The first part of the path that exists must be a directory: `--wheel-dir file.whl/x`.
    for p in (path, *path.parents):
        if os.path.lexists(p):
            if not p.is_dir():
                return "is a file, not a directory" if p == path else f"cannot be created: {p} is a file, not a directory"
            break
    created = [p for p in (path, *path.parents) if not os.path.lexists(p)]
    try:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            return f"cannot be created: {e.strerror or e}"
        try:
            fd, name = tempfile.mkstemp(prefix=".buildrows-write-test-", dir=path)
            os.close(fd)
            os.unlink(name)
        except OSError as e:
            return f"is not writable: {e.strerror or e}"
        return None
    finally:
        for p in created:  # deepest first
            try:
                p.rmdir()
            except OSError:
                break

"""Where a wheel directory keeps the wheels that are not for publishing, so its top holds only wheels.

building.md promises that `twine upload dist/*` never publishes a failed wheel; with `dist/rejected/`
and `dist/earlier-*/` beside the wheels, `dist/*` named directories and twine refused the whole
upload (issue 35). Those wheels now live under `WHEEL_DIR/.buildrows/`: `rejected/` (failed their
check) and `earlier-YYYYmmdd-HHMMSS/` (an earlier build's wheel of the same name, kept aside). A
dot directory is outside what `dist/*` and `dist/*.whl` match (the shell's and twine's globbing
skip dot names), and stays beside the wheels it belongs to, whatever --wheel-dir is.

The old layout is moved, never removed: `settle` renames `WHEEL_DIR/rejected` and each
`WHEEL_DIR/earlier-*` into `.buildrows/` (a name already taken there gets a `-N` suffix).
"""

from __future__ import annotations

import os
from pathlib import Path

KEPT = ".buildrows"
REJECTED = "rejected"
EARLIER = "earlier-"


def kept_dir(wheel_dir: Path) -> Path:
    """WHEEL_DIR/.buildrows: where the wheel directory's wheels that are not for publishing go."""
    return wheel_dir / KEPT


def rejected_dir(wheel_dir: Path) -> Path:
    """Where a wheel that failed its check goes (WHEEL_DIR/.buildrows/rejected)."""
    return kept_dir(wheel_dir) / REJECTED


def aside_root(directory: Path) -> Path:
    """Where an earlier wheel of `directory` is kept aside: WHEEL_DIR/.buildrows for a wheel
    directory, the directory itself when it is already under .buildrows (the rejected one)."""
    return directory if KEPT in directory.parts else kept_dir(directory)


def earlier_dirs(wheel_dir: Path) -> list[Path]:
    """The earlier-* directories of a wheel directory, in its .buildrows and (not yet settled) at its top."""
    out: list[Path] = []
    for where in (kept_dir(wheel_dir), wheel_dir):
        try:
            out += [p for p in where.iterdir() if p.is_dir() and p.name.startswith(EARLIER)]
        except OSError:
            continue
    return sorted(out)


def settle(wheel_dir: Path) -> list[str]:
    """Move the old layout's `rejected/` and `earlier-*/` from the top of `wheel_dir` into its
    .buildrows directory; one line per move. Nothing is removed or replaced."""
    try:
        old = sorted(p for p in wheel_dir.iterdir()
                     if p.is_dir() and not p.is_symlink() and (p.name == REJECTED or p.name.startswith(EARLIER)))
    except OSError:
        return []
    lines = []
    for src in old:
        target = kept_dir(wheel_dir) / src.name
        n = 1
        while target.exists():
            n += 1
            target = kept_dir(wheel_dir) / f"{src.name}-{n}"
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(src, target)
        lines.append(f"moved {src} to {target}: the wheel directory's top holds only wheels, so "
                     "`twine upload dist/*` uploads wheels alone")
    return lines

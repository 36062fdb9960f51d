"""The project's last commit time, kept by HEAD's commit id, so `env` and the CI hook start without running git.

`buildrows.build.epoch.source_date_epoch` takes SOURCE_DATE_EPOCH from `git log -1 --format=%ct
-- .` in the project (the last commit touching it). That answer depends only on the commit HEAD
names and the project's place in the repository, so it is kept under buildrows' cache
(`epoch/`, one small file per key) with the key made of: the repository's git directory, HEAD's
commit id (read from `.git` directly: HEAD, a loose ref, packed-refs, a worktree's commondir), and
the project's path. A later call with the same HEAD reads the file; a new commit, a checkout or
another project is another key, so git is asked again. When `.git` has a shape this reader does
not know (a ref it cannot find, a reftable), nothing is kept and git answers as before.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

_HEX = frozenset("0123456789abcdef")


def _git_dir(start: Path) -> Path | None:
    """The git directory of the repository holding `start` (`.git`, or the one a `.git` file names)."""
    for d in (start, *start.parents):
        dot = d / ".git"
        if dot.is_dir():
            return dot
        if dot.is_file():
            text = dot.read_text(encoding="utf-8", errors="replace").strip()
            if text.startswith("gitdir:"):
                target = Path(text[len("gitdir:"):].strip())
                return target if target.is_absolute() else (d / target)
            return None
    return None


def _is_id(text: str) -> bool:
    return len(text) in (40, 64) and set(text) <= _HEX


def head_commit(git_dir: Path) -> str | None:
    """HEAD's commit id, read from the git directory's files; None when they do not say it plainly."""
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if _is_id(head):
        return head
    if not head.startswith("ref: "):
        return None
    ref = head[len("ref: "):].strip()
    common = git_dir
    with contextlib.suppress(OSError):
        common = (git_dir / (git_dir / "commondir").read_text(encoding="utf-8").strip()).resolve()
    for base in dict.fromkeys((git_dir, common)):
        try:
            value = (base / ref).read_text(encoding="utf-8").strip()
        except OSError:
            continue
        return value if _is_id(value) else None
    try:
        packed = (common / "packed-refs").read_text(encoding="utf-8")
    except OSError:
        return None
    for line in packed.splitlines():
        parts = line.split(" ")
        if len(parts) == 2 and parts[1] == ref and _is_id(parts[0]):
            return parts[0]
    return None


def _entry(project: Path, env: Mapping[str, str]) -> Path | None:
    """The cache file for the project at its HEAD (None: HEAD not readable here)."""
    project = project.resolve()
    git_dir = _git_dir(project)
    commit = head_commit(git_dir) if git_dir is not None else None
    if git_dir is None or commit is None:
        return None
    from buildrows.plan.provisioned import cache_root

    return cache_root(env) / "epoch" / f"{commit}-{_fnv1a(f'{git_dir.resolve()}{chr(0)}{project}'):016x}"


def _fnv1a(text: str) -> int:
    """A stable 64-bit hash of the repository and project paths (FNV-1a): hashlib would load
    OpenSSL, a tenth of the hook's start-up, for a file name."""
    h = 0xCBF29CE484222325
    for byte in text.encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def kept(project: Path, env: Mapping[str, str]) -> tuple[Path | None, str | None]:
    """(the cache file, the commit time it keeps, or None when there is none yet)."""
    entry = _entry(project, env)
    if entry is None:
        return None, None
    try:
        text = entry.read_text(encoding="utf-8").strip()
    except OSError:
        return entry, None
    return entry, text if text.isdigit() else None


def keep(entry: Path, value: str) -> None:
    """Write the answer (atomically; a cache that cannot be written is no error)."""
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = entry.with_name(f"{entry.name}.{os.getpid()}.tmp")
        tmp.write_text(value + "\n", encoding="utf-8")
        os.replace(tmp, entry)
    except OSError:
        pass

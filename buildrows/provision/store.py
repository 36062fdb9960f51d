"""What buildrows keeps on disk, by kind, with sizes and ages, and pruning it (`buildrows cache`).

In the cache ($BUILDROWS_CACHE, else ~/.cache/buildrows): toolkits (provisioned CUDA toolkits),
environments (per-row build environments), downloads (toolkit archives; dropped once unpacked and
checked, so only an interrupted or BUILDROWS_KEEP_DOWNLOADS=1 install leaves them), the compiler
cache (ccache's files), importable (the link builds import buildrows.metadata through), nvcc-answers
(what `nvcc --version` said, so `env` and `hook` do not run it again: buildrows.plan.toolchain). In a
project: its build trees (build/skbuild-ROW, build/ROW), the rows' logs (build/logs) and the
wheels an earlier build kept aside (dist/.buildrows/earlier-*/).

An entry's age is the time since the newest change to it or its immediate contents (a toolkit
or an environment is rewritten when it is provisioned again). The compiler cache is pruned file
by file (ccache finds a missing entry a miss); every other kind, entry by entry.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from buildrows.errors import BadInput

CACHE_KINDS = ("toolkits", "environments", "downloads", "compiler-cache", "importable", "nvcc-answers")
PROJECT_KINDS = ("build-trees", "logs", "earlier-wheels")
KINDS = CACHE_KINDS + PROJECT_KINDS


@dataclass(frozen=True)
class Entry:
    kind: str
    path: Path
    size: int  # bytes
    modified: float  # seconds since the epoch: the newest change to it or its immediate contents

    def age_days(self, now: float) -> float:
        return max(0.0, (now - self.modified) / 86400)


def parse_age(text: str) -> float:
    """`30d`, `12h`, `2w`, `90m` as seconds; BadInput otherwise."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([mhdw])\s*", text)
    if not m:
        raise BadInput(f"--older-than {text!r} is not an age\n    fix: a number and a unit: 90m, 12h, 30d or 2w")
    return float(m.group(1)) * {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}[m.group(2)]


def _size(path: Path) -> int:
    try:
        st = path.lstat()
    except OSError:
        return 0
    if not path.is_dir() or path.is_symlink():
        return st.st_size
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _modified(path: Path) -> float:
    try:
        newest = path.lstat().st_mtime
    except OSError:
        return 0.0
    if path.is_dir() and not path.is_symlink():
        try:
            for child in os.scandir(path):
                with contextlib.suppress(OSError):
                    newest = max(newest, child.stat(follow_symlinks=False).st_mtime)
        except OSError:
            pass
    return newest


def _entries(kind: str, paths: Iterable[Path]) -> list[Entry]:
    return [Entry(kind, p, _size(p), _modified(p)) for p in sorted(paths)]


def _children(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return [p for p in directory.iterdir() if not p.name.startswith(".")]


def cache_entries(root: Path) -> list[Entry]:
    """Everything in buildrows' cache, by kind (anything else there is listed as `other`)."""
    out: list[Entry] = []
    out += _entries("toolkits", _children(root / "toolkits"))
    out += _entries("environments", _children(root / "envs"))
    out += _entries("downloads", _children(root / "downloads"))
    ccache = root / "ccache"
    if ccache.is_dir():
        out.append(Entry("compiler-cache", ccache, _size(ccache), _modified(ccache)))
    if (root / "importable").exists():
        out += _entries("importable", [root / "importable"])
    out += _entries("nvcc-answers", _children(root / "nvcc"))
    known = {"toolkits", "envs", "downloads", "ccache", "importable", "nvcc"}
    out += _entries("other", [p for p in _children(root) if p.name not in known])
    return out


def project_entries(project: Path, wheel_dir: Path | None = None) -> list[Entry]:
    """A project's build trees, its rows' logs and the wheels earlier builds kept aside."""
    build = project / "build"
    trees = [p for p in _children(build) if p.is_dir() and p.name != "logs"]
    dist = wheel_dir or project / "dist"
    from buildrows.provision.wheel_dirs import earlier_dirs

    earlier = earlier_dirs(dist)  # under .buildrows/, and the old layout's at the top
    return (_entries("build-trees", trees) + _entries("logs", _children(build / "logs"))
            + _entries("earlier-wheels", earlier))


def human_size(n: int) -> str:
    for unit, scale in (("GB", 1000 ** 3), ("MB", 1000 ** 2), ("KB", 1000)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def human_age(days: float) -> str:
    if days < 1 / 24:
        return f"{max(1, round(days * 1440))}m"
    if days < 1:
        return f"{round(days * 24)}h"
    return f"{round(days)}d"


def render(entries: Sequence[Entry], now: float, root: Path) -> list[str]:
    """Per kind: total size and count, then each entry (path, size, age); the grand total last."""
    lines: list[str] = []
    kinds = [k for k in (*KINDS, "other") if any(e.kind == k for e in entries)]
    for kind in kinds:
        mine = [e for e in entries if e.kind == kind]
        lines.append(f"{kind}: {human_size(sum(e.size for e in mine))} in {len(mine)} entr{'y' if len(mine) == 1 else 'ies'}")
        for e in sorted(mine, key=lambda e: -e.size):
            lines.append(f"  {human_size(e.size):>9}  {human_age(e.age_days(now)):>4} old  {_short(e.path, root)}")
    total = sum(e.size for e in entries if e.kind in CACHE_KINDS or e.kind == "other")
    lines.append(f"cache {root}: {human_size(total)} in all")
    return lines


def _short(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class Pruned:
    entry: Entry
    freed: int


def prune(entries: Sequence[Entry], kinds: Sequence[str], older_than: float | None, now: float, *,
          dry_run: bool = False) -> list[Pruned]:
    """Remove the entries of `kinds` older than `older_than` seconds (all of them when None). The
    compiler cache loses only its files that old (its configuration stays)."""
    done: list[Pruned] = []
    for e in entries:
        if e.kind not in kinds:
            continue
        if e.kind == "compiler-cache":
            freed = _prune_files(e.path, now - (older_than or 0), dry_run)
            if freed:
                done.append(Pruned(e, freed))
            continue
        if older_than is not None and now - e.modified < older_than:
            continue
        if not dry_run:
            if e.path.is_dir() and not e.path.is_symlink():
                shutil.rmtree(e.path, ignore_errors=True)
            else:
                e.path.unlink(missing_ok=True)
        done.append(Pruned(e, e.size))
    return done


def _prune_files(directory: Path, before: float, dry_run: bool) -> int:
    freed = 0
    for root, _dirs, files in os.walk(directory):
        for name in files:
            if name.endswith(".conf"):
                continue
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
                if st.st_mtime <= before:
                    if not dry_run:
                        os.unlink(path)
                    freed += st.st_size
            except OSError:
                pass
    return freed


def now() -> float:
    return time.time()


def cache_root_of(env: Mapping[str, str]) -> Path:
    from buildrows.plan.provisioned import cache_root

    return cache_root(env)

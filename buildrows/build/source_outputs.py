"""What a row's build writes into the project's own source tree, kept to that row.

Rows share one checkout; each has its own build tree (build/skbuild-ROW, build/setuptools-ROW).
A project that links into its source directory breaks that: LightGBM 4.7.0 writes
`lib_lightgbm.so` to `${PROJECT_SOURCE_DIR}` and installs it from there. After its CUDA row, the
CPU row's reused tree found that file newer than its own objects, linked nothing, and packed the
CUDA row's library into the CPU wheel (the check failed it: device code and libnccl.so.2 in a CPU
wheel).

So the build records every file a row's build created in the source tree (outside `build/` and
the wheel directory; and one it changed that a build created), and before another row builds, moves each such file that is
still as that row left it to `build/source-outputs/ROW/` (never a file it did not see the build
write; never a file changed since), and puts back the files this row left there earlier. The user's
own files are never touched: only what buildrows saw a build of this checkout write.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

RECORD = "source-outputs.json"
STASH = "source-outputs"
_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".tox", ".nox", ".venv"})
_LIMIT = 200_000  # files: a larger checkout is not watched (said once)

Snapshot = dict[str, tuple[int, int]]


def snapshot(project: Path, skip: Iterable[Path] = ()) -> Snapshot | None:
    """Each file under `project` (relative path -> (mtime_ns, size)), outside build/ and `skip`;
    None when the tree is larger than this is meant to watch."""
    skipped = {os.path.realpath(p) for p in skip} | {os.path.realpath(project / "build")}
    out: Snapshot = {}
    for root, dirs, files in os.walk(project):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and os.path.realpath(os.path.join(root, d)) not in skipped]
        for name in files:
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            out[os.path.relpath(path, project)] = (st.st_mtime_ns, st.st_size)
            if len(out) > _LIMIT:
                return None
    return out


def written(before: Snapshot, after: Snapshot, project: Path | None = None) -> Snapshot:
    """The files the build created, and those it changed that a build created before (a relinked
    library). A file that was there before any build (the sdist's egg-info, a tracked
    `_version.py`) is the user's even when a build rewrites it: never recorded, never moved."""
    known = {rel for files in _read(project).values() for rel in files} if project is not None else set()
    return {p: st for p, st in after.items() if p not in before or (before[p] != st and p in known)}


def _read(project: Path) -> dict[str, dict[str, list[int]]]:
    try:
        raw = json.loads((project / "build" / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # RecursionError: nested 100,000 deep, not ours
        return {}
    return {str(r): {str(p): list(v) for p, v in files.items()} for r, files in raw.items()
            if isinstance(files, dict)} if isinstance(raw, dict) else {}


def record(project: Path, row: str, files: Snapshot) -> None:
    """Remember what `row`'s build wrote into the source tree: these files, and those it wrote
    before that are still as it left them (a build with nothing to do writes none again)."""
    data = _read(project)
    kept = {rel: st for rel, st in data.get(row, {}).items() if rel not in files and _same(project / rel, st)}
    merged = {**kept, **{p: [st[0], st[1]] for p, st in files.items()}}
    if merged:
        data[row] = dict(sorted(merged.items()))
    else:
        data.pop(row, None)
    (project / "build").mkdir(parents=True, exist_ok=True)
    (project / "build" / RECORD).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _same(path: Path, st: list[int]) -> bool:
    try:
        now = os.lstat(path)
    except OSError:
        return False
    return (now.st_mtime_ns, now.st_size) == (st[0], st[1])


def settle(project: Path, row: str) -> list[str]:
    """Before `row` builds: move the other rows' outputs, as they left them, to their stash, and put
    back this row's. Returns what was done, one line each, for the build's output."""
    data = _read(project)
    done: list[str] = []
    for other, files in sorted(data.items()):
        if other == row:
            continue
        for rel, st in files.items():
            src = project / rel
            if not _same(src, st):
                continue
            dst = project / "build" / STASH / other / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            if dst.exists():
                dst.unlink()
            shutil.move(str(src), str(dst))
            done.append(f"moved {rel} (row {other}'s build wrote it into the source tree) to "
                        f"build/{STASH}/{other}/")
    for rel, st in data.get(row, {}).items():
        stashed = project / "build" / STASH / row / rel
        target = project / rel
        if stashed.exists() and not target.exists() and _same(stashed, st):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(stashed), str(target))
            done.append(f"put back {rel}, which this row's build wrote earlier")
    return done


#: CMake that puts what it links into the source tree: LightGBM's `set(LIBRARY_OUTPUT_PATH ${PROJECT_SOURCE_DIR})`.
_INTO_SOURCE = re.compile(
    r"\b(EXECUTABLE_OUTPUT_PATH|LIBRARY_OUTPUT_PATH|(?:CMAKE_)?(?:LIBRARY|RUNTIME|ARCHIVE)_OUTPUT_DIRECTORY)\s+\"?"
    r"\$\{(PROJECT_SOURCE_DIR|CMAKE_SOURCE_DIR|CMAKE_CURRENT_SOURCE_DIR|CMAKE_CURRENT_LIST_DIR)\}")


def writes_into_source(project: Path, source: Path) -> str | None:
    """Where the project's CMake (read from `source`) sends its outputs into the source tree
    ("CMakeLists.txt:393 LIBRARY_OUTPUT_PATH ${PROJECT_SOURCE_DIR}"), or where an earlier build of
    a row was seen writing there ("a build of ROW wrote lib_lightgbm.so"); None when neither."""
    from buildrows.build.doctor_project import cmake_files

    for path, text in cmake_files(source):
        m = _INTO_SOURCE.search(text)
        if m is not None:
            rel = path.relative_to(project) if path.is_relative_to(project) else path
            return f"{rel.as_posix()}:{text.count(chr(10), 0, m.start()) + 1} {m.group(1)} ${{{m.group(2)}}}"
    for row, files in sorted(_read(project).items()):
        if files:
            return f"a build of {row} wrote {sorted(files)[0]}"
    return None

"""The pull-request path filter's default: the project's build files and the sources they name.

A pull request that changes only a kernel must build; before this the filter held the policy, the
scripts and the build files, and `csrc/**` reached it only when the policy listed it in [ci] paths.
This reads what the driver reads - CMakeLists.txt (and the directories it adds and the files it
includes), setup.py, pyproject.toml's [tool.scikit-build] and [tool.setuptools] - and turns every
relative path they name that exists in the project into a filter: a directory as `dir/**`, a file
as its directory's `dir/**` (a file at the project's top as itself). Nothing is executed; a path
built from variables (`${X}/a.cu`) is not followed, which is what [ci] paths is for.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from buildrows.policy.discover import repository_root as repository_root

_CMAKE_COMMENT = re.compile(r"#\[(=*)\[.*?\]\1\]|#[^\n]*", re.DOTALL)
_CMAKE_SUBDIR = re.compile(r"\badd_subdirectory\s*\(\s*\"?([^\s\")$]+)", re.IGNORECASE)
_TOKEN = re.compile(r"[^\s()\"';]+")
_PY_STRING = re.compile(r"""(?:'([^'\n\\]+)'|"([^"\n\\]+)")""")




def _inside(project: Path, base: Path, text: str) -> PurePosixPath | None:
    """TEXT as a path relative to the project when it names an existing file or directory in it."""
    if not text or "$" in text or "*" in text or "://" in text or text.startswith("-") or len(text) > 300:
        return None
    try:
        p = (base / text).resolve()
        rel = p.relative_to(project.resolve())
    except (ValueError, OSError):
        return None
    if not rel.parts or not p.exists():
        return None
    return PurePosixPath(rel.as_posix())


def _filter(project: Path, rel: PurePosixPath) -> str:
    if (project / rel).is_dir():
        return f"{rel}/**"
    return f"{rel.parent}/**" if rel.parent != PurePosixPath(".") else str(rel)


def _cmake(project: Path, lists: Path, seen: set[Path], out: list[PurePosixPath]) -> None:
    if lists in seen or not lists.is_file():
        return
    seen.add(lists)
    text = _CMAKE_COMMENT.sub("", lists.read_text(encoding="utf-8", errors="replace"))
    base = lists.parent
    for sub in _CMAKE_SUBDIR.findall(text):
        rel = _inside(project, base, sub)
        if rel is not None:
            out.append(rel)
        _cmake(project, (base / sub / "CMakeLists.txt"), seen, out)
    for tok in _TOKEN.findall(text):
        if "/" in tok or "." in tok:
            rel = _inside(project, base, tok)
            if rel is not None and rel != PurePosixPath("CMakeLists.txt"):
                out.append(rel)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)


def _pyproject(project: Path, out: list[PurePosixPath]) -> None:
    path = project / "pyproject.toml"
    if not path.is_file():
        return
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return  # doctor reports an unreadable pyproject.toml; the filter keeps the file itself
    tool = data.get("tool", {})
    sk = tool.get("scikit-build", {})
    named: list[Any] = [sk.get("cmake", {}).get("source-dir"), sk.get("wheel", {}).get("packages"),
                        sk.get("wheel", {}).get("package-dir"), sk.get("sdist", {}).get("include")]
    named += [m.get("provider-path") for m in sk.get("metadata", {}).values() if isinstance(m, dict)]
    st = tool.get("setuptools", {})
    named += [st.get("package-dir"), st.get("packages")]
    for text in _strings(named):
        rel = _inside(project, project, text)
        if rel is not None:
            out.append(rel)
    source_dir = sk.get("cmake", {}).get("source-dir")
    if isinstance(source_dir, str):
        _cmake(project, project / source_dir / "CMakeLists.txt", set(), out)


def _setup_py(project: Path, out: list[PurePosixPath]) -> None:
    path = project / "setup.py"
    if not path.is_file():
        return
    for a, b in _PY_STRING.findall(path.read_text(encoding="utf-8", errors="replace")):
        rel = _inside(project, project, a or b)
        if rel is not None and rel != PurePosixPath("setup.py"):
            out.append(rel)


def named_sources(project: Path, driver: str) -> list[str]:
    """Path filters (relative to the project) for the sources the project's build files name."""
    found: list[PurePosixPath] = []
    _cmake(project, project / "CMakeLists.txt", set(), found)
    _pyproject(project, found)
    if driver == "setup.py":
        _setup_py(project, found)
    filters = list(dict.fromkeys(_filter(project, rel) for rel in found))
    dirs = [f[: -len("**")] for f in filters if f.endswith("/**")]
    # kernels/impl/** adds nothing beside kernels/**
    return [f for f in filters if not any(f != d + "**" and f.startswith(d) for d in dirs)]

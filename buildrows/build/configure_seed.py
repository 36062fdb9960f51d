"""CMake's compiler detection, done once per key and reused by the other rows of one `build` (SPEC §11).

A fresh build tree makes CMake identify each enabled language's compiler and probe its ABI. For
CUDA that compiles CMake's probes for the row's whole architecture list: seconds per tree, more
than a small project's own compile, and the same for every Python of a train. CMake skips all of
it in a tree it configured before: it loads ``CMakeFiles/<version>/CMakeSystem.cmake`` and
``CMake<LANG>Compiler.cmake`` and takes the tools it found (``CMAKE_AR``, ``CMAKE_LINKER``, ...)
from the cache. buildrows does the same across trees of one invocation:

- after a row's *fresh* tree was configured and built, its detection results (those files, and
  the ``CMAKE_*`` cache entries that name neither the tree, the project, the Python nor a value
  the command line gives again) are the *seed* for the row's key;
- a later row with the same key gets the seed planted in its own fresh tree (never in a tree
  that exists), with ``CMAKE_PLATFORM_INFO_INITIALIZED`` set as CMake sets it, so its first
  configure is what a reconfigure of the donor tree would be: `tests/test_configure_seed.py`
  compares the build files the two write.

The key is every input of the detection: the build command without what only the Python changes
(the interpreter, ``Python_EXECUTABLE`` and friends, the row's name, tree and wheel directory,
its environment's bin on PATH), and the whole environment the build runs with, less the row's own name, Python and statistics log. So a
different train, architecture list, compiler, flag, generator, toolchain variable or launcher is
another key. Two inputs are not known before the build runs, because the row's build
environment picks them: which CMake runs and which scikit-build-core. After a seeded build,
`verify` reads both from the new tree; if either differs from the donor's, buildrows builds the
row again in a fresh tree, without a seed.

Seeds live in memory for one invocation: no seed outlives the compilers it describes. Only the
scikit-build-core driver's trees are seeded (its tree is ``-C build-dir``); the cmake-presets and
setup.py drivers detect in every tree, as before.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: Cache settings that only the row's Python (or name) changes: left out of the key.
PYTHON_DEFINES = frozenset({"Python_EXECUTABLE", "Python3_EXECUTABLE", "PYTHON_EXECUTABLE",
                            "BUILDROWS_PYTHON", "BUILDROWS_ROW"})
#: Variables of a row's build that only its Python (or name) changes: left out of the key.
ROW_VARIABLES = frozenset({"BUILDROWS_ROW", "BUILDROWS_PYTHON", "CCACHE_STATSLOG"})
#: CMAKE_* cache entries tied to one tree, project or configure run, or given again on every
#: command line: never planted.
TREE_ENTRIES = frozenset({
    "CMAKE_CACHEFILE_DIR", "CMAKE_HOME_DIRECTORY", "CMAKE_FIND_PACKAGE_REDIRECTS_DIR",
    "CMAKE_NUMBER_OF_MAKEFILES", "CMAKE_INSTALL_PREFIX", "CMAKE_PREFIX_PATH", "CMAKE_MODULE_PATH",
    "CMAKE_FIND_ROOT_PATH_MODE_PACKAGE", "CMAKE_BUILD_TYPE", "CMAKE_CUDA_ARCHITECTURES",
    "CMAKE_PROJECT_TOP_LEVEL_INCLUDES",
})
_ENTRY = re.compile(r"^([A-Za-z0-9_./+-]+)(?::([A-Z]+))?=(.*)$")


@dataclass(frozen=True)
class Seed:
    """One fresh tree's compiler detection, ready to plant in another fresh tree."""

    donor: str  # the row whose tree ran the detection
    version: str  # the CMake that ran it: its CMakeFiles/<version> directory
    files: tuple[tuple[str, bytes], ...]  # CMakeFiles/<version>/*.cmake: name, content
    entries: tuple[str, ...]  # CMakeCache.txt lines (NAME:TYPE=VALUE)
    skbuild: str | None = None  # scikit-build-core's version that configured the tree
    # The CMake source directory the donor's tree was configured from, relative to its project:
    # scikit-build-core's `cmake.source-dir` ("." unless the project moves its CMakeLists.txt).
    source_dir: str = "."


def key(argv: Sequence[str], env: Mapping[str, str]) -> str:
    """The key of a scikit-build-core build command (argv[0] is the row's interpreter) run with
    `env` (the whole environment, the command's own variables included)."""
    settings: list[str] = []
    rest = iter(argv[1:])
    for a in rest:
        if a == "--outdir":  # where the wheel lands (a row's own directory when rows build beside each other)
            next(rest, None)
        elif not _python_only(a):
            settings.append(a)
    variables = sorted((k, _without_interpreter_bin(v, argv[0]) if k == "PATH" else v)
                       for k, v in env.items() if k not in ROW_VARIABLES)
    blob = json.dumps({"seed": 1, "argv": settings, "env": variables}, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def _without_interpreter_bin(path: str, python: str) -> str:
    """PATH without the row interpreter's own directory (its environment's bin, first on a build's
    PATH: `buildrows.build.drivers.with_environment_bin`), which only the row's Python changes."""
    import os

    own = os.path.dirname(os.path.abspath(python))
    return os.pathsep.join(d for d in path.split(os.pathsep) if os.path.abspath(d or ".") != own)


def _python_only(arg: str) -> bool:
    if arg.startswith("build-dir="):
        return True
    name = arg.removeprefix("cmake.define.").split("=", 1)[0] if arg.startswith("cmake.define.") else ""
    return name in PYTHON_DEFINES


def tree_of(argv: Sequence[str]) -> Path | None:
    """The build tree a scikit-build-core command names (`-C build-dir=...`), or None."""
    for a in argv:
        if a.startswith("build-dir="):
            return Path(a.removeprefix("build-dir="))
    return None


def read_cache(tree: Path) -> list[tuple[str, str, str, str]] | None:
    """The tree's CMakeCache.txt as (line, name, type, value) tuples, or None when it has none."""
    try:
        text = (tree / "CMakeCache.txt").read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return None
    out = []
    for line in text.splitlines():
        if line.startswith(("#", "//")) or not line.strip():
            continue
        m = _ENTRY.match(line)
        if m:
            out.append((line, m.group(1), m.group(2) or "", m.group(3)))
    return out


def cache_values(tree: Path) -> dict[str, str]:
    return {name: value for _, name, _, value in read_cache(tree) or []}


def detection_dir(tree: Path) -> Path | None:
    """The tree's CMakeFiles/<version> directory (the one holding CMakeSystem.cmake), or None
    when there is none or more than one (two CMakes configured the tree: nothing to trust)."""
    found = [p.parent for p in (tree / "CMakeFiles").glob("*/CMakeSystem.cmake")]
    return found[0] if len(found) == 1 else None


def harvest(tree: Path, source: Path, donor: str, private: Sequence[str] = ()) -> Seed | None:
    """The seed a freshly configured tree gives, or None when it has no complete detection.
    Entries whose value names the tree, the source directory or a path in `private` (the row's
    interpreter and its environment) are left out."""
    entries = read_cache(tree)
    where = detection_dir(tree)
    if entries is None or where is None:
        return None
    files = tuple((p.name, p.read_bytes()) for p in sorted(where.glob("*.cmake")))
    if not any(name.endswith("Compiler.cmake") for name, _ in files):
        return None
    tied = [str(tree), str(tree.resolve()), str(source), str(source.resolve()), *[p for p in private if p]]
    kept: list[str] = []
    for line, name, kind, value in entries:
        base = name.removesuffix("-ADVANCED")
        if not base.startswith("CMAKE_") or base in TREE_ENTRIES or base.startswith("CMAKE_PROJECT_"):
            continue
        if base.endswith("_COMPILER_LAUNCHER") or kind == "UNINITIALIZED":
            continue  # given again on every command line
        if any(t in value for t in tied):
            continue
        kept.append(line)
    values = cache_values(tree)
    relative = _source_dir(values.get("CMAKE_HOME_DIRECTORY"), source)
    if relative is None:  # CMake's source is not inside the project: nothing to say where it is for another row
        return None
    return Seed(donor, where.name, files, tuple(kept), values.get("SKBUILD_CORE_VERSION"), relative)


def _source_dir(home: str | None, project: Path) -> str | None:
    """CMake's source directory (the cache's CMAKE_HOME_DIRECTORY) relative to the project, or
    None when there is none or it lies outside the project."""
    import os

    if not home:
        return None
    relative = os.path.relpath(Path(home).resolve(), project.resolve())
    if relative == ".." or relative.startswith(".." + os.sep) or os.path.isabs(relative):
        return None
    return Path(relative).as_posix()


def plant(seed: Seed, tree: Path, project: Path) -> None:
    """Write the seed into a tree that has no CMakeCache.txt yet (the caller checks): the
    detection files, then the cache entries with this tree's and CMake source's own directories
    (the donor's source directory, under this project: CMake refuses a tree whose cache names
    another source, as scikit-build-core's `cmake.source-dir` moves it)."""
    source = project / seed.source_dir if seed.source_dir != "." else project
    if (tree / "CMakeCache.txt").exists():
        raise ValueError(f"{tree} is configured already: a seed is only planted in a fresh tree")
    where = tree / "CMakeFiles" / seed.version
    where.mkdir(parents=True, exist_ok=True)
    for name, content in seed.files:
        (where / name).write_bytes(content)
    lines = [
        "# Planted by buildrows: CMake's compiler detection from the tree of row " + seed.donor + ",",
        "# whose build had the same CMake, generator, compilers, flags and environment (SPEC §11).",
        *seed.entries,
        f"CMAKE_CACHEFILE_DIR:INTERNAL={tree.as_posix()}",
        f"CMAKE_HOME_DIRECTORY:INTERNAL={source.as_posix()}",
    ]
    if not any(line.startswith("CMAKE_PLATFORM_INFO_INITIALIZED:") for line in seed.entries):
        lines.append("CMAKE_PLATFORM_INFO_INITIALIZED:INTERNAL=1")
    (tree / "CMakeCache.txt").write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogateescape")


def verify(seed: Seed, tree: Path) -> str | None:
    """Why a seeded tree's configure cannot be trusted (another CMake or scikit-build-core ran
    than the donor's), or None."""
    values = cache_values(tree)
    ran = ".".join(values.get(f"CMAKE_CACHE_{part}_VERSION", "?") for part in ("MAJOR", "MINOR", "PATCH"))
    if not seed.version.startswith(ran) or (len(seed.version) > len(ran) and seed.version[len(ran)].isdigit()):
        return f"CMake {ran} configured it, but the detection came from CMake {seed.version} (row {seed.donor})"
    skbuild = values.get("SKBUILD_CORE_VERSION")
    if seed.skbuild is not None and skbuild != seed.skbuild:
        return (f"scikit-build-core {skbuild or '(none)'} configured it, but the detection came from "
                f"scikit-build-core {seed.skbuild} (row {seed.donor})")
    return None

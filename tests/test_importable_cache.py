"""Issue 28, point 9: where buildrows' cache holds code (the link that makes `buildrows.metadata`
importable by a build), it is keyed per installation.

Seen: `~/.cache/buildrows/importable/buildrows` pointed at another installation's code, so two
buildrows installations sharing the default cache could run each other's code. Two real copies of
the package, each asked in its own interpreter process, with one cache."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import buildrows

PACKAGE = Path(buildrows.__file__).resolve().parent


def _install(root: Path) -> Path:
    """A second installation of this buildrows: the package copied under `root`."""
    shutil.copytree(PACKAGE, root / "buildrows", ignore=shutil.ignore_patterns("__pycache__"))
    return root / "buildrows"


def _provider_path(installation: Path, cache: Path) -> str:
    """PYTHONPATH that installation gives a build (drivers.provider_path, asked in a process of its own)."""
    code = ("import sys; from pathlib import Path; from buildrows.build.drivers import provider_path; "
            "print(provider_path(Path(sys.argv[1]), {}))")
    env = {**os.environ, "PYTHONPATH": str(installation.parent)}
    got = subprocess.run([sys.executable, "-c", code, str(cache)], env=env, capture_output=True, text=True,
                         check=True, cwd=installation.parent)  # not this checkout's directory: -c imports from there
    return got.stdout.strip()


def _imported_by_a_build(pythonpath: str) -> Path:
    """Where `buildrows.metadata` comes from for a build given that PYTHONPATH."""
    code = "import buildrows.metadata as m; print(m.__file__)"
    got = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path[:0] = {pythonpath.split(os.pathsep)!r}; "
                          + code], capture_output=True, text=True, check=True)
    return Path(got.stdout.strip()).resolve().parent


def test_two_installations_sharing_the_cache_each_expose_their_own_code(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    one, two = _install(tmp_path / "one"), _install(tmp_path / "two")
    first = _provider_path(one, cache)
    second = _provider_path(two, cache)
    assert first != second
    assert Path(first).parent == Path(second).parent == cache / "importable"
    assert _imported_by_a_build(first) == one.resolve()
    assert _imported_by_a_build(second) == two.resolve()
    # the first installation again, after the second: still its own code
    assert _provider_path(one, cache) == first and _imported_by_a_build(first) == one.resolve()
    # a link of its key that points elsewhere (another installation's, or one left by an older
    # buildrows) is corrected, never used
    link = Path(first) / "buildrows"
    link.unlink()
    link.symlink_to(two, target_is_directory=True)
    assert _provider_path(one, cache) == first and _imported_by_a_build(first) == one.resolve()

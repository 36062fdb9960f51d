"""The member-path helpers the check runs over every member of a wheel (PyTorch's: 13,000), rewritten for
speed in round 7 (issue 38): held to the plain definitions they replaced, on generated member lists."""

from __future__ import annotations

import itertools
import random

from buildrows.check.installable import _clashes
from buildrows.check.runtime import _install_dir, _wheel_dirs


def _clashing_paths(members: tuple[str, ...]) -> list[str]:
    """Every path that is a member file and the parent directory of another member (the definition)."""
    files = {m for m in members if not m.endswith("/")}
    dirs: set[str] = set()
    for m in members:
        parts = m.rstrip("/").split("/")
        for i in range(1, len(parts)):
            dirs.add("/".join(parts[:i]))
    return sorted(files & dirs)


def _install_dir_by_parts(member: str) -> str | None:
    parts = member.split("/")
    if parts[0].endswith(".data"):
        if len(parts) > 2 and parts[1] in ("purelib", "platlib"):
            return "/".join(parts[2:-1])
        return None
    return member.rpartition("/")[0]


def test_clashes_are_the_definitions() -> None:
    rnd = random.Random(38)
    tried = found = 0
    for _ in range(5000):
        members = tuple(
            "/".join(rnd.choice(["a", "b", "c", ""]) for _ in range(rnd.randint(1, 4))) + rnd.choice(["", "/"])
            for _ in range(rnd.randint(1, 8)))
        expected = _clashing_paths(members)
        got = _clashes(members)
        tried += 1
        if expected:
            found += 1
            assert len(got) == 1 and got[0].startswith(", ".join(expected[:5])), (members, expected, got)
            assert "both a file and a directory in the wheel" in got[0]
        else:
            assert got == [], (members, got)
    assert found > 500 and tried - found > 500  # both answers were exercised


def test_a_file_under_a_file_is_a_clash() -> None:
    (message,) = _clashes(("pkg/mod", "pkg/mod/__init__.py", "pkg/other.py"))
    assert message.startswith("pkg/mod: both a file and a directory in the wheel")
    assert _clashes(("pkg/", "pkg/a/b.py", "pkg/a/c.py")) == []


def test_install_dir_is_the_definition() -> None:
    atoms = ["a", "x.data", "purelib", "platlib", "scripts", "", "b.so"]
    for k in range(1, 6):
        for combo in itertools.product(atoms, repeat=k):
            member = "/".join(combo)
            assert _install_dir(member) == _install_dir_by_parts(member), member
    assert _install_dir("x-1.data/platlib/pkg/lib/a.so") == "pkg/lib"
    assert _install_dir("x-1.data/scripts/tool") is None
    assert _install_dir("x-1.data/purelib/") == ""


def test_wheel_dirs_hold_every_parent() -> None:
    class Info:
        members = ("pkg/lib/a.so", "pkg/sub/deep/b.py", "x-1.data/platlib/other/c.so", "x-1.data/scripts/s")

    assert _wheel_dirs(Info()) == {"", "pkg", "pkg/lib", "pkg/sub", "pkg/sub/deep", "other"}  # type: ignore[arg-type]


def _wheel_dirs_by_definition(members: tuple[str, ...]) -> set[str]:
    dirs = {""}
    for m in members:
        d = _install_dir_by_parts(m)
        while d:
            dirs.add(d)
            d = d.rpartition("/")[0]
    return dirs


def test_wheel_dirs_are_the_definition() -> None:
    """Round 8 finds the distinct parents in C loops and walks only those up: the same set as walking every
    member's install directory, .data schemes, directory entries, empty parts and absolute names included."""
    rnd = random.Random(8)
    atoms = ["a", "b", "x-1.data", "purelib", "platlib", "scripts", "", "c.so"]

    class Info:
        members: tuple[str, ...] = ()

    for _ in range(4000):
        Info.members = tuple("/".join(rnd.choice(atoms) for _ in range(rnd.randint(1, 5))) + rnd.choice(["", "/"])
                             for _ in range(rnd.randint(1, 10)))
        assert _wheel_dirs(Info()) == _wheel_dirs_by_definition(Info.members), Info.members  # type: ignore[arg-type]

"""Where a project's files are found from any directory inside it: its repository's root, found as
git finds it (the policy search walks up to it; the CI path filter and `workflow` start there)."""

from __future__ import annotations

from pathlib import Path


def repository_root(start: Path) -> Path | None:
    """The root of the repository that holds START, found as git finds it: the nearest directory
    upward (START included) with a `.git` entry (a directory, or the file a worktree or submodule
    has). None outside any repository. Needs no git executable."""
    here = start.resolve()
    for d in (here, *here.parents):
        if (d / ".git").exists():
            return d
    return None

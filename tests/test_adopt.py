"""Issue 29: a project adopted the way the README and guide say passes in every place it builds.

The repository root is found from any subdirectory, as git finds it (`workflow`, the policy
lookup of every command); the end-to-end adoption of two fresh projects is further down.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO, Result

EXAMPLE = REPO / "examples" / "cuda-extension"


def _bundled_checkout(root: Path) -> Path:
    """buildrows' repository as far as the bundled example's policy needs it ([ci] install = "../.."),
    with a .git entry (a worktree's .git is a file: both count)."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, root / name)
    shutil.copytree(EXAMPLE, root / "examples" / "cuda-extension", ignore=shutil.ignore_patterns(
        "build", "dist", "__pycache__", "CMakeUserPresets.json", "buildrows-presets.json"))
    (root / ".git").write_text("gitdir: /nowhere/worktrees/x\n", encoding="utf-8")
    return root / "examples" / "cuda-extension"


def test_workflow_from_the_examples_own_directory_renders_at_the_repository_root(
        tmp_path: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    """It took the example's directory as the root and refused `[ci] install = '../..'`."""
    example = _bundled_checkout(tmp_path)
    monkeypatch.chdir(example)
    r = cli("workflow")
    assert r.code == 0, r.err
    assert f"repository root: {tmp_path.resolve()}" in r.err
    caller = (tmp_path / ".github" / "workflows" / "build-wheels-cuda-linux-x86_64.yml").read_text(encoding="utf-8")
    assert "examples/cuda-extension/buildrows.toml" in caller
    assert (tmp_path / ".github" / "scripts" / "buildrows-pre-build.sh").is_file()
    assert not (example / ".github").exists()
    # --check from another subdirectory finds the same root and the same files
    monkeypatch.chdir(example / "csrc")
    r = cli("workflow", "--check")
    assert r.code == 0, r.err


def test_outside_a_repository_workflow_says_it_takes_the_current_directory(
        tmp_path: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    example = _bundled_checkout(tmp_path)
    (tmp_path / ".git").unlink()
    monkeypatch.chdir(example)
    r = cli("workflow")
    assert r.code == 2
    assert f"no git repository holds {example}: taking it as the repository root (pass --root DIR" in r.err
    assert "leads outside the repository" in r.err


def test_a_command_in_a_subdirectory_finds_the_policy_up_to_the_repository_root(
        tmp_path: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    example = _bundled_checkout(tmp_path)
    monkeypatch.chdir(example / "csrc")
    r = cli("rows", "linux-x86_64-cu130-py312")
    assert r.code == 0, r.err
    assert "linux-x86_64-cu130-py312" in r.out
    # never above the repository's root: the search stops there, and says so
    (example / "buildrows.toml").unlink()
    r = cli("rows")
    assert r.code == 2
    assert (f"no buildrows policy in {example / 'csrc'} or the directories above it up to the repository root "
            f"{tmp_path.resolve()}") in r.err

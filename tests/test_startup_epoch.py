"""Start-up of `env`/`hook` without subprocesses (issue 35): the last commit time kept by HEAD's
commit id (buildrows.build.epoch_cache), the running interpreter's LDSHARED read in-process.
About 1 s (a few git commands)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from buildrows.build.epoch import source_date_epoch
from buildrows.build.epoch_cache import head_commit
from buildrows.build.ldshared import _MARK, _PROBE, interpreter_link

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"}


def _git(repo: Path, *args: str, when: int | None = None) -> str:
    env = {**os.environ, **GIT_ENV}
    if when is not None:
        env.update(GIT_AUTHOR_DATE=f"{when} +0000", GIT_COMMITTER_DATE=f"{when} +0000")
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True).stdout.strip()


def _commit(repo: Path, name: str, when: int) -> None:
    (repo / "proj").mkdir(exist_ok=True)
    (repo / "proj" / name).write_text(name, encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", name, when=when)


def test_the_commit_time_is_kept_by_head_and_a_new_commit_is_asked_again(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _commit(repo, "a", 1_700_000_000)
    env = {"BUILDROWS_CACHE": str(tmp_path / "cache")}
    assert head_commit(repo / ".git") == _git(repo, "rev-parse", "HEAD")
    assert source_date_epoch(repo / "proj", env) == ("1700000000", "the time of the project's last git commit")
    assert len(list((tmp_path / "cache" / "epoch").iterdir())) == 1
    # With the answer kept, git is not run again: a PATH without git gives the same time.
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert source_date_epoch(repo / "proj", env)[0] == "1700000000"
    monkeypatch.undo()
    # A new commit is a new HEAD: asked again. Packed refs (git gc / pack-refs) are read too.
    _commit(repo, "b", 1_700_000_500)
    _git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert head_commit(repo / ".git") == _git(repo, "rev-parse", "HEAD")
    assert source_date_epoch(repo / "proj", env)[0] == "1700000500"
    # A worktree (a .git file naming its git directory, refs in the common one) reads its own HEAD.
    _git(repo, "branch", "side", "HEAD~1")
    _git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), "side")
    assert head_commit(Path(_git(tmp_path / "wt", "rev-parse", "--absolute-git-dir"))) == _git(repo, "rev-parse", "side")
    assert source_date_epoch(tmp_path / "wt" / "proj", env)[0] == "1700000000"


def test_a_head_it_cannot_read_falls_back_to_git(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _commit(repo, "a", 1_700_000_000)
    _git(repo, "branch", "other")
    # HEAD names a ref that is itself symbolic: git follows it, this reader does not.
    (repo / ".git" / "refs" / "heads" / "main").write_text("ref: refs/heads/other\n", encoding="utf-8")
    assert head_commit(repo / ".git") is None
    env = {"BUILDROWS_CACHE": str(tmp_path / "cache")}
    assert source_date_epoch(repo / "proj", env)[0] == "1700000000"
    assert not (tmp_path / "cache" / "epoch").exists()


def test_the_running_interpreter_answers_as_a_second_one_does() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith(_MARK))
    link = interpreter_link(sys.executable)
    assert line == _MARK + __import__("json").dumps([link.ldshared, link.libdir, link.cc])
    assert link.ldshared  # CPython on Linux always has one


HEAVY = ("dataclasses", "inspect", "subprocess", "tempfile", "hashlib", "shutil", "threading", "platform")


@pytest.mark.parametrize("command", [["env", "ROW", "--no-toolchain-check"], ["hook"]])
def test_env_and_hook_run_without_heavy_modules_once_their_answers_are_kept(tmp_path: Path, command: list[str]) -> None:
    """What scripts/bench_startup.py measures: the second call (the commit time and, for the hook,
    nvcc's answer kept) imports none of the modules that made start-up slow, and runs no process."""
    config = Path(__file__).parent / "data" / "policies" / "executorch" / "buildrows.toml"
    row = f"linux-x86_64-cu130-py{sys.version_info.major}{sys.version_info.minor}"
    argv = ["buildrows", "--config", str(config), *[row if a == "ROW" else a for a in command]]
    code = (f"import runpy, sys\nsys.argv = {argv!r}\n"
            "try:\n    runpy.run_module('buildrows', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            f"print('HEAVY', sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n")
    env = {**os.environ, "BUILDROWS_CACHE": str(tmp_path / "cache"), "CU_VERSION": "cu130",
           "BUILD_ENV_FILE": str(tmp_path / "build.env"), "GITHUB_ENV": str(tmp_path / "github.env"),
           "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    env.pop("SOURCE_DATE_EPOCH", None)
    runs = [subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                           check=False) for _ in range(2)]
    assert runs[0].returncode == runs[1].returncode == 0, runs[0].stderr + runs[1].stderr
    assert "subprocess" in runs[0].stderr.split("HEAVY")[-1], runs[0].stderr  # the first call asks git
    assert runs[1].stderr.strip().splitlines()[-1] == "HEAVY []", runs[1].stderr

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


# --- reproducible wheels ----------------------------------------------------------------------------


def _rezip(src: Path, dest: Path, date_time: tuple[int, int, int, int, int, int], *, change: str | None = None) -> Path:
    """SRC's members rewritten with other timestamps (and, with CHANGE, one byte of that member flipped)."""
    import zipfile

    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == change:
                data = data[:-1] + bytes([data[-1] ^ 1])
            out = zipfile.ZipInfo(info.filename, date_time=date_time)
            out.external_attr = info.external_attr
            zout.writestr(out, data)
    return dest


def test_stamping_the_same_wheel_twice_gives_the_same_bytes(tmp_path: Path) -> None:
    """The build record and RECORD took the clock's time: every stamp was other bytes."""
    import time

    from buildrows.build.record import BuildRecord
    from buildrows.build.stamp import stamp_wheel
    from tests.test_stamp import build_tiny

    wheel = build_tiny(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    rec = BuildRecord(row="linux-x86_64-cu130-py311", cuda="13.0", torch=None, torch_cuda=None, buildrows="0")
    first = stamp_wheel(shutil.copy2(wheel, a), local_tag="+cu130", requirements=["nvidia-cuda-runtime>=13,<14"],
                        record=rec, metadata=True).wheel
    time.sleep(2.1)  # zip timestamps have two-second steps
    second = stamp_wheel(shutil.copy2(wheel, b), local_tag="+cu130", requirements=["nvidia-cuda-runtime>=13,<14"],
                         record=rec, metadata=True).wheel
    assert first.read_bytes() == second.read_bytes()


def test_the_rebuild_compare_ignores_zip_timestamps_but_not_content(tmp_path: Path) -> None:
    from buildrows.build.stamp import same_wheel
    from tests.test_stamp import build_tiny

    wheel = build_tiny(tmp_path)
    later = _rezip(wheel, tmp_path / "later.whl", (2030, 1, 2, 3, 4, 6))
    assert later.read_bytes() != wheel.read_bytes()
    assert same_wheel(wheel, later)
    changed = _rezip(wheel, tmp_path / "changed.whl", (2030, 1, 2, 3, 4, 6), change="tiny/__init__.py")
    assert not same_wheel(wheel, changed)


def test_a_source_date_epoch_that_is_not_a_number_is_refused(tmp_path: Path) -> None:
    from buildrows.build.stamp import ZIP_EPOCH, source_date_epoch
    from buildrows.errors import BadInput

    assert source_date_epoch(tmp_path, {"SOURCE_DATE_EPOCH": "1700000000"}) == (
        "1700000000", "SOURCE_DATE_EPOCH from the environment")
    assert source_date_epoch(tmp_path, {}) == (str(ZIP_EPOCH), "1980-01-01 (no git history and no SOURCE_DATE_EPOCH)")
    with pytest.raises(BadInput, match=r"SOURCE_DATE_EPOCH='yesterday' is not a whole number of seconds"):
        source_date_epoch(tmp_path, {"SOURCE_DATE_EPOCH": "yesterday"})

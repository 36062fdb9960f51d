"""`buildrows cache`: what is stored, by kind and size, and pruning by age or kind (issue 31),
on a temporary BUILDROWS_CACHE and project."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

DAY = 86400


def _put(path: Path, size: int, days_old: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    when = time.time() - days_old * DAY
    os.utime(path, (when, when))
    return path


def _dir(path: Path, size: int, days_old: float) -> Path:
    _put(path / "f", size, days_old)
    when = time.time() - days_old * DAY
    os.utime(path, (when, when))
    return path


@pytest.fixture
def stocked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    cache = tmp_path / "cache"
    _dir(cache / "toolkits" / "linux-x86_64-cuda-12.6", 3_000_000, 40)
    _dir(cache / "toolkits" / "linux-x86_64-cuda-13.0", 2_000_000, 1)
    _dir(cache / "envs" / "py3.11-abc", 500_000, 45)
    _put(cache / "downloads" / "0123-cuda_nvcc.tar.xz", 1_100_000, 35)
    _put(cache / "downloads" / "4567-cuda_cudart.tar.xz", 100_000, 2)
    _put(cache / "ccache" / "a" / "old.entry", 7_000, 60)
    _put(cache / "ccache" / "b" / "new.entry", 9_000, 0)
    _put(cache / "ccache" / "buildrows-ccache.conf", 10, 90)
    project = tmp_path / "project"
    _dir(project / "build" / "skbuild-linux-x86_64-cu130-py311", 250_000, 50)
    _dir(project / "build" / "logs" / "linux-x86_64-cu130-py311", 2_000, 50)
    _dir(project / "dist" / "earlier-20260101-120000", 9_000, 50)
    _put(project / "dist" / "mine.whl", 9_000, 50)
    monkeypatch.setenv("BUILDROWS_CACHE", str(cache))
    return cache, project


def test_cache_lists_every_kind_with_sizes_and_ages(cli: Callable[..., object], stocked: tuple[Path, Path]) -> None:
    cache, project = stocked
    r = cli("cache", "--project", str(project))
    assert r.code == 0, r.err  # type: ignore[attr-defined]
    out: str = r.out  # type: ignore[attr-defined]
    assert "toolkits: 5.0 MB in 2 entries" in out
    assert "    3.0 MB   40d old  toolkits/linux-x86_64-cuda-12.6" in out
    assert "environments: 500.0 KB in 1 entry" in out and "downloads: 1.2 MB in 2 entries" in out
    assert "compiler-cache: 16.0 KB in 1 entry" in out
    assert "build-trees: 250.0 KB in 1 entry" in out and str(project / "build" / "skbuild-linux-x86_64-cu130-py311") in out
    assert "logs: 2.0 KB" in out and "earlier-wheels: 9.0 KB in 1 entry" in out
    assert f"cache {cache}: 6.7 MB in all" in out
    assert all(len(line) <= 80 for line in out.splitlines() if "/" not in line)
    doc = json.loads(cli("cache", "--json", "--project", str(project)).out)  # type: ignore[attr-defined]
    assert {e["kind"] for e in doc["entries"]} == {"toolkits", "environments", "downloads", "compiler-cache",
                                                   "build-trees", "logs", "earlier-wheels"}


def test_prune_by_kind_and_age(cli: Callable[..., object], stocked: tuple[Path, Path]) -> None:
    cache, project = stocked
    dry = cli("cache", "prune", "--older-than", "30d", "--kind", "downloads", "--dry-run")
    assert dry.code == 0 and "would remove downloads: " in dry.out  # type: ignore[attr-defined]
    assert (cache / "downloads" / "0123-cuda_nvcc.tar.xz").exists()
    r = cli("cache", "prune", "--older-than", "30d", "--kind", "downloads")
    assert r.code == 0, r.err  # type: ignore[attr-defined]
    assert "removed 1 entry, 1.1 MB" in r.out  # type: ignore[attr-defined]
    assert not (cache / "downloads" / "0123-cuda_nvcc.tar.xz").exists()
    assert (cache / "downloads" / "4567-cuda_cudart.tar.xz").exists()  # 2 days old: kept
    # every cache kind by age: the old toolkit and environment, the compiler cache's old files;
    # never the project's trees, logs or wheels unless named
    r = cli("cache", "prune", "--older-than", "30d", "--project", str(project))
    assert r.code == 0, r.err  # type: ignore[attr-defined]
    assert not (cache / "toolkits" / "linux-x86_64-cuda-12.6").exists() and (cache / "toolkits" / "linux-x86_64-cuda-13.0").exists()
    assert not (cache / "envs" / "py3.11-abc").exists()
    assert not (cache / "ccache" / "a" / "old.entry").exists() and (cache / "ccache" / "b" / "new.entry").exists()
    assert (cache / "ccache" / "buildrows-ccache.conf").exists()
    assert (project / "build" / "skbuild-linux-x86_64-cu130-py311").exists() and (project / "dist" / "earlier-20260101-120000").exists()
    r = cli("cache", "prune", "--kind", "earlier-wheels", "--project", str(project))
    assert r.code == 0 and not (project / "dist" / "earlier-20260101-120000").exists()  # type: ignore[attr-defined]
    assert (project / "dist" / "mine.whl").exists()  # a wheel in the wheel directory is never touched


def test_prune_needs_a_kind_or_an_age_and_a_readable_age(cli: Callable[..., object], stocked: tuple[Path, Path]) -> None:
    r = cli("cache", "prune")
    assert r.code == 2 and "needs --kind KIND or --older-than AGE" in r.err  # type: ignore[attr-defined]
    r = cli("cache", "prune", "--older-than", "a month")
    assert r.code == 2 and "--older-than 'a month' is not an age" in r.err  # type: ignore[attr-defined]
    assert "fix: a number and a unit: 90m, 12h, 30d or 2w" in r.err  # type: ignore[attr-defined]

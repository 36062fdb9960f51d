"""nvcc's answer kept on disk (buildrows.plan.toolchain.read_train): `env` and `hook` run on every
CI job and by scripts, so a second call reads the answer instead of running nvcc twice again; a
changed nvcc (or the toolkit behind a wrapper) is asked again; a corrupt answer is ignored."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from buildrows.plan import toolchain
from buildrows.plan.toolchain import CudaCompiler, read_train
from buildrows.policy.trains import Train

REAL_NVCC = shutil.which("nvcc")


def fake_toolkit(root: Path, release: str, full: str, log: Path) -> Path:
    """A toolkit root whose bin/nvcc logs each run, reports `release` and, asked for a dry run,
    names its root as nvcc does (`#$ TOP=...`)."""
    (root / "bin").mkdir(parents=True, exist_ok=True)
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\n"
                    f'echo "$*" >> "{log}"\n'
                    'case "$*" in *--dryrun*) echo "#\\$ TOP=' + str(root / "bin") + '/.." >&2; exit 0;; esac\n'
                    f'echo "Cuda compilation tools, release {release}, V{full}"\n', encoding="utf-8")
    nvcc.chmod(0o755)
    return nvcc


def wrapper(path: Path, target: Path, log: Path) -> Path:
    """/usr/local/bin/nvcc as distributions ship it: a script that execs a toolkit's nvcc."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\necho wrapper >> "{log}"\nexec "{target}" "$@"\n', encoding="utf-8")
    path.chmod(0o755)
    return path


def runs(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def answers(cache: Path) -> list[Path]:
    return sorted((cache / "nvcc").glob("*.json"))


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setattr(toolchain, "_TRAINS", {})  # each call below is a fresh process's
    return {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "BUILDROWS_CACHE": str(tmp_path / "cache")}


def fresh_process() -> None:
    toolchain._TRAINS.clear()


@pytest.mark.skipif(REAL_NVCC is None, reason="needs an nvcc on PATH")
def test_the_real_nvccs_answer_is_read_back_without_running_it(tmp_path: Path, env: dict[str, str]) -> None:
    log = tmp_path / "runs.log"
    assert REAL_NVCC is not None
    nvcc = wrapper(tmp_path / "bin" / "nvcc", Path(REAL_NVCC), log)
    first = read_train(CudaCompiler(str(nvcc), (str(nvcc),), "PATH"), env)
    asked = runs(log)
    assert first.train is not None and asked == 2  # --version and the dry run for its root
    assert len(answers(tmp_path / "cache")) == 1
    fresh_process()
    second = read_train(CudaCompiler(str(nvcc), (str(nvcc),), "PATH"), env)
    assert runs(log) == asked  # read from the cache, nvcc not run
    assert (second.train, second.version, second.root) == (first.train, first.version, first.root)


def test_a_changed_nvcc_is_asked_again(tmp_path: Path, env: dict[str, str]) -> None:
    log = tmp_path / "runs.log"
    nvcc = fake_toolkit(tmp_path / "cuda", "12.8", "12.8.93", log)
    comp = CudaCompiler(str(nvcc), (str(nvcc),), "PATH")
    assert read_train(comp, env).train == Train(12, 8)
    fresh_process()
    assert read_train(comp, env).train == Train(12, 8) and runs(log) == 2  # the second call ran nothing
    st = nvcc.stat()
    fake_toolkit(tmp_path / "cuda", "13.0", "13.0.88", log)  # same size, another answer
    assert nvcc.stat().st_size == st.st_size
    os.utime(nvcc, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    fresh_process()
    again = read_train(comp, env)
    assert (again.train, again.version) == (Train(13, 0), "13.0.88") and runs(log) == 4


def test_the_toolkit_behind_a_wrapper_changing_is_asked_again(tmp_path: Path, env: dict[str, str]) -> None:
    log = tmp_path / "runs.log"
    real = fake_toolkit(tmp_path / "cuda", "12.8", "12.8.93", log)
    nvcc = wrapper(tmp_path / "bin" / "nvcc", real, log)
    comp = CudaCompiler(str(nvcc), (str(nvcc),), "PATH")
    first = read_train(comp, env)
    assert first.train == Train(12, 8) and first.root == str((tmp_path / "cuda").resolve())
    asked = runs(log)
    fake_toolkit(tmp_path / "cuda", "13.0", "13.0.88", log)  # the wrapper is untouched
    st = real.stat()
    os.utime(real, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    fresh_process()
    assert read_train(comp, env).train == Train(13, 0) and runs(log) > asked


@pytest.mark.parametrize("text", ["{not json", "[]", '{"format": 1}', "\xff\xfe"])
def test_a_corrupt_answer_is_ignored_and_rewritten(tmp_path: Path, env: dict[str, str], text: str) -> None:
    log = tmp_path / "runs.log"
    nvcc = fake_toolkit(tmp_path / "cuda", "13.0", "13.0.88", log)
    comp = CudaCompiler(str(nvcc), (str(nvcc),), "PATH")
    read_train(comp, env)
    [answer] = answers(tmp_path / "cache")
    answer.write_text(text, encoding="latin-1")
    fresh_process()
    again = read_train(comp, env)
    assert (again.train, again.version) == (Train(13, 0), "13.0.88") and runs(log) == 4  # asked again
    assert json.loads(answer.read_text(encoding="utf-8"))["version"] == "13.0.88"  # and kept anew


def test_an_answer_of_another_nvcc_or_format_is_not_believed(tmp_path: Path, env: dict[str, str]) -> None:
    log = tmp_path / "runs.log"
    nvcc = fake_toolkit(tmp_path / "cuda", "13.0", "13.0.88", log)
    comp = CudaCompiler(str(nvcc), (str(nvcc),), "PATH")
    read_train(comp, env)
    [answer] = answers(tmp_path / "cache")
    data = json.loads(answer.read_text(encoding="utf-8"))
    for forged in ({**data, "key": data["key"] + " (another nvcc)", "version": "14.0.1", "train": [14, 0]},
                   {**data, "format": toolchain.ANSWER_FORMAT + 1, "version": "14.0.1", "train": [14, 0]}):
        answer.write_text(json.dumps(forged), encoding="utf-8")
        fresh_process()
        assert read_train(comp, env).version == "13.0.88"


def test_an_unwritable_cache_only_costs_the_nvcc_runs(tmp_path: Path, env: dict[str, str]) -> None:
    log = tmp_path / "runs.log"
    nvcc = fake_toolkit(tmp_path / "cuda", "13.0", "13.0.88", log)
    (tmp_path / "file").write_text("not a directory")
    env["BUILDROWS_CACHE"] = str(tmp_path / "file")
    comp = CudaCompiler(str(nvcc), (str(nvcc),), "PATH")
    assert read_train(comp, env).train == Train(13, 0)
    fresh_process()
    assert read_train(comp, env).train == Train(13, 0) and runs(log) == 4


def test_the_cache_command_lists_and_prunes_the_answers_as_their_own_kind(tmp_path: Path, env: dict[str, str]) -> None:
    from buildrows.provision import store

    nvcc = fake_toolkit(tmp_path / "cuda", "13.0", "13.0.88", tmp_path / "runs.log")
    read_train(CudaCompiler(str(nvcc), (str(nvcc),), "PATH"), env)
    entries = store.cache_entries(tmp_path / "cache")
    assert [e.kind for e in entries] == ["nvcc-answers"] and entries[0].path.parent.name == "nvcc"
    store.prune(entries, ["nvcc-answers"], None, 0.0, dry_run=False)
    assert answers(tmp_path / "cache") == []

"""A CUDA train newer than buildrows' data (issue 36): accepted with a note saying what was assumed
and how to know instead, never refused; at build time the train's own nvcc (`--list-gpu-code`,
answers kept in the cache) has the last word. A fake nvcc reports `release 13.7`; the build test
wraps the real nvcc with it and builds tests/data/cuda-mini as a CUDA 13.7 row (about 20 s)."""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from cuda_tools import find_nvcc

from buildrows.policy.archs import (
    Train,
    beyond_data,
    beyond_data_note,
    newest_train,
    parse_arch_list,
)
from tests.conftest import REPO, Result

LIST = "sm_75\\nsm_80\\nsm_86\\nsm_90\\nsm_100\\nsm_120\\nsm_121\\nsm_130\\n"
POLICY = """[project]
name = "cuda-mini"
driver = "cmake-presets"
cuda-option = "MINI_BUILD_CUDA"
[python]
versions = ["3.11"]
[cuda]
trains = ["{train}"]
[platforms.linux-x86_64]
trains = ["{train}"]
[[platforms.linux-x86_64.cuda]]
trains = ["{train}"]
archs = "{archs}"
"""
NOTE = ("note: CUDA 13.7 is newer than buildrows' CUDA data (its newest train is CUDA 13.5, read 2026-12-03 from "
        "PyPI nvidia-cuda-nvcc 13.5.37): it is taken to compile what CUDA 13.5 does (7.5 8.0 8.6 8.7 8.8 8.9 9.0 "
        "10.0 10.3 10.7 11.0 12.0 12.1, and architectures newer than 12.1) and to write any PTX ISA from 9.5 on; a "
        "build asks the train's own nvcc (`nvcc --list-gpu-code`) and refuses an architecture it does not list; to "
        "have it in the data, upgrade buildrows, or run `python scripts/refresh_cuda_data.py` in a checkout of it")


def fake_nvcc(bindir: Path, log: Path, real: str | None = None) -> Path:
    """`release 13.7`, a --list-gpu-code of its own; every other call goes to `real` (else succeeds)."""
    bindir.mkdir(parents=True, exist_ok=True)
    nvcc = bindir / "nvcc"
    rest = f'exec {real} "$@"' if real else "exit 0"
    nvcc.write_text("#!/bin/sh\n"
                    f'echo "$@" >> {log}\n'
                    'case "$1" in\n'
                    "  --version) printf 'Cuda compilation tools, release 13.7, V13.7.12\\n'; exit 0;;\n"
                    f"  --list-gpu-code) printf '{LIST}'; exit 0;;\n"
                    "esac\n"
                    'case "$*" in *--dryrun*-arch=sm_130a*) echo "nvcc fatal : Unsupported gpu architecture"; exit 1;; esac\n'
                    f"{rest}\n", encoding="utf-8")
    nvcc.chmod(0o755)
    return nvcc


def _project(tmp_path: Path, train: str, archs: str) -> Path:
    project = tmp_path / "cuda-mini"
    if not project.exists():
        shutil.copytree(REPO / "tests" / "data" / "cuda-mini", project)
        with (project / "CMakeLists.txt").open("a", encoding="utf-8") as f:
            f.write("install(TARGETS mini LIBRARY DESTINATION lib)\n")
    policy = project / "buildrows.toml"
    policy.write_text(POLICY.format(train=train, archs=archs), encoding="utf-8")
    return policy


@pytest.fixture
def nvcc_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("CUDA_HOME", "CUDA_PATH", "CU_VERSION", "DESIRED_CUDA", "CMAKE_ARGS", "BUILDROWS_HOST_OS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    log = tmp_path / "nvcc-calls"
    monkeypatch.setenv("CUDACXX", str(fake_nvcc(tmp_path / "bin", log)))
    return log


def test_which_trains_are_beyond_the_data() -> None:
    assert newest_train() == Train(13, 5)
    assert [beyond_data(Train.parse(t)) for t in ("13.5", "13.6", "14.0", "14.9", "15.0", "12.7", "99.9")] == [
        False, True, True, True, False, False, False]
    assert beyond_data_note(Train(13, 5)) is None
    # the assumed set takes newer architectures too (the train's nvcc decides), never older ones it lacks
    assert parse_arch_list("8.0 13.0 13.0f", train=Train(14, 0)).dotted == ["8.0", "13.0", "13.0f"]
    with pytest.raises(ValueError, match="'7.0': CUDA 13.7 cannot compile this architecture; CUDA 13.7 compiles "
                                         r"nothing below 7.5 \(assumed: CUDA 13.7 is newer than buildrows' data, "
                                         "taken to compile what 13.5 does\\)"):
        parse_arch_list("7.0 8.0", train=Train(13, 7))


def test_rows_and_show_accept_the_train_with_its_note(tmp_path: Path, cli: Callable[..., Result]) -> None:
    policy = _project(tmp_path, "13.7", "7.5 13.0")
    r = cli("--config", str(policy), "rows")
    assert r.code == 0, r.err
    assert r.out.split() == ["linux-x86_64-cu137-py311", "7.5;13.0+PTX"]
    assert NOTE in r.err
    r = cli("--config", str(policy), "show", "linux-x86_64-cu137-py311")
    assert r.code == 0 and NOTE in r.err
    assert "75-real;130-real;130-virtual" in r.out
    # a train past the next major is still refused: cu999 reads as CUDA 99.9
    r = cli("--config", str(_project(tmp_path, "15.0", "8.0")), "rows")
    assert r.code == 2 and "buildrows does not know which architectures CUDA 15.0 compiles" in r.err


def test_check_accepts_the_train_with_its_note(tmp_path: Path, cli: Callable[..., Result]) -> None:
    """`check WHEEL --cuda 13.7` prints the note every other command prints; a known train prints none."""
    wheel = tmp_path / "kern-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("kern/k.ptx", ".version 9.0\n.target sm_75\n.address_size 64\n")
        z.writestr("kern-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: kern\nVersion: 1.0\n")
    r = cli("check", str(wheel), "--cuda", "13.7", "--archs", "7.5-virtual", "--row", "linux-x86_64-cu137-py311",
            "--config", str(_project(tmp_path, "13.7", "7.5-virtual")))
    # the row is judged (its runtime, which this wheel lacks, fails as for any train), and the note is said
    assert "[PASS] device-code-covers-row" in r.out and "no newer than CUDA 13.7 writes" in r.out, r.out + r.err
    assert NOTE in r.err
    r = cli("check", str(wheel), "--cuda", "13.0", "--archs", "7.5-virtual")
    assert "[PASS] device-code-covers-row" in r.out and "newer than buildrows' CUDA data" not in r.out + r.err


def test_its_own_nvcc_has_the_last_word(tmp_path: Path, cli: Callable[..., Result], nvcc_env: Path) -> None:
    """8.9 is in the assumed set (13.5's), but this 13.7 nvcc does not list sm_89: doctor refuses the row."""
    policy = _project(tmp_path, "13.7", "7.5 8.9")
    r = cli("--config", str(policy), "doctor", "linux-x86_64-cu137-py311", "--project", str(policy.parent))
    assert r.code == 3, r.err + r.out
    assert NOTE in r.err
    assert ("row linux-x86_64-cu137-py311: '8.9' is not an architecture CUDA 13.7.12's nvcc compiles "
            f"({os.environ['CUDACXX']}: `nvcc --list-gpu-code` lists 7.5 8.0 8.6 9.0 10.0 12.0 12.1 13.0); "
            "buildrows' data does not know CUDA 13.7 and took it to compile what its newest train does") in r.out + r.err
    assert "fix: drop 8.9 from the row's architecture list" in r.out + r.err
    # the answer is kept beside nvcc's version in the cache: asked once, not on the next call
    (kept,) = (tmp_path / "cache" / "nvcc").glob("*-gpu-code.json")
    assert json.loads(kept.read_text())["list-gpu-code"][-1] == "13.0"
    cli("--config", str(policy), "doctor", "linux-x86_64-cu137-py311", "--project", str(policy.parent))
    assert nvcc_env.read_text().splitlines().count("--list-gpu-code") == 1
    # an a/f variant is asked of nvcc (`-arch=sm_130a --dryrun`): this one refuses 13.0a, accepts 13.0f
    policy = _project(tmp_path, "13.7", "7.5 13.0f 13.0a")
    r = cli("--config", str(policy), "doctor", "linux-x86_64-cu137-py311", "--project", str(policy.parent))
    assert r.code == 3
    assert ("'13.0a' is not an architecture CUDA 13.7.12's nvcc compiles (" in r.out + r.err
            and "lists 7.5 8.0 8.6 9.0 10.0 12.0 12.1 13.0, and it refuses -arch=sm_130a)" in r.out + r.err)
    policy = _project(tmp_path, "13.7", "7.5 13.0f")
    r = cli("--config", str(policy), "doctor", "linux-x86_64-cu137-py311", "--project", str(policy.parent))
    assert "[REFUSED] nvcc" not in r.out + r.err, r.out + r.err
    assert "--dryrun -arch=sm_130f" in nvcc_env.read_text()


@pytest.mark.integration
def test_a_row_of_a_train_newer_than_the_data_builds(tmp_path: Path, cli: Callable[..., Result],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    real = find_nvcc()
    if real is None or shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("needs nvcc, cmake and ninja")
    for var in ("CUDA_HOME", "CUDA_PATH", "CU_VERSION", "DESIRED_CUDA", "CMAKE_ARGS", "BUILDROWS_HOST_OS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CUDACXX", str(fake_nvcc(tmp_path / "bin", tmp_path / "calls", real=os.path.realpath(real))))
    policy = _project(tmp_path, "13.7", "7.5")
    r = cli("--config", str(policy), "build", "linux-x86_64-cu137-py311", "--project", str(policy.parent))
    out = r.out + r.err
    assert NOTE in r.err
    assert "Linking CUDA shared library libmini.so" in out, out[-3000:]
    # the device code is judged against the 13.7 row: the wrapped nvcc 13.0 wrote it, older than the row
    assert "[PASS] device-code-covers-row" in out and "[PASS] device-code-train" in out
    assert "no newer than CUDA 13.7 writes" in out


def test_a_provisioned_toolkit_of_the_train_is_asked_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`buildrows toolkit install 13.7`'s nvcc (plan.row.toolkit_compiler) has the same last word."""
    from buildrows.errors import Refused
    from buildrows.plan.row import toolkit_compiler
    from buildrows.policy.load import load_policy

    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "cuda-13.7"
    fake_nvcc(root / "bin", tmp_path / "calls")
    row = load_policy(_project(tmp_path, "13.7", "7.5 8.9")).row("linux-x86_64-cu137-py311")
    assert row is not None
    with pytest.raises(Refused, match=r"'8.9' is not an architecture CUDA 13.7.12's nvcc compiles \(.*cuda-13.7/bin/"
                                      r"nvcc: `nvcc --list-gpu-code` lists 7.5 8.0 8.6 9.0 10.0 12.0 12.1 13.0\)"):
        toolkit_compiler(row, str(root), dict(os.environ))
    row = load_policy(_project(tmp_path, "13.7", "7.5 13.0")).row("linux-x86_64-cu137-py311")
    assert row is not None
    assert toolkit_compiler(row, str(root), dict(os.environ)).version == "13.7.12"

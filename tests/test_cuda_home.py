"""The row's environment is complete for a project's own switches (SPEC §8): CUDA_HOME/CUDA_PATH are
the real root of the row's nvcc, asked of nvcc (never a wrapper's location), and the policy's
environment switches are on for CUDA rows and off for CPU rows, whatever the builder's image sets."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.toolchain import find_cuda_compiler
from tests.conftest import Result
from tests.cuda_tools import find_nvcc
from tests.test_env import read_back_bash, tool_env

NVCC = find_nvcc()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="needs nvcc")


def switch_policy(tmp_path: Path, train: str) -> Path:
    p = tmp_path / "buildrows.toml"
    p.write_text(f"""
[project]
driver = "setup.py"
env-switches = ["FORCE_CUDA", "USE_CUDA"]
[python]
versions = ["3.11"]
[cuda]
trains = ["{train}"]
[platforms.linux-x86_64]
trains = ["{train}"]
cpu = true
[[platforms.linux-x86_64.cuda]]
trains = ["{train}"]
archs = "9.0"
""")
    return p


def wrapper(directory: Path, target: str) -> Path:
    """An nvcc reached through a wrapper script, as /usr/local/bin/nvcc is on many images."""
    directory.mkdir(parents=True, exist_ok=True)
    w = directory / "nvcc"
    w.write_text(f'#!/bin/sh\nexec "{target}" "$@"\n')
    w.chmod(0o755)
    return w


def row_env(cli: Callable[..., Result], policy: Path, row: str, out: Path, names: list[str]) -> dict[str, str]:
    r = cli("--config", str(policy), "env", row, "--format", "shell", "--output", str(out))
    assert r.code == 0, r.err
    return {k: v.decode() for k, v in read_back_bash(out, names).items()}


@needs_nvcc
def test_cuda_home_is_the_real_root_of_a_wrapped_nvcc(cli: Callable[..., Result], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert NVCC is not None
    real = find_cuda_compiler({"PATH": f"{Path(NVCC).parent}{os.pathsep}/usr/bin{os.pathsep}/bin"})
    assert real is not None and real.train is not None and real.root is not None
    real_nvcc = str(Path(real.root) / "bin" / "nvcc")
    bindir = tmp_path / "wrapped" / "bin"
    wrapper(bindir, real_nvcc)
    tool_env(monkeypatch, bindir)
    monkeypatch.setenv("FORCE_CUDA", "0")  # the image's value; a CUDA row turns it on
    policy = switch_policy(tmp_path, real.train.dotted)
    got = row_env(cli, policy, f"linux-x86_64-{real.train.cu}-py311", tmp_path / "cuda.env",
                  ["CUDA_HOME", "CUDA_PATH", "CUDACXX", "FORCE_CUDA", "USE_CUDA"])
    # torch.utils.cpp_extension would have guessed the wrapper's grandparent, which holds no toolkit.
    assert got["CUDA_HOME"] == got["CUDA_PATH"] == real.root != str(tmp_path / "wrapped")
    assert os.path.isfile(os.path.join(got["CUDA_HOME"], "include", "cuda_runtime.h"))
    assert got["CUDACXX"] == str(bindir / "nvcc")
    assert (got["FORCE_CUDA"], got["USE_CUDA"]) == ("1", "1")


@needs_nvcc
def test_cpu_row_turns_every_switch_off_even_when_the_image_sets_it(cli: Callable[..., Result], tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    assert NVCC is not None
    tool_env(monkeypatch, Path(NVCC).parent)
    monkeypatch.setenv("FORCE_CUDA", "1")
    monkeypatch.setenv("USE_CUDA", "1")
    real = find_cuda_compiler({"PATH": str(Path(NVCC).parent)})
    assert real is not None and real.train is not None
    got = row_env(cli, switch_policy(tmp_path, real.train.dotted), "linux-x86_64-cpu-py311", tmp_path / "cpu.env",
                  ["FORCE_CUDA", "USE_CUDA", "TORCH_CUDA_ARCH_LIST"])
    assert got == {"FORCE_CUDA": "0", "USE_CUDA": "0", "TORCH_CUDA_ARCH_LIST": ""}


@needs_nvcc
def test_the_root_is_asked_of_the_binary_when_the_dry_run_cannot_run(tmp_path: Path) -> None:
    """No host compiler on PATH: nvcc's dry run fails, the real binary behind a symlink still tells
    its root, and a wrapper script tells nothing (its location is never taken for a root)."""
    assert NVCC is not None
    root = find_cuda_compiler({"PATH": f"{Path(NVCC).parent}{os.pathsep}/usr/bin{os.pathsep}/bin"})
    assert root is not None and root.root is not None
    (tmp_path / "link").mkdir()
    (tmp_path / "link" / "nvcc").symlink_to(Path(root.root) / "bin" / "nvcc")
    bare = {"PATH": str(tmp_path / "link")}
    found = find_cuda_compiler(bare)
    assert found is not None and found.root == root.root
    wrapper(tmp_path / "wrap" / "bin", str(Path(root.root) / "bin" / "nvcc"))
    found = find_cuda_compiler({"PATH": str(tmp_path / "wrap" / "bin")})
    assert found is not None and found.train == root.train and found.root is None


def test_an_nvcc_that_does_not_say_its_root_sets_no_cuda_home(cli: Callable[..., Result], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is guessed: an nvcc whose dry run names no root leaves CUDA_HOME to the builder."""
    from tests.test_env import fake_nvcc

    tool_env(monkeypatch, tmp_path / "bin")
    fake_nvcc(tmp_path / "bin")
    r = cli("--config", str(switch_policy(tmp_path, "13.0")), "env", "linux-x86_64-cu130-py311", "--format", "dotenv")
    assert r.code == 0, r.err
    assert "CUDA_HOME" not in r.out and "FORCE_CUDA='1'" in r.out

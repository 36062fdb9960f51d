"""Issue 35 point 3 with real torch wheels: `build --provision` of a PyTorch extension's CUDA row,
then its CPU row, and the CPU row's environment holds PyTorch's CPU torch (not the CUDA row's).

tests/test_torch_envs.py tells the same story with a stand-in torch on a file: index (default
suite, and BUILDROWS_TEST_TORCH_ENVS=1 for both orders). This test uses the real thing: torch
2.14.1+cu130 and 2.14.1+cpu from PyTorch's per-train indexes (buildrows' default
BUILDROWS_TORCH_INDEX), installed by `build --provision` into fresh row environments, and the
extension (tests/data/torch-extension: a CPU kernel, and a CUDA kernel on the CUDA row) compiled
against each. Downloads are kept in pip's cache under $BUILDROWS_TEST_CACHE (default
~/.cache/buildrows-test-container)/pip, so a second run downloads nothing.

Opt-in: BUILDROWS_TEST_TORCH_REAL=1 (about 3.5 GB downloaded the first time; two row environments
and two compiles, 10 to 15 minutes). It needs PyTorch's index: where it does not answer, the test
fails saying so (PyPI's Linux torch is a CUDA build, so no CPU torch can come from PyPI).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from buildrows.provision.torch import DEFAULT_INDEX, index_problem
from tests import torch_extension

BUILDROWS = str(Path(sys.executable).parent / "buildrows")
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
CUDA, CPU = f"linux-x86_64-cu130-py{PY.replace('.', '')}", f"linux-x86_64-cpu-py{PY.replace('.', '')}"


def _requires(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return [ln.split(": ", 1)[1] for ln in z.read(meta).decode().splitlines() if ln.startswith("Requires-Dist: ")]


@pytest.mark.integration
@pytest.mark.skipif(os.environ.get("BUILDROWS_TEST_TORCH_REAL") != "1",
                    reason="set BUILDROWS_TEST_TORCH_REAL=1: real torch 2.14.1+cu130 and +cpu from PyTorch's indexes "
                           "(3.5 GB the first time, kept in pip's cache), two compiles, 10 to 15 minutes")
def test_the_cpu_row_after_the_cuda_row_gets_the_cpu_torch(tmp_path: Path) -> None:
    for accel in ("cu130", "cpu"):
        problem = index_problem(DEFAULT_INDEX.replace("{accel}", accel))
        if problem is not None:
            pytest.fail(f"BUILDROWS_TEST_TORCH_REAL=1, but PyTorch's {accel} index cannot be reached from here: "
                        f"{problem}. Run it on a machine that reaches it (PyPI has no CPU torch for Linux)")
    project = tmp_path / "torch-extension"
    shutil.copytree(torch_extension.PROJECT, project, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info"))
    pol = project / "buildrows.toml"
    pol.write_text(pol.read_text(encoding="utf-8").replace('versions = ["3.11"]', f'versions = ["{PY}"]')
                   .replace(torch_extension.ARCHS, 'archs = "8.0"\n'), encoding="utf-8")
    kept = Path(os.environ.get("BUILDROWS_TEST_CACHE") or Path.home() / ".cache" / "buildrows-test-container")
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "BUILDROWS_TORCH_INDEX")}
    env.update(BUILDROWS_CACHE=str(tmp_path / "cache"), PIP_CACHE_DIR=str(kept / "pip"))
    dist = tmp_path / "dist"
    got = {}
    for row in (CUDA, CPU):
        r = subprocess.run([BUILDROWS, "--config", str(pol), "build", row, "--provision", "--wheel-dir", str(dist)],
                           env=env, capture_output=True, text=True, check=False, cwd=project)
        got[row] = r
        assert r.returncode == 0, r.stdout + r.stderr
        assert "reused" not in r.stderr, r.stderr
    assert "torch verified: the environment imports torch 2.14.1+cu130 (CUDA 13.0)" in got[CUDA].stderr
    assert "torch verified: the environment imports torch 2.14.1+cpu (a CPU build)" in got[CPU].stderr, got[CPU].stderr
    (cpu_wheel,) = [w for w in dist.glob("*.whl") if "+cpu" in w.name or "cu130" not in w.name]
    assert any(req.replace(" ", "").startswith("torch==2.14.1") for req in _requires(cpu_wheel)), _requires(cpu_wheel)

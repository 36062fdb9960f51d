"""Issue 40 (round 5): a setup.py that passes nvcc `--threads N` for more than N architectures.

causal-conv1d 1.7.0 appends `["--threads", "4"]` to nine hard-coded -gencode pairs; on the H200
(16 cores) its backward kernel was still compiling, four architectures at a time, when the
10-minute device call ended it (scripts/gpu_round5.sh). init's policy and doctor said nothing of it.
Doctor now notes it, with the variable that lifts it (nvcc keeps the last `--threads`); the row
stays ready. About 5 s: one real init and doctor on a small project of that shape.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.build.doctor_sources import source_findings
from buildrows.policy.load import load_policy
from buildrows.policy.switches import read_setup_py
from tests.conftest import Result

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
ROW = f"linux-x86_64-cu130-py{PY.replace('.', '')}"

THREADED = '''
import os
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension
def append_nvcc_threads(args):
    return args + ["--threads", "2"]
cc_flag = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90",
           "-gencode", "arch=compute_100,code=sm_100"]
ext = [CUDAExtension("thr_cuda", ["k.cu"], extra_compile_args={"nvcc": append_nvcc_threads(["-O3"] + cc_flag)})]
setup(name="thr", ext_modules=ext, cmdclass={"build_ext": BuildExtension})
'''


@pytest.mark.parametrize(("flags", "threads"), [
    ('["--threads", "4"]', 4),
    ('["-O3", "--threads=2"]', 2),
    ('["--threads 8"]', 8),
    ('["--threads", str(n)]', None),  # not a constant: not read
    ('["-O3"]', None),
])
def test_setup_py_threads_are_read(tmp_path: Path, flags: str, threads: int | None) -> None:
    (tmp_path / "setup.py").write_text(f"n = 4\nargs = {flags}\n")
    found = read_setup_py(tmp_path)
    assert found.nvcc_threads == threads
    assert found.nvcc_threads_where == ("setup.py:2" if threads is not None else None)


def _policy(tmp_path: Path, extra: str = "", archs: str = "8.0 9.0 10.0") -> Path:
    path = tmp_path / "buildrows.toml"
    path.write_text('[project]\nname = "p"\ndriver = "setup.py"\n' + extra
                    + f'[python]\nversions = ["{PY}"]\n[cuda]\ntrains = ["13.0"]\n[cuda.runtime.13]\nmode = "torch"\n'
                    '[platforms.linux-x86_64]\ntrains = ["13.0"]\ncpu = true\n'
                    f'[[platforms.linux-x86_64.cuda]]\ntrains = ["13.0"]\narchs = "{archs}"\nptx = "none"\n')
    return path


def _threads(tmp_path: Path, setup_py: str, extra: str = "", env: dict[str, str] | None = None,
             archs: str = "8.0 9.0 10.0") -> list[tuple[str, str, str, str]]:
    (tmp_path / "setup.py").write_text(setup_py)
    pol = load_policy(_policy(tmp_path, extra, archs))
    out = []
    for name in (ROW, f"linux-x86_64-cpu-py{PY.replace('.', '')}"):
        row = pol.row(name)
        assert row is not None
        out += [(name, f.status, f.seen, f.fix) for f in source_findings(pol, row, tmp_path, env or {})
                if f.check == "nvcc-threads"]
    return out


def test_doctor_notes_threads_below_the_architectures(tmp_path: Path) -> None:
    [(row, status, seen, fix)] = _threads(tmp_path, THREADED)  # the CPU row: nothing
    assert (row, status) == (ROW, "note")
    assert seen == "setup.py passes nvcc --threads 2 (setup.py:6) for 3 architectures: nvcc compiles each source for 2 of them at a time"
    assert fix.startswith('NVCC_APPEND_FLAGS = "--threads 0" in [project.cuda-env] (nvcc keeps the last --threads')
    # the variable given, in the policy or the environment: no note
    assert _threads(tmp_path, THREADED, '[project.cuda-env]\nNVCC_APPEND_FLAGS = "--threads 0"\n') == []
    assert _threads(tmp_path, THREADED, env={"NVCC_APPEND_FLAGS": "--threads 3"}) == []
    # as many threads as architectures, or 0 (one per CPU): no note
    assert _threads(tmp_path, THREADED.replace('"--threads", "2"', '"--threads", "3"')) == []
    assert _threads(tmp_path, THREADED.replace('"--threads", "2"', '"--threads", "0"')) == []
    # no hard-coded list: the row's architectures count (TORCH_CUDA_ARCH_LIST)
    plain = 'args = ["--threads", "2"]\n'
    assert [s for _, _, s, _ in _threads(tmp_path, plain, archs="8.0 9.0")] == []
    assert [s for _, _, s, _ in _threads(tmp_path, plain, archs="8.0 9.0 12.0")] == [
        "setup.py passes nvcc --threads 2 (setup.py:1) for 3 architectures: nvcc compiles each source for 2 of them at a time"]


def test_init_then_doctor_note_the_threads_and_keep_the_row_ready(tmp_path: Path, cli: Callable[..., Result],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # init writes the policy of the project in the current directory
    (tmp_path / "setup.py").write_text(THREADED)
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    r = cli("init", "--cuda", "13.0", "--python", PY)
    assert r.code == 0, r.err
    r = cli("--config", str(tmp_path / "buildrows.toml"), "doctor", ROW)
    out = r.out + r.err
    if "[ok     ] nvcc" not in out:
        pytest.skip("no nvcc 13.0 here for the CUDA row")
    assert "[note   ] nvcc-threads: setup.py passes nvcc --threads 2 (setup.py:6) for 3 architectures" in out
    assert r.code == 0 and f"{ROW}: everything the row needs is here" in out

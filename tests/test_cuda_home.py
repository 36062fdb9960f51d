"""The row's environment is complete for a project's own switches (SPEC §8): CUDA_HOME/CUDA_PATH are
the real root of the row's nvcc, asked of nvcc (never a wrapper's location), and the policy's
environment switches are on for CUDA rows and off for CPU rows, whatever the builder's image sets."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.plan.toolchain import find_cuda_compiler
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


# --- doctor: the CUDA root torch takes -------------------------------------------------------

def test_torch_cuda_home_verdicts(tmp_path: Path) -> None:
    """Each way torch's CUDA root can be wrong for the row, and the one way it is right."""
    from buildrows.build.doctor_cuda import check_torch_cuda_home
    from buildrows.policy.load import policy_from_dict

    row = next(r for r in policy_from_dict({"python": {"versions": ["3.11"]}, "cuda": {"trains": ["13.0"]},
                                            "platforms": {"linux-x86_64": {"trains": ["13.0"], "cuda": [
                                                {"trains": ["13.0"], "archs": "9.0"}]}}}, "p.toml").rows)
    root = tmp_path / "cuda"
    (root / "include").mkdir(parents=True)
    (root / "lib64").mkdir()
    (root / "include" / "cuda_runtime.h").write_text("")
    (root / "lib64" / "libcudart.so").write_text("")
    (f,) = check_torch_cuda_home(row, None, "/usr/local/bin/nvcc", "/usr/local", None)
    assert f.status == "refused" and "does not say which CUDA root it compiles with" in f.seen
    (f,) = check_torch_cuda_home(row, str(root), "/x/bin/nvcc", "/usr/local", None)
    assert f.status == "refused" and f"torch would build with CUDA root /usr/local, but the row's nvcc (/x/bin/nvcc) compiles with {root}" in f.seen
    assert f"CUDA_HOME={root}" in f.fix
    (f,) = check_torch_cuda_home(row, str(root), "/x/bin/nvcc", None, "ModuleNotFoundError: No module named 'torch'")
    assert f.status == "missing" and "No module named 'torch'" in f.seen
    (f,) = check_torch_cuda_home(row, str(root), "/x/bin/nvcc", str(root), None, "csrc/k.cu includes ATen/cuda/CUDAContext.h")
    assert f.status == "missing" and "lacks cublas_v2.h, cusparse.h, cusolverDn.h (csrc/k.cu includes ATen/cuda/CUDAContext.h)" in f.seen
    (f,) = check_torch_cuda_home(row, str(root), "/x/bin/nvcc", str(root), None)
    assert f.status == "ok"  # a project that includes no CUDA library header needs none
    (root / "lib64" / "libcudart.so").unlink()
    (f,) = check_torch_cuda_home(row, str(root), "/x/bin/nvcc", str(root), None)
    assert f.status == "missing" and "lib64/libcudart.so (torch links -lcudart)" in f.seen


def test_library_header_use_reads_the_projects_sources(tmp_path: Path) -> None:
    from buildrows.build.doctor_cuda import library_header_use

    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "a.cpp").write_text("#include <torch/extension.h>\n")
    assert library_header_use(tmp_path) is None
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "gen.cu").write_text('#include "cusparse.h"\n')  # build output is not the project's
    assert library_header_use(tmp_path) is None
    (tmp_path / "csrc" / "k.cu").write_text('  #  include <ATen/cuda/CUDAContext.h>\n')
    assert library_header_use(tmp_path) == "csrc/k.cu includes ATen/cuda/CUDAContext.h"



def _has_cuda13_torch() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return (torch.version.cuda or "").startswith("13.0")


@pytest.mark.integration
@pytest.mark.skipif(not _has_cuda13_torch() or NVCC is None, reason="needs torch for CUDA 13.0 and nvcc")
@pytest.mark.parametrize("complete", [True, False])
def test_doctor_asks_the_rows_torch(cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    complete: bool) -> None:
    """A torch extension whose kernel includes CUDAContext.h, nvcc through a wrapper on PATH: torch
    takes the root nvcc reports (buildrows sets CUDA_HOME); a root without cuSPARSE's headers is refused."""
    from tests.cuda_root import assemble, nvidia_tree

    tree = nvidia_tree()
    if tree is None:
        pytest.skip("needs nvidia-cuda-nvcc 13.0 and torch's NVIDIA packages (see .ci/run)")
    root = assemble(tree, tmp_path / "cuda")
    if not complete:  # a runtime-only toolkit: the library headers are not there
        (root / "include").unlink()
        (root / "include").mkdir()
        for h in tree.joinpath("include").iterdir():
            if not h.name.startswith(("cublas", "cusparse", "cusolver")):
                (root / "include" / h.name).symlink_to(h)
    wrapper(tmp_path / "wrap" / "bin", str(root / "bin" / "nvcc"))
    tool_env(monkeypatch, tmp_path / "wrap" / "bin")
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path / "wrap" / "bin"), str(Path(sys.executable).parent),
                                                "/usr/bin", "/bin"]))
    project = tmp_path / "proj"
    (project / "csrc").mkdir(parents=True)
    (project / "setup.py").write_text("from torch.utils.cpp_extension import CUDAExtension\n")
    (project / "csrc" / "k.cu").write_text("#include <ATen/cuda/CUDAContext.h>\n")
    r = cli("--config", str(switch_policy(tmp_path, "13.0")), "doctor", f"linux-x86_64-cu130-py{sys.version_info.major}{sys.version_info.minor}",
            "--project", str(project))
    if complete:
        assert "[ok     ] torch CUDA_HOME: " + str(root.resolve()) in r.out + r.err, r.out + r.err
    else:
        assert r.code == 3, r.out + r.err
        assert "lacks cublas_v2.h, cusparse.h, cusolverDn.h (csrc/k.cu includes ATen/cuda/CUDAContext.h)" in r.out + r.err

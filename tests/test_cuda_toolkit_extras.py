"""NVIDIA's meta-package as PyTorch 2.14.1's PyPI wheel declares it: `cuda-toolkit[cublas,cudart,...]==13.0.3`.

Found measuring issue 38 on that wheel: an exact pin of a CUDA 13 release was read as "another major's
toolkit" (only 13.0, 13.0.0, 13.9 and 13.99 were tried against the specifier), so no NVIDIA package the
wheel declares counted and `libraries-load` failed every CUDA library of torch's own wheel. And an extra
installs what cuda_toolkit-13.0.3.0's Requires-Dist says, sometimes several packages (`cublas` brings
NVRTC, `cusolver` cuBLAS and cuSPARSE), plus `cufile` and `nvtx`, which the table lacked."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from buildrows.check.nvidia import admits_major, declared_nvidia
from tests.conftest import Result
from tests.test_jit_wheel import POLICY, REQUIRES, _wheel

# torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl's METADATA, as published on PyPI
TORCH_2_14_1 = (
    "filelock",
    'cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,nvjitlink,nvrtc,nvtx]==13.0.3; '
    'platform_system == "Linux"',
    'nvidia-cudnn-cu13==9.24.0.43; platform_system == "Linux"',
    'nvidia-nccl-cu13==2.30.7; platform_system == "Linux"',
)


@pytest.mark.parametrize(("specifier", "major", "admits"), [
    ("==13.0.3", 13, True),     # PyTorch 2.14.1's pin
    ("==13.0.3", 12, False),
    ("==13.*", 13, True),
    ("==12.*", 13, False),      # numba-cuda's cu12 extra
    (">=13,<14", 13, True),
    (">=13,<14", 12, False),
    ("~=13.0", 13, True),
    (">13.0.3,<13.0.5", 13, True),
    ("<13", 13, False),
    ("<13", 12, True),
    ("===13.0.3", 13, True),
    ("!=13.0.3", 13, True),
    ("", 12, True),
])
def test_a_toolkit_pin_admits_its_major(specifier: str, major: int, admits: bool) -> None:
    assert admits_major(SpecifierSet(specifier), major) is admits


def test_pytorch_2_14_1_declares_what_its_libraries_need() -> None:
    declared = declared_nvidia(TORCH_2_14_1, "linux-x86_64", None, 13)
    assert set(declared) == {
        "nvidia-cublas", "nvidia-cuda-runtime", "nvidia-cufft", "nvidia-cufile", "nvidia-cuda-cupti", "nvidia-curand",
        "nvidia-cusolver", "nvidia-cusparse", "nvidia-nvjitlink", "nvidia-cuda-nvrtc", "nvidia-nvtx",
        "nvidia-cudnn-cu13", "nvidia-nccl-cu13"}
    # The same requirements read for a CUDA 12 row: the toolkit pin is 13's, so none of its packages count.
    assert set(declared_nvidia(TORCH_2_14_1, "linux-x86_64", None, 12)) == {"nvidia-cudnn-cu13", "nvidia-nccl-cu13"}
    # Not on Windows: every entry is marked platform_system == "Linux".
    assert declared_nvidia(TORCH_2_14_1, "windows-amd64", None, 13) == {}


def test_an_extra_installs_every_package_its_metadata_names() -> None:
    got = declared_nvidia(['cuda-toolkit[cusolver]==13.0.3'], "linux-x86_64", None, 13)
    assert set(got) == {"nvidia-cusolver", "nvidia-cublas", "nvidia-cusparse"}
    got = declared_nvidia(['cuda-toolkit[cublas]==12.9.1'], "linux-x86_64", None, 12)
    assert set(got) == {"nvidia-cublas-cu12"}  # CUDA 12's cublas extra brings cuBLAS alone


def test_nvrtc_through_the_cublas_extra_of_an_exact_pin_is_held(tmp_path: Path, cli: Callable[..., Result]) -> None:
    """End to end: a JIT wheel stating libnvrtc.so.13, which only `cuda-toolkit[cublas]==13.0.3` installs."""
    policy = tmp_path / "buildrows.toml"
    policy.write_text(POLICY.format(jit='jit = ["libnvrtc.so.13"]'), encoding="utf-8")
    requires = [*REQUIRES, 'cuda-toolkit[cublas]==13.0.3; extra == "cu13"']
    r = cli("check", str(_wheel(tmp_path, requires=requires)), "--cuda", "13.0", "--config", str(policy))
    assert r.code == 0 and "held: libnvrtc.so.13: carried by nvidia-cuda-nvrtc [extra cu13]" in r.out, r.out

"""init reads how a CMake project takes CUDA (issue 28, seen on cuvec 6.0.1).

cuvec's CMake (scikit-build-core, `cmake.source-dir = "cuvec"`) calls `find_package(CUDAToolkit)`
without REQUIRED, builds CUDA whenever it finds a toolkit, has no switch, and links only
`CUDA::cudart_static`. init wrote a policy whose CUDA wheel failed runtime-reached (mode
"dynamic": "no shipped library links the CUDA runtime dynamically"), advised an INSTALL_RPATH to
a libcudart the wheel never loads, and gave no CPU rows (or, with --cpu, CPU rows that would
build CUDA). Now: mode "static", no such advice, and CPU rows that hide the toolkit from CMake.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.policy.load import load_policy
from tests.conftest import Result

PYPROJECT = """[build-system]
requires = ["scikit-build-core"]
build-backend = "scikit_build_core.build"

[project]
name = "cuvecish"
version = "1.0"

[tool.scikit-build]
cmake.source-dir = "cuvecish"
"""
CMAKE = """cmake_minimum_required(VERSION 3.24)
project(cuvecish LANGUAGES CXX)
option(CUVECISH_CUDA_OPTIONAL "Make CUDA optional rather than forced" ON)
if(NOT CUVECISH_CUDA_OPTIONAL)
  find_package(CUDAToolkit REQUIRED)
else()
  find_package(CUDAToolkit)
endif()
add_library(m MODULE m.cpp)
if(CUDAToolkit_FOUND)
  target_link_libraries(m PRIVATE CUDA::cudart_static)
endif()
"""


def _init(cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cmake: str,
          *extra: str) -> tuple[Result, str]:
    src = tmp_path / "p"
    (src / "cuvecish").mkdir(parents=True)
    (src / "pyproject.toml").write_text(PYPROJECT)
    (src / "cuvecish" / "CMakeLists.txt").write_text(cmake)
    monkeypatch.chdir(src)
    r = cli("init", "--cuda", "13.0", "--python", "3.11", *extra)
    assert r.code == 0, r.out + r.err
    return r, (src / "buildrows.toml").read_text()


def test_a_cmake_that_finds_cuda_when_it_can_gets_cpu_rows_that_hide_it_and_a_static_runtime(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r, text = _init(cli, tmp_path, monkeypatch, CMAKE)
    assert ('[project.cpu-cache]  # CMake cache variables for CPU rows only\n'
            'CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit = "ON"  # its CMake builds CUDA whenever it finds a toolkit '
            '(cuvecish/CMakeLists.txt:7, not REQUIRED) and has no switch: CPU rows hide it\n') in text
    assert ('[cuda.runtime.13]\nmode = "static"  # its CMake links the runtime statically (cuvecish/CMakeLists.txt:11) '
            'and never CUDA::cudart: the runtime is in the libraries\n') in text
    assert "INSTALL_RPATH" not in r.out + r.err
    pol = load_policy(tmp_path / "p" / "buildrows.toml")
    assert [row.name for row in pol.rows] == ["linux-x86_64-cpu-py311", "linux-x86_64-cu130-py311"]
    cpu = pol.row("linux-x86_64-cpu-py311")
    assert cpu is not None and ("CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit", "ON") in cpu.cache
    cuda = pol.row("linux-x86_64-cu130-py311")
    assert cuda is not None and ("CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit", "ON") not in cuda.cache
    r = cli("doctor", "linux-x86_64-cpu-py311")
    assert "[ok     ] cuda: CPU row: CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON ([project.cpu-cache])" in r.out, r.out


def test_a_cmake_that_requires_cuda_or_links_the_shared_runtime_keeps_the_old_start(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    required = CMAKE.replace("  find_package(CUDAToolkit)\n", "  find_package(CUDAToolkit 12 REQUIRED)\n")
    shared = required.replace("CUDA::cudart_static", "CUDA::cudart")
    r, text = _init(cli, tmp_path, monkeypatch, shared)
    assert "cpu-cache" not in text and "cpu = true" not in text and 'mode = "static"' not in text
    assert "INSTALL_RPATH" in r.out + r.err  # the shared runtime must be reached: the advice stays
    r = cli("doctor", "linux-x86_64-cu130-py311")  # (no CPU row to judge)
    assert "linux-x86_64-cpu" not in r.out


def test_a_cpu_env_of_the_policy_is_what_tells_the_project(cli: Callable[..., Result], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """pyvkfft 2025.1.1's setup.py picks its backends from VKFFT_BACKEND: no switch init can
    name, so the policy says it per kind of row; doctor said nothing told the project."""
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(name='vk')\n")
    (tmp_path / "buildrows.toml").write_text(
        '[project]\nname = "vk"\ndriver = "setup.py"\n\n[project.cpu-env]\nVKFFT_BACKEND = "none"\n\n'
        '[python]\nversions = ["3.11"]\n\n[platforms.linux-x86_64]\ncpu = true\n')
    monkeypatch.chdir(tmp_path)
    r = cli("doctor", "linux-x86_64-cpu-py311")
    assert "[ok     ] cuda: CPU row: VKFFT_BACKEND=none ([project.cpu-env])" in r.out, r.out
    (tmp_path / "buildrows.toml").write_text((tmp_path / "buildrows.toml").read_text().replace(
        '[project.cpu-env]\nVKFFT_BACKEND = "none"\n\n', ""))
    r = cli("doctor", "linux-x86_64-cpu-py311")
    assert "nothing tells the project to leave CUDA off" in r.out


@pytest.mark.parametrize(("extra", "static"), [
    ("", True),  # LightGBM 4.7.0: enable_language(CUDA), no CUDA:: target: CMake links cudart statically
    ('set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)\n', False),
    ("target_link_libraries(lgb PRIVATE cudart)\n", False),
    ("find_package(Torch REQUIRED)\n", False),
])
def test_a_cmake_that_enables_cuda_links_the_runtime_statically_by_default(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str, static: bool) -> None:
    cmake = ('cmake_minimum_required(VERSION 3.25)\nproject(lgb LANGUAGES CXX)\noption(USE_CUDA "CUDA" OFF)\n'
             "if(USE_CUDA)\n  enable_language(CUDA)\nendif()\n" + extra)
    _, text = _init(cli, tmp_path, monkeypatch, cmake)
    assert ('mode = "static"  # its CMake links the runtime statically (cuvecish/CMakeLists.txt:5 enables CUDA; '
            "CMake's default CMAKE_CUDA_RUNTIME_LIBRARY is Static)" in text) is static, text

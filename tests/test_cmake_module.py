"""The CMake module, run by the real cmake (3.25 and 4.x): conversion, and every refusal."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from buildrows.resources import cmake_module

CMAKES = [c for c in ("/usr/bin/cmake", str(Path(sys.executable).parent / "cmake")) if Path(c).is_file()]
pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not CMAKES or shutil.which("ninja") is None, reason="needs cmake and ninja")]

NONE_PROJECT = """cmake_minimum_required(VERSION 3.25)
project(probe LANGUAGES NONE)
option(PROBE_CUDA "" OFF)
message(STATUS "ARCHS=[${CMAKE_CUDA_ARCHITECTURES}]")
"""
CUDA_PROJECT = """cmake_minimum_required(VERSION 3.25)
project(probe LANGUAGES NONE)
enable_language(CUDA)
"""


def configure(cmake: str, tmp_path: Path, defines: list[str], env: dict[str, str] | None = None,
              source: str = NONE_PROJECT) -> subprocess.CompletedProcess[str]:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "CMakeLists.txt").write_text(source)
    clean = {k: v for k, v in os.environ.items()
             if k not in ("TORCH_CUDA_ARCH_LIST", "CUDAARCHS", "BUILDROWS_CUDA", "CUDACXX")}
    argv = [cmake, "-S", str(src), "-B", str(tmp_path / "b"), "-G", "Ninja",
            f"-DCMAKE_PROJECT_TOP_LEVEL_INCLUDES={cmake_module()}", *defines]
    return subprocess.run(argv, env={**clean, **(env or {})}, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("cmake", CMAKES)
@pytest.mark.parametrize(("defines", "env", "archs"), [
    ([], {"TORCH_CUDA_ARCH_LIST": "7.5;9.0+PTX"}, "75-real;90-real;90-virtual"),
    (["-DTORCH_CUDA_ARCH_LIST=8.0 12.0a+PTX"], {}, "80-real;120a-real;120a-virtual"),
    (["-DBUILDROWS_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=75-real;90-real;90-virtual"],
     {"TORCH_CUDA_ARCH_LIST": "7.5;9.0+PTX"}, "75-real;90-real;90-virtual"),
    (["-DBUILDROWS_CUDA=OFF"], {}, ""),  # a CPU row needs no list
    # a row with PTX but no cubin for 12.0 (12.0-virtual), as rendered: TORCH_CUDA_ARCH_LIST empty
    (["-DBUILDROWS_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=75-real;80-real;120-virtual"],
     {"TORCH_CUDA_ARCH_LIST": ""}, "75-real;80-real;120-virtual"),
    # a CPU row ignores a list the builder's environment carries (the GPU image sets one)
    (["-DBUILDROWS_CUDA=OFF"], {"TORCH_CUDA_ARCH_LIST": "9.0a", "CUDAARCHS": "90a-real"}, ""),
])
def test_converts_the_list(cmake: str, tmp_path: Path, defines: list[str], env: dict[str, str], archs: str) -> None:
    p = configure(cmake, tmp_path, defines, env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"ARCHS=[{archs}]" in p.stdout


@pytest.mark.parametrize("cmake", CMAKES)
@pytest.mark.parametrize(("defines", "env", "message"), [
    (["-DBUILDROWS_CUDA=ON"], {}, "CUDA is requested (BUILDROWS_CUDA=ON) but no GPU architecture list was given"),
    (["-DBUILDROWS_CUDA_OPTION=PROBE_CUDA", "-DPROBE_CUDA=ON"], {}, "CUDA is requested (PROBE_CUDA=ON)"),
    ([], {"BUILDROWS_CUDA": "ON"}, "CUDA is requested (the environment's BUILDROWS_CUDA=ON)"),
    (["-DBUILDROWS_CUDA=ON", "-DBUILDROWS_ROW=linux-x86_64-cu130-py311"], {"TORCH_CUDA_ARCH_LIST": "8.0;9.0+ptx"},
     "row linux-x86_64-cu130-py311: '9.0+ptx' in the environment's TORCH_CUDA_ARCH_LIST"),
    ([], {"TORCH_CUDA_ARCH_LIST": "native"}, "'native' in the environment's TORCH_CUDA_ARCH_LIST"),
    ([], {"TORCH_CUDA_ARCH_LIST": "9.O"}, "'9.O' in the environment's TORCH_CUDA_ARCH_LIST"),
    # PTX without a cubin is never read as a cubin here (issue 27)
    ([], {"TORCH_CUDA_ARCH_LIST": "8.0;compute_120"},
     "'compute_120' in the environment's TORCH_CUDA_ARCH_LIST ('8.0;compute_120'): TORCH_CUDA_ARCH_LIST cannot say "
     "PTX without a cubin"),
    (["-DTORCH_CUDA_ARCH_LIST=8.0 12.0-virtual"], {}, "'12.0-virtual' in the TORCH_CUDA_ARCH_LIST variable"),
    (["-DCMAKE_CUDA_ARCHITECTURES=native"], {}, "CMAKE_CUDA_ARCHITECTURES='native' asks CMake to choose"),
    (["-DBUILDROWS_CUDA=ON"], {"CUDAARCHS": "all"}, "CMAKE_CUDA_ARCHITECTURES='all' asks CMake to choose"),
    (["-DCMAKE_CUDA_ARCHITECTURES=75-real"], {"TORCH_CUDA_ARCH_LIST": "7.5;9.0+PTX"},
     "CMAKE_CUDA_ARCHITECTURES='75-real' disagrees with the environment's TORCH_CUDA_ARCH_LIST"),
])
def test_refusals(cmake: str, tmp_path: Path, defines: list[str], env: dict[str, str], message: str) -> None:
    p = configure(cmake, tmp_path, defines, env)
    assert p.returncode != 0
    text = " ".join((p.stdout + p.stderr).split())  # CMake wraps long messages
    assert "buildrows:" in text and " ".join(message.split()) in text, text
    assert "never falls back to detecting the builder's GPU" in text


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("cmake", CMAKES[:1])
@pytest.mark.parametrize(("defines", "message"), [
    ([], "the project enabled the CUDA language but no GPU architecture list was given"),
    (["-DBUILDROWS_CUDA=OFF"], "this is a CPU row (BUILDROWS_CUDA=OFF), yet the project enabled the CUDA language"),
])
def test_a_project_that_enables_cuda_anyway_is_stopped(cmake: str, tmp_path: Path, defines: list[str],
                                                       message: str) -> None:
    p = configure(cmake, tmp_path, defines, source=CUDA_PROJECT)
    assert p.returncode != 0
    assert message in " ".join((p.stdout + p.stderr).split())


PYTHON_PROJECT = """cmake_minimum_required(VERSION 3.25)
project(probe LANGUAGES NONE)
find_package(Python REQUIRED COMPONENTS Interpreter)
message(STATUS "PYTHON=[${Python_VERSION}]")
"""


@pytest.mark.parametrize("cmake", CMAKES)
def test_python_of_another_version_than_the_row_is_refused(cmake: str, tmp_path: Path) -> None:
    """The issue's case: a py312 preset built a cp311 module. The pinned interpreter is the row's;
    when the project finds another one anyway, configuration stops naming both."""
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    pins = [f"-DPython_EXECUTABLE={sys.executable}", "-DBUILDROWS_ROW=linux-x86_64-cpu-py39"]
    p = configure(cmake, tmp_path, [*pins, "-DBUILDROWS_PYTHON=3.9"], source=PYTHON_PROJECT)
    assert p.returncode != 0
    assert f"the project found Python {here}" in p.stderr and "but the row is Python 3.9" in p.stderr
    shutil.rmtree(tmp_path / "b")
    p = configure(cmake, tmp_path, [*pins, f"-DBUILDROWS_PYTHON={here}"], source=PYTHON_PROJECT)
    assert p.returncode == 0, p.stderr
    assert "unused" not in p.stderr.lower()

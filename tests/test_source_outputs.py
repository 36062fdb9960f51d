"""A row's build outputs in the project's own source tree stay that row's (issue 28, LightGBM 4.7.0).

LightGBM links `lib_lightgbm.so` into `${PROJECT_SOURCE_DIR}` (`set(LIBRARY_OUTPUT_PATH ...)`) and
installs it from there: its CPU row's wheel shipped the CUDA row's library (the rows built at
once, and a reused tree found the other row's newer file). Now such a project's rows build one at
a time, and what each row's build wrote there is moved aside while another row builds.
"""

from __future__ import annotations

import os
from pathlib import Path

from buildrows.build import source_outputs as so


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _build(project: Path, row: str, lib: str) -> None:
    """What a row's build does: settle, link into the source tree when the file is missing, record."""
    so.settle(project, row)
    before = so.snapshot(project)
    assert before is not None
    if not (project / "lib_x.so").exists():
        _write(project / "lib_x.so", lib)
    after = so.snapshot(project)
    assert after is not None
    so.record(project, row, so.written(before, after, project))


def test_each_row_gets_its_own_output_back(tmp_path: Path) -> None:
    project = tmp_path / "p"
    _write(project / "CMakeLists.txt", "project(x)\nset(LIBRARY_OUTPUT_PATH ${PROJECT_SOURCE_DIR})\n")
    _write(project / "src" / "x.cpp", "int x;\n")
    assert so.writes_into_source(project, project) == "CMakeLists.txt:2 LIBRARY_OUTPUT_PATH ${PROJECT_SOURCE_DIR}"
    _build(project, "cpu", "cpu library")
    _build(project, "cu130", "cuda library")  # the CPU row's file was moved aside: the CUDA row links its own
    assert (project / "lib_x.so").read_text() == "cuda library"
    assert (project / "build" / "source-outputs" / "cpu" / "lib_x.so").read_text() == "cpu library"
    # Without settling, the CPU row would find the CUDA row's newer file and link nothing: it gets its own back.
    _build(project, "cpu", "never linked")
    assert (project / "lib_x.so").read_text() == "cpu library"
    assert (project / "build" / "source-outputs" / "cu130" / "lib_x.so").read_text() == "cuda library"
    # The sources were never touched, and a row's record survives a build that wrote nothing again.
    assert (project / "src" / "x.cpp").read_text() == "int x;\n"
    assert sorted(so._read(project)) == ["cpu", "cu130"]


def test_a_file_changed_since_or_never_seen_written_stays(tmp_path: Path) -> None:
    project = tmp_path / "p"
    _write(project / "CMakeLists.txt", "project(x)\n")
    _write(project / "mine.txt", "the user's\n")
    assert so.writes_into_source(project, project) is None
    _build(project, "cpu", "cpu library")
    assert so.writes_into_source(project, project) == "a build of cpu wrote lib_x.so"
    (project / "lib_x.so").write_text("edited by hand, longer than before\n")
    os.utime(project / "lib_x.so", ns=(1, 1))
    assert so.settle(project, "cu130") == []  # changed since the CPU row wrote it: not buildrows' to move
    assert (project / "lib_x.so").exists() and (project / "mine.txt").exists()


def test_a_file_that_was_there_before_any_build_is_never_recorded(tmp_path: Path) -> None:
    project = tmp_path / "p"
    _write(project / "pkg" / "_version.py", "v = 1\n")  # shipped in the sdist; setuptools_scm rewrites it
    before = so.snapshot(project)
    assert before is not None
    (project / "pkg" / "_version.py").write_text("v = 1  # rewritten by the build\n")
    _write(project / "lib_x.so", "cpu library")
    after = so.snapshot(project)
    assert after is not None
    assert sorted(so.written(before, after, project)) == ["lib_x.so"]

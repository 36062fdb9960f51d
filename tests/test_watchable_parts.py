"""Issue 31's parts that need no compiler: a step's heartbeat and first error line, the log files,
refusing unwritable directories before any compile, -q/-v, a closed pipe, `build --json` and
`doctor --json`. tests/test_watchable_build.py drives the real CUDA builds."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.errors import ExternalFailure
from buildrows.process import progress
from buildrows.process.logs import RowLogs
from buildrows.process.runner import Command, run_step
from buildrows.ui import UI

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "cuda-extension" / "buildrows.toml"
EXECUTORCH = REPO / "tests" / "data" / "policies" / "executorch" / "buildrows.toml"


def _ui(tmp_path: Path, row: str = "r1", prefixed: bool = False) -> tuple[UI, io.StringIO, RowLogs]:
    err = io.StringIO()
    logs = RowLogs(tmp_path / "logs" / row)
    handle = logs.start()
    return UI(io.StringIO(), err).for_row(row, prefixed=prefixed, log=handle, logs=logs), err, logs


def test_a_silent_step_gets_heartbeats_and_its_counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BUILDROWS_HEARTBEAT", "0.3")
    ui, err, logs = _ui(tmp_path, prefixed=True)
    run_step(ui, Command("compile", ("sh", "-c", "echo '[1/4] Building CUDA object k.cu.o'; sleep 1.5; echo '[2/4] Linking'")))
    lines = err.getvalue().splitlines()
    assert lines[0] == "r1 | ==> compile" and lines[2] == "r1 | [1/4] Building CUDA object k.cu.o"
    beats = [ln for ln in lines if "still running" in ln]
    assert beats and beats[0].startswith("r1 |   ... step 'compile' still running: ") and beats[0].endswith(", last [1/4]")
    assert "silent for" in beats[0]
    assert lines.index(beats[0]) < lines.index("r1 | [2/4] Linking")
    step_log = logs.directory / "01-compile.log"
    text = step_log.read_text(encoding="utf-8")
    assert "sh -c" in text.splitlines()[1] and "[2/4] Linking" in text and "# exit status: 0" in text
    assert "still running" not in text  # the step's own output only; row.log has everything
    assert "r1 |" not in (logs.directory / "row.log").read_text(encoding="utf-8")


def test_no_heartbeat_when_turned_off_or_the_step_talks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BUILDROWS_HEARTBEAT", "0")
    ui, err, _ = _ui(tmp_path)
    run_step(ui, Command("quiet", ("sh", "-c", "sleep 0.5")))
    assert "still running" not in err.getvalue()
    monkeypatch.setenv("BUILDROWS_HEARTBEAT", "oops")
    assert progress.heartbeat_interval() == progress.HEARTBEAT


@pytest.mark.parametrize(("output", "first"), [
    (["-- Configuring", "/p/csrc/a.c:3:1: error: unknown type name 'this'", "FAILED: a.o", "ninja: build stopped"],
     "/p/csrc/a.c:3:1: error: unknown type name 'this'"),
    (["k.cu(7): error: identifier \"x\" is undefined", "1 error detected in the compilation of \"k.cu\"."],
     'k.cu(7): error: identifier "x" is undefined'),
    (["CMake Error at CMakeLists.txt:4 (find_package):", "  Could not find"], "CMake Error at CMakeLists.txt:4 (find_package):"),
    (["Collecting x", "ERROR: No matching distribution found for x"], "ERROR: No matching distribution found for x"),
    # a compiler's error comes before CMake's complaint about it
    (["CMake Error: the build failed", "a.c:1:1: fatal error: x.h: No such file or directory"],
     "a.c:1:1: fatal error: x.h: No such file or directory"),
    (["+ gcc -Werror=format -c a.c", "all good"], None),
])
def test_the_first_error_line(output: list[str], first: str | None) -> None:
    assert progress.first_error(output) == first


def test_a_failed_step_says_its_first_error_and_log_not_a_cut_command(tmp_path: Path) -> None:
    ui, _err, logs = _ui(tmp_path)
    script = "echo building; echo 'x.c:2:5: error: expected ; before }' ; echo 'FAILED: x.o'; exit 1"
    with pytest.raises(ExternalFailure) as got:
        run_step(ui, Command("build", ("sh", "-c", script)), doctor="buildrows doctor r1")
    first = str(got.value).splitlines()[0]
    assert first.startswith("step 'build' failed after ") and first.endswith(": x.c:2:5: error: expected ; before }")
    assert f"    log: {logs.directory / '01-build.log'}" in str(got.value)
    assert "fix: read the step's output in its log; `buildrows doctor r1` checks the toolchain" in str(got.value)


def _quiet_policy(tmp_path: Path) -> Path:
    example = EXAMPLE.parent
    text = EXAMPLE.read_text(encoding="utf-8").replace('source-dir = "."', f'source-dir = "{example.as_posix()}"')
    policy = tmp_path / "buildrows.toml"
    policy.write_text(text, encoding="utf-8")
    return policy


@pytest.mark.parametrize("case", ["proc", "file", "file-parent", "no-permission"])
def test_an_unusable_wheel_dir_is_exit_2_before_any_compile(cli: Callable[..., object], tmp_path: Path,
                                                            case: str) -> None:
    a_file = tmp_path / "a.whl"
    a_file.write_text("x")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    where = {"proc": "/proc/x", "file": str(a_file), "file-parent": str(a_file / "sub"),
             "no-permission": str(locked / "dist")}[case]
    if case == "no-permission" and os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    r = cli("--config", str(EXAMPLE), "build", "linux-x86_64-cpu-py311", "--wheel-dir", where, "--no-compiler-cache")
    assert r.code == 2, r.err  # type: ignore[attr-defined]
    err: str = r.err  # type: ignore[attr-defined]
    assert f"buildrows: bad input: the wheel directory {Path(where).resolve()} " in err
    assert {"proc": "cannot be created", "file": "is a file, not a directory",
            "file-parent": f"cannot be created: {a_file} is a file", "no-permission": "cannot be created"}[case] in err
    assert "fix: pass --wheel-dir a directory you can write" in err
    assert "==> doctor" not in err and "internal error" not in err


def test_an_unwritable_cache_is_exit_2(cli: Callable[..., object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "cache-file"
    blocker.write_text("x")
    monkeypatch.setenv("BUILDROWS_CACHE", str(blocker))
    r = cli("--config", str(EXAMPLE), "build", "linux-x86_64-cpu-py311", "--wheel-dir", str(tmp_path / "d"))
    assert r.code == 2, r.err  # type: ignore[attr-defined]
    assert f"buildrows' cache {blocker} is a file, not a directory" in r.err  # type: ignore[attr-defined]
    assert "fix: point BUILDROWS_CACHE at a directory you can write" in r.err  # type: ignore[attr-defined]


def test_build_json_is_one_document_and_the_table_goes_to_stderr(cli: Callable[..., object], tmp_path: Path) -> None:
    r = cli("--config", str(EXECUTORCH), "build", "linux-aarch64-jetpack*", "linux-aarch64-cu130-py311",
            "--keep-going", "--no-compiler-cache", "--json", "--wheel-dir", str(tmp_path / "dist"))
    assert r.code == 3, r.err  # type: ignore[attr-defined]
    doc = json.loads(r.out)  # type: ignore[attr-defined]
    assert doc["command"] == "build" and doc["exit_code"] == 3 and doc["summary"].startswith("2 rows: 0 built, 2 refused")
    assert [row["status"] for row in doc["rows"]] == ["refused", "refused"]
    assert set(doc["rows"][0]) == {"row", "status", "exit_code", "wheel", "wheel_path", "size", "check", "seconds",
                                   "compiler_cache", "reason", "fix", "log"}
    assert doc["rows"][1]["row"] == "linux-aarch64-cu130-py311" and "cannot be built on this machine" in doc["rows"][1]["reason"]
    assert "compiler cache" in r.err and "2 rows: 0 built, 2 refused; exit code 3" in r.err  # type: ignore[attr-defined]


def test_doctor_json(cli: Callable[..., object]) -> None:
    r = cli("--config", str(EXECUTORCH), "doctor", "linux-aarch64-cu130-py311", "--json")
    assert r.code == 3  # type: ignore[attr-defined]
    doc = json.loads(r.out)  # type: ignore[attr-defined]
    (row,) = doc["rows"]
    assert doc["command"] == "doctor" and row["row"] == "linux-aarch64-cu130-py311" and row["ready"] is False
    assert row["error"] and "cannot be built" in row["error"]
    assert all(set(f) == {"check", "status", "seen", "fix"} for f in row["findings"])


def test_quiet_and_verbose_are_global(cli: Callable[..., object], capsys: pytest.CaptureFixture[str]) -> None:
    loud = cli("--config", str(EXECUTORCH), "build", "linux-aarch64-cu130-py311", "--no-compiler-cache")
    quiet = cli("-q", "--config", str(EXECUTORCH), "build", "linux-aarch64-cu130-py311", "--no-compiler-cache")
    after = cli("--config", str(EXECUTORCH), "build", "linux-aarch64-cu130-py311", "--no-compiler-cache", "-q")
    assert loud.code == quiet.code == after.code == 3  # type: ignore[attr-defined]
    assert "==> doctor" in loud.err and "==> doctor" not in quiet.err  # type: ignore[attr-defined]
    assert "buildrows: refused:" in quiet.err and quiet.err == after.err  # type: ignore[attr-defined]
    assert quiet.out == loud.out  # type: ignore[attr-defined]  # the results are the same
    both = cli("-q", "-v", "--config", str(EXECUTORCH), "rows")
    assert both.code == 2 and "-q and -v contradict each other" in capsys.readouterr().err  # type: ignore[attr-defined]


def test_a_closed_pipe_ends_quietly() -> None:
    done = subprocess.run(f"{sys.executable} -m buildrows schema | head -1", shell=True, capture_output=True,
                          text=True, check=False, executable="/bin/bash")
    assert done.stdout == "{\n" and done.stderr == "", done.stderr
    # a reader gone before the first write (`true` exits at once): the write fails for certain
    status = subprocess.run(f"set -o pipefail; {{ sleep 0.3; exec {sys.executable} -m buildrows schema; }} | true",
                            shell=True, capture_output=True, text=True, check=False, executable="/bin/bash")
    assert status.returncode == 141 and status.stderr == "", status.stderr


def test_rows_coverage_view_of_the_executorch_policy_fits_80_columns(cli: Callable[..., object]) -> None:
    r = cli("--config", str(EXECUTORCH), "rows", "--coverage")
    assert r.code == 0, r.err  # type: ignore[attr-defined]
    lines = r.out.splitlines()  # type: ignore[attr-defined]
    assert lines[0] == "GPU architectures the policy promises:"
    assert lines[1].split() == ["7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "11.0", "12.0"]
    assert lines[2].split() == ["linux-x86_64-cu126", "py310-py313", "C", "C", "C", "C", "C+", ".", ".", "."]
    assert "linux-aarch64-cu130 py310-py313" in r.out and lines[-1] == "not in the view: 1 CPU or empty row"  # type: ignore[attr-defined]
    assert all(len(line) <= 80 for line in lines)


def test_coverage_cells_of_a_wheels_libraries() -> None:
    from buildrows.policy.coverage import Coverage, collapse, of_libraries

    cells = of_libraries([(("sm_75", "sm_90"), ("sm_90",)), (("sm_75",), ("sm_90",))])
    assert cells == {"sm_75": "C", "sm_90": "~"}  # one library has a cubin for 9.0, the other PTX only
    assert of_libraries([((), ("sm_120",))]) == {"sm_120": "P"}
    lines = collapse([Coverage("l-cu130-py310", {"sm_75": "C"}), Coverage("l-cu130-py312", {"sm_75": "C"}),
                      Coverage("l-cu130-py311", {"sm_75": "."})])
    assert [c.label for c in lines] == ["l-cu130 py310,py312", "l-cu130 py311"]


def test_an_unwritable_build_directory_is_exit_2(cli: Callable[..., object], tmp_path: Path) -> None:
    import shutil

    project = tmp_path / "project"
    shutil.copytree(EXAMPLE.parent, project, ignore=shutil.ignore_patterns("build", "dist", "__pycache__"))
    (project / "build").write_text("not a directory")
    r = cli("--config", str(project / "buildrows.toml"), "build", "linux-x86_64-cpu-py311", "--no-compiler-cache")
    assert r.code == 2, r.err  # type: ignore[attr-defined]
    assert f"the project's build directory {project / 'build'} is a file, not a directory" in r.err  # type: ignore[attr-defined]
    assert "fix: make" in r.err and "==> doctor" not in r.err  # type: ignore[attr-defined]


def test_rows_built_together_on_github_get_a_header_not_a_group(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    err = io.StringIO()
    ui = UI(out=io.StringIO(), err=err).for_row("r1", prefixed=True)
    with ui.section("row 2/3: r1"):
        ui.info("inside")
        ui.warn("careful")
    assert err.getvalue() == "r1 | === row 2/3: r1 ===\nr1 | inside\n::warning::r1 | careful\n"

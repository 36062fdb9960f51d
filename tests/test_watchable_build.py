"""Issue 31: a long build a person can watch, stop and read afterwards - with the real cmake,
ninja, nvcc and ccache, the CLI run as a user runs it (a subprocess whose stderr is read line by
line as it comes).

One `build` of two rows covers the streaming: the CUDA row and the CPU row of this Python built
beside each other (each line prefixed with its row), the CPU row's source with a syntax error; a
configure step made silent (CMake sleeps) gets heartbeats. A second
test interrupts a real compile with SIGINT, then builds the same row twice at once in the tree it
left."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from buildrows.plan.toolchain import locate_cuda_compiler

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "cuda-extension"
FULL = 'archs = "7.5 8.0 8.6 8.9 9.0 10.0 12.0"'
PYT = f"{sys.version_info.major}{sys.version_info.minor}"
STEP = "build (scikit-build-core wheel)"

pytestmark = pytest.mark.integration


def _needs_cuda() -> None:
    for tool in ("cmake", "ninja"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool} on PATH")
    if locate_cuda_compiler(dict(os.environ)) is None:
        pytest.skip("needs nvcc (CUDA 13.0)")


def _project(tmp_path: Path, archs: str, sleep: float = 0) -> Path:
    """A copy of the example with a short list; with `sleep`, CMake's configure is silent that long."""
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(
        "build", "dist", "CMakeUserPresets.json", "buildrows-presets.json", "__pycache__"))
    policy = project / "buildrows.toml"
    policy.write_text(policy.read_text(encoding="utf-8").replace(FULL, f'archs = "{archs}"', 1), encoding="utf-8")
    if sleep:
        cml = project / "CMakeLists.txt"
        cml.write_text(cml.read_text(encoding="utf-8") + f'\nexecute_process(COMMAND "${{CMAKE_COMMAND}}" -E sleep {sleep})\n',
                       encoding="utf-8")
    return policy


def _compiling(tree: Path) -> list[int]:
    """The processes compiling vadd_cuda.cu in `tree` (nvcc runs there; ninja passes the source
    relative to it, so the command line alone cannot tell this test's compile from another's)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if b"vadd_cuda.cu" in (entry / "cmdline").read_bytes() and os.readlink(entry / "cwd") == str(tree):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def _wait_for_compile(tree: Path, timeout: float = 120) -> list[int]:
    """The processes compiling the kernel, once there is one (ninja prints a compile's `[n/m]`
    when it ends, so the output cannot say that one is running)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = _compiling(tree)
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no process compiling vadd_cuda.cu in {tree} within {timeout}s")


def _default_sigint() -> None:
    """SIGINT as a terminal's program has it: a test run in the background of a shell (`pytest &`)
    inherits it ignored, and Python then never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Run:
    """`buildrows ARGS` in a session of its own (as a terminal runs it), its stderr read as it comes."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.lines: list[tuple[float, str]] = []
        self.proc = subprocess.Popen([sys.executable, "-m", "buildrows", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True,
                                     env={**os.environ, "NO_COLOR": "1", **(env or {})}, preexec_fn=_default_sigint)
        self.out = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def wait_for(self, text: str, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in ln for _, ln in self.lines):
            assert self.proc.poll() is None or self._reader.is_alive(), f"ended before {text!r}:\n{self.err}"
            assert time.monotonic() < deadline, f"no {text!r} in {timeout}s:\n{self.err}"
            time.sleep(0.05)

    def finish(self, timeout: float = 300) -> int:
        assert self.proc.stdout is not None
        self.out = self.proc.stdout.read()
        self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return self.proc.returncode

    @property
    def err(self) -> str:
        return "\n".join(ln for _, ln in self.lines)


def test_rows_in_parallel_stream_prefixed_lines_heartbeats_logs_and_the_first_error(tmp_path: Path) -> None:
    """The CUDA row and the CPU row of this Python build beside each other (they share no
    compile), each line prefixed with its row as it comes; the CPU row's source has a syntax error."""
    _needs_cuda()
    policy = _project(tmp_path, "7.5", sleep=2)
    project = policy.parent
    bad = project / "csrc" / "vadd_cpu.c"
    bad.write_text(bad.read_text(encoding="utf-8") + "\nthis is not C;\n", encoding="utf-8")
    cuda, cpu = f"linux-x86_64-cu130-py{PYT}", f"linux-x86_64-cpu-py{PYT}"
    run = Run("--config", str(policy), "build", cuda, cpu, "--keep-going", "--jobs", "2",
              "--wheel-dir", str(tmp_path / "dist"), env={"BUILDROWS_HEARTBEAT": "0.5"})
    assert run.finish() == 4, run.err
    lines = run.lines

    def at(row: str, text: str) -> list[int]:
        return [i for i, (_, ln) in enumerate(lines) if ln.startswith(f"{row} | ") and text in ln]

    assert "building 2 rows that share no compile 2 at a time" in run.err
    for row, other, compiling, end in ((cuda, cpu, "Building CUDA object", "built in"),
                                       (cpu, cuda, "Building C object", "failed in")):
        started, compiled, ended = at(row, f"==> {STEP}"), at(row, compiling), at(row, end)
        assert started and compiled and ended, run.err
        # streamed as it came, not held until the row ended: the other row's lines come in between
        between = [ln for _, ln in lines[started[0]:ended[0]] if ln.startswith(f"{other} | ")]
        assert between, f"{row}'s lines were not interleaved with {other}'s:\n{run.err}"
        assert lines[ended[0]][0] - lines[started[0]][0] > 1.5  # its step's lines came while it ran (CMake sleeps 2s)
        assert at(row, f"step '{STEP}' still running:"), run.err  # the silent configure got heartbeats
    out = run.out
    # both rows' logs exist and the summary names them
    log = project / "build" / "logs" / cuda / "row.log"
    assert f"log of {cuda}: {log}" in out
    text = log.read_text(encoding="utf-8")
    assert "Building CUDA object" in text and "verdict: PASS" in text and f"{cuda} | " not in text
    assert (project / "build" / "logs" / cuda / "01-build-scikit-build-core-wheel.log").is_file()
    # the CPU row: the compiler's error line in its summary cell, its step's log, and the fix
    step_log = project / "build" / "logs" / cpu / "01-build-scikit-build-core-wheel.log"
    assert f"log of {cpu}: {step_log}" in out
    assert (project / "build" / "logs" / cpu / "row.log").is_file()
    (cell,) = [ln for ln in out.splitlines() if ln.startswith(cpu + " ")]
    assert "csrc/vadd_cpu.c:" in cell and "error: unknown type name" in cell and "FAILED" in cell, out
    assert "`" not in cell and " -m build" not in cell, cell  # the error, not a command line
    assert "error: unknown type name" in step_log.read_text(encoding="utf-8")
    assert "  fix: read the step's output in its log;" in out
    assert "2 rows: 1 built, 1 failed; exit code 4" in out
    # what the built wheel carries, rows x architectures
    view = out.split("GPU architectures the built wheels carry:\n")[1].splitlines()
    assert view[0].split() == ["7.5"] and view[1].split() == ["linux-x86_64-cu130", f"py{PYT}", "C+"]


def test_ctrl_c_during_a_compile_then_two_builds_of_the_row_at_once(tmp_path: Path) -> None:
    _needs_cuda()
    policy = _project(tmp_path, "8.6", sleep=1)
    project = policy.parent
    row = f"linux-x86_64-cu130-py{PYT}"
    dist = tmp_path / "dist"
    args = ("--config", str(policy), "build", row, "--wheel-dir", str(dist))
    run = Run(*args, "--no-compiler-cache")
    run.wait_for("Building project with Ninja")
    tree = project / "build" / f"skbuild-{row}"
    compiling = _wait_for_compile(tree)  # nvcc is compiling this project's kernel now
    os.killpg(run.proc.pid, signal.SIGINT)  # what the terminal does on Ctrl-C: the whole foreground group
    assert run.finish() == 130, run.err
    assert not set(compiling) & set(_compiling(tree)), "the compiler outlived the build"
    err = run.err
    assert "buildrows: interrupted: step 'build (scikit-build-core wheel)' stopped by the user" in err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "buildrows: step failed" not in err and "checks the toolchain" not in err, err
    (cell,) = [ln for ln in run.out.splitlines() if ln.startswith(row + " ")]
    assert "INTERRUPTED" in cell and f"interrupted: Ctrl-C during step '{STEP}'" in cell, cell
    assert "exit code 130" in run.out
    assert not (dist / ".buildrows-staging").exists() and not list(dist.glob("*.whl"))
    assert (project / "build" / f"skbuild-{row}" / "CMakeCache.txt").is_file()  # the tree stays
    # Two builds of the row at once, in the tree the interrupted one left: the second waits for the first.
    one = Run(*args, "--json")
    one.wait_for(f"==> {STEP}")
    two = Run(*args[:-1], str(tmp_path / "dist2"))
    assert one.finish() == 0, one.err
    assert two.finish() == 0, two.err
    assert f"waiting: row {row} (build/skbuild-{row}) is being built by another buildrows (pid {one.proc.pid}" in two.err
    assert "ended after" in two.err
    assert "check PASS" in two.out
    # the first build's --json: one document on stdout, the table on stderr
    doc = json.loads(one.out)
    (got,) = doc["rows"]
    assert doc["exit_code"] == 0 and got["status"] == "built" and got["check"] == "pass"
    assert got["wheel_path"] == str(dist / got["wheel"]) and Path(got["wheel_path"]).is_file()
    assert got["log"] == str(project / "build" / "logs" / row / "row.log") and Path(got["log"]).is_file()
    assert "check PASS" in one.err

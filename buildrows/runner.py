"""The one module that runs subprocesses for a build: find the tool, log the command, stream, fail clearly.

Everything else computes argument lists (`buildrows.drivers`) and hands them here. Each step is
announced with its exact command line (`+ cmake --workflow --preset ...`); the tool is looked up
on the PATH the step itself will run with, so the command printed is the command run; a
non-zero exit becomes an :class:`ExternalFailure` naming the step, the command and its status.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from buildrows.errors import ExternalFailure
from buildrows.ui import UI


@dataclass(frozen=True)
class Command:
    """One external step: what it is called, its argv, the variables it adds, where it runs."""

    step: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    notes: tuple[str, ...] = field(default=())  # why this command looks the way it does

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """The full environment the command runs with: base, then this step's variables."""
        out = dict(base)
        out.update(self.env)
        return out


def find_tool(name: str, env: Mapping[str, str]) -> str | None:
    """`name` as the step will resolve it: a path stays a path, a bare name is looked up on env's PATH."""
    if os.sep in name or (os.altsep and os.altsep in name):
        return name if os.path.isfile(name) else None
    return shutil.which(name, path=env.get("PATH", os.defpath))


def resolve(cmd: Command, base: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The argv (tool resolved to a full path) and environment a step will run with."""
    env = cmd.environment(base)
    tool = find_tool(cmd.argv[0], env)
    if tool is None:
        raise ExternalFailure(
            f"step '{cmd.step}': {cmd.argv[0]!r} is not on the PATH this step runs with\n"
            f"    fix: install it (`buildrows doctor` says how), or put it on PATH")
    return [tool, *cmd.argv[1:]], env


def run_step(ui: UI, cmd: Command, base: Mapping[str, str] | None = None) -> float:
    """Run one step, streaming its output to the UI's error stream; return its wall time in seconds."""
    argv, env = resolve(cmd, os.environ if base is None else base)
    ui.step(cmd.step, argv)
    for var, value in cmd.env:
        ui.info(f"  {var}={shlex.quote(value)}")
    for note in cmd.notes:
        ui.info(f"  ({note})")
    start = time.perf_counter()
    try:
        code = _stream(argv, env, cmd.cwd, ui)
    except OSError as e:
        raise ExternalFailure(f"step '{cmd.step}' could not start `{shlex.join(argv)}`: {e}") from e
    elapsed = time.perf_counter() - start
    if code != 0:
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        raise ExternalFailure(
            f"step '{cmd.step}' failed: `{shlex.join(argv)}` {how}"
            + (f" (in {cmd.cwd})" if cmd.cwd else "")
            + "\n    fix: read the step's output above; `buildrows doctor ROW` checks the toolchain")
    ui.info(f"  step '{cmd.step}' took {elapsed:.1f}s")
    return elapsed


def _stream(argv: Sequence[str], env: Mapping[str, str], cwd: str | None, ui: UI) -> int:
    """Pass the child's output straight through when the UI writes to the real stderr (no copy,
    and ninja keeps its progress line); otherwise copy it line by line into the UI's stream."""
    if ui.err is sys.stderr:
        sys.stderr.flush()
        return subprocess.run(list(argv), env=dict(env), cwd=cwd, stdout=sys.stderr.fileno(),
                              stdin=subprocess.DEVNULL, check=False).returncode
    with subprocess.Popen(list(argv), env=dict(env), cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                          errors="replace", bufsize=1) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            ui.err.write(line)
        return proc.wait()


@dataclass(frozen=True)
class Captured:
    """A probe's result: the exit status and its output, or why it could not run."""

    code: int
    output: str
    error: str | None = None


def capture(argv: Sequence[str], env: Mapping[str, str] | None = None, timeout: float = 60) -> Captured:
    """Run a quick probe (`cmake --version`) quietly; never raises."""
    try:
        proc = subprocess.run(list(argv), env=dict(os.environ if env is None else env), capture_output=True,
                              text=True, errors="replace", timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Captured(-1, "", str(e))
    return Captured(proc.returncode, proc.stdout + proc.stderr)

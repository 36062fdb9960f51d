"""The one module that runs subprocesses for a build: find the tool, log the command, stream, fail clearly.

Everything else computes argument lists (`buildrows.build.drivers`) and hands them here. Each step is
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


def with_environment_bin(env: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """env with the active Python environment's scripts directory (sys.prefix/bin; Scripts on
    Windows) at the end of PATH when it is not on PATH already, and that directory (None when
    nothing was added). `pip install cmake ninja` into a venv that was never activated puts them
    there: doctor finds them, and the build (cmake looking for ninja included) uses them."""
    import sysconfig

    out = dict(env)
    scripts = sysconfig.get_path("scripts")
    if not scripts or not os.path.isdir(scripts):
        return out, None
    path = out.get("PATH", "")
    norm = os.path.normcase(os.path.normpath(scripts))
    if any(d and os.path.normcase(os.path.normpath(d)) == norm for d in path.split(os.pathsep)):
        return out, None
    out["PATH"] = path + os.pathsep + scripts if path else scripts
    return out, scripts


def rerun_line(cmd: Command, argv: Sequence[str], env: Mapping[str, str], shell_env: Mapping[str, str]) -> str:
    """The step as one shell line a person can paste: cd, every variable that differs from their
    shell's environment, then the command."""
    assigns = [f"{k}={shlex.quote(v)}" for k, v in env.items() if shell_env.get(k) != v]
    unset = [f"-u {shlex.quote(k)}" for k in shell_env if k not in env]
    head = f"cd {shlex.quote(cmd.cwd)} && " if cmd.cwd else ""
    prefix = " ".join(["env", *unset, *assigns]) + " " if assigns or unset else ""
    return head + prefix + shlex.join(list(argv))


def resolve(cmd: Command, base: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
    """The argv (tool resolved to a full path) and environment a step will run with."""
    env = cmd.environment(base)
    tool = find_tool(cmd.argv[0], env)
    if tool is None:
        raise ExternalFailure(
            f"step '{cmd.step}': {cmd.argv[0]!r} is not on the PATH this step runs with\n"
            f"    fix: install it (`buildrows doctor` says how), or put it on PATH")
    return [tool, *cmd.argv[1:]], env


def run_step(ui: UI, cmd: Command, base: Mapping[str, str] | None = None, *,
             doctor: str = "buildrows doctor") -> float:
    """Run one step, streaming its output to the UI's error stream; return its wall time in seconds.

    A failure says how to rerun the step by hand (the variables it had, then the command) and
    names `doctor` (the exact `buildrows ... doctor ROW` for the row being built)."""
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
            f"step '{cmd.step}' failed after {duration(elapsed)}: `{shlex.join(argv)}` {how}"
            + (f" (in {cmd.cwd})" if cmd.cwd else "")
            + f"\n    to rerun it by hand, with the environment it had:\n      {rerun_line(cmd, argv, env, os.environ)}"
            + f"\n    fix: read the step's output above; `{doctor}` checks the toolchain")
    ui.info(f"  step '{cmd.step}' took {duration(elapsed)}")
    return elapsed


def duration(seconds: float) -> str:
    """`0.4s`, `25.3s`, `1m54s`."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, sec = divmod(round(seconds), 60)
    return f"{m}m{sec:02d}s"


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

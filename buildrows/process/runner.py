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
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from buildrows.errors import ExternalFailure
from buildrows.frozen import Frozen, field, frozen_dataclass
from buildrows.ui import UI


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Command(Frozen):
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
    """Run one step, streaming its output line by line through the UI (prefixed with the row
    when rows build beside each other, copied into the row's log and the step's own log);
    return its wall time in seconds.

    A failure names the first error line of the output, the step's log, how to rerun the step
    by hand (the variables it had, then the command) and `doctor` (the exact
    `buildrows ... doctor ROW` for the row being built). Ctrl-C stops the step's process group
    and raises :class:`Interrupted`, whatever status the step then exits with."""
    from buildrows.errors import Interrupted
    from buildrows.process import progress
    from buildrows.process.progress import duration

    if progress.INTERRUPTED.is_set():
        raise Interrupted(f"step '{cmd.step}' was not started: stopped by the user")
    argv, env = resolve(cmd, os.environ if base is None else base)
    ui.step(cmd.step, argv)
    for var, value in cmd.env:
        ui.detail(f"  {var}={shlex.quote(value)}")
    for note in cmd.notes:
        ui.detail(f"  ({note})")
    log_path = ui.logs.step_path(cmd.step) if ui.logs is not None else None
    start = time.perf_counter()
    try:
        code, first, last = _stream(argv, env, cmd, ui, log_path)
    except OSError as e:
        from buildrows.process.diskfull import disk_full, is_disk_full

        if is_disk_full(e):  # its log could not be written
            raise disk_full(e, f"during step '{cmd.step}'") from e
        raise ExternalFailure(f"step '{cmd.step}' could not start `{shlex.join(argv)}`: {e}") from e
    elapsed = time.perf_counter() - start
    where = f"\n    log: {log_path}" if log_path is not None else ""
    if progress.INTERRUPTED.is_set():
        who = "by SIGTERM" if progress.TERMINATED.is_set() else "by the user"
        raise Interrupted(f"step '{cmd.step}' stopped {who} after {duration(elapsed)} ({progress.cause()}; its processes "
                          f"were stopped){where}\n    fix: run the same build again: its tree is kept and reused")
    if code != 0:
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        said = f": {first}" if first else (f" ({how}); its last line: {last}" if last else f" ({how})")
        raise ExternalFailure(
            f"step '{cmd.step}' failed after {duration(elapsed)}{said}{where}"
            + f"\n    the command {how}: `{shlex.join(argv)}`" + (f" (in {cmd.cwd})" if cmd.cwd else "")
            + f"\n    to rerun it by hand, with the environment it had:\n      {rerun_line(cmd, argv, env, os.environ)}"
            + f"\n    fix: read the step's output{' in its log' if log_path else ' above'}; `{doctor}` checks the toolchain")
    ui.info(f"  step '{cmd.step}' took {duration(elapsed)}")
    return elapsed


def _stream(argv: Sequence[str], env: Mapping[str, str], cmd: Command, ui: UI,
            log_path: Path | None) -> tuple[int, str | None, str | None]:
    """Run the step in its own process group and copy its output, line by line as it comes,
    through the UI and into its log; returns its exit status, its first error line and its last line.

    Ctrl-C while it runs (the KeyboardInterrupt lands here, in the main thread) is forwarded to
    every running step's group (buildrows.process.progress); what the steps print after that goes
    to their logs only."""
    from buildrows.process import progress

    log = log_path.open("w", encoding="utf-8", errors="replace") if log_path is not None else None
    try:
        if log is not None:
            log.write(f"# step: {cmd.step}\n# command: {shlex.join(list(argv))}\n")
            if cmd.cwd:
                log.write(f"# directory: {cmd.cwd}\n")
            log.writelines(f"# {k}={shlex.quote(v)}\n" for k, v in cmd.env)
            log.write(f"# started: {time.strftime('%Y-%m-%d %H:%M:%S')}\n\n")
            log.flush()
        from buildrows.process.lock import inherited

        proc = subprocess.Popen(list(argv), env=dict(env), cwd=cmd.cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, pass_fds=inherited(),
                                **progress.popen_options())
        progress.register(proc)
        try:
            assert proc.stdout is not None
            with progress.Watch(ui, cmd.step) as watch:
                while True:
                    try:
                        raw = proc.stdout.readline()
                        if not raw:
                            break
                        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                        watch.saw(line)
                        if log is not None:
                            log.write(line + "\n")
                            log.flush()
                        ui.child(line, show=not progress.INTERRUPTED.is_set())
                    except KeyboardInterrupt:
                        progress.interrupt_all()
                while True:
                    try:
                        code = proc.wait()
                        break
                    except KeyboardInterrupt:
                        progress.interrupt_all()
        finally:
            progress.unregister(proc)
            if proc.poll() is None:  # an exception other than Ctrl-C: do not leave it running
                progress.kill(proc)
                proc.wait()
        if log is not None:
            if progress.INTERRUPTED.is_set():
                log.write(f"\n# {progress.cause()}: buildrows stopped this step's process group (a KeyboardInterrupt "
                          "above is the step's reaction to it)")
            log.write(f"\n# exit status: {code}\n")
        return code, watch.first_error(), watch.last_line
    finally:
        if log is not None:
            log.close()


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Captured(Frozen):
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

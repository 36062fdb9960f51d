"""A running step, watched: its `[n/m]`, a heartbeat when it is silent, its first error line, and
Ctrl-C forwarded to its process group.

Each step runs in a process group of its own (`popen_options`), so the terminal's Ctrl-C reaches
buildrows only: buildrows then sends SIGINT to every running step's group (`interrupt_all`),
stops echoing their output (a child Python's KeyboardInterrupt traceback goes to the log, not the
screen), and reports the rows as interrupted (exit 130). A step that has not stopped 10 seconds
later gets SIGTERM, and 5 seconds after that SIGKILL. SIGTERM to buildrows (a CI runner cancelling
the job) takes the same way out, sending SIGTERM to the steps at once, and exits 143 (`terminating`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from buildrows.ui import UI

#: Set once the user pressed Ctrl-C (or SIGTERM came): no new step starts, running ones are being stopped.
INTERRUPTED = threading.Event()
#: Set once SIGTERM came (a CI runner cancelling the job): the same stop as Ctrl-C, SIGTERM first
#: to the steps, and exit EXIT_TERMINATED.
TERMINATED = threading.Event()
#: The exit status of a build stopped by SIGTERM (128 + 15, as a shell reports it).
EXIT_TERMINATED = 143
_RUNNING: set[subprocess.Popen[bytes]] = set()
_LOCK = threading.Lock()

#: Seconds of silence before a heartbeat line (BUILDROWS_HEARTBEAT overrides; 0 turns it off).
HEARTBEAT = 30.0
GRACE_TERM, GRACE_KILL = 10.0, 5.0

_COUNTER = re.compile(r"^\s*\[(\d+)/(\d+)\]")
#: The lines that say what went wrong, most telling first: a compiler's, CMake's, pip's, ninja's.
_ERRORS = (
    re.compile(r"(?<![A-Za-z_-])(fatal )?error( [A-Z]+\d+)?:"),  # gcc, clang, nvcc (`k.cu(7): error:`), MSVC
    re.compile(r"^CMake Error\b"),
    re.compile(r"^ERROR:"),  # pip
)
_SKIP = re.compile(r"^\s*(\+ |\*\*\*|--|FAILED:|ninja: build stopped|\d+ errors? detected)|Werror|error_|-error")


def duration(seconds: float) -> str:
    """`0.4s`, `25.3s`, `1m54s`."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, sec = divmod(round(seconds), 60)
    return f"{m}m{sec:02d}s"


def heartbeat_interval() -> float:
    """BUILDROWS_HEARTBEAT (seconds) or 30; a bad value is the default."""
    text = os.environ.get("BUILDROWS_HEARTBEAT", "")
    try:
        return max(0.0, float(text)) if text else HEARTBEAT
    except ValueError:
        return HEARTBEAT


def popen_options() -> dict[str, Any]:
    """Start a step in a process group of its own (Ctrl-C in the terminal reaches buildrows only)."""
    if sys.platform == "win32":
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}  # type: ignore[attr-defined,unused-ignore]
    return {"start_new_session": True}


def register(proc: subprocess.Popen[bytes]) -> None:
    with _LOCK:
        _RUNNING.add(proc)
    if INTERRUPTED.is_set():  # Ctrl-C came while it started
        _signal(proc, "INT")


def unregister(proc: subprocess.Popen[bytes]) -> None:
    with _LOCK:
        _RUNNING.discard(proc)


def _signal(proc: subprocess.Popen[bytes], which: str) -> None:
    if proc.poll() is not None:
        return
    try:
        if sys.platform == "win32":
            if which == "INT":
                proc.send_signal(signal.CTRL_BREAK_EVENT)  # type: ignore[attr-defined,unused-ignore]
            else:
                proc.kill()
        else:
            os.killpg(proc.pid, {"INT": signal.SIGINT, "TERM": signal.SIGTERM, "KILL": signal.SIGKILL}[which])
    except (ProcessLookupError, PermissionError, OSError):
        pass


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL to the step's whole process group."""
    _signal(proc, "KILL")


def interrupt_all() -> None:
    """Ctrl-C: SIGINT to every running step's process group, then SIGTERM and SIGKILL to those
    still running after the grace periods. A second call (a second Ctrl-C) kills at once."""
    again = INTERRUPTED.is_set()
    INTERRUPTED.set()
    with _LOCK:
        procs = list(_RUNNING)
    first = "TERM" if TERMINATED.is_set() else "INT"  # SIGTERM: the runner kills us all soon
    for p in procs:
        _signal(p, "KILL" if again else first)
    if again or not procs:
        return
    steps = (("KILL", GRACE_KILL),) if first == "TERM" else (("TERM", GRACE_TERM), ("KILL", GRACE_KILL))

    def escalate() -> None:
        for which, wait in steps:
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and any(p.poll() is None for p in procs):
                time.sleep(0.1)
            for p in procs:
                _signal(p, which)

    threading.Thread(target=escalate, daemon=True, name="buildrows-stop").start()


def cause() -> str:
    """What stopped the build, as messages say it."""
    return "SIGTERM" if TERMINATED.is_set() else "Ctrl-C"


@contextmanager
def terminating() -> Iterator[None]:
    """Treat SIGTERM like Ctrl-C for the body (steps stopped, rows reported, the summary printed),
    and remember it (TERMINATED). Only the main thread can take a signal; elsewhere nothing changes."""
    TERMINATED.clear()
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        yield
        return

    def handler(signum: int, frame: object) -> None:
        already = TERMINATED.is_set()
        TERMINATED.set()
        if not already:
            raise KeyboardInterrupt  # lands where Ctrl-C would, and takes the same way out

    before = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def error_kind(line: str) -> int | None:
    """Which of the error patterns the line is (its rank: a compiler's error first), or None."""
    text = line.strip()
    if not text or _SKIP.search(text):
        return None
    for i, pattern in enumerate(_ERRORS):
        if pattern.search(text):
            return i
    return None


def first_error(lines: list[str]) -> str | None:
    """The first line that says what went wrong (a compiler's `error:`, `CMake Error`, pip's `ERROR:`)."""
    found: dict[int, str] = {}
    for line in lines:
        kind = error_kind(line)
        if kind is not None and kind not in found:
            found[kind] = line.strip()
    return found[min(found)] if found else None


class Watch:
    """What a person sees of a running step besides its own output: the `[n/m]` it printed last,
    and a heartbeat line when it has been silent for `interval` seconds (again every interval)."""

    def __init__(self, ui: UI, step: str, interval: float | None = None) -> None:
        self.ui, self.step = ui, step
        self.interval = heartbeat_interval() if interval is None else interval
        self.start = self.last = time.monotonic()
        self.counter: str | None = None
        self.errors: dict[int, str] = {}  # the first line of each error kind (error_kind)
        self.last_line: str | None = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Watch:
        if self.interval > 0:
            self._thread = threading.Thread(target=self._beat, daemon=True, name=f"heartbeat {self.step}")
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=1)

    def saw(self, line: str) -> None:
        self.last = time.monotonic()
        m = _COUNTER.match(line)
        if m:
            self.counter = f"[{m.group(1)}/{m.group(2)}]"
        if line.strip():
            self.last_line = line.strip()
            kind = error_kind(line)
            if kind is not None and kind not in self.errors:
                self.errors[kind] = line.strip()

    def first_error(self) -> str | None:
        """The most telling error line the step printed (a compiler's before CMake's before pip's)."""
        return self.errors[min(self.errors)] if self.errors else None

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def _beat(self) -> None:

        while not self._done.wait(min(self.interval, 1.0)):
            now = time.monotonic()
            if now - self.last < self.interval or INTERRUPTED.is_set():
                continue
            who = f"{self.ui.row}: " if self.ui.row and not self.ui.prefix else ""
            at = f", last {self.counter}" if self.counter else ""
            self.ui.info(f"  ... {who}step '{self.step}' still running: {duration(now - self.start)} elapsed, "
                         f"silent for {duration(now - self.last)}{at}")
            self.last = now  # the next one after another interval of silence

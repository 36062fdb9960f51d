"""Output that knows where it runs: GitHub Actions folding and annotations, NO_COLOR/FORCE_COLOR elsewhere.

A row built beside others writes through a copy of the UI (`for_row`) that prefixes each line
with the row's name and copies it, without colour, into the row's log file; lines of different
rows never mix (one lock for every write).
"""

from __future__ import annotations

import os
import shlex
import sys
from _thread import RLock  # what threading.RLock() makes, without importing threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from buildrows.process.logs import RowLogs

#: Every line any UI writes goes out under this lock: rows built in threads never cut each other's lines.
_WRITE = RLock()


def wants_color(stream: TextIO, environ: Mapping[str, str], github: bool) -> bool:
    """Colour as the conventions say, in the order CPython's own ``_colorize`` applies them:
    NO_COLOR non-empty turns it off (https://no-color.org), then FORCE_COLOR non-empty turns it on
    even into a pipe or a GitHub log (https://force-color.org), then TERM=dumb turns it off; else
    a terminal gets colour and GitHub Actions' log (not a terminal) does not."""
    if environ.get("NO_COLOR"):
        return False
    if environ.get("FORCE_COLOR"):
        return True
    if environ.get("TERM") == "dumb" or github:
        return False
    return bool(hasattr(stream, "isatty") and stream.isatty())


class UI:
    """The only place buildrows writes human-readable output (the library never prints).

    quiet (-q): only warnings, errors and results; verbose (-v): every variable a step sets and
    why a command looks as it does (without it they are in the row's log only)."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None, quiet: bool = False,
                 verbose: bool = False) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.quiet = quiet
        self.verbose = verbose
        self.github = os.environ.get("GITHUB_ACTIONS") == "true"
        self.color = wants_color(self.err, os.environ, self.github)
        self.prefix = ""  # "ROW | " while rows build beside each other
        self.row: str | None = None  # the row this UI reports on (heartbeats name it)
        self.log: TextIO | None = None  # the row's log: every line, without colour
        self.logs: RowLogs | None = None  # where the row's steps write their logs

    def _c(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text

    def _emit(self, text: str, code: str = "", *, show: bool = True, stream: TextIO | None = None) -> None:
        """One message (one or more lines) to stderr (or `stream`), prefixed, and into the log."""
        with _WRITE:
            if show:
                target = stream or self.err
                for line in text.split("\n"):
                    target.write(self.prefix + (self._c(code, line) if code and line else line) + "\n")
                target.flush()
            if self.log is not None:
                self.log.write(text + "\n")
                self.log.flush()

    def print(self, text: str = "") -> None:
        """Results (what a pipe consumes) go to stdout."""
        self._emit(text, stream=self.out)

    def info(self, text: str) -> None:
        self._emit(text, show=not self.quiet)

    def detail(self, text: str) -> None:
        """What only -v shows (it is in the row's log either way)."""
        self._emit(text, show=self.verbose and not self.quiet)

    def child(self, line: str, show: bool = True) -> None:
        """One line of a step's own output (the compiler's, ninja's): shown unless -q, always logged."""
        self._emit(line.rstrip("\r\n"), show=show and not self.quiet)

    def step(self, name: str, argv: Sequence[str] | None = None) -> None:
        """Announce a step and the exact command line it runs."""
        self._emit(f"==> {name}", "1", show=not self.quiet)
        if argv is not None:
            self._emit(f"+ {shlex.join(list(argv))}", show=not self.quiet)

    def ok(self, text: str) -> None:
        self._emit(text, "32", show=not self.quiet)

    def warn(self, text: str) -> None:
        if self.github:
            with _WRITE:
                print(f"::warning::{_escape(self.prefix + text)}", file=self.err, flush=True)
            self._emit(f"warning: {text}", show=False)
        else:
            self._emit(f"warning: {text}", "33")

    def error(self, title: str, text: str) -> None:
        if self.github:
            with _WRITE:
                print(f"::error title=buildrows {title}::{_escape(self.prefix + text)}", file=self.err)
        self._emit(f"buildrows: {title}: {text}", "31")

    def for_row(self, row: str, *, prefixed: bool, log: TextIO | None = None, logs: RowLogs | None = None) -> UI:
        """A UI for one row: the same streams and settings, its lines prefixed with the row's name
        when it builds beside others, and copied into its log."""
        import copy

        other = copy.copy(self)
        other.row = row
        other.prefix = f"{row} | " if prefixed else ""
        other.log, other.logs = log, logs
        return other

    @contextmanager
    def section(self, title: str) -> Iterator[None]:
        """A header for one part of a long run (each row of `build`): a ::group:: that folds on
        GitHub Actions, a header line elsewhere."""
        if not self.github or self.prefix:  # rows built together get no ::group:: (below): a header line
            self._emit(f"=== {title} ===", "1;36", show=not self.quiet)
        with self.group(title):
            yield

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        """A ::group:: that folds on GitHub Actions (groups do not nest, and rows built beside
        each other share one: only a UI without a prefix opens one)."""
        fold = self.github and not self.prefix
        if fold:
            with _WRITE:
                print(f"::group::{title}", file=self.err, flush=True)
        try:
            yield
        finally:
            if fold:
                with _WRITE:
                    print("::endgroup::", file=self.err, flush=True)


def _escape(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

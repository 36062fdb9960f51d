"""Output that knows where it runs: GitHub Actions folding and annotations, NO_COLOR elsewhere."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TextIO


class UI:
    """The only place buildrows writes human-readable output (the library never prints)."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None, quiet: bool = False) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.quiet = quiet
        self.github = os.environ.get("GITHUB_ACTIONS") == "true"
        color_ok = hasattr(self.err, "isatty") and self.err.isatty()
        self.color = color_ok and "NO_COLOR" not in os.environ and not self.github

    def _c(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text

    def print(self, text: str = "") -> None:
        """Results (what a pipe consumes) go to stdout."""
        print(text, file=self.out)

    def info(self, text: str) -> None:
        if not self.quiet:
            print(text, file=self.err)

    def step(self, name: str, argv: Sequence[str] | None = None) -> None:
        """Announce a step and the exact command line it runs."""
        if argv is not None:
            print(self._c("1", f"==> {name}"), file=self.err)
            print(f"+ {shlex.join(list(argv))}", file=self.err)
        else:
            print(self._c("1", f"==> {name}"), file=self.err)
        self.err.flush()

    def ok(self, text: str) -> None:
        print(self._c("32", text), file=self.err)

    def warn(self, text: str) -> None:
        if self.github:
            print(f"::warning::{_escape(text)}", file=self.err)
        else:
            print(self._c("33", f"warning: {text}"), file=self.err)

    def error(self, title: str, text: str) -> None:
        if self.github:
            print(f"::error title=buildrows {title}::{_escape(text)}", file=self.err)
        print(self._c("31", f"buildrows: {title}: ") + text, file=self.err)

    def buffered(self) -> UI:
        """A UI with this one's settings that writes into memory (a row built beside others, in
        parallel); `replay` then writes what it holds, in one piece, here."""
        import io

        other = UI(io.StringIO(), io.StringIO(), self.quiet)
        other.github, other.color = self.github, self.color
        return other

    def replay(self, other: UI) -> None:
        """Write what a `buffered` UI holds: its results to stdout, its log to stderr."""
        for mine, theirs in ((self.out, other.out), (self.err, other.err)):
            getvalue = getattr(theirs, "getvalue", None)
            if getvalue is not None:
                mine.write(getvalue())
                mine.flush()

    @contextmanager
    def section(self, title: str) -> Iterator[None]:
        """A header for one part of a long run (each row of `build`): a ::group:: that folds on
        GitHub Actions, a header line elsewhere."""
        if not self.github:
            print(self._c("1;36", f"=== {title} ==="), file=self.err, flush=True)
        with self.group(title):
            yield

    @contextmanager
    def group(self, title: str) -> Iterator[None]:
        if self.github:
            print(f"::group::{title}", file=self.err, flush=True)
        try:
            yield
        finally:
            if self.github:
                print("::endgroup::", file=self.err, flush=True)


def _escape(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

"""What `buildrows build` reports after many rows: one outcome per row, the table, the exit code.

Plain data and pure functions: the command records an outcome per row as it goes and renders
the table at the end, whether every row ran or the build stopped at the first failure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from buildrows.errors import (
    EXIT_BAD_INPUT,
    EXIT_CHECK_FAILED,
    EXIT_EXTERNAL,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_REFUSED,
)

Status = Literal["built", "failed", "refused", "skipped", "interrupted"]

#: How bad each exit code is, worst last: a bug in buildrows (1) outranks everything, then a
#: failed build step (4), a failed wheel check (5), bad input (2) and a refusal (3).
SEVERITY = (EXIT_OK, EXIT_REFUSED, EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_EXTERNAL, EXIT_INTERNAL)


@dataclass(frozen=True)
class RowOutcome:
    """One selected row at the end of a build: what happened and what it produced."""

    row: str
    status: Status
    exit_code: int = EXIT_OK
    wheel: str | None = None  # the wheel's file name (None: failed, or the driver makes none)
    size: int | None = None  # bytes
    check: bool | None = None  # the wheel check's verdict; None when not checked
    seconds: float | None = None
    cache: str = ""  # compiler-cache hits, as CacheStats.describe() says, or "off"
    reason: str = ""  # the first line of the error, for failed, refused and skipped rows
    wheel_path: str | None = None  # where the wheel was written
    log: str | None = None  # the row's log (a failed row's: its failed step's log)
    fix: str = ""  # what to do about a failure, from the error's `fix:` line


def worst_exit(outcomes: Sequence[RowOutcome]) -> int:
    """The worst exit code among the rows (SEVERITY order); 0 when every row built and passed."""
    def rank(code: int) -> int:
        return SEVERITY.index(code) if code in SEVERITY else len(SEVERITY)

    return max((o.exit_code for o in outcomes), key=rank, default=EXIT_OK)


def size_text(n: int) -> str:
    """A file size as people read it: `812 KB`, `4.2 MB`."""
    if n < 1000 * 1000:
        return f"{max(1, round(n / 1000))} KB"
    if n < 1000 ** 3:
        return f"{n / 1000 ** 2:.1f} MB"
    return f"{n / 1000 ** 3:.2f} GB"


def _size(n: int | None) -> str:
    return "-" if n is None else size_text(n)


def _check(o: RowOutcome) -> str:
    if o.status == "built":
        return "-" if o.check is None else ("PASS" if o.check else "FAIL")
    return o.status.upper() if o.status != "skipped" else "not built"


def table_rows(outcomes: Sequence[RowOutcome], width: int = 0) -> list[tuple[str, ...]]:
    """The summary as cells: row, wheel, size, check, time, compiler cache. A row that made no
    wheel says why in the wheel's column (cut to `width` characters when given)."""
    out: list[tuple[str, ...]] = []
    for o in outcomes:
        why = o.reason if not width or len(o.reason) <= width else o.reason[:width - 3] + "..."
        wheel = o.wheel or ("(no wheel)" if o.status == "built" else why or "-")
        secs = "-" if o.seconds is None else f"{o.seconds:.1f}s"
        out.append((o.row, wheel, _size(o.size), _check(o), secs, o.cache or "-"))
    return out


#: The longest reason the text table shows in the wheel column (the Markdown table shows all).
REASON_WIDTH = 90
HEADER = ("row", "wheel", "size", "check", "time", "compiler cache")


def render_table(outcomes: Sequence[RowOutcome]) -> list[str]:
    """The summary as aligned text lines, the header first."""
    cells = [HEADER, *table_rows(outcomes, width=REASON_WIDTH)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(HEADER))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def render_logs(outcomes: Sequence[RowOutcome]) -> list[str]:
    """Under the table: each row's log, and for a row that did not build, its fix."""
    lines: list[str] = []
    for o in outcomes:
        if o.log:
            lines.append(f"log of {o.row}: {o.log}")
        if o.status in ("failed", "interrupted", "refused") and o.fix:
            lines.append(f"  fix: {o.fix}")
    return lines


def render_markdown(outcomes: Sequence[RowOutcome]) -> str:
    """The summary as a GitHub-flavoured Markdown table (for $GITHUB_STEP_SUMMARY)."""
    def esc(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in table_rows(outcomes)]
    details = [f"- {o.row}: log `{o.log}`" + (f"; fix: {esc(o.fix)}" if o.fix and o.status != "built" else "")
               for o in outcomes if o.log or (o.fix and o.status != "built")]
    return "\n".join(lines) + "\n" + ("\n" + "\n".join(details) + "\n" if details else "")


def totals(outcomes: Sequence[RowOutcome]) -> str:
    """One line: how many rows built, failed, were refused or not built, and the exit code."""
    counts = {s: sum(1 for o in outcomes if o.status == s)
              for s in ("built", "failed", "interrupted", "refused", "skipped")}
    checked_bad = sum(1 for o in outcomes if o.status == "built" and o.check is False)
    parts = [f"{counts['built']} built" + (f" ({checked_bad} failed the check)" if checked_bad else "")]
    parts += [f"{n} {'not built' if s == 'skipped' else s}" for s, n in counts.items() if s != "built" and n]
    return f"{len(outcomes)} row{'s' if len(outcomes) != 1 else ''}: " + ", ".join(parts) + f"; exit code {worst_exit(outcomes)}"


def to_json(outcomes: Sequence[RowOutcome], seconds: float, differences: Sequence[str] = ()) -> dict[str, object]:
    """`build --json`: one document with every selected row's outcome (docs/reference.md)."""
    rows = [{
        "row": o.row,
        "status": o.status,
        "exit_code": o.exit_code,
        "wheel": o.wheel,
        "wheel_path": o.wheel_path,
        "size": o.size,
        "check": None if o.check is None else ("pass" if o.check else "fail"),
        "seconds": None if o.seconds is None else round(o.seconds, 3),
        "compiler_cache": o.cache or None,
        "reason": o.reason or None,
        "fix": o.fix or None,
        "log": o.log,
    } for o in outcomes]
    return {"command": "build", "exit_code": worst_exit(outcomes), "seconds": round(seconds, 3),
            "summary": totals(outcomes), "rows": rows, "members_differ": list(differences)}


#: A C or C++ compile as setuptools prints it, or as ninja's progress line shows it (`[1/3] c++ ... -c`).
_CXX_COMPILE = re.compile(r"^(?:\[\d+/\d+\]\s+)?(?:\S*ccache\s+)?\S*(?:c\+\+|g\+\+|gcc|clang\+\+|clang|\bcc)\s[^\n]*\s-c\s",
                          re.MULTILINE)


def cxx_compiles_in_logs(log_dir: Path) -> int | None:
    """How many C/C++ compile commands a setup.py row's step logs show (None: the logs cannot be
    read). Zero means the build compiled nothing: a pure-Python wheel, or ninja with no work to do,
    which the cache column says instead of "not cached"."""
    try:
        text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in sorted(log_dir.glob("[0-9]*.log")))
    except OSError:
        return None
    return len(_CXX_COMPILE.findall(text))

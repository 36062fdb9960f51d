"""Refuse policy text too large, too deeply nested or with too long a dotted key, before TOML parses it.

Python's TOML parser recurses once per level of nesting and handles a dotted key part by part:
a 20,000-part dotted key (42 KB) took 12.5 s and 2.4 GB and then a RecursionError, 100,000 parts
more than 23 GB, arrays nested 1,000 deep a RecursionError (issue 37). A policy is a few KB, nested
four or five levels, its keys three parts at most, so the limits below are far from any real one
and each refusal names the file, the line and the limit (docs/policy.md, "Limits").
"""

from __future__ import annotations

import re
from functools import cache
from itertools import repeat
from pathlib import Path
from typing import Final

from buildrows.errors import BadInput

__all__ = ["MAX_DEPTH", "MAX_KEY_PARTS", "MAX_POLICY_BYTES", "check_bounds"]

MAX_POLICY_BYTES: Final = 1 << 20
MAX_DEPTH: Final = 64  # arrays and inline tables, one inside the other
MAX_KEY_PARTS: Final = 64  # `a.b.c = 1` has 3


@cache
def _tokens() -> re.Pattern[str]:
    # Strings (whose brackets and dots are text), comments, and the characters that matter.
    return re.compile(r'"""(?:\\.|[^\\])*?"""|\'\'\'.*?\'\'\'|"(?:\\.|[^"\\\n])*"|\'[^\'\n]*\'|#[^\n]*|[\[\]{}=.,\n]',
                      re.DOTALL)


def check_bounds(text: str, file: str | Path) -> None:
    """Raise :class:`BadInput` naming `file` when `text` is past a limit above; otherwise return at
    once (a policy with few brackets and dots is not scanned at all: `env` and `hook` start fast)."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_POLICY_BYTES:
        raise BadInput(f"{file}: the policy is {size} bytes, more than the {MAX_POLICY_BYTES >> 20} MiB a policy may be\n"
                       "    fix: a policy is a few KB; check that this is the file you meant")
    brackets = text.count("[") + text.count("{")
    # A dotted key lies on one line: only a line with that many dots could hold one.
    if brackets <= MAX_DEPTH and max(map(str.count, text.split("\n"), repeat(".")), default=0) < MAX_KEY_PARTS:
        return
    depth = dots = 0
    line = 1
    for m in _tokens().finditer(text):
        tok = m.group()
        if tok in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                _refuse(file, text, m.start(), f"arrays or inline tables nested more than {MAX_DEPTH} deep")
            dots = 0
        elif tok in "]}":
            depth = max(depth - 1, 0)
            dots = 0
        elif tok == ".":
            dots += 1
            if dots >= MAX_KEY_PARTS:
                _refuse(file, text, m.start(), f"a dotted key of more than {MAX_KEY_PARTS} parts")
        elif tok in ",=\n":
            dots = 0
        elif tok.startswith(('"""', "'''")):
            line += tok.count("\n")
    del line


def _refuse(file: str | Path, text: str, at: int, what: str) -> None:
    line = text.count("\n", 0, at) + 1
    raise BadInput(f"{file}:{line}: {what}: no policy needs that, and reading it would take the parser "
                   "gigabytes or its recursion limit\n"
                   "    fix: write the key or value out plainly (a policy's keys have at most three parts)")

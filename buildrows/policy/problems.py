"""Collect a policy's problems, each with its file, line, row and field.

The line of a dotted key in the TOML text (`Locator`), and the problem collector the section
builders share (`PolicyProblems`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from buildrows.errors import Problem
from buildrows.policy import schema


class Locator:
    """Finds the line of a dotted key in TOML text (tables, arrays of tables, keys)."""

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?")
    _KEY = re.compile(r"^\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_.\-\" ]+?)\s*=")

    def __init__(self, text: str, prefix: tuple[str, ...] = ()) -> None:
        self.prefix = prefix
        self.index: dict[tuple[str | int, ...], int] = {}
        counts: dict[tuple[str, ...], int] = {}
        current: tuple[str | int, ...] = ()
        for n, line in enumerate(text.splitlines(), start=1):
            m = self._HEADER.match(line)
            if m:
                keys = tuple(_split_key(m.group(2)))
                if m.group(1) == "[[":
                    i = counts.get(keys, 0)
                    counts[keys] = i + 1
                    current = (*keys, i)
                else:
                    current = keys
                for j in range(1, len(current) + 1):
                    self.index.setdefault(current[:j], n)
                continue
            m = self._KEY.match(line)
            if m:
                keys = tuple(_split_key(m.group(1)))
                for j in range(1, len(keys) + 1):
                    self.index.setdefault((*current, *keys[:j]), n)
                # inline tables: `archs = { "13.0" = ... }` puts nested keys on this line too
                for inner in re.findall(r"[{,]\s*(\"[^\"]*\"|[A-Za-z0-9_\-]+)\s*=", line):
                    self.index.setdefault((*current, *keys, inner.strip('"')), n)

    def __call__(self, path: tuple[str | int, ...]) -> int | None:
        full: tuple[str | int, ...] = (*self.prefix, *path)
        while full:
            if full in self.index:
                return self.index[full]
            full = full[:-1]
        return None


def _split_key(text: str) -> list[str]:
    return [p.strip().strip('"').strip("'") for p in re.findall(r'"[^"]*"|\'[^\']*\'|[^.]+', text)]


class PolicyProblems:
    """The problems of one policy file, collected with file, line, row and field; the base of the
    section builders (buildrows.policy.build_sections, buildrows.policy.build_rows)."""

    def __init__(self, doc: dict[str, Any], file: str, locate: schema.Locate, prefix: tuple[str, ...] = ()) -> None:
        self.doc = doc
        self.file = file
        self.locate = locate
        self.prefix = prefix
        self.problems: list[Problem] = []
        # Trains already reported as unknown (or unparsable) in cuda.trains: every later mention of
        # them is the same mistake, so it is not reported again (one error per mistake).
        self.bad_trains: set[str] = set()
        self.runtime_reported: set[int] = set()

    def key(self, *path: str | int) -> str:
        """A key path as the file spells it (`tool.buildrows.platforms.linux-x86_64` in pyproject.toml)."""
        return schema._dotted((*self.prefix, *path))

    def problem(self, path: tuple[str | int, ...], message: str, *, row: str | None = None,
                hint: str | None = None, refusal: bool = False) -> None:
        self.problems.append(
            Problem(message, file=self.file, line=self.locate(path), row=row,
                    field=self.key(*path), hint=hint, refusal=refusal)
        )

    def where(self, path: tuple[str | int, ...]) -> str:
        line = self.locate(path)
        return f"{self.key(*path)} ({Path(self.file).name}{f':{line}' if line else ''})"

    def _no_reason(self, e: dict[str, Any], path: tuple[str | int, ...]) -> bool:
        if not e["reason"].strip():
            self.problem((*path, "reason"), "an exception needs its reason", hint="say why the project intends it")
            return True
        return False

"""Rows x GPU architectures at a glance: which carry a cubin, PTX only, both, or nothing.

One view for what a policy promises (`buildrows rows --coverage`, from each row's parsed
architecture list, buildrows.policy.archs) and for what built wheels carry (after `build`, from
the device code read out of each wheel). Cells are architectures as cuobjdump names them
(`sm_90`, `sm_90a`), so a new spelling the architecture model learns shows up as its own column.
Rows that differ only in their Python share one line (`linux-x86_64-cu130 py310-313`), which keeps
a whole release on an 80-column terminal.

Legend: `C` a cubin; `C+` a cubin and PTX; `P` PTX only (JIT-compiled on that GPU); `~` some of
the wheel's libraries only; `.` nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

LEGEND = "C cubin, C+ cubin and PTX, P PTX only, ~ some libraries only, . none"


@dataclass(frozen=True)
class Coverage:
    """One line of the view: a label and, per architecture name (`sm_90`), its cell."""

    label: str
    cells: Mapping[str, str]


def cell(cubin: bool, ptx: bool) -> str:
    return "C+" if cubin and ptx else "C" if cubin else "P" if ptx else "."


def of_names(cubins: Iterable[str], ptx: Iterable[str]) -> dict[str, str]:
    c, p = set(cubins), set(ptx)
    return {a: cell(a in c, a in p) for a in c | p}


def of_libraries(libraries: Sequence[tuple[Sequence[str], Sequence[str]]]) -> dict[str, str]:
    """A wheel's cells from its device-code libraries' (cubins, ptx): an architecture some of
    them lack is `~`."""
    per = [of_names(c, p) for c, p in libraries]
    names = set().union(*per) if per else set()
    out: dict[str, str] = {}
    for a in names:
        got = {lib.get(a, ".") for lib in per}
        out[a] = got.pop() if len(got) == 1 else ("~" if "." in got else "C" if all(g.startswith("C") for g in got) else "~")
    return out


def _key(name: str) -> tuple[int, str]:
    m = re.fullmatch(r"sm_(\d+)([a-z]*)", name)
    return (int(m.group(1)), m.group(2)) if m else (10 ** 6, name)


def _dotted(name: str) -> str:
    m = re.fullmatch(r"sm_(\d+)(\d)([a-z]*)", name)
    return f"{m.group(1)}.{m.group(2)}{m.group(3)}" if m else name


def collapse(lines: Sequence[Coverage]) -> list[Coverage]:
    """Rows whose names differ only in `-pyXY` and whose cells are the same: one line."""
    groups: dict[tuple[str, tuple[tuple[str, str], ...]], list[str]] = {}
    order: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    for ln in lines:
        m = re.fullmatch(r"(.+)-py(\d+t?)", ln.label)
        base, py = (m.group(1), m.group(2)) if m else (ln.label, "")
        key = (base, tuple(sorted(ln.cells.items())))
        if key not in groups:
            groups[key] = []
            order.append(key)
        if py:
            groups[key].append(py)
    out = []
    for key in order:
        out.append(Coverage(f"{key[0]} {_pythons(groups[key])}".rstrip(), dict(key[1])))
    return out


def _pythons(pys: list[str]) -> str:
    """`py310`, `py310-py313` (consecutive), `py310,py312` (not)."""
    if len(pys) <= 1:
        return "".join(f"py{p}" for p in pys)
    digits = [int(p) if p.isdigit() else None for p in pys]
    if all(d is not None for d in digits) and digits == list(range(digits[0] or 0, (digits[0] or 0) + len(pys))):
        return f"py{pys[0]}-py{pys[-1]}"
    return ",".join(f"py{p}" for p in pys)


def render(lines: Sequence[Coverage], title: str) -> list[str]:
    """The view as text: a header of architectures (dotted), one line per row group, the legend."""
    if not lines:
        return []
    names = sorted({a for ln in lines for a in ln.cells}, key=_key)
    width = max(len(ln.label) for ln in lines)
    cols = [max(len(_dotted(a)), 2) for a in names]
    head = " " * width + "  " + " ".join(_dotted(a).rjust(w) for a, w in zip(names, cols, strict=True))
    out = [title, head]
    for ln in lines:
        out.append(ln.label.ljust(width) + "  " + " ".join(ln.cells.get(a, ".").rjust(w) for a, w in zip(names, cols, strict=True)))
    out.append(f"({LEGEND})")
    return out

"""Which extras a requirement's environment marker holds under, read from the marker in one pass.

A wheel's `Requires-Dist: pkg; extra == "a" or extra == "b"` applies under extras a and b. The check
asks that once per extra the wheel names, and packaging answers it by evaluating the marker again
each time: a marker of 10,000 `extra == ...` clauses took minutes (issue 37). Here the marker,
parsed once, is read as a set: each clause on `extra` is a set of extras (`!=`: all but one),
every other clause true or false on the platform, combined as packaging combines them (`and`
binds tighter than `or`). Clauses it does not model fall back to packaging, per extra named.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from packaging.markers import Marker
from packaging.utils import canonicalize_name

__all__ = ["Extras", "extras_where"]


class _AllBut(frozenset[str]):
    """Every extra but these (what `extra != "x"` selects)."""


_Set = frozenset[str]  # a set of extras; an _AllBut for "every extra but ..."


@dataclass(frozen=True)
class Extras:
    """The extras a marker holds under: a set read from the marker, or (a marker this reading does
    not model) packaging's own evaluation, per extra asked."""

    of: _Set
    marker: Marker | None = None
    env: tuple[tuple[str, str], ...] = ()

    def holds(self, extra: str) -> bool:
        if self.marker is not None:
            return self.marker.evaluate(dict(self.env, extra=extra))
        name = canonicalize_name(extra)
        return name not in self.of if isinstance(self.of, _AllBut) else name in self.of


def extras_where(parsed: Marker, env: dict[str, str]) -> Extras:
    """The extras under which `parsed` holds in the marker environment `env`, in one pass over the marker, parsed once
    (issue 37: a marker of 10,000 `extra == ...` clauses was parsed and evaluated again for each of
    its 10,000 extras: minutes). Each clause on `extra` is a set, every other clause true or false,
    combined as packaging evaluates markers (`and` binds tighter than `or`)."""
    try:
        return Extras(_where(parsed._markers, env))  # packaging's parsed form (stable since packaging 22)
    except _Unsure:
        # A clause this reading does not model (`extra in "a b"`, `"x" == extra`...): packaging decides, per extra asked.
        return Extras(frozenset(), parsed, tuple(env.items()))


class _Unsure(Exception):
    pass


_ALL: _Set = _AllBut()
_NONE: _Set = frozenset()


def _both(a: _Set, b: _Set) -> _Set:
    if isinstance(a, _AllBut) and isinstance(b, _AllBut):
        return _AllBut(a | b)
    if isinstance(a, _AllBut):
        return frozenset(b - a)
    if isinstance(b, _AllBut):
        return frozenset(a - b)
    return a & b


def _either(a: _Set, b: _Set) -> _Set:
    if isinstance(a, _AllBut) and isinstance(b, _AllBut):
        return _AllBut(a & b)
    if isinstance(a, _AllBut):
        return _AllBut(a - b)
    if isinstance(b, _AllBut):
        return _AllBut(b - a)
    return a | b


def _where(markers: Sequence[object], env: dict[str, str]) -> _Set:
    groups: list[_Set] = [_ALL]
    for item in markers:
        if isinstance(item, list):
            groups[-1] = _both(groups[-1], _where(item, env))
        elif isinstance(item, tuple):
            groups[-1] = _both(groups[-1], _clause(item, env))
        elif item == "or":
            groups.append(_ALL)
        elif item != "and":
            raise _Unsure
    plain = [g for g in groups if not isinstance(g, _AllBut)]
    but = [g for g in groups if isinstance(g, _AllBut)]
    anyof = frozenset().union(*plain)
    if not but:
        return anyof
    return _AllBut(frozenset.intersection(*but) - anyof)


def _clause(item: tuple[object, ...], env: dict[str, str]) -> _Set:
    lhs, op, rhs = item
    names = [getattr(x, "value", None) for x in (lhs, rhs)]
    kinds = [type(x).__name__ for x in (lhs, rhs)]
    if "extra" not in names or kinds[0] != "Variable":
        if "extra" in names:
            raise _Unsure
        one = Marker(_spelled(item))
        return _ALL if one.evaluate(dict(env, extra="")) else _NONE
    value = canonicalize_name(str(names[1]))
    if str(getattr(op, "value", "")) == "==":
        return frozenset({value})
    if str(getattr(op, "value", "")) == "!=":
        return _AllBut({value})
    raise _Unsure


def _spelled(item: tuple[object, ...]) -> str:
    lhs, op, rhs = item
    return " ".join(x.serialize() if hasattr(x, "serialize") else str(x) for x in (lhs, op, rhs))

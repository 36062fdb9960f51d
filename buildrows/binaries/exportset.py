"""The names a library exports, held compactly: 8 bytes a name, not a Python string in a set.

A library's exported symbols are only ever asked "is this name here?" (the load check's
``DynamicSymbols.defines``). TensorFlow's wheel has 260,000 of them in one library; as a
``frozenset`` of ``str`` (each name also as ``name@VERSION``) they made ``check`` peak at 307 MB.
:class:`ExportSet` keeps a sorted ``array`` of the 64-bit hashes of the names' UTF-8 bytes
(Python's own ``hash`` of ``bytes``: SipHash, seeded per process, computed in C) and answers by
binary search: memory grows by 8 bytes an export, and building it holds no name longer than the
moment it is hashed. A false "here" needs a 64-bit collision between the name asked for and one of
the library's exports (about one in 10^14 for a library of 260,000 exports); nothing else differs
from the set. Hashes are only compared within one process (the set is never stored or sent).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator

__all__ = ["ExportSet"]


class ExportSet:
    """A set of names answering ``name in it`` and ``len``, from the names' hashes."""

    __slots__ = ("_hashes",)

    def __init__(self, hashes: Iterable[int] = ()) -> None:
        table = array("q", hashes)
        # array has no sort of its own: a sorted copy, once
        self._hashes = array("q", sorted(table)) if len(table) > 1 else table

    @staticmethod
    def key(name: bytes) -> int:
        """What a name is held as (for builders that have its bytes at hand)."""
        return hash(name)

    @classmethod
    def of(cls, names: Iterable[str]) -> ExportSet:
        return cls(hash(n.encode("utf-8", "surrogateescape")) for n in names)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        h = hash(name.encode("utf-8", "surrogateescape"))
        i = bisect_left(self._hashes, h)
        return i < len(self._hashes) and self._hashes[i] == h

    def __len__(self) -> int:
        return len(self._hashes)

    def __iter__(self) -> Iterator[str]:
        raise TypeError("an ExportSet holds hashes, not names: ask `name in exports`")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExportSet) and self._hashes == other._hashes

    def __hash__(self) -> int:
        return hash(self._hashes.tobytes())

    def __repr__(self) -> str:
        return f"ExportSet({len(self)} names)"

    @property
    def nbytes(self) -> int:
        return self._hashes.itemsize * len(self._hashes)

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


# Up to here sorted() at once (some 10 MB of ints for a moment, a tenth of the time: PyTorch's libtorch_cpu.so has 150,000).
_SPLIT = 1 << 18


def _sorted(table: array) -> array:  # type: ignore[type-arg]
    """``table`` sorted. array has no sort of its own, and sorted() makes a Python int of each entry
    (40 bytes: 76 MB for TensorFlow's 1.9 million): a large table is sorted in 256 parts by its top
    byte, one part's ints at a time."""
    if len(table) <= _SPLIT:
        return array("q", sorted(table))
    parts = [array("q") for _ in range(256)]
    for h in table:
        parts[(h >> 56) + 128].append(h)
    del table
    out = array("q")
    for i in range(256):
        out.extend(sorted(parts[i]))
        parts[i] = array("q")
    return out


class ExportSet:
    """A set of names answering ``name in it`` and ``len``, from the names' hashes."""

    __slots__ = ("_hashes",)

    def __init__(self, hashes: Iterable[int] = ()) -> None:
        table = hashes if isinstance(hashes, array) else array("q", hashes)
        self._hashes = _sorted(table)

    @staticmethod
    def key(name: bytes) -> int:
        """What a name is held as (for builders that have its bytes at hand)."""
        return hash(name)

    @staticmethod
    def versioned_key(name: bytes, version: bytes) -> int:
        """What ``name@version`` (a name exported under a version) is held as."""
        return hash((hash(name), version))

    @classmethod
    def of(cls, names: Iterable[str]) -> ExportSet:
        return cls(hash(n.encode("utf-8", "surrogateescape")) for n in names)

    def has_versioned(self, name: str, version: str) -> bool:
        """Whether ``name`` is exported under ``version``."""
        return self._has(self.versioned_key(name.encode("utf-8", "surrogateescape"),
                                            version.encode("utf-8", "surrogateescape")))

    def has_key(self, h: int) -> bool:
        """Whether the name whose :meth:`key` is ``h`` is here (a caller asking many libraries for the
        same name computes its key once)."""
        table = self._hashes
        i = bisect_left(table, h)
        return i < len(table) and table[i] == h

    def _has(self, h: int) -> bool:
        i = bisect_left(self._hashes, h)
        return i < len(self._hashes) and self._hashes[i] == h

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        return self._has(hash(name.encode("utf-8", "surrogateescape")))

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

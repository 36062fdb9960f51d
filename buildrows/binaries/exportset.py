"""The names a library exports, held by their hashes: never a Python string in a set.

A library's exported symbols are only ever asked "is this name here?" (the load check's
``DynamicSymbols.defines``). TensorFlow's wheel has 260,000 of them in one library; as a
``frozenset`` of ``str`` (each name also as ``name@VERSION``) they made ``check`` peak at 307 MB.
:class:`ExportSet` keeps the 64-bit hashes of the names' UTF-8 bytes (Python's own ``hash`` of
``bytes``: SipHash, seeded per process, computed in C); building it holds no name longer than the
moment it is hashed. Two ways, the same answers:

- up to :data:`SET_MAX` names, while all such sets of the process hold at most :data:`SET_BUDGET`
  names (some 8 MB: PyTorch's libraries fit, TensorFlow's 77 do not), a ``frozenset`` of the hashes: asked in one C step, many names at once with
  :meth:`ExportSet.missing` (the load check's 29,000 asks on PyTorch's wheel), and no sort to build;
- beyond that, a sorted ``array`` of the hashes, each as the nearest double, asked by binary search:
  8 bytes a name. Doubles because ``sorted`` compares floats in one machine instruction and 64-bit
  ints digit by digit (half the time).

A false "here" needs a collision between the name asked for and one of the library's exports: of
64 bits in a set, of 53 bits in the array (about one in 10^10 for a library of 260,000 exports);
nothing else differs from a set of the names. Hashes are only compared within one process (never
stored or sent).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from typing import Final

__all__ = ["ExportSet"]


# Up to here sorted() at once (some 10 MB of ints for a moment, a tenth of the time: PyTorch's libtorch_cpu.so has 150,000).
_SPLIT = 1 << 18


def _sorted(table: array[int]) -> array[float]:
    """``table``'s hashes as doubles, sorted. array has no sort of its own, and sorted() makes a
    Python object of each entry (76 MB for TensorFlow's 1.9 million): a large table is sorted in 256
    parts by its top byte (``float`` keeps the order of ints), one part's floats at a time."""
    if len(table) <= _SPLIT:
        return array("d", sorted(map(float, table)))
    parts = [array("q") for _ in range(256)]
    for h in table:
        parts[(h >> 56) + 128].append(h)
    del table
    out = array("d")
    for i in range(256):
        out.extend(sorted(map(float, parts[i])))
        parts[i] = array("q")
    return out


#: The most names one ExportSet holds as a ``frozenset`` (some 60 bytes each against the array's 8),
#: and the most all of them hold at once (ExportSets that would pass it take the array). The total is
#: kept without a lock: a race between two symbol threads costs a set more or less, never an answer.
SET_MAX: Final = 1 << 18
SET_BUDGET: Final = 1 << 17
_held = [0]
_STEP: Final = 8192


class ExportSet:
    """A set of names answering ``name in it`` and ``len``, from the names' hashes."""

    __slots__ = ("_hashes", "_set")

    def __init__(self, hashes: Iterable[int] = ()) -> None:
        table = hashes if isinstance(hashes, array) else array("q", hashes)
        if len(table) <= SET_MAX and _held[0] + len(table) <= SET_BUDGET:
            held: set[int] = set()
            for lo in range(0, len(table), _STEP):  # in steps: a C loop holds the GIL (buildrows.binaries.symtab)
                held.update(table[lo:lo + _STEP])
            self._set: set[int] | None = held
            self._hashes: array[float] = array("d")
            _held[0] += len(self._set)
        else:
            self._set = None
            self._hashes = _sorted(table)

    def __del__(self, _counter: list[int] = _held) -> None:
        # The counter is bound here: at interpreter exit a module's globals may already be gone.
        held = getattr(self, "_set", None)  # None too when __init__ failed before it
        if held is not None:
            _counter[0] -= len(held)

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
        return self.has_key(self.versioned_key(name.encode("utf-8", "surrogateescape"),
                                               version.encode("utf-8", "surrogateescape")))

    def has_key(self, h: int) -> bool:
        """Whether the name whose :meth:`key` is ``h`` is here (a caller asking many libraries for the
        same name computes its key once)."""
        if self._set is not None:
            return h in self._set
        table, f = self._hashes, float(h)
        i = bisect_left(table, f)
        return i < len(table) and table[i] == f

    def missing(self, keys: set[int]) -> set[int]:
        """The keys of ``keys`` whose names are not here (many names asked at once)."""
        if self._set is not None:
            return keys.difference(self._set)
        return {h for h in keys if not self.has_key(h)}

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        return self.has_key(hash(name.encode("utf-8", "surrogateescape")))

    def __len__(self) -> int:
        return len(self._set) if self._set is not None else len(self._hashes)

    def __iter__(self) -> Iterator[str]:
        raise TypeError("an ExportSet holds hashes, not names: ask `name in exports`")

    def _floats(self) -> array[float]:
        return self._hashes if self._set is None else _sorted(array("q", self._set))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ExportSet):
            return False
        if self._set is not None and other._set is not None:
            return self._set == other._set
        return sorted(set(self._floats())) == sorted(set(other._floats()))

    def __hash__(self) -> int:
        return hash(self._floats().tobytes())

    def __repr__(self) -> str:
        return f"ExportSet({len(self)} names)"

    @property
    def held_as_array(self) -> bool:
        """Whether the hashes are the sorted array (8 bytes a name), not a set."""
        return self._set is None

    @property
    def nbytes(self) -> int:
        """What the array holds (0 for a set, whose size Python decides)."""
        return self._hashes.itemsize * len(self._hashes)

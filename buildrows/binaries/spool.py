"""Pages of a library kept while it streams past: in memory up to a budget, the rest in an unnamed temporary file.

The whole check gathers, while each library inflates once, every range its symbol reader and string scan will
read (:mod:`buildrows.binaries.libstream`'s planner, ``gather``): the first read-only segment (``.dynsym``, the
version sections), the read-only data after the code (``.rodata``), the dynamic string table. On PyTorch's
libraries that is 25-40 MB each, on TensorFlow's ``libtensorflow_cc.so.2`` over 100 MB (an 87 MB string table):
held in memory on a few threads at once, the check's 160 MB bound would not hold. So only the first
:data:`MEMORY_BUDGET` bytes of a library's pages stay in memory; the rest are written to a temporary file
(deleted when closed, or at once where the platform allows: nothing is left behind) and read back when asked.
Writing them costs a copy into the page cache, far less than inflating them again.
"""

from __future__ import annotations

import os
import tempfile
import threading
from typing import IO, Final

__all__ = ["MEMORY_BUDGET", "PageStore"]

#: What one library's kept pages may hold in memory; beyond it they go to the temporary file.
MEMORY_BUDGET: Final = 8 << 20


class PageStore:
    """``index -> bytes`` for pages kept in passing; pages past the memory budget live in a temporary file."""

    def __init__(self, budget: int = MEMORY_BUDGET) -> None:
        self.budget = budget
        self.in_memory = 0
        self._memory: dict[int, bytes] = {}
        self._spilled: dict[int, tuple[int, int]] = {}  # index -> (offset in the file, length)
        self._file: IO[bytes] | None = None
        self._end = 0
        self._lock = threading.Lock()

    def __contains__(self, index: int) -> bool:
        return index in self._memory or index in self._spilled

    def __len__(self) -> int:
        return len(self._memory) + len(self._spilled)

    @property
    def spilled(self) -> int:
        """Bytes written to the temporary file."""
        return self._end

    def put(self, index: int, data: bytes) -> None:
        if index in self:
            return
        if self.in_memory + len(data) <= self.budget:
            self._memory[index] = data
            self.in_memory += len(data)
            return
        with self._lock:
            if self._file is None:
                # Unbuffered: a page goes straight to the page cache, not through a buffer first.
                self._file = tempfile.TemporaryFile(prefix="buildrows-pages-", buffering=0)  # noqa: SIM115  (closed by close())
            at = self._end
            if _pwrite(self._file, data, at) != len(data):
                raise OSError("a page could not be written whole to the temporary file of kept pages")
            self._end += len(data)
            self._spilled[index] = (at, len(data))

    def get(self, index: int) -> bytes | None:
        page = self._memory.get(index)
        if page is not None:
            return page
        where = self._spilled.get(index)
        if where is None:
            return None
        return self._read(where[0], where[1])

    def get_run(self, first: int, last: int) -> bytes | None:
        """Pages ``first..last`` joined, when all were spilled one after another (as the stream writes
        them): one read of the temporary file, not one a page. None otherwise."""
        start = self._spilled.get(first)
        if start is None:
            return None
        at = start[0]
        for index in range(first, last + 1):
            where = self._spilled.get(index)
            if where is None or where[0] != at:
                return None
            at += where[1]
        return self._read(start[0], at - start[0])

    def _read(self, at: int, size: int) -> bytes:
        with self._lock:
            if self._file is None:
                raise OSError("the temporary file of kept pages was closed while it was read")
            data = _pread(self._file, size, at)
        if len(data) != size:
            raise OSError("a temporary file of kept pages was cut short while it was read")
        return data

    def close(self) -> None:
        """Drop every page and the temporary file."""
        with self._lock:
            self._memory.clear()
            self._spilled.clear()
            self.in_memory = 0
            if self._file is not None:
                self._file.close()
                self._file = None


def _pwrite(file: IO[bytes], data: bytes, at: int) -> int:
    if hasattr(os, "pwrite"):
        return os.pwrite(file.fileno(), data, at)
    file.seek(at)  # Windows: no pwrite (callers hold the store's lock)
    return file.write(data) or 0


def _pread(file: IO[bytes], size: int, at: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(file.fileno(), size, at)
    file.seek(at)
    return file.read(size) or b""

"""Pages of a library kept while it streams past: in memory up to a budget, the rest in an unnamed temporary file.

The whole check gathers, while each library inflates once, every range its symbol reader and string scan will
read (:mod:`buildrows.binaries.libstream`'s planner, ``gather``): the first read-only segment (``.dynsym``, the
version sections), the read-only data after the code (``.rodata``), the dynamic string table. On PyTorch's
libraries that is 25-40 MB each, on TensorFlow's ``libtensorflow_cc.so.2`` over 100 MB (an 87 MB string table):
held in memory on a few threads at once, the check's 160 MB bound would not hold. So the pages of all the
libraries being read at once share :data:`MEMORY_BUDGET` bytes of memory (:data:`SHARED_BUDGET`, given back as
each library's symbols are read); pages beyond it are written to a temporary file (deleted when closed, or at
once where the platform allows: nothing is left behind) and read back when asked. Writing them costs a copy
into the page cache, far less than inflating them again. Shared, not a budget per library (8 MiB each until
issue 38), so that memory does not grow with the number of threads: 16 MiB is what two threads held before.
A larger one was measured (issue 38): it spares PyTorch's libtorch_cpu.so some 30 MB of writes, but the
check's peak on TensorFlow's wheel grows with it (`scripts/bench_check.py --modes check-full`, peak RSS:
132 MiB with 8 MiB shared, 138 MiB with 16, 158 MiB with 24), against the 160 MB bound.
"""

from __future__ import annotations

import os
import tempfile
import threading
from typing import IO, Final

__all__ = ["MEMORY_BUDGET", "SHARED_BUDGET", "MemoryBudget", "PageStore"]

#: What the kept pages of all libraries being read at once may hold in memory; beyond it they go to the
#: temporary file.
MEMORY_BUDGET: Final = 16 << 20
#: Pages bound for the temporary file are written this many bytes at a time, not one 64 KiB page a call: each
#: write gives up the GIL and, while the symbol thread parses, waits to take it back (issue 38).
SPILL_WRITE: Final = 1 << 20


class MemoryBudget:
    """Bytes of memory that page stores take from and give back, shared between threads."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()

    def take(self, size: int) -> bool:
        """Whether ``size`` more bytes fit (and are now counted)."""
        with self._lock:
            if self.used + size > self.limit:
                return False
            self.used += size
            return True

    def give(self, size: int) -> None:
        with self._lock:
            self.used -= size


#: The budget the whole check's gathered pages share (buildrows.binaries.libstream).
SHARED_BUDGET: Final = MemoryBudget(MEMORY_BUDGET)


class PageStore:
    """``index -> bytes`` for pages kept in passing; pages past the memory budget live in a temporary file.
    ``budget``: a :class:`MemoryBudget` shared with other stores, or a number of bytes for this store alone."""

    def __init__(self, budget: int | MemoryBudget = SHARED_BUDGET) -> None:
        self.budget = budget if isinstance(budget, MemoryBudget) else MemoryBudget(budget)
        self.in_memory = 0
        self._memory: dict[int, bytes] = {}
        self._spilled: dict[int, tuple[int, int]] = {}  # index -> (offset in the file, length)
        self._file: IO[bytes] | None = None
        self._end = 0  # bytes written to the file
        self._pending: list[bytes] = []  # spilled pages not written yet, in file order from ``_end``
        self._pending_size = 0
        self._lock = threading.Lock()

    def __contains__(self, index: int) -> bool:
        return index in self._memory or index in self._spilled

    def __len__(self) -> int:
        return len(self._memory) + len(self._spilled)

    @property
    def spilled(self) -> int:
        """Bytes given to the temporary file (written, or waiting to be written with the next ones)."""
        return self._end + self._pending_size

    def put(self, index: int, data: bytes) -> None:
        if index in self:
            return
        if self.budget.take(len(data)):
            self._memory[index] = data
            self.in_memory += len(data)
            return
        with self._lock:
            self._spilled[index] = (self._end + self._pending_size, len(data))
            self._pending.append(data)
            self._pending_size += len(data)
            if self._pending_size >= SPILL_WRITE:
                self._flush()

    def _flush(self) -> None:
        """Write the pending pages, in one call (the caller holds the lock)."""
        if not self._pending:
            return
        if self._file is None:
            # Unbuffered: the pages go straight to the page cache, not through a buffer first.
            self._file = tempfile.TemporaryFile(prefix="buildrows-pages-", buffering=0)  # noqa: SIM115  (closed by close())
        if _pwritev(self._file, self._pending, self._end) != self._pending_size:
            raise OSError("pages could not be written whole to the temporary file of kept pages")
        self._end += self._pending_size
        self._pending.clear()
        self._pending_size = 0

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
            if at + size > self._end:
                self._flush()
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
            self._pending.clear()
            self._pending_size = 0
            self.budget.give(self.in_memory)
            self.in_memory = 0
            if self._file is not None:
                self._file.close()
                self._file = None

    def __del__(self) -> None:
        # A store dropped unclosed (a library whose reading failed half-way) gives its share back.
        if getattr(self, "in_memory", 0):
            self.budget.give(self.in_memory)
            self.in_memory = 0


def _pwritev(file: IO[bytes], pages: list[bytes], at: int) -> int:
    if hasattr(os, "pwritev"):
        done = 0
        for lo in range(0, len(pages), 512):  # IOV_MAX is 1,024 on Linux
            part = pages[lo:lo + 512]
            want = sum(map(len, part))
            got = os.pwritev(file.fileno(), part, at + done)
            done += got
            if got != want:
                return done
        return done
    data = b"".join(pages)
    file.seek(at)  # Windows: no pwritev (callers hold the store's lock)
    return file.write(data) or 0


def _pread(file: IO[bytes], size: int, at: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(file.fileno(), size, at)
    file.seek(at)
    return file.read(size) or b""

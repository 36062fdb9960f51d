"""A wheel's shared libraries read: each streamed once, on a few threads, largest first, into a
:class:`LibraryInfo`; ELF libraries kept as they passed (:class:`PassedLibrary`) for the symbol reader.

Each library is inflated once, in bounded chunks, and read as it streams past
(:mod:`buildrows.binaries.libstream`): fat binaries are recognised in passing, header ranges are kept, the
library itself never is, so memory stays flat whatever the library's size. Inflating is the
whole cost; the inflater (:mod:`buildrows.binaries.inflate`, zlib-ng when installed) releases the GIL, so
libraries are read on a few threads, largest first.
"""

from __future__ import annotations

import gc
import os
import re
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from buildrows.binaries.binfmt import BinaryFormat, BinaryFormatError, BinaryLayout, read_binary
from buildrows.binaries.fatbin import DeviceCode, FatbinError
from buildrows.binaries.fatbin import list_device_code as _fatbin_device_code
from buildrows.binaries.inflate import PASS_INFLATER, InflateError, MemberStream
from buildrows.binaries.libstream import SparseSource, read_streamed
from buildrows.binaries.zipdir import (
    DEFAULT_MAX_MEMBER_SIZE,
    WheelError,
    _directory,
    _Member,
    _member_stream,
)

DEFAULT_WORKERS: Final = 4  # capped by the CPU count; each costs a few MB, not a library

_LIBRARY_NAME = re.compile(r"\.(?:so(?:\.\d+)*|dll|pyd)$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class LibraryInfo:
    """Device code and dynamic dependencies of one shared library in a wheel.

    ``cubins`` and ``ptx`` list architectures as ``cuobjdump --list-elf``/``--list-ptx`` name
    them, in file order with repeats (a library built from several objects repeats them).
    ``machine``: ``x86_64``, ``aarch64``... (ELF ``e_machine``, PE ``Machine``; see
    :data:`buildrows.binaries.binfmt.ELF_MACHINES`).
    """

    path: str
    format: BinaryFormat
    size: int
    machine: str = ""
    cubins: tuple[str, ...] = ()
    ptx: tuple[str, ...] = ()
    needed: tuple[str, ...] = ()
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()
    delay_imports: tuple[str, ...] = ()
    # PTX that only the relocatable fat binary (``__nv_relfatbin``) holds while an executable one
    # exists: what separable compilation leaves, and what the runtime never JIT-compiles.
    relocatable_ptx: tuple[str, ...] = ()
    # The PTX ISA version of each ``ptx`` entry (same order; for kernel files judged as one unit, every file's,
    # while ``ptx`` names each architecture once): which toolkit wrote it, which driver JITs it.
    ptx_isa: tuple[tuple[int, int], ...] = ()
    # The toolkit release (12, 9) each uncompressed cubin's toolkit note records (those with one).
    cubin_toolkits: tuple[tuple[int, int], ...] = ()

    @property
    def has_device_code(self) -> bool:
        """Whether the library carries any cubin or PTX."""
        return bool(self.cubins or self.ptx)

    @property
    def rpaths(self) -> tuple[str, ...]:
        """DT_RPATH then DT_RUNPATH entries (ELF); empty for PE."""
        return self.rpath + self.runpath



@contextmanager
def collections_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while the libraries stream (and, in the whole check, while
    they are judged), on again after if it was on. A collection holds the GIL from start to end, over every
    object the process tracks (on PyTorch's wheel 13,000 members' entries, tens of thousands of imports):
    10-20 ms at a time in which no inflating worker can hand a chunk over (issue 38, measured with a
    thread timing its own GIL waits). What the reading allocates is acyclic (bytes, tuples, arrays): nothing
    waits on a collection to be freed, and the next one after the pause finds whatever cycles there are."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: `taskset`, a container's cpuset), not the machine's."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def is_shared_library(member: str) -> bool:
    """Whether a member name looks like a shared library (``.so``, ``.so.N``, ``.dll``, ``.pyd``)."""
    low = member.lower()
    if ".so" not in low and low[-4:] not in (".dll", ".pyd"):
        return False  # nearly every member of a large wheel: no regex
    return _LIBRARY_NAME.search(member) is not None



def iter_libraries(
    path: str | os.PathLike[str],
    *,
    max_member_size: int = DEFAULT_MAX_MEMBER_SIZE,
    workers: int | None = None,
) -> Iterator[LibraryInfo]:
    """Yield a :class:`LibraryInfo` for each shared library, in the zip's order."""
    wheel = Path(path)
    libs = [i for i in _directory(wheel).infos if is_shared_library(i.filename)]
    yield from _read_libraries(wheel, libs, max_member_size, workers)


def list_device_code(
    path: str | os.PathLike[str], *, max_member_size: int = DEFAULT_MAX_MEMBER_SIZE
) -> dict[str, LibraryInfo]:
    """Every shared library of a wheel, by member name."""
    return {lib.path: lib for lib in iter_libraries(path, max_member_size=max_member_size)}



@dataclass(frozen=True, slots=True)
class PassedLibrary:
    """An ELF library as it streamed past in :func:`read_wheel`: its stream (a range asked for again
    inflates again), and its symbols, read from the pages gathered in passing."""

    stream: MemberStream
    # Its dynamic symbols and strings (CUDA runtime markers scanned when ``markers``: a library without
    # device code), being read on the symbol thread (a Future), read (a value), or None: read when asked.
    symbols: Any = None
    markers: bool = False

    def read_symbols(self) -> Any:
        """The symbols, waiting for the symbol thread if it is still reading them; None if it could not."""
        symbols = self.symbols
        return symbols.result() if isinstance(symbols, Future) else symbols


_PASSED: dict[str, PassedLibrary] = {}
_PASSED_FOR: list[tuple[str, int, int, int]] = []  # the directory key of the wheel they belong to
_PASSED_LOCK = threading.Lock()


def passed_library(path: str | os.PathLike[str], member: str) -> PassedLibrary | None:
    """The library ``member`` of this wheel as :func:`read_wheel` (``keep_for_symbols``) streamed
    it, if it did and the file is unchanged."""
    key = _directory(Path(path)).key
    with _PASSED_LOCK:
        return _PASSED.get(member) if [key] == _PASSED_FOR else None


def _library_info(wheel: Path, info: _Member, max_size: int) -> LibraryInfo:
    # Every library inflates once, with the fastest inflater there is (ISA-L): what the load check reads
    # of it (symbols, strings) is gathered in passing, not inflated again from checkpoints.
    stream = _member_stream(wheel, info, max_size, PASS_INFLATER)
    gather = bool(_PASSED_FOR)
    try:
        lib = read_streamed(stream, gather=gather)
    except InflateError as exc:
        raise WheelError(str(wheel), str(exc), info.filename) from None
    except (BinaryFormatError, FatbinError) as exc:
        raise WheelError(str(wheel), str(exc), info.filename) from exc
    described = _describe(info.filename, info.file_size, lib.layout, lib.device_code, lib.relocatable)
    source = lib.source
    if gather and source is not None:
        if lib.layout.format == "elf":
            # The load check's symbols and strings, parsed in Python on the symbol thread from the pages
            # kept in passing, while this worker inflates its next library (the inflater releases the GIL).
            markers = not described.has_device_code
            pending = _symbol_thread().submit(_passed_symbols, source, markers)
            with _PASSED_LOCK:
                _PASSED[info.filename] = PassedLibrary(stream, pending, markers)
        else:
            source.close()
    return described


_SYMBOL_THREAD: list[ThreadPoolExecutor] = []


def _symbol_thread() -> ThreadPoolExecutor:
    """One thread for every library's symbol parsing: Python, so a second would only wait for the GIL."""
    with _PASSED_LOCK:
        if not _SYMBOL_THREAD:
            _SYMBOL_THREAD.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="buildrows-symbols"))
        return _SYMBOL_THREAD[0]


def _passed_symbols(source: SparseSource, markers: bool) -> Any:
    """The dynamic symbols and strings of a library that streamed past, read from its gathered pages (a page
    not gathered inflates again), or None where reading them fails: the load check reads them again when it
    asks, and words the error there."""
    from buildrows.binaries.symbols import _with_strings, read_dynamic_symbols, scan_strings

    try:
        got = read_dynamic_symbols(source)
        return _with_strings(got, scan_strings(source, markers=markers)) if got is not None else None
    except (InflateError, BinaryFormatError, OSError):
        return None
    finally:
        source.close()


def describe_library(path: str, data: bytes | bytearray | memoryview) -> LibraryInfo:
    """A :class:`LibraryInfo` for one library held in memory (a loose file, say).

    Malformed input raises :class:`BinaryFormatError` or :class:`FatbinError`. Wheel members are
    read streaming instead (:mod:`buildrows.binaries.libstream`), with the same result.
    """
    binary = read_binary(data)
    code = _device_code(binary.device_code_sections)
    # Else the relocatable one was read above, as cuobjdump does.
    relocatable = _device_code(binary.relfatbin) if binary.fatbin else DeviceCode()
    layout = BinaryLayout(
        format=binary.format,
        machine=binary.machine,
        needed=binary.needed,
        rpath=binary.rpath,
        runpath=binary.runpath,
        imports=binary.imports,
        delay_imports=binary.delay_imports,
    )
    return _describe(path, len(data), layout, code, relocatable)


def _device_code(sections: tuple[memoryview, ...]) -> DeviceCode:
    cubins: list[str] = []
    ptx: list[str] = []
    isa: list[tuple[int, int]] = []
    toolkits: list[tuple[int, int]] = []
    for section in sections:
        code = _fatbin_device_code(section)
        cubins.extend(code.cubins)
        ptx.extend(code.ptx)
        isa.extend(code.ptx_isa)
        toolkits.extend(code.cubin_toolkits)
    return DeviceCode(cubins=tuple(cubins), ptx=tuple(ptx), ptx_isa=tuple(isa), cubin_toolkits=tuple(toolkits))


def _describe(path: str, size: int, layout: BinaryLayout, code: DeviceCode, relocatable: DeviceCode) -> LibraryInfo:
    return LibraryInfo(
        path=path,
        format=layout.format,
        size=size,
        machine=layout.machine,
        cubins=code.cubins,
        ptx=code.ptx,
        ptx_isa=code.ptx_isa,
        cubin_toolkits=code.cubin_toolkits,
        needed=layout.needed,
        rpath=layout.rpath,
        runpath=layout.runpath,
        imports=layout.imports,
        delay_imports=layout.delay_imports,
        relocatable_ptx=tuple(p for p in relocatable.ptx if p not in code.ptx),
    )


def _read_libraries(
    wheel: Path, libs: list[_Member], max_size: int, workers: int | None
) -> Iterator[LibraryInfo]:
    if workers is None:
        workers = min(DEFAULT_WORKERS, _usable_cpus())
    if workers <= 1 or len(libs) <= 1:
        for info in libs:
            yield _library_info(wheel, info, max_size)
        return
    # Largest first, so one big library does not start last and run alone.
    order = sorted(range(len(libs)), key=lambda i: libs[i].compress_size, reverse=True)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {i: pool.submit(_library_info, wheel, libs[i], max_size) for i in order}
        try:
            for i in range(len(libs)):
                yield futures[i].result()
        finally:
            for future in futures.values():
                future.cancel()

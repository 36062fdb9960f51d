"""The dynamic symbols of a wheel's libraries, read member by member through the check's reader:
the bridge between the zip reader (`wheelread`'s `zipdir` and `libraries`) and the ELF symbol reader
(`symbols`), so neither imports the other. Memory is a chunk, the checkpoints and the symbol sections,
never a library."""

from __future__ import annotations

from collections.abc import Container, Iterable
from pathlib import Path

from buildrows.binaries.binfmt import BinaryFormatError
from buildrows.binaries.inflate import InflateError
from buildrows.binaries.libraries import passed_library
from buildrows.binaries.symbols import (
    HEAD,
    DynamicSymbols,
    _StreamedSource,
    _with_strings,
    imported_symbols_from,
    passed_symbols,
    read_dynamic_symbols,
    scan_strings,
)
from buildrows.binaries.zipdir import (
    DEFAULT_MAX_MEMBER_SIZE,
    WheelError,
    member_reader,
    members_named,
)
from buildrows.binaries.zipdir import _member_stream as member_stream


def wheel_imported_symbols(wheel: Path, members: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """member -> its imported symbols, for the ELF members named: each streams through the
    check's reader (buildrows.binaries.zipdir.member_reader), one at a time, so memory is
    .dynsym and its strings, never a library (init --from-wheel held 1.95 GB for NVIDIA's
    cuDNN wheel when it read each library whole)."""
    out: dict[str, tuple[str, ...]] = {}
    for member in members:
        read, size = member_reader(wheel, member)
        out[member] = imported_symbols_from(read, size)
    return out


def wheel_library_symbols(wheel: Path, members: Iterable[str], *, scan: bool = True,
                          markers: Container[str] = (), max_member_size: int | None = None) -> dict[str, DynamicSymbols]:
    """member -> its dynamic symbols (and, with ``scan``, the soname strings it carries; for the members in
    ``markers``, the CUDA runtime's entry points too), for the ELF members named: each streams past once,
    one at a time; memory is a chunk, the checkpoints and the symbol sections, not the library."""
    out: dict[str, DynamicSymbols] = {}
    infos = members_named(wheel, members)  # the check's one pass over the central directory
    for info in infos:
        passed = passed_library(wheel, info.filename)
        if passed is not None:  # it streamed past in read_wheel, its symbol and string sections kept
            symbols = passed.read_symbols() if scan and passed.markers == (info.filename in markers) else None
            if symbols is not None:
                out[info.filename] = symbols  # read on read_wheel's symbol thread, from the pages kept
                continue
            try:
                got = passed_symbols(passed.stream, info.filename in markers, scan=scan)
            except InflateError as exc:
                raise WheelError(str(wheel), str(exc), info.filename) from None
            except BinaryFormatError as exc:
                raise WheelError(str(wheel), str(exc), info.filename) from exc
            if got is not None:
                out[info.filename] = got
            continue
        stream = member_stream(wheel, info, max_member_size or DEFAULT_MAX_MEMBER_SIZE)
        head = bytearray()
        try:
            for _, piece in stream.chunks():
                if len(head) < HEAD:
                    head += piece[:HEAD - len(head)]
                    if len(head) >= 4 and head[:4] != b"\x7fELF":
                        break  # a PE or other file: nothing to read here
            if head[:4] != b"\x7fELF":
                continue
            source = _StreamedSource(stream, bytes(head))
            got = read_dynamic_symbols(source)
            if got is not None and scan:
                got = _with_strings(got, scan_strings(source, markers=info.filename in markers))
        except InflateError as exc:
            raise WheelError(str(wheel), str(exc), info.filename) from None
        except BinaryFormatError as exc:
            raise WheelError(str(wheel), str(exc), info.filename) from exc
        if got is not None:
            out[info.filename] = got
    return out

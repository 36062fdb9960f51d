"""Kernel files in a wheel: members that are not shared libraries sniffed by their first bytes, and the
cubins, fat binaries and PTX among them read (:mod:`buildrows.binaries.kernelfiles` says what each holds)."""

from __future__ import annotations

import os
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO, Final

from buildrows.binaries.binfmt import BinaryFormatError
from buildrows.binaries.fatbin import MAX_CONTAINERS, FatbinError
from buildrows.binaries.fatbin import list_device_code as _fatbin_device_code
from buildrows.binaries.fatscan import FatbinScanner
from buildrows.binaries.inflate import InflateError
from buildrows.binaries.kernelfiles import (
    PREFIX,
    CubinError,
    KernelFile,
    KernelKind,
    cubin_code,
    ptx_isa,
    ptx_targets,
    sniff,
)
from buildrows.binaries.kernelfiles import worth_sniffing as _worth_sniffing
from buildrows.binaries.libraries import DEFAULT_WORKERS, _usable_cpus, is_shared_library
from buildrows.binaries.libstream import read_streamed
from buildrows.binaries.zipdir import (
    _FLAG_ENCRYPTED,
    _FLAG_UTF8,
    _LOCAL_HEADER,
    _LOCAL_MAGIC,
    DEFAULT_MAX_MEMBER_SIZE,
    WheelError,
    _directory,
    _Member,
    _member_stream,
)

# A cubin at most this large is inflated whole to read its headers; a larger one streams once
# (size and CRC checked) and its header ranges are inflated again from the nearest checkpoint.
_WHOLE_CUBIN: Final = 4 << 20
# A fat binary its containers do not explain is read whole so the in-memory reader words the error.
_WHOLE_FATBIN: Final = 256 << 20


def read_kernels(
    path: str | os.PathLike[str],
    *,
    max_member_size: int = DEFAULT_MAX_MEMBER_SIZE,
    workers: int | None = None,
) -> tuple[KernelFile, ...]:
    """Device code in the members that are not shared libraries, in the zip's order
    (:mod:`buildrows.binaries.kernelfiles`): each candidate's first bytes decide, so a member
    that carries none is never inflated in full."""
    wheel = Path(path)
    candidates = [i for i in _directory(wheel).infos
                  if _worth_sniffing(i.filename, i.file_size) and not is_shared_library(i.filename)]
    if not candidates:
        return ()
    sniffed = _sniff_members(wheel, candidates)
    if workers is None:
        workers = min(DEFAULT_WORKERS, _usable_cpus())
    tasks = [(info, kind, prefix) for info, kind, prefix in sniffed if kind is not None]
    if workers <= 1 or len(tasks) <= 1:
        found = [_kernel_file(wheel, info, kind, prefix, max_member_size) for info, kind, prefix in tasks]
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            found = list(pool.map(lambda t: _kernel_file(wheel, t[0], t[1], t[2], max_member_size), tasks))
    return tuple(k for k in found if k is not None)


def _sniff_members(
    wheel: Path, infos: list[_Member]
) -> list[tuple[_Member, KernelKind | None, bytes]]:
    """Each member's kind from its first :data:`PREFIX` bytes, in one pass over the file (by
    offset). Members stored encrypted or with another method than stored/deflate carry no
    device code the runtime could load, and are left out."""
    out: list[tuple[_Member, KernelKind | None, bytes]] = []
    with wheel.open("rb") as fp:
        archive_size = fp.seek(0, os.SEEK_END)
        for info in sorted(infos, key=lambda i: i.header_offset):
            if info.flag_bits & _FLAG_ENCRYPTED or info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                continue
            member = info.filename
            if info.header_offset < 0 or info.header_offset + _LOCAL_HEADER.size > archive_size:
                raise WheelError(str(wheel), "local header lies past the end of the archive (truncated?)", member)
            fp.seek(info.header_offset)
            magic, *_, name_len, extra_len = _LOCAL_HEADER.unpack(fp.read(_LOCAL_HEADER.size))
            if magic != _LOCAL_MAGIC:
                raise WheelError(str(wheel), "bad local header signature", member)
            raw_name = fp.read(name_len)
            if raw_name.decode("utf-8" if info.flag_bits & _FLAG_UTF8 else "cp437", "replace") != info.orig_filename:
                raise WheelError(str(wheel), "local header names another member than the central directory", member)
            fp.seek(extra_len, os.SEEK_CUR)
            want = min(PREFIX, info.file_size)
            if info.compress_type == zipfile.ZIP_STORED:
                prefix = fp.read(want)
            else:
                prefix = _inflate_prefix(fp, info.compress_size, want)
            out.append((info, sniff(prefix), prefix))
    order = {id(info): n for n, info in enumerate(infos)}
    out.sort(key=lambda t: order[id(t[0])])  # back in the zip's order
    return out


def _inflate_prefix(fp: BinaryIO, compressed: int, want: int) -> bytes:
    """The first ``want`` bytes of a deflated member (corrupt data gives what inflated, which
    :func:`sniff` then does not recognise; a member read in full is checked then)."""
    inflater = zlib.decompressobj(-15)
    out = b""
    left = compressed
    try:
        while len(out) < want and left and not inflater.eof:
            data = fp.read(min(left, 2 * PREFIX))
            if not data:
                break
            left -= len(data)
            out += inflater.decompress(data, want - len(out))
    except zlib.error:
        pass
    return out[:want]


def _kernel_file(wheel: Path, info: _Member, kind: KernelKind, prefix: bytes, max_size: int) -> KernelFile | None:
    """Read one member :func:`sniff` recognised; None for a host ELF without device code."""
    member = info.filename
    if kind == "ptx":  # its header names the target and the ISA; the text itself is not needed
        return KernelFile(member, kind, info.file_size, ptx=ptx_targets(prefix), ptx_isa=ptx_isa(prefix))
    stream = _member_stream(wheel, info, max_size)
    try:
        if kind == "elf":
            try:
                lib = read_streamed(stream)
            except BinaryFormatError:
                return None  # not a host binary the loader could map (a data file that starts like one)
            if not (lib.device_code.cubins or lib.device_code.ptx):
                return None
            host = lib.device_code
            return KernelFile(member, kind, info.file_size, cubins=host.cubins, ptx=host.ptx, ptx_isa=host.ptx_isa,
                              cubin_toolkits=host.cubin_toolkits)
        if kind == "cubin":
            if info.file_size <= _WHOLE_CUBIN:
                data = b"".join(piece for _, piece in stream.chunks())
                arch, toolkit = cubin_code(lambda at, n: data[at:at + n], len(data))
            else:
                for _ in stream.chunks():  # size and CRC checked, checkpoints kept
                    pass
                arch, toolkit = cubin_code(stream.read, stream.size)
            return KernelFile(member, kind, info.file_size, cubins=(arch,),
                              cubin_toolkits=(toolkit,) if toolkit is not None else ())
        scanner = FatbinScanner(stream.size)
        scanner.limit_to([(0, stream.size)])
        for pos, piece in stream.chunks():
            scanner.feed(pos, piece)
        scanner.finish()
        code = scanner.device_code(0, stream.size)
        if scanner.too_many:
            raise FatbinError(f"more than {MAX_CONTAINERS} containers; refusing to read further")
        if code is None:  # not explained by its containers: the in-memory reader words why
            if stream.size > _WHOLE_FATBIN:
                raise FatbinError(f"not a well-formed fat binary ({stream.size} bytes its containers do not explain)")
            code = _fatbin_device_code(stream.read(0, stream.size))
        return KernelFile(member, kind, info.file_size, cubins=code.cubins, ptx=code.ptx, ptx_isa=code.ptx_isa,
                          cubin_toolkits=code.cubin_toolkits)
    except InflateError as exc:
        raise WheelError(str(wheel), str(exc), member) from None
    except (BinaryFormatError, FatbinError, CubinError) as exc:
        raise WheelError(str(wheel), f"{kind}: {exc}", member) from exc

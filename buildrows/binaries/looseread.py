"""Read a loose shared library, or every library of a directory (an install tree), for the check.

The cmake-presets driver installs a tree and makes no wheel; ``buildrows check`` and
``buildrows archs`` hold that tree (or one library) to the rules that apply without wheel
metadata. Symlinks (``libfoo.so -> libfoo.so.1``) are skipped so each library is read once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from buildrows.binaries.binfmt import BinaryFormatError, detect_format
from buildrows.binaries.fatbin import FatbinError, list_device_code
from buildrows.binaries.kernelfiles import (
    PREFIX,
    CubinError,
    KernelFile,
    cubin_code,
    ptx_isa,
    ptx_targets,
    sniff,
    worth_sniffing,
)
from buildrows.binaries.libraries import LibraryInfo, describe_library, is_shared_library

__all__ = ["LooseError", "LooseInfo", "read_loose"]


class LooseError(ValueError):
    """A loose file or tree cannot be read as libraries; the message names the file."""


@dataclass(frozen=True, slots=True)
class LooseInfo:
    """What the check reads from a library or a directory: no name, no metadata."""

    path: Path
    libraries: tuple[LibraryInfo, ...]
    members: tuple[str, ...]  # every regular file, relative to the directory (or the file's name)
    requires_dist: tuple[str, ...] = ()
    build_record: bytes | None = None
    kernels: tuple[KernelFile, ...] = ()  # device code in files that are not libraries (kernelfiles)


def read_loose(path: str | os.PathLike[str]) -> LooseInfo:
    """Read one shared library, or every shared library below a directory."""
    root = Path(path)
    if root.is_file():
        kernel = _kernel(root, root.name) if not is_shared_library(root.name) else None
        if kernel is not None:  # a cubin, a fat binary, PTX text: checked as the wheel's kernel files are
            return LooseInfo(root, (), (root.name,), kernels=(kernel,))
        lib = _describe(root, root.name, required=True)
        assert lib is not None  # required: raised instead
        return LooseInfo(root, (lib,), (root.name,))
    if not root.is_dir():
        raise LooseError(f"{root}: no such file or directory")
    libraries: list[LibraryInfo] = []
    kernels: list[KernelFile] = []
    members: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fname in sorted(filenames):
            full = Path(dirpath) / fname
            if full.is_symlink() or not full.is_file():
                continue
            rel = full.relative_to(root).as_posix()
            members.append(rel)
            if is_shared_library(fname):
                lib = _describe(full, rel, required=False)
                if lib is not None:
                    libraries.append(lib)
            elif (kernel := _kernel(full, rel)) is not None:
                kernels.append(kernel)
    return LooseInfo(root, tuple(libraries), tuple(members), kernels=tuple(kernels))


def _kernel(full: Path, rel: str) -> KernelFile | None:
    """The device code of a file that is not a shared library, decided by its first bytes
    (buildrows.binaries.kernelfiles); None when it carries none."""
    try:
        size = full.stat().st_size
        if not worth_sniffing(rel, size):
            return None
        with full.open("rb") as fp:
            prefix = fp.read(PREFIX)
        kind = sniff(prefix)
        if kind is None:
            return None
        if kind == "ptx":
            return KernelFile(rel, kind, size, ptx=ptx_targets(prefix), ptx_isa=ptx_isa(prefix))
        data = full.read_bytes()
    except OSError as e:
        raise LooseError(f"{full}: cannot read: {e}") from e
    try:
        if kind == "cubin":
            arch, toolkit = cubin_code(lambda at, n: data[at:at + n], len(data))
            return KernelFile(rel, kind, size, cubins=(arch,), cubin_toolkits=(toolkit,) if toolkit is not None else ())
        if kind == "fatbin":
            code = list_device_code(data)
        else:
            try:
                lib = describe_library(rel, data)
            except BinaryFormatError:
                return None  # not a host binary the loader could map (a data file that starts like one)
            if not lib.has_device_code:
                return None
            return KernelFile(rel, kind, size, cubins=lib.cubins, ptx=lib.ptx, ptx_isa=lib.ptx_isa,
                              cubin_toolkits=lib.cubin_toolkits)
    except (BinaryFormatError, FatbinError, CubinError) as e:
        raise LooseError(f"{full}: {kind}: {e}") from e
    return KernelFile(rel, kind, size, cubins=code.cubins, ptx=code.ptx, ptx_isa=code.ptx_isa,
                      cubin_toolkits=code.cubin_toolkits)


def _describe(full: Path, rel: str, *, required: bool) -> LibraryInfo | None:
    try:
        data = full.read_bytes()
    except OSError as e:
        raise LooseError(f"{full}: cannot read: {e}") from e
    if detect_format(data) is None:
        if required:
            raise LooseError(f"{full}: neither a wheel nor an ELF or PE shared library")
        return None  # a linker script named libfoo.so (glibc ships some) is not a library the loader maps
    try:
        return describe_library(rel, data)
    except (BinaryFormatError, FatbinError) as e:
        raise LooseError(f"{full}: {e}") from e

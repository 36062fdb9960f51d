"""Device code shipped as files of its own: cubins, fat binaries, PTX text, host ELF objects with a fat binary.

A wheel may carry kernels beside (or instead of) shared libraries: thousands of ``.cubin`` files
loaded with ``cuModuleLoad``, a ``.fatbin``, PTX text JIT-compiled at run time, an object file
with ``.nv_fatbin``. What a member is is decided by its **content**, never its name:

* a *cubin*: an ELF file whose ``e_machine`` is ``EM_CUDA`` (190);
* a *fat binary*: a file that starts with the container magic ``0xBA55ED50``;
* *PTX text*: a ``.version N.M`` line followed by a ``.target sm_XX`` line (after ``//`` comments);
* a *host ELF* that is not named like a shared library (an object file, an executable): its
  ``.nv_fatbin``/``__nv_relfatbin`` is read as a library's is.

:func:`sniff` decides from a small prefix (:data:`PREFIX` bytes), so a member that is none of
these is never inflated in full. Names only rule out what the CUDA runtime never loads as device
code: sources, headers and text formats (:func:`worth_sniffing`).

A cubin is named as ``cuobjdump --list-elf`` names it: ``sm_<N>`` from ``e_flags`` (the low byte
under ELF ABI version 7, bits 8-15 from version 8, the CUDA 12.8+ layout), plus ``a`` for an
arch-specific cubin (``EF_CUDA_ACCELERATORS`` in ABI 7; from ABI 8 that bit stays clear and the
toolkit note ``.note.nv.tkinfo`` records ``-arch sm_90a``, which is what cuobjdump reads). A
family cubin (``sm_100f``) is named ``sm_100``, as cuobjdump and fat-binary entries name it.
PTX is named by its ``.target`` (``sm_90a``); cuobjdump does not read PTX text files.

What dates them (issue 27): a cubin's toolkit note names the release that wrote it
(:func:`cubin_code`, the same note :func:`buildrows.binaries.fatbin.scan_toolkit` reads inside fat
binaries), PTX text its ``.version`` (the PTX ISA).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from buildrows.binaries.fatbin import FATBIN_MAGIC, scan_toolkit

__all__ = ["PREFIX", "KernelFile", "KernelKind", "cubin_arch", "cubin_code", "ptx_isa", "ptx_targets", "sniff",
           "worth_sniffing"]

KernelKind = Literal["cubin", "fatbin", "ptx", "elf"]

#: What :func:`sniff` reads of a member to decide (an ELF header, a fat binary's, PTX's header lines).
PREFIX: Final = 4096
EM_CUDA: Final = 190
_ELF_MAGIC: Final = b"\x7fELF"
_FATBIN_MAGIC: Final = struct.pack("<I", FATBIN_MAGIC)
_ABI_V8: Final = 8
_ACCELERATORS_V7: Final = 0x800
_ACCELERATORS_V8: Final = 0x8
# PTX's header: comments and blank lines, then `.version`, then `.target` (optionally with
# `.address_size` or more options on the target line).
_PTX_VERSION = re.compile(rb"^[ \t]*\.version[ \t]+(\d+)\.(\d+)[ \t]*\r?$", re.MULTILINE)
_PTX_TARGET = re.compile(rb"^[ \t]*\.target[ \t]+(sm_\d+[af]?)\b", re.MULTILINE)
_TKINFO_ARCH = re.compile(rb"-arch[ =](?:sm|compute)_(\d+)([af]?)\b")
# Text and source formats the CUDA runtime never loads as device code: not even sniffed.
_NOT_KERNELS: Final = frozenset({
    "py", "pyi", "pyc", "pyo", "pyx", "pxd", "pxi", "h", "hh", "hpp", "hxx", "cuh", "inl", "inc", "ipp",
    "tcc", "c", "cc", "cpp", "cxx", "cu", "cmake", "jinja", "md", "rst", "html", "htm", "js", "mjs", "css",
    "json", "yaml", "yml", "toml", "ini", "cfg", "typed", "pc", "thrift", "svg", "png", "jpg", "jpeg", "gif",
    "ico", "whl", "zip", "tar", "gz", "bz2", "xz", "a", "lib", "la",
})
_MIN_SIZE: Final = 16


@dataclass(frozen=True, slots=True)
class KernelFile:
    """Device code in one member that is not a shared library, named as cuobjdump names it."""

    path: str
    kind: KernelKind
    size: int
    cubins: tuple[str, ...] = ()
    ptx: tuple[str, ...] = ()
    ptx_isa: tuple[tuple[int, int], ...] = ()  # the PTX ISA of each ``ptx`` entry, as for a library
    cubin_toolkits: tuple[tuple[int, int], ...] = ()  # the release of each cubin's toolkit note (those with one)

    @property
    def has_device_code(self) -> bool:
        return bool(self.cubins or self.ptx)


def worth_sniffing(member: str, size: int) -> bool:
    """Whether a member (not a shared library) could carry device code: not a directory, a
    ``.dist-info`` file, a source, header or text format, and at least 16 bytes."""
    if size < _MIN_SIZE or member.endswith("/"):
        return False
    head, _, base = member.rpartition("/")
    if "." in base and base.rpartition(".")[2].lower() in _NOT_KERNELS:
        return False
    return not member.partition("/")[0].endswith(".dist-info") or not head


def sniff(prefix: bytes) -> KernelKind | None:
    """What a member is, from its first bytes (up to :data:`PREFIX`); None: no device code."""
    if prefix[:4] == _ELF_MAGIC:
        if len(prefix) < 20:
            return None
        order = "<" if prefix[5] == 1 else ">"
        (machine,) = struct.unpack_from(order + "H", prefix, 18)
        return "cubin" if machine == EM_CUDA else "elf"
    if prefix[:4] == _FATBIN_MAGIC:
        return "fatbin"
    if b".version" in prefix and b".target" in prefix:
        version = _PTX_VERSION.search(prefix)
        target = _PTX_TARGET.search(prefix)
        if version is not None and target is not None and version.start() < target.start():
            return "ptx"
    return None


def ptx_targets(prefix: bytes) -> tuple[str, ...]:
    """The ``.target`` architecture of PTX text, from its header (what :func:`sniff` saw)."""
    target = _PTX_TARGET.search(prefix)
    return (target.group(1).decode("ascii"),) if target is not None else ()


def ptx_isa(prefix: bytes) -> tuple[tuple[int, int], ...]:
    """The PTX ISA of PTX text (its ``.version``), from its header, beside :func:`ptx_targets`."""
    version = _PTX_VERSION.search(prefix)
    return ((int(version.group(1)), int(version.group(2))),) if version is not None and ptx_targets(prefix) else ()


class CubinError(ValueError):
    """A member whose ELF header says cubin, but whose headers cannot be read."""


def cubin_arch(read: Callable[[int, int], bytes], size: int) -> str:
    """A cubin's architecture as ``cuobjdump --list-elf`` names it (``sm_80``, ``sm_90a``).

    ``read(offset, size)`` returns a range of the file (its header, the section table, the
    toolkit note): the file is never needed whole.
    """
    return cubin_code(read, size)[0]


def cubin_code(read: Callable[[int, int], bytes], size: int) -> tuple[str, tuple[int, int] | None]:
    """A cubin's architecture (as :func:`cubin_arch`) and the release its toolkit note names (the
    newest, where nvlink and ptxas each left one), or None where it carries none."""
    head = read(0, min(size, 64))
    if len(head) < 52 or head[:4] != _ELF_MAGIC:
        raise CubinError("truncated ELF header")
    is64, order = head[4] == 2, "<" if head[5] == 1 else ">"
    abi = head[8]
    if is64:
        if len(head) < 64:
            raise CubinError("truncated ELF header")
        (flags,) = struct.unpack_from(order + "I", head, 48)
        (shoff,) = struct.unpack_from(order + "Q", head, 40)
        shentsize, shnum, shstrndx = struct.unpack_from(order + "HHH", head, 58)
    else:
        (flags,) = struct.unpack_from(order + "I", head, 36)
        (shoff,) = struct.unpack_from(order + "I", head, 32)
        shentsize, shnum, shstrndx = struct.unpack_from(order + "HHH", head, 46)
    if abi >= _ABI_V8:
        sm, accelerated = (flags >> 8) & 0xFF, bool(flags & _ACCELERATORS_V8)
    else:
        sm, accelerated = flags & 0xFF, bool(flags & _ACCELERATORS_V7)
    if sm == 0:
        raise CubinError(f"e_flags {flags:#x} name no SM architecture")
    note = _tkinfo(read, size, is64, order, shoff, shentsize, shnum, shstrndx)
    releases, _keep = scan_toolkit(note, final=True)
    toolkit = max(releases) if releases else None
    if accelerated:
        return f"sm_{sm}a", toolkit
    variant = ""
    for match in _TKINFO_ARCH.finditer(note):
        if int(match.group(1)) == sm:
            variant = match.group(2).decode("ascii")
            break
    return f"sm_{sm}{variant}", toolkit


def _tkinfo(read: Callable[[int, int], bytes], size: int, is64: bool, order: str,
            shoff: int, shentsize: int, shnum: int, shstrndx: int) -> bytes:
    """The ``.note.nv.tkinfo`` section (empty when the cubin has none): its ``-arch sm_<sm>a`` /
    ``sm_<sm>f`` names the variant ("a": arch-specific, how ABI 8 marks it; "f": family-specific,
    cuobjdump -elf names the cubin sm_100f), its tool version the release."""
    entry = struct.Struct(order + ("IIQQQQIIQQ" if is64 else "IIIIIIIIII"))
    if not shoff or shentsize < entry.size or shnum == 0 or shnum > 65_535 or shoff + shentsize * shnum > size:
        return b""
    table = read(shoff, shentsize * shnum)
    sections = [entry.unpack_from(table, i * shentsize) for i in range(shnum)]
    if shstrndx >= shnum:
        return b""
    # (name, type, flags, addr, offset, size, ...): offset and size sit at 4 and 5 in both classes.
    names_at, names_size = sections[shstrndx][4], sections[shstrndx][5]
    if names_at + names_size > size or names_size > 1 << 20:
        return b""
    names = read(names_at, names_size)
    for sec in sections:
        end = names.find(b"\0", sec[0])
        if names[sec[0]:end if end >= 0 else None] != b".note.nv.tkinfo":
            continue
        at, length = sec[4], sec[5]
        if at + length > size or length > 1 << 16:
            return b""
        return read(at, length)
    return b""

"""Read the entry headers of a CUDA fat binary (the contents of a ``.nv_fatbin`` section).

A section holds one or more *containers*, back to back (possibly separated by zero padding).
Each container is a 16-byte header followed by entries; each entry is a header followed by its
payload (a cubin, PTX text, LTO IR, ...; possibly LZ4- or ZSTD-compressed). Everything needed to
name an entry the way ``cuobjdump --list-elf`` / ``--list-ptx`` does is in the entry header, so no
payload is ever decompressed.

Layout (little endian; reverse-engineered by comparing nvcc 13.0 output with cuobjdump 13.5)::

    container header, 16 bytes
      0  u32  magic 0xBA55ED50
      4  u16  version (1)
      6  u16  header size (16)
      8  u64  size of the entries that follow

    entry header, ``header size`` bytes (64, 80, 112, 120 seen; 4688 for a device-linked cubin
    named after ~70 objects)
      0  u16  kind: 1 PTX, 2 ELF (cubin), 8 LTO IR
      2  u16  entry version (0x0101)
      4  u32  header size
      8  u64  payload size (padded to 8)
     16  u32  compressed size (0 when stored uncompressed)
     20  u32  offset of the options block inside the header (0 when none)
     24  u16  minor version (cubin: ELF ABI, 1.8 today; PTX: the ISA, e.g. 9.0 from nvcc 13.0)
     26  u16  major version
     28  u32  SM number (75, 90, 100, 121, ...)
     32  u32  name offset          36  u32  name size
     40  u64  flags: 0x1 64-bit, 0x2 debug, 0x10 linux host, 0x40 windows host,
                     0x2000 LZ4, 0x8000 ZSTD, 0x100000 arch-specific ("a"),
                     0x200000 family-specific ("f")
     48  u64  (hash for LTO IR, else 0)
     56  u64  uncompressed size (0 when stored uncompressed)

Naming: ``sm_<N>`` plus ``a`` (flag 0x100000) or ``f`` (0x200000), for cubins and PTX alike, as
``cuobjdump -elf`` prints them (``arch = sm_100f``). ``cuobjdump --list-elf`` alone drops a family
cubin's ``f`` (``sm_100``); nvcc treats it as the same GPU code as ``sm_100`` (it refuses to build
both), so a list's ``10.0`` and ``10.0f`` are different promises of the same cubin. The cubin's own
ELF header cannot tell them apart: ``e_flags`` is the same for ``sm_120``, ``sm_120a`` and
``sm_120f`` (0x6007802 from nvcc 13.0); only the entry header's flags (and the cubin's
``.note.nv.tkinfo``, ``-arch sm_120a``) say which.

The toolkit that wrote a cubin: ptxas records it in the cubin's ``.note.nv.tkinfo`` note (owner
``NVIDIA Corp``, type 2000; seen in cubins of CUDA 12.8 and later, absent from older ones). Its
descriptor is six u32 (a version, then the offsets of the object name, the tool name
``ptxas``, the tool version ``Cuda compilation tools, release 13.0, V13.0.88``, the branch and the
options ``-arch sm_90 -m 64``) followed by their NUL-terminated strings. It is read only from cubins of ELF
ABI 1.8 (:data:`TKINFO_ABI`; older ones carry none) where the cubin is stored uncompressed (:func:`scan_toolkit`), never by decompressing a payload. (The first
u32 is 2 in CUDA 13's notes, but the toolkit, 128 or 129, in CUDA 12.8's and 12.9's: only the
string is read.) A cubin nvlink linked holds one note per object and nvlink's: its newest
release is the cubin's.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final, Literal

__all__ = [
    "FATBIN_MAGIC",
    "TKINFO_ABI",
    "DeviceCode",
    "FatbinEntry",
    "FatbinError",
    "iter_entries",
    "list_device_code",
    "parse_fatbin",
    "read_entry_header",
    "scan_toolkit",
]

FATBIN_MAGIC: Final = 0xBA55ED50

KIND_PTX: Final = 1
KIND_ELF: Final = 2
KIND_LTO_IR: Final = 8

FLAG_LZ4: Final = 0x2000
FLAG_ZSTD: Final = 0x8000
FLAG_ARCH_SPECIFIC: Final = 0x100000
FLAG_FAMILY: Final = 0x200000

# A real container never gets near these; they bound the work a hostile input can cause. An entry
# header holds the entry's name inline: nvlink's device-linked cubin is named after every object
# it links, joined by "-" (LightGBM 4.7.0's lib_lightgbm.so: a 4688-byte header naming ~70 files,
# which a 4096 bound refused as a malformed wheel). Only the 64 fixed bytes are ever read.
MAX_ENTRIES: Final = 1_000_000
# nvcc writes one container per translation unit: thousands in PyTorch's libraries. 4M empty containers
# (64 MB, a 138 KB member) took 958 MB and 19 s (issue 37); past this many a file is refused.
MAX_CONTAINERS: Final = 1 << 18
MAX_ENTRY_HEADER: Final = 1 << 20
_MIN_ENTRY_HEADER: Final = 64

_CONTAINER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
_NONZERO = re.compile(rb"[^\x00]")

# A cubin's toolkit note: namesz 12, descsz, type 2000, "NVIDIA Corp\0"; the descriptor follows. The search
# looks for the type and name, a literal that is rare in code (a search led by "12, then any 4 bytes" stops
# at every other word of a cubin and runs at a third of the speed), and then checks namesz 8 bytes before.
_TKINFO = re.compile(re.escape(b"\xd0\x07\x00\x00NVIDIA Corp\x00"))
_TKINFO_AT: Final = 8  # where _TKINFO's match starts in the note
TKINFO_HEAD: Final = 24  # the note's header and name
# Only cubins of ELF ABI 1.8 (CUDA 12.8's layout; the entry header's version) carry the note: of 4,700
# uncompressed cubins in 22 real wheels, every ABI 1.8 cubin had one and no ABI 1.7 cubin did (CUDA 11.8
# to 12.9 builds), so older ones are not searched (a search costs ~1 s per GB of cubins).
TKINFO_ABI: Final = (1, 8)
TKINFO_MAX_DESC: Final = 4096  # ptxas writes ~150 bytes; a longer descriptor is not read
_TKINFO_DESC = struct.Struct("<6I")
_RELEASE = re.compile(rb"Cuda compilation tools, release (\d+)\.(\d+),")

EntryKind = Literal["ptx", "elf", "lto-ir", "other"]
Compression = Literal["none", "lz4", "zstd"]

_KINDS: Final[dict[int, EntryKind]] = {KIND_PTX: "ptx", KIND_ELF: "elf", KIND_LTO_IR: "lto-ir"}


class FatbinError(ValueError):
    """The bytes are not a well-formed CUDA fat binary."""


@dataclass(frozen=True, slots=True)
class FatbinEntry:
    """One entry of a fat binary, described by its header alone."""

    kind: EntryKind
    kind_code: int
    sm: int
    arch_specific: bool
    family: bool
    compression: Compression
    offset: int
    header_size: int
    payload_size: int
    compressed_size: int
    uncompressed_size: int
    version: tuple[int, int]
    flags: int

    @property
    def arch(self) -> str:
        """The entry's architecture with its variant (``sm_90a``, ``sm_100f``, ``sm_120``).

        ``cuobjdump -elf`` names a family cubin ``arch = sm_100f`` too; only ``--list-elf`` drops the f.
        """
        suffix = ""
        if self.arch_specific:
            suffix = "a"
        elif self.family:
            suffix = "f"
        return f"sm_{self.sm}{suffix}"


@dataclass(frozen=True, slots=True)
class DeviceCode:
    """Architectures of the cubins and PTX of a fat binary, in file order, repeats kept.

    ``ptx_isa``: the PTX ISA version of each PTX entry, as its entry header records it (the
    ``.version`` of the PTX text: 8.7 is CUDA 12.8's, 9.0 CUDA 13.0's), in the same order as ``ptx``.
    ``cubin_toolkits``: the toolkit release (12, 9) each uncompressed cubin's toolkit note records, for
    the cubins that carry one (not aligned with ``cubins``).
    """

    cubins: tuple[str, ...] = ()
    ptx: tuple[str, ...] = ()
    # Not part of equality: two readings agree on which code a binary carries; the ISA is checked apart.
    ptx_isa: tuple[tuple[int, int], ...] = field(default=(), compare=False)
    cubin_toolkits: tuple[tuple[int, int], ...] = field(default=(), compare=False)

    def __bool__(self) -> bool:
        return bool(self.cubins or self.ptx)


def _toolkit_of(desc: bytes | memoryview) -> tuple[int, int] | None:
    """The release a toolkit note's descriptor names (``release 12.9`` -> (12, 9)); None if malformed.

    Its first u32 is 2 in CUDA 13's notes and the toolkit (128, 129) in CUDA 12.8's and 12.9's, so
    only the tool version string is read."""
    if len(desc) < _TKINFO_DESC.size:
        return None
    _first, _obj, _tool, tool_version, _branch, _options = _TKINFO_DESC.unpack_from(desc)
    strings = bytes(desc[_TKINFO_DESC.size:])
    end = strings.find(b"\0", tool_version) if tool_version < len(strings) else -1
    found = _RELEASE.match(strings, tool_version, end) if end >= 0 else None
    return (int(found.group(1)), int(found.group(2))) if found is not None else None


def scan_toolkit(buf: bytes | memoryview, *, final: bool) -> tuple[list[tuple[int, int]], int]:
    """The toolkit notes in ``buf``, a piece of a cubin (from its first byte, or from where the
    last piece said to keep): their releases, in order, and where to resume.

    Returns ``(releases, keep)``: ``keep`` is the index from which ``buf`` must be kept and joined to
    the next piece (a note, or a note's header, that the piece ends inside). ``final``: ``buf``
    reaches the cubin's end, so an unfinished note is malformed and skipped. Reading a cubin whole
    (``final=True``) or in pieces finds the same notes. A linked cubin holds several (nvlink's and
    ptxas's for each object); the newest release is the cubin's.
    """
    releases: list[tuple[int, int]] = []
    pos = 0  # no note starts before this
    while True:
        found = _TKINFO.search(buf, pos + _TKINFO_AT)
        if found is None:
            return releases, len(buf) if final else max(pos, len(buf) - (TKINFO_HEAD - 1))
        start = found.start() - _TKINFO_AT
        name_size, desc_size = struct.unpack_from("<II", buf, start)
        end = found.end() + desc_size
        if name_size == 12 and desc_size <= TKINFO_MAX_DESC:
            if end > len(buf) and not final:
                return releases, start
            release = _toolkit_of(memoryview(buf)[found.end():end]) if end <= len(buf) else None
            if release is not None:
                releases.append(release)
                pos = end
                continue
        pos = start + 1


def _skip_zeros(view: memoryview, pos: int) -> int:
    """Return the offset of the first non-zero byte at or after ``pos`` (``len`` if none)."""
    match = _NONZERO.search(view, pos)
    return len(view) if match is None else match.start()


def read_entry_header(view: memoryview, pos: int, left: int) -> FatbinEntry:
    """The entry whose header starts at ``view[pos]``, with ``left`` bytes left in its container.

    ``view`` must hold at least the 64 bytes from ``pos`` on (``left >= 64`` is checked here).
    Shared by :func:`iter_entries` and the streaming scanner, so both refuse the same entries.
    """
    if left < _MIN_ENTRY_HEADER:
        raise FatbinError(
            f"truncated entry header at offset {pos:#x}: {left} bytes left in the container, need 64"
        )
    (
        kind_code,
        _entry_version,
        header_size,
        payload_size,
        compressed_size,
        _options_offset,
        minor,
        major,
        sm,
        _name_offset,
        _name_size,
        flags,
        _reserved,
        uncompressed_size,
    ) = _ENTRY.unpack_from(view, pos)
    if not _MIN_ENTRY_HEADER <= header_size <= MAX_ENTRY_HEADER:
        raise FatbinError(
            f"entry at offset {pos:#x} has header size {header_size} (expected 64..{MAX_ENTRY_HEADER})"
        )
    if header_size > left or payload_size > left - header_size:
        raise FatbinError(
            f"entry at offset {pos:#x} declares {header_size}+{payload_size} bytes"
            f" but only {left} remain in its container"
        )
    if compressed_size > payload_size:
        raise FatbinError(
            f"entry at offset {pos:#x} declares compressed size {compressed_size}"
            f" larger than its payload ({payload_size})"
        )
    if flags & FLAG_ZSTD:
        compression: Compression = "zstd"
    elif flags & FLAG_LZ4:
        compression = "lz4"
    else:
        compression = "none"
    return FatbinEntry(
        kind=_KINDS.get(kind_code, "other"),
        kind_code=kind_code,
        sm=sm,
        arch_specific=bool(flags & FLAG_ARCH_SPECIFIC),
        family=bool(flags & FLAG_FAMILY),
        compression=compression,
        offset=pos,
        header_size=header_size,
        payload_size=payload_size,
        compressed_size=compressed_size,
        uncompressed_size=uncompressed_size,
        version=(major, minor),
        flags=flags,
    )


def iter_entries(
    data: bytes | bytearray | memoryview, *, max_entries: int = MAX_ENTRIES
) -> Iterator[FatbinEntry]:
    """Yield every entry of every container in ``data``, in file order.

    Zero padding between and after containers is skipped. Anything else that is not a
    well-formed container raises :class:`FatbinError` naming the offset.
    """
    view = memoryview(data).cast("B")
    end = len(view)
    count = containers = 0
    pos = _skip_zeros(view, 0)
    while pos < end:
        containers += 1
        if containers > MAX_CONTAINERS:
            raise FatbinError(f"more than {MAX_CONTAINERS} containers; refusing to read further")
        if end - pos < _CONTAINER.size:
            raise FatbinError(
                f"truncated container header at offset {pos:#x}: {end - pos} bytes left, need 16"
            )
        magic, _version, header_size, fat_size = _CONTAINER.unpack_from(view, pos)
        if magic != FATBIN_MAGIC:
            raise FatbinError(
                f"bad container magic {magic:#010x} at offset {pos:#x} (expected {FATBIN_MAGIC:#010x})"
            )
        if header_size < _CONTAINER.size or header_size > end - pos:
            raise FatbinError(
                f"container at offset {pos:#x} has header size {header_size}, past the end of the data"
            )
        body = pos + header_size
        if fat_size > end - body:
            raise FatbinError(
                f"container at offset {pos:#x} declares {fat_size} bytes of entries but only {end - body} remain"
            )
        container_end = body + fat_size
        entry_pos = body
        while entry_pos < container_end:
            entry = read_entry_header(view, entry_pos, container_end - entry_pos)
            count += 1
            if count > max_entries:
                raise FatbinError(f"more than {max_entries} entries; refusing to read further")
            yield entry
            entry_pos += entry.header_size + entry.payload_size
        pos = _skip_zeros(view, container_end)


def parse_fatbin(
    data: bytes | bytearray | memoryview, *, max_entries: int = MAX_ENTRIES
) -> tuple[FatbinEntry, ...]:
    """All entries of ``data`` (see :func:`iter_entries`)."""
    return tuple(iter_entries(data, max_entries=max_entries))


def list_device_code(
    data: bytes | bytearray | memoryview, *, max_entries: int = MAX_ENTRIES
) -> DeviceCode:
    """The cubin and PTX architectures in ``data``, as ``cuobjdump --list-elf``/``--list-ptx`` order them."""
    cubins: list[str] = []
    ptx: list[str] = []
    isa: list[tuple[int, int]] = []
    toolkits: list[tuple[int, int]] = []
    view = memoryview(data).cast("B")
    for entry in iter_entries(view, max_entries=max_entries):
        if entry.kind == "elf":
            cubins.append(entry.arch)
            if entry.compression == "none" and entry.compressed_size == 0 and entry.version >= TKINFO_ABI:
                start = entry.offset + entry.header_size
                releases, _keep = scan_toolkit(view[start : start + entry.payload_size], final=True)
                if releases:
                    toolkits.append(max(releases))
        elif entry.kind == "ptx":
            ptx.append(entry.arch)
            isa.append(entry.version)
    return DeviceCode(cubins=tuple(cubins), ptx=tuple(ptx), ptx_isa=tuple(isa), cubin_toolkits=tuple(toolkits))

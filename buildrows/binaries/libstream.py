"""Read one shared library as it streams out of a wheel, keeping only what the checks need.

The member is inflated once, chunk by chunk (:class:`buildrows.binaries.inflate.MemberStream`). While it
passes:

* :class:`buildrows.binaries.fatscan.FatbinScanner` recognises fat binary containers and their entries;
* a :class:`SparseSource` keeps the pages the header parsers will want, as far as they can be
  known in advance: the first 64 KiB (ELF/PE headers, program headers, PE section table), then,
  as those arrive, the ELF section header table and the bytes before it (where ``.shstrtab``
  usually is), the dynamic segment, the dynamic strings it names, the PE import tables.

At the end :func:`buildrows.binaries.binfmt.read_layout` reads the library through the same
:class:`SparseSource`, with the same code and checks as for a library in memory; any page it wants
that was not kept is inflated again from the nearest checkpoint. The section table then says where
``.nv_fatbin`` lies, and only containers that tile it count (see :mod:`buildrows.binaries.fatscan`).
A section the search did not cover in passing (it looks only in read-only segments) streams past once
more, from the nearest checkpoint, through a scanner of its own; only a section its containers do not
explain (malformed) is read whole, for the in-memory reader's verdict.
Memory: a few chunks, the pages kept, the checkpoints; not the library.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from buildrows.binaries.binfmt import BinaryFormatError, BinaryLayout, read_layout
from buildrows.binaries.fatbin import MAX_CONTAINERS, DeviceCode, FatbinError, list_device_code
from buildrows.binaries.fatscan import FatbinScanner
from buildrows.binaries.inflate import MemberStream
from buildrows.binaries.spool import SHARED_BUDGET, MemoryBudget, PageStore

__all__ = ["PAGE", "SparseSource", "StreamedLibrary", "read_streamed"]

PAGE: Final = 1 << 16
HEAD: Final = 1 << 16
# What the planner may ask to keep in passing; anything more is read again on demand.
MAX_PREFETCH: Final = 16 << 20
# Bytes kept before the ELF section header table: .shstrtab is normally right there.
SHT_LEAD: Final = 1 << 16
STRING_WINDOW: Final = 4096
# Gathering for the symbol reader too (``gather``): what one library may keep in all (beyond the memory
# budget in a temporary file: buildrows.binaries.spool), and from the start of each segment kept.
GATHER_KEEP: Final = 256 << 20
SEGMENT_KEEP: Final = 32 << 20
_DT_STRTAB, _DT_SYMTAB, _DT_STRSZ = 5, 6, 10
_DT_VERSYM, _DT_VERDEF, _DT_VERNEED = 0x6FFFFFF0, 0x6FFFFFFC, 0x6FFFFFFE
_PF_X: Final = 1
_PT_GNU_EH_FRAME: Final = 0x6474E550
_PF_W: Final = 2


class SparseSource:
    """A :class:`buildrows.binaries.binfmt.ByteSource` over pages kept in passing or fetched again later."""

    def __init__(self, size: int, fetch: Callable[[int, int], bytes], *, budget: int | MemoryBudget | None = None,
                 max_keep: int = MAX_PREFETCH) -> None:
        self._size = size
        self.fetch = fetch
        # In memory up to ``budget`` bytes (no limit: None), the rest in a temporary file (buildrows.binaries.spool).
        self.pages = PageStore(budget if budget is not None else 1 << 62)
        self.max_keep = max_keep
        self.filling: dict[int, bytearray | None] = {}  # wanted pages not yet (wholly) passed (None: not reached)
        self.passed = 0  # the stream's position
        self.prefetched = 0
        self.fetches = 0
        self.lowest = 0  # the lowest page index in ``filling`` (when it is not empty)

    @property
    def size(self) -> int:
        return self._size

    def _page_len(self, index: int) -> int:
        return min(PAGE, self._size - index * PAGE)

    def want(self, offset: int, size: int) -> None:
        """Keep ``[offset, offset + size)`` as it passes (pages already passed are left out)."""
        if size <= 0 or offset >= self._size:
            return
        end = min(offset + size, self._size)
        first = max(offset, self.passed) // PAGE
        for index in range(first, (end - 1) // PAGE + 1):
            if index in self.pages or index in self.filling or index * PAGE < self.passed:
                continue
            if self.prefetched >= self.max_keep:
                return
            self.lowest = min(self.lowest, index) if self.filling else index
            self.filling[index] = None
            self.prefetched += self._page_len(index)

    def unwant(self, start: int, end: int) -> None:
        """Keep no page lying wholly in ``[start, end)`` that the stream has not reached yet: a fat binary's
        inside, which neither the symbol reader nor the string scan reads (asked for anyway, it inflates again)."""
        for index in range(-(-start // PAGE), end // PAGE):
            if index in self.filling and self.filling[index] is None and (index + 1) * PAGE <= end:
                del self.filling[index]
                self.prefetched -= self._page_len(index)

    def feed(self, offset: int, data: bytes) -> None:
        """The stream's next piece: copy what falls in wanted pages."""
        end = offset + len(data)
        if self.filling and self.lowest * PAGE < end:
            # The pages this piece overlaps, not every wanted page (a gathered library wants thousands).
            for index in range(max(offset // PAGE, self.lowest), (end - 1) // PAGE + 1):
                if index not in self.filling:
                    continue
                base = index * PAGE
                page = self.filling[index]
                plen = self._page_len(index)
                if page is None and base >= offset and base + plen <= end:
                    # The whole page in this piece (nearly every page): one copy, no bytearray.
                    del self.filling[index]
                    self.pages.put(index, data[base - offset : base - offset + plen])
                    continue
                if page is None:  # allocated as the stream reaches it: wanting costs no memory
                    page = self.filling[index] = bytearray(self._page_len(index))
                lo = max(base, offset)
                hi = min(base + len(page), end)
                page[lo - base : hi - base] = data[lo - offset : hi - offset]
                if hi == base + len(page):
                    del self.filling[index]
                    self.pages.put(index, bytes(page))
            while self.filling and self.lowest not in self.filling:  # pages fill in order: only ever upwards
                self.lowest += 1
        self.passed = end

    def peek(self, offset: int, size: int) -> bytes | None:
        """The bytes if every page of the range was kept, else None (never fetches)."""
        if offset < 0 or size < 0 or offset + size > self._size:
            return None
        parts = []
        for index in range(offset // PAGE, (offset + size - 1) // PAGE + 1 if size else offset // PAGE):
            page = self.pages.get(index)
            if page is None:
                return None
            parts.append(page)
        joined = b"".join(parts)
        start = offset - (offset // PAGE) * PAGE
        return joined[start : start + size]

    def read(self, offset: int, size: int) -> bytes:
        if size <= 0:
            return b""
        first, last = offset // PAGE, (offset + size - 1) // PAGE
        index = first
        while index <= last:  # one fetch per run of consecutive missing pages
            if index in self.pages:
                index += 1
                continue
            run_start = index
            while index <= last and index not in self.pages:
                index += 1
            data = self.fetch(run_start * PAGE, (index - run_start) * PAGE)
            self.fetches += 1
            for page in range(run_start, index):
                at = (page - run_start) * PAGE
                self.pages.put(page, data[at : at + self._page_len(page)])
        base = offset - first * PAGE
        if first == last:
            return self._page(first)[base : base + size]
        run = self.pages.get_run(first, last)  # spilled one after another: one read, not one a page
        if run is not None:
            return run[base : base + size]
        return b"".join([self._page(i) for i in range(first, last + 1)])[base : base + size]

    def _page(self, index: int) -> bytes:
        page = self.pages.get(index)
        if page is None:  # dropped (close): inflated again
            page = self.fetch(index * PAGE, self._page_len(index))
            self.fetches += 1
        return page

    def close(self) -> None:
        """Drop the kept pages (and their temporary file); a later read inflates again."""
        self.pages.close()


_Stage = Callable[[], object]


class _Planner:
    """Asks ``source`` to keep the header ranges, stage by stage, as each one becomes known.

    Only an optimisation: whatever it misses (or misreads in a malformed file) is fetched again
    when the parser asks for it, so it may give up at any point.
    """

    def __init__(self, source: SparseSource, *, gather: bool = False) -> None:
        self.source = source
        self.stage: _Stage | None = self._head
        # Gathering: the whole first chunk too (the planner first runs once it has passed: .dynsym may lie in it).
        self.gather = gather
        source.want(0, 1 << 20 if gather else HEAD)
        self.phdrs: tuple[int, int, int, bool, str] = (0, 0, 0, True, "<")
        self.dynamic: tuple[int, int] = (0, 0)
        self.loads: list[tuple[int, int, int]] = []
        # Where fat binaries can be (an ELF's read-only loaded segments); None: anywhere.
        self.scan_regions: list[tuple[int, int]] | None = None

    def step(self) -> None:
        # Each stage returns the next one, itself while it waits for bytes, or None when done.
        while self.stage is not None:
            try:
                nxt = self.stage()
            except (struct.error, ValueError, IndexError, OverflowError, MemoryError):
                nxt = None
            if nxt == self.stage:
                return
            self.stage = nxt if callable(nxt) else None

    def _head(self) -> object:
        src = self.source
        head = src.peek(0, min(64, src.size))
        if head is None:
            return self._head
        if head[:4] == b"\x7fELF":
            return self._elf_head(head)
        if head[:2] == b"MZ":
            return self._pe_head()
        return None

    def _elf_head(self, head: bytes) -> object:
        is64 = head[4] == 2
        order = "<" if head[5] == 1 else ">"
        if is64:
            phoff, shoff = struct.unpack_from(order + "QQ", head, 32)
            phentsize, phnum, shentsize, shnum = struct.unpack_from(order + "HHHH", head, 54)
        else:
            phoff, shoff = struct.unpack_from(order + "II", head, 28)
            phentsize, phnum, shentsize, shnum = struct.unpack_from(order + "HHHH", head, 42)
        src = self.source
        src.want(phoff, phentsize * phnum)
        if shoff:
            src.want(shoff - SHT_LEAD, SHT_LEAD + shentsize * max(shnum, 1))
        self.phdrs = (phoff, phentsize, phnum, is64, order)
        return self._elf_phdrs

    def _elf_phdrs(self) -> object:
        phoff, phentsize, phnum, is64, order = self.phdrs
        table = self.source.peek(phoff, phentsize * phnum)
        if table is None:
            return self._elf_phdrs if self.source.passed <= phoff + phentsize * phnum else None
        regions: list[tuple[int, int]] = []
        headers = []
        for i in range(phnum):
            if is64:
                p_type, p_flags, p_offset, p_vaddr, _pa, p_filesz = struct.unpack_from(
                    order + "IIQQQQ", table, i * phentsize
                )
            else:
                p_type, p_offset, p_vaddr, _pa, p_filesz, _m, p_flags = struct.unpack_from(
                    order + "IIIIIII", table, i * phentsize
                )
            headers.append((p_type, p_flags, p_offset, p_vaddr, p_filesz))
        # .eh_frame_hdr (PT_GNU_EH_FRAME) follows .rodata in the read-only segment as GNU ld and lld lay it
        # out: the unwind tables after it are not kept for the string scan (15 MB of libtorch_cpu.so's).
        unwind = [off for kind, _f, off, _v, _s in headers if kind == _PT_GNU_EH_FRAME]
        for p_type, p_flags, p_offset, p_vaddr, p_filesz in headers:
            if p_type == 1:
                if self.gather and (not self.loads or not p_flags & (_PF_X | _PF_W)):
                    # The symbol reader's and the string scan's sections, as linkers lay them out: the
                    # first segment (.dynsym, .dynstr, the version sections), the read-only ones (.rodata).
                    keep = min(p_filesz, SEGMENT_KEEP)
                    if self.loads:
                        keep = min([keep] + [u - p_offset for u in unwind if p_offset < u < p_offset + keep])
                    self.source.want(p_offset, keep)
                self.loads.append((p_vaddr, p_offset, p_filesz))
                # In passing, only read-only segments are searched (where GCC's and PyTorch's links
                # put .nv_fatbin): searching PyTorch's 350 MB of code too costs ~20% more CPU. A
                # fat binary elsewhere (NVIDIA's libraries and CuPy's put it in the read+execute
                # segment) is recognised by streaming its section once more (_rescan).
                if not p_flags & (_PF_X | _PF_W):
                    regions.append((p_offset, p_offset + p_filesz))
            elif p_type == 2 and self.dynamic == (0, 0):
                self.dynamic = (p_offset, p_filesz)
        if self.loads:
            self.scan_regions = regions
        if self.dynamic == (0, 0):
            return None
        self.source.want(*self.dynamic)
        return self._elf_dynamic

    def _elf_dynamic(self) -> object:
        is64, order = self.phdrs[3], self.phdrs[4]
        offset, size = self.dynamic
        table = self.source.peek(offset, size)
        if table is None:
            return self._elf_dynamic if self.source.passed <= offset + size else None
        entry = struct.Struct(order + ("qQ" if is64 else "iI"))
        strtab = None
        values = []
        tags: dict[int, int] = {}
        for i in range(size // entry.size):
            tag, value = entry.unpack_from(table, i * entry.size)
            if tag == 0:
                break
            tags.setdefault(tag, value)
            if tag == 5:
                strtab = value
            elif tag in (1, 15, 29):
                values.append(value)
        if self.gather:
            # Where a tool moved them past .dynamic (patchelf puts .dynstr at the end): kept as they pass.
            for tag, span in ((_DT_STRTAB, tags.get(_DT_STRSZ, 0)), (_DT_SYMTAB, 1 << 22), (_DT_VERSYM, 1 << 20),
                              (_DT_VERNEED, 1 << 16), (_DT_VERDEF, 1 << 16)):
                for vaddr, off, filesz in self.loads:
                    if tag in tags and vaddr <= tags[tag] < vaddr + filesz:
                        self.source.want(tags[tag] - vaddr + off, min(span, SEGMENT_KEEP << 2))
                        break
        for vaddr, off, filesz in self.loads:
            if strtab is not None and vaddr <= strtab < vaddr + filesz:
                for value in values:
                    self.source.want(strtab - vaddr + off + value, STRING_WINDOW)
                break
        return None

    def _pe_head(self) -> object:
        src = self.source
        head = src.peek(0, min(HEAD, src.size))
        if head is None:
            return None
        (lfanew,) = struct.unpack_from("<I", head, 0x3C)
        _machine, nsections, _t, _s, _n, opt_size = struct.unpack_from("<HHIIIH", head, lfanew + 4)
        opt = lfanew + 24
        (magic,) = struct.unpack_from("<H", head, opt)
        dirs = opt + (112 if magic == 0x20B else 96)
        wanted = []
        for index in (1, 13):  # import, delay import
            rva, _size = struct.unpack_from("<II", head, dirs + 8 * index)
            if rva:
                wanted.append(rva)
        table = opt + opt_size
        budget = _PE_KEEP  # what all sections together may keep (issue 37: 1,200 sections mapping the imports kept 1.9 GB)
        for i in range(nsections):
            vsize, va, raw_size, raw_ptr = struct.unpack_from("<IIII", head, table + 40 * i + 8)
            for rva in wanted:
                if va <= rva < va + max(vsize, raw_size):
                    for at, size in ((raw_ptr + rva - va, min(raw_ptr + raw_size - (raw_ptr + rva - va), 1 << 22)),
                                     (raw_ptr, min(raw_size, 1 << 22))):
                        size = min(size, budget)
                        if size > 0:
                            src.want(at, size)
                            budget -= size
        return None


# The PE import tables kept while a DLL streams past, all sections together (a real DLL's are KBs);
# what lies beyond is inflated again if pefile asks for it.
_PE_KEEP: Final = 16 << 20


@dataclass(frozen=True, slots=True)
class StreamedLibrary:
    """A library's layout and device code, read while it streamed past."""

    layout: BinaryLayout
    device_code: DeviceCode
    relocatable: DeviceCode  # __nv_relfatbin's when an executable fat binary exists, else empty
    fetches: int  # ranges inflated again (for the benchmark's record)
    # With ``gather``: the pages kept, for the symbol reader (close it when done), else None.
    source: SparseSource | None = None


def _rescan(stream: MemberStream, offset: int, size: int) -> DeviceCode | None:
    """The section's containers, recognised while the range streams past again (bounded memory:
    a chunk at a time, wherever the section lies); None if they do not explain it."""
    scanner = FatbinScanner(stream.size)
    scanner.limit_to([(offset, offset + size)])
    for pos, piece in stream.read_pieces(offset, size):
        scanner.feed(pos, piece)
    scanner.finish()
    return scanner.device_code(offset, size)


def _section_code(scanner: FatbinScanner, source: SparseSource, stream: MemberStream,
                  ranges: tuple[tuple[int, int], ...]) -> DeviceCode:
    cubins: list[str] = []
    ptx: list[str] = []
    isa: list[tuple[int, int]] = []
    toolkits: list[tuple[int, int]] = []
    if ranges and scanner.too_many:
        raise FatbinError(f"more than {MAX_CONTAINERS} fat-binary containers; refusing to read further")
    for offset, size in ranges:
        code = scanner.device_code(offset, size)
        if code is None and not scanner.searched(offset, size):
            # Not searched in passing (a read+execute segment, as NVIDIA links its own libraries and
            # CuPy's): the range streams past once more, never held whole.
            source.fetches += 1
            code = _rescan(stream, offset, size)
        if code is None:
            # Not explained by containers at all (malformed): the in-memory reader decides, and words the error.
            code = list_device_code(source.read(offset, size))
        cubins += code.cubins
        ptx += code.ptx
        isa += code.ptx_isa
        toolkits += code.cubin_toolkits
    return DeviceCode(cubins=tuple(cubins), ptx=tuple(ptx), ptx_isa=tuple(isa), cubin_toolkits=tuple(toolkits))


def read_streamed(stream: MemberStream, observe: Callable[[bytes], None] | None = None, *,
                  gather: bool = False) -> StreamedLibrary:
    """Inflate ``stream`` once and read the library in it; ``observe`` sees every piece as it passes.
    ``gather``: also keep what the symbol reader and the string scan will read (in memory up to a budget, the
    rest in a temporary file: buildrows.binaries.spool), returned as the result's ``source``, so that nothing
    inflates again unless a section lies where linkers do not put it.

    Raises :class:`buildrows.binaries.inflate.InflateError`, :class:`buildrows.binaries.binfmt.BinaryFormatError` or
    :class:`buildrows.binaries.fatbin.FatbinError`, as reading the whole library in memory would.
    """
    source = (SparseSource(stream.size, stream.read, budget=SHARED_BUDGET, max_keep=GATHER_KEEP) if gather
              else SparseSource(stream.size, stream.read))
    scanner = FatbinScanner(stream.size)
    planner = _Planner(source, gather=gather)
    let_go = 0  # gathering: the end of the last fat binary whose inside was let go
    for offset, data in stream.chunks():
        if offset == 0 and len(data) >= 4 and data[:4] != b"\x7fELF" and data[:2] != b"MZ":
            # Neither ELF nor PE: refused from its first bytes, not after inflating it all (a 7 GB
            # member of zeros streamed for a minute to reach the same verdict, issue 37).
            raise BinaryFormatError("not an ELF or PE file (unknown magic bytes)")
        scanner.feed(offset, data)
        if gather and scanner.skip_until > offset and scanner.skip_until != let_go:
            # Inside a fat binary (the device code, most of a CUDA library's read-only segment): none of it
            # is kept for the symbol reader or the string scan, which never look there; its pages are let go
            # before this piece is copied (once a container), and again if the planner asks for more.
            source.unwant(max(scanner.skip_from, offset), scanner.skip_until)
            let_go = scanner.skip_until
        source.feed(offset, data)
        if observe is not None:
            observe(data)
        if planner.stage is not None:
            wanted = source.prefetched
            planner.step()
            if planner.scan_regions is not None and scanner.regions is None:
                scanner.limit_to(planner.scan_regions)
            if gather and source.prefetched > wanted and scanner.skip_until > offset + len(data):
                source.unwant(max(scanner.skip_from, offset + len(data)), scanner.skip_until)
    scanner.finish()
    layout = read_layout(source)
    code = _section_code(scanner, source, stream, layout.device_code_ranges)
    # Beside an executable fat binary, the relocatable one too (what -rdc leaves the runtime).
    relocatable = _section_code(scanner, source, stream, layout.relfatbin) if layout.fatbin else DeviceCode()
    return StreamedLibrary(layout, code, relocatable, source.fetches, source if gather else None)

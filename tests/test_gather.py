"""The whole check's one pass (issue 38): what the load check reads of each library (dynamic symbols, versions,
strings) is gathered while it streams past once, parsed on the symbol thread, never inflated again where the
sections lie where linkers put them; the same answer as reading the library on disk; pages past the memory
budget kept in a temporary file (buildrows.binaries.spool)."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from buildrows.binaries import libstream
from buildrows.binaries.inflate import MemberStream
from buildrows.binaries.spool import PageStore
from buildrows.binaries.symbols import DynamicSymbols, library_symbols
from buildrows.binaries.wheelread import read_wheel
from buildrows.binaries.wheelsymbols import wheel_library_symbols

# Real libraries as linkers lay them out: this machine's libstdc++ (2 MB: .rodata lies past the first chunk),
# and one built here that names a library it dlopens and calls the CUDA runtime by name.
SYSTEM = [p for p in (Path("/lib/x86_64-linux-gnu/libstdc++.so.6"), Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6"))
          if p.is_file()][:1]
pytestmark = pytest.mark.skipif(not SYSTEM or shutil.which("gcc") is None, reason="needs gcc and libstdc++")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    d = tmp_path_factory.mktemp("gather")
    (d / "dl.c").write_text('#include <dlfcn.h>\nint cudaLaunchKernel(void) { return 0; }\n'
                            'void *open_it(void) { return dlopen("libcublas.so.13", RTLD_NOW); }\n', encoding="utf-8")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(d / "libdl_it.so"), str(d / "dl.c"), "-ldl"], check=True)
    libs = {"pkg/libstdc++.so.6": SYSTEM[0], "pkg/libdl_it.so": d / "libdl_it.so"}
    path = d / "pkg-1.0-cp312-cp312-linux_x86_64.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, lib in libs.items():
            zf.write(lib, member)
        zf.writestr("pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
    return path, libs


def _symbols_counting_rereads(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, DynamicSymbols], int]:
    reads = []
    original = MemberStream.read_pieces
    monkeypatch.setattr(MemberStream, "read_pieces",
                        lambda self, offset, size: (reads.append((offset, size)), original(self, offset, size))[1])
    info = read_wheel(path, keep_for_symbols=True, workers=2)
    markers = {lib.path for lib in info.libraries if not lib.has_device_code}
    return wheel_library_symbols(path, [lib.path for lib in info.libraries], markers=markers), len(reads)


def test_symbols_are_gathered_in_the_one_pass(wheel: tuple[Path, dict[str, Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    path, libs = wheel
    got, rereads = _symbols_counting_rereads(path, monkeypatch)
    assert rereads == 0  # nothing inflated a second time
    for member, lib in libs.items():
        assert got[member] == library_symbols(lib, scan=True), member
    assert "libcublas.so.13" in got["pkg/libdl_it.so"].sonames_named
    assert got["pkg/libdl_it.so"].cuda_markers == ("cudaLaunchKernel",)
    assert len(got["pkg/libstdc++.so.6"].imports) > 10


def test_a_section_not_kept_in_passing_is_inflated_again_with_the_same_answer(
        wheel: tuple[Path, dict[str, Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard behind the one pass: a section where the planner did not look (here: nothing kept past the
    first chunk) is read again from the member, never answered from missing bytes."""
    path, libs = wheel
    monkeypatch.setattr(libstream, "SEGMENT_KEEP", 0)
    monkeypatch.setattr(libstream, "GATHER_KEEP", 0)
    got, rereads = _symbols_counting_rereads(path, monkeypatch)
    assert rereads > 0
    assert got["pkg/libstdc++.so.6"] == library_symbols(libs["pkg/libstdc++.so.6"], scan=True)


def test_pages_past_the_memory_budget_go_to_a_temporary_file() -> None:
    store = PageStore(budget=1 << 16)
    pages = {i: bytes([i]) * (1 << 16) for i in range(4)}
    for i, page in pages.items():
        store.put(i, page)
    assert (store.in_memory, store.spilled) == (1 << 16, 3 << 16)
    assert all(store.get(i) == page for i, page in pages.items())
    store.close()
    assert (store.get(2), len(store), store.spilled >= 0) == (None, 0, True)


def test_stores_read_at_once_share_one_memory_budget() -> None:
    """Every library being read at once takes its pages' memory from one budget (a second library spills
    what the first holds), and a store closed or dropped gives its share back."""
    from buildrows.binaries.spool import MemoryBudget

    shared = MemoryBudget(3 << 16)
    first, second = PageStore(shared), PageStore(shared)
    for i in range(2):
        first.put(i, bytes([i]) * (1 << 16))
        second.put(i, bytes([i]) * (1 << 16))
    assert (first.in_memory, first.spilled, second.in_memory, second.spilled) == (2 << 16, 0, 1 << 16, 1 << 16)
    assert shared.used == 3 << 16 and second.get(1) == bytes([1]) * (1 << 16)
    first.close()
    assert shared.used == 1 << 16
    second.put(2, b"x" * (1 << 16))  # in memory again, now that the first gave its share back
    assert second.in_memory == 2 << 16 and shared.used == 2 << 16
    del second
    import gc

    gc.collect()
    assert shared.used == 0


def test_spilled_pages_are_read_back_as_one_run() -> None:
    store = PageStore(budget=0)
    for i in range(5):
        store.put(i, bytes([i]) * (1 << 16))
    assert store.get_run(1, 3) == b"".join(bytes([i]) * (1 << 16) for i in (1, 2, 3))
    kept = PageStore(budget=1 << 16)  # page 0 in memory, the rest spilled
    for i in range(3):
        kept.put(i, bytes([i]) * (1 << 16))
    assert kept.get_run(0, 2) is None  # not all in the file: read page by page instead
    assert kept.get_run(1, 2) == bytes([1]) * (1 << 16) + bytes([2]) * (1 << 16)


def test_a_fat_binarys_inside_is_not_kept_and_the_answers_stay(tmp_path: Path) -> None:
    """Gathering keeps the read-only segment's start for the string scan; a fat binary there (most of a CUDA
    library: 317 MB of libtorch_cuda.so's 335 MB segment) is let go as soon as its container is recognised,
    and the symbols, strings and device code are those of the library on disk."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from cuda_tools import fatbin_container, fatbin_entry

    payload = bytes(range(256)) * (12 << 12)  # 12 MiB of cubin payload, no zeros
    blob = fatbin_container([fatbin_entry(sm=90, payload=payload), fatbin_entry(kind=1, sm=90, payload=b"//ptx\0" * 8)])
    (tmp_path / "fat.bin").write_bytes(blob)
    (tmp_path / "fat.c").write_text(
        '#include <dlfcn.h>\n'
        'void *open_it(void) { return dlopen("libcublas.so.13", RTLD_NOW); }\n'
        '__asm__(".section .nv_fatbin, \\"a\\"\\n.balign 8\\n.incbin \\"' + str(tmp_path / "fat.bin") + '\\"\\n.previous");\n',
        encoding="utf-8")
    lib = tmp_path / "libfat.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "fat.c"), "-ldl"], check=True)
    data = lib.read_bytes()
    at = data.find(blob[:16])
    assert at > 0
    stream = _stream_of(tmp_path, lib)
    got = libstream.read_streamed(stream, gather=True)
    assert got.source is not None
    kept = {i for i in range(stream.size // libstream.PAGE + 1) if i in got.source.pages}
    inside = set(range(-(-(at + (1 << 20)) // libstream.PAGE), (at + len(blob)) // libstream.PAGE))
    assert inside and not kept & inside, "pages inside the fat binary were kept"
    assert got.device_code.cubins == ("sm_90",) and got.device_code.ptx == ("sm_90",)
    from buildrows.binaries.symbols import _with_strings, read_dynamic_symbols, scan_strings

    symbols = read_dynamic_symbols(got.source)
    assert symbols is not None
    assert _with_strings(symbols, scan_strings(got.source)) == library_symbols(lib, scan=True)
    assert "libcublas.so.13" in library_symbols(lib, scan=True).sonames_named


def _stream_of(tmp_path: Path, lib: Path) -> MemberStream:
    from buildrows.binaries.inflate import PASS_INFLATER
    from buildrows.binaries.zipdir import _directory, _member_stream

    path = tmp_path / "fat-1.0-cp312-cp312-linux_x86_64.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(lib, "fat/libfat.so")
    info = next(i for i in _directory(path).infos if i.filename == "fat/libfat.so")
    return _member_stream(path, info, 1 << 40, PASS_INFLATER)


def test_spilled_pages_are_written_a_megabyte_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages past the budget go to the file in runs of SPILL_WRITE bytes, one call each (a call gives up the GIL
    and waits to take it back, issue 38), and read back alike whether written yet or still waiting."""
    import os

    from buildrows.binaries import spool

    calls: list[int] = []
    real = os.pwritev

    def counting(fd: int, buffers: list[bytes], offset: int) -> int:
        calls.append(sum(map(len, buffers)))
        return real(fd, buffers, offset)

    monkeypatch.setattr(os, "pwritev", counting)
    store = PageStore(budget=0)
    pages = {i: bytes([i]) * (1 << 16) for i in range(40)}  # 2.5 MiB: two runs written, half a run waiting
    for i, page in pages.items():
        store.put(i, page)
    assert calls == [spool.SPILL_WRITE, spool.SPILL_WRITE]
    assert store.spilled == 40 << 16
    assert store.get(39) == pages[39]  # waiting: written first, then read
    assert calls[2:] == [8 << 16]
    assert store.get(3) == pages[3] and store.get_run(14, 18) == b"".join(pages[i] for i in range(14, 19))
    store.close()


def test_no_collection_while_the_libraries_stream() -> None:
    import gc

    from buildrows.binaries.libraries import collections_paused

    assert gc.isenabled()
    with collections_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collections_paused():
            pass
        assert not gc.isenabled()  # off before: left off
    finally:
        gc.enable()

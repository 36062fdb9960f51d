"""Each hand-written reader against the kept library it replaces, on real files: CPU seconds and
peak memory (tracemalloc) of the same question asked both ways. docs/design.md's table of readers
quotes its output.

    python scripts/bench_readers.py --wheel TORCH.whl --library LIB.so [--repeat 5]

- the zip's central directory: buildrows.binaries.zipdir against zipfile.ZipFile;
- an ELF library's layout (NEEDED, RPATH/RUNPATH, where .nv_fatbin lies): binaries.binfmt against
  pyelftools (what auditwheel and most tools use);
- its undefined dynamic symbols: binaries.symbols against pyelftools' .dynsym iteration;
- where its NEEDED libraries resolve: auditwheel's lddtree.ldd (the loader simulation a kept library
  offers) is timed for reference; buildrows' own (check/loading.py) answers a different question
  (see the design page), so only the failure mode is compared.

The best of --repeat runs is printed (CPU time: other work on the machine inflates wall time, not
CPU time). pyelftools and auditwheel are test dependencies, not the package's.
"""

from __future__ import annotations

import argparse
import gc
import mmap
import sys
import time
import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def measure(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """(best CPU seconds, peak MiB allocated by Python during the best run's twin, result)."""
    best = float("inf")
    result: Any = None
    for _ in range(repeat):
        gc.collect()
        t0 = time.process_time()
        result = fn()
        best = min(best, time.process_time() - t0)
    gc.collect()
    tracemalloc.start()
    fn()
    _cur, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return best, peak / 2**20, result


def row(question: str, ours: tuple[float, float, Any], kept: tuple[float, float, Any], kept_name: str) -> None:
    ratio = kept[0] / ours[0] if ours[0] > 0 else float("inf")
    print(f"| {question} | {ours[0] * 1000:.1f} ms, {ours[1]:.1f} MiB | {kept_name}: {kept[0] * 1000:.1f} ms, "
          f"{kept[1]:.1f} MiB | {ratio:.1f}x |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheel", required=True, type=Path, help="a large wheel (torch's: ~13,000 members)")
    ap.add_argument("--library", required=True, type=Path, help="a large ELF shared library on disk")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    from buildrows.binaries import binfmt, symbols, zipdir

    print(f"wheel: {args.wheel.name} ({args.wheel.stat().st_size / 2**20:.0f} MiB); "
          f"library: {args.library.name} ({args.library.stat().st_size / 2**20:.0f} MiB)")
    print("| question | buildrows | kept library | kept / ours (CPU) |")
    print("| --- | --- | --- | --- |")

    def ours_zip() -> int:
        return len(zipdir._read_central_directory(args.wheel))

    def kept_zip() -> int:
        with zipfile.ZipFile(args.wheel) as zf:
            return len(zf.infolist())

    a, b = measure(ours_zip, args.repeat), measure(kept_zip, args.repeat)
    assert a[2] == b[2], (a[2], b[2])
    row(f"zip central directory ({a[2]} members)", a, b, "zipfile")

    with args.library.open("rb") as fp, mmap.mmap(fp.fileno(), 0, access=mmap.ACCESS_READ) as data:
        view = memoryview(data)

        def ours_layout() -> tuple[str, ...]:
            return binfmt.read_binary(view).needed

        def kept_layout() -> tuple[str, ...]:
            with args.library.open("rb") as f:
                elf = ELFFile(f)
                needed: list[str] = []
                for sec in elf.iter_sections():
                    if isinstance(sec, DynamicSection):
                        needed += [t.needed for t in sec.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
                    _ = sec.name == ".nv_fatbin" and (sec["sh_offset"], sec["sh_size"])
                return tuple(needed)

        a, b = measure(ours_layout, args.repeat), measure(kept_layout, args.repeat)
        assert a[2] == b[2], (a[2], b[2])
        row("ELF layout: NEEDED, RPATH, .nv_fatbin's range", a, b, "pyelftools")

        def ours_symbols() -> int:
            return len(symbols.imported_symbols(view))

        def kept_symbols() -> int:
            with args.library.open("rb") as f:
                dynsym = ELFFile(f).get_section_by_name(".dynsym")
                return sum(1 for i, s in enumerate(dynsym.iter_symbols())
                           if i and s["st_shndx"] == "SHN_UNDEF")

        a, b = measure(ours_symbols, args.repeat), measure(kept_symbols, max(1, args.repeat // 5))
        assert a[2] == b[2], (a[2], b[2])
        row(f"undefined dynamic symbols ({a[2]})", a, b, "pyelftools")
        view.release()

    try:
        from auditwheel.lddtree import ldd
    except ImportError:
        print("auditwheel is not installed: the loader simulation is not timed")
        return 0
    t = measure(lambda: len(ldd(args.library).libraries), max(1, args.repeat // 5))
    print(f"\nauditwheel's lddtree.ldd on {args.library.name}: {t[0] * 1000:.1f} ms CPU, {t[1]:.1f} MiB "
          "(it resolves against this host's libraries, from files on disk)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark (SPEC §10): listing a wheel's device code, against merely inflating its libraries and
against extracting them and running cuobjdump; target within 1.3x of the first, 8x faster than the
second, with identical results.

    python scripts/bench_check.py WHEEL [--repeat 3] [--workers N] [--cuobjdump PATH]

Timings are the best of --repeat runs, interleaved, with the wheel already in the page cache (the
first pass warms it). Baselines, all single-threaded:
  zipfile-read   ZipFile.read() of every shared library: the straightforward way to inflate them
  zlib-oneshot   one zlib.decompress() per library from its raw bytes, no CRC: a floor for inflating
  cuobjdump      extract each library to a temporary directory, run cuobjdump --list-elf and
                 --list-ptx on it (timed once; it is slow)
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from buildrows.wheelread import DEFAULT_WORKERS, is_shared_library, read_wheel  # noqa: E402

Listing = dict[str, tuple[tuple[str, ...], tuple[str, ...]]]


def find_cuobjdump() -> str | None:
    found = shutil.which("cuobjdump")
    if found:
        return found
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for candidate in sorted(Path(root).glob("cu*/bin/cuobjdump"), reverse=True):
            return str(candidate)
    return None


def libraries(wheel: Path) -> list[zipfile.ZipInfo]:
    with zipfile.ZipFile(wheel) as zf:
        return [i for i in zf.infolist() if is_shared_library(i.filename)]


def inflate_zipfile(wheel: Path) -> int:
    total = 0
    with zipfile.ZipFile(wheel) as zf:
        for info in libraries(wheel):
            total += len(zf.read(info))
    return total


def inflate_oneshot(wheel: Path) -> int:
    total = 0
    with wheel.open("rb") as fp:
        for info in libraries(wheel):
            fp.seek(info.header_offset + 26)
            name_len, extra_len = struct.unpack("<HH", fp.read(4))
            fp.seek(info.header_offset + 30 + name_len + extra_len)
            raw = fp.read(info.compress_size)
            if info.compress_type == zipfile.ZIP_DEFLATED:
                total += len(zlib.decompress(raw, -zlib.MAX_WBITS, info.file_size))
            else:
                total += len(raw)
    return total


def ours(wheel: Path, workers: int) -> Listing:
    info = read_wheel(wheel, workers=workers)
    return {lib.path: (lib.cubins, lib.ptx) for lib in info.libraries}


_LINE = re.compile(r"^(ELF|PTX) file\s+\d+: .*\.(sm_\w+)\.(?:cubin|ptx)$")


def cuobjdump_listing(cuobjdump: str, wheel: Path) -> Listing:
    result: Listing = {}
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as zf:
        for info in libraries(wheel):
            path = zf.extract(info, tmp)
            lists: dict[str, list[str]] = {"ELF": [], "PTX": []}
            for flag in ("--list-elf", "--list-ptx"):
                proc = subprocess.run(
                    [cuobjdump, flag, path], capture_output=True, text=True, check=False
                )
                if proc.returncode != 0 and "does not contain device code" not in proc.stderr:
                    raise SystemExit(f"cuobjdump {flag} {path}: {proc.stderr.strip()}")
                for line in proc.stdout.splitlines():
                    match = _LINE.match(line.strip())
                    if match:
                        lists[match.group(1)].append(match.group(2))
            result[info.filename] = (tuple(lists["ELF"]), tuple(lists["PTX"]))
            os.unlink(path)
    return result


def best(fn: Callable[[], object], times: list[float]) -> object:
    t0 = time.perf_counter()
    value = fn()
    times.append(time.perf_counter() - t0)
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=min(DEFAULT_WORKERS, os.cpu_count() or 1))
    parser.add_argument("--cuobjdump", default=None)
    parser.add_argument("--skip-cuobjdump", action="store_true")
    args = parser.parse_args(argv)
    wheel: Path = args.wheel

    libs = libraries(wheel)
    size = sum(i.file_size for i in libs)
    compressed = sum(i.compress_size for i in libs)
    print(f"wheel: {wheel.name} ({wheel.stat().st_size / 2**20:.0f} MiB)")
    print(
        f"libraries: {len(libs)}, {size / 2**20:.0f} MiB inflated from {compressed / 2**20:.0f} MiB"
    )
    print(
        f"cpus: {os.cpu_count()}, workers: {args.workers}, python {sys.version.split()[0]}, zlib {zlib.ZLIB_RUNTIME_VERSION}"
    )

    inflate_oneshot(wheel)  # warm the page cache
    runs: dict[str, list[float]] = {
        "zipfile-read": [],
        "zlib-oneshot": [],
        "ours-1": [],
        "ours-n": [],
    }
    listing: Listing = {}
    for _ in range(args.repeat):
        best(lambda: inflate_zipfile(wheel), runs["zipfile-read"])
        best(lambda: inflate_oneshot(wheel), runs["zlib-oneshot"])
        listing = best(lambda: ours(wheel, 1), runs["ours-1"])  # type: ignore[assignment]
        parallel = best(lambda: ours(wheel, args.workers), runs["ours-n"])
        if parallel != listing:
            raise SystemExit("single-threaded and threaded readers disagree")
    t = {name: min(values) for name, values in runs.items()}

    print()
    print(f"decompress only, ZipFile.read (baseline)  {t['zipfile-read']:8.2f} s")
    print(f"decompress only, zlib one-shot, no CRC    {t['zlib-oneshot']:8.2f} s")
    print(
        f"buildrows reader, 1 thread                {t['ours-1']:8.2f} s"
        f"   {t['ours-1'] / t['zipfile-read']:.2f}x baseline, {t['ours-1'] / t['zlib-oneshot']:.2f}x one-shot"
    )
    print(
        f"buildrows reader, {args.workers} threads               {t['ours-n']:8.2f} s"
        f"   {t['ours-n'] / t['zipfile-read']:.2f}x baseline, {t['ours-n'] / t['zlib-oneshot']:.2f}x one-shot"
    )

    ok = t["ours-1"] <= 1.3 * t["zipfile-read"]
    cubins = sum(len(c) for c, _ in listing.values())
    ptx = sum(len(p) for _, p in listing.values())
    with_code = sum(1 for c, p in listing.values() if c or p)
    print(f"device code: {with_code} libraries, {cubins} cubins, {ptx} PTX")
    if not args.skip_cuobjdump:
        cuobjdump = args.cuobjdump or find_cuobjdump()
        if cuobjdump is None:
            raise SystemExit("cuobjdump not found; pass --cuobjdump or --skip-cuobjdump")
        t0 = time.perf_counter()
        reference = cuobjdump_listing(cuobjdump, wheel)
        t_cuobjdump = time.perf_counter() - t0
        identical = reference == listing
        print(
            f"extract + cuobjdump                       {t_cuobjdump:8.2f} s"
            f"   {t_cuobjdump / t['ours-1']:.1f}x slower than 1 thread, {t_cuobjdump / t['ours-n']:.1f}x than {args.workers}"
        )
        print(f"identical results: {identical}")
        if not identical:
            for path in sorted(set(reference) | set(listing)):
                if reference.get(path) != listing.get(path):
                    print(
                        f"  {path}: cuobjdump {reference.get(path)} buildrows {listing.get(path)}"
                    )
        ok = ok and identical and t_cuobjdump >= 8 * t["ours-1"]
    print(
        f"targets (<=1.3x decompress, >=8x faster than cuobjdump, identical): {'met' if ok else 'NOT met'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

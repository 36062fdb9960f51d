"""Benchmark (SPEC §10): the four Python rows of one train against one row, both from a cold
compiler cache, on the bundled example with its full architecture list.

Each repeat runs, in one process each and interleaved so drift in the machine hits all of them:
  one    `buildrows build ROW` for one Python, compiler cache emptied first;
  four   `buildrows build 'linux-x86_64-cuXYZ-py31[0-3]'`, compiler cache emptied first (the
         first row fills it and CMake's compiler detection; the other three take the kernel from
         the cache and the detection from the first tree, and build beside each other: --jobs
         defaults to the CPUs, at most 4);
  plain  the same four rows with --no-compiler-cache (no cache, detection in every tree, one row
         at a time), the reference for the device code.
Every run passes --provision: buildrows finds each row's interpreter (pyenv's 3.10-3.13 here)
and makes its cached build environment; a warm-up build creates those once, so the timed runs
differ only in compiling. Build trees are removed before every run. Target: four <= 1.5 x one. Then every cached wheel's device code
(each fat-binary entry's bytes, read by buildrows' own reader) must equal the uncached wheel's.

    python scripts/bench_rows.py [--train cu130] [--one 3.11] [--repeat 3] [--work DIR] [--jobs N]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "cuda-extension"
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
sys.path.insert(0, str(REPO))


def device_code(wheel: Path) -> list[tuple[str, str, bytes]]:
    """(library, entry arch and kind, entry bytes) for every fat-binary entry of the wheel."""
    from buildrows.binaries.binfmt import read_binary
    from buildrows.binaries.fatbin import iter_entries

    out = []
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if ".so" not in name:
                continue
            info = read_binary(z.read(name))
            for section in info.device_code_sections:
                for e in iter_entries(section):
                    start = e.offset + e.header_size
                    # The library's own name differs per Python (_core.cpython-312-...); the entries must not.
                    out.append((name.split("/")[-1].split(".")[0], f"{e.kind} {e.arch}",
                                bytes(section[start:start + e.payload_size])))
    return out


def run(argv: list[str], env: dict[str, str], log: Path) -> tuple[float, int, str]:
    start = time.perf_counter()
    with log.open("w", encoding="utf-8") as f:
        done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=f, text=True, check=False)
    return time.perf_counter() - start, done.returncode, done.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--train", default="cu130")
    ap.add_argument("--one", default=f"{sys.version_info.major}.{sys.version_info.minor}",
                    help="the Python of the single row (default: this one)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", type=Path, default=REPO / "build" / "bench_rows")
    ap.add_argument("--jobs", type=int, help="pass --jobs N to the four-row build (default: buildrows' own)")
    args = ap.parse_args()
    work = args.work.resolve()
    project = work / "project"
    shutil.rmtree(project, ignore_errors=True)
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(
        "build", "dist", "CMakeUserPresets.json", "buildrows-presets.json", "__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CCACHE_")}
    env["BUILDROWS_CACHE"] = str(work / "cache")
    ccache_dir = work / "cache" / "ccache"
    policy = project / "buildrows.toml"
    four_rows = f"linux-x86_64-{args.train}-py31[0-3]"
    one_row = f"linux-x86_64-{args.train}-py{args.one.replace('.', '')}"
    cli = [sys.executable, "-m", "buildrows", "--config", str(policy), "build", "--provision"]
    kinds = {
        "one": [*cli, one_row, "--wheel-dir", str(work / "wheels-one")],
        "four": [*cli, four_rows, "--wheel-dir", str(work / "wheels-four"),
                 *(["--jobs", str(args.jobs)] if args.jobs else [])],
        "plain": [*cli, four_rows, "--no-compiler-cache", "--wheel-dir", str(work / "wheels-plain")],
    }
    # Warm-up: interpreters and per-row environments, so the timed runs differ only in compiling.
    print(f"warm-up: {four_rows} (interpreters, build environments)", flush=True)
    _, code, out = run([*cli, four_rows, "--wheel-dir", str(work / "wheels-warm")], env, work / "warm.log")
    if code != 0:
        print(out)
        raise SystemExit(f"the warm-up build failed (exit {code}); see {work / 'warm.log'}")
    times: dict[str, list[float]] = {k: [] for k in kinds}
    summaries: dict[str, str] = {}
    for i in range(args.repeat):
        for kind, argv in kinds.items():
            shutil.rmtree(project / "build", ignore_errors=True)
            shutil.rmtree(ccache_dir, ignore_errors=True)
            shutil.rmtree(work / f"wheels-{kind}", ignore_errors=True)
            t, code, out = run(argv, env, work / f"{kind}.log")
            if code != 0:
                print(out)
                raise SystemExit(f"{kind} failed (exit {code}); see {work / f'{kind}.log'}")
            times[kind].append(t)
            summaries[kind] = out
            print(f"run {i + 1}/{args.repeat} {kind:5} {t:7.2f}s", flush=True)
    one, four, plain = (statistics.median(times[k]) for k in ("one", "four", "plain"))
    print(f"\ntrain {args.train}, {len(PYTHONS)} Python rows vs {one_row}, full list, cold compiler cache each run")
    print(f"  one row    median {one:6.2f}s  ({' '.join(f'{t:.2f}' for t in times['one'])})")
    print(f"  four rows  median {four:6.2f}s  ({' '.join(f'{t:.2f}' for t in times['four'])})  "
          f"= {four / one:.2f} x one row (target <= 1.5)")
    print(f"  four rows without the compiler cache  median {plain:6.2f}s  "
          f"({' '.join(f'{t:.2f}' for t in times['plain'])})  = {plain / one:.2f} x one row")
    # Where a row's time goes: CMake's configure (compiler detection, in every fresh build tree,
    # compiles CMake's ABI probe for the row's whole architecture list) against the rest.
    log = (work / "four.log").read_text(encoding="utf-8", errors="replace")
    configures = re.findall(r"-- Configuring done \(([\d.]+)s\)", log)
    steps = re.findall(r"step 'build \(scikit-build-core wheel\)' took ([\d.]+)s", log)
    caches = re.findall(r"^  compiler cache: (\d+/\d+ hits.*)$", log, re.MULTILINE)
    print("\nlast four-row run, per row: CMake configure / whole wheel build step / compiler cache")
    for i, (c, st) in enumerate(zip(configures, steps, strict=False)):
        print(f"  row {i + 1}: configure {c}s / build {st}s / {caches[i] if i < len(caches) else '-'}")
    print("\nlast four-row run's summary:")
    print("\n".join("  " + ln for ln in summaries["four"].splitlines() if ln.strip() and not ln.startswith("/")))
    # Device code: every cached wheel against the uncached wheel of the same row.
    same = True
    for wheel in sorted((work / "wheels-four").glob("*.whl")):
        tag = re.search(r"-(cp\d+)-", wheel.name)
        plain_wheels = list((work / "wheels-plain").glob(f"*-{tag.group(1) if tag else '?'}-*.whl"))
        if len(plain_wheels) != 1:
            print(f"  {wheel.name}: no uncached wheel to compare with")
            same = False
            continue
        a, b = device_code(wheel), device_code(plain_wheels[0])
        ok = bool(a) and a == b
        same &= ok
        print(f"  {wheel.name}: {len(a)} fat-binary entries, "
              f"{sum(len(d) for *_, d in a)} bytes, {'identical to' if ok else 'DIFFERENT from'} the uncached build")
    print(f"\nresult: four rows = {four / one:.2f} x one row; device code "
          f"{'identical' if same else 'NOT identical'} to uncached builds")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

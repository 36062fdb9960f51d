"""Benchmark (SPEC §10): what `buildrows build` adds to the same `cmake --workflow --preset` run by hand.

Both sides build the bundled example for one row from an empty build tree, with the same rendered
presets; runs are interleaved (hand, buildrows, hand, ...) so drift in the machine hits both, and
the medians are compared. The buildrows side is a cold `python -m buildrows build --driver
cmake-presets ROW` process: resolve, doctor (cmake/ninja/nvcc probes), render, the workflow.
Target: under 3% added.

    python scripts/bench_build.py [--row linux-x86_64-cu130-py311] [--repeat 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "cuda-extension"
POLICY = EXAMPLE / "buildrows.toml"


def timed(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    default_row = f"linux-x86_64-cu130-py{sys.version_info.major}{sys.version_info.minor}"
    ap.add_argument("--row", default=default_row)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    buildrows = [sys.executable, "-m", "buildrows", "--config", str(POLICY)]
    build_dir = EXAMPLE / "build" / args.row
    # Render once so the hand-run has the same presets buildrows will use.
    subprocess.run([*buildrows, "render", args.row, "--project", str(EXAMPLE)], check=True)
    hand = ["cmake", "--workflow", "--preset", args.row]
    ours = [*buildrows, "build", args.row, "--driver", "cmake-presets", "--project", str(EXAMPLE)]
    hand_times: list[float] = []
    ours_times: list[float] = []
    for i in range(args.repeat):
        for name, argv, sink in (("by hand", hand, hand_times), ("buildrows", ours, ours_times)):
            shutil.rmtree(build_dir, ignore_errors=True)
            t = timed(argv, EXAMPLE)
            sink.append(t)
            print(f"run {i + 1}/{args.repeat} {name:9} {t:7.2f}s", flush=True)
    # The fixed cost alone (an upper bound: build runs both in one process), free of compile noise.
    fixed = [timed([*buildrows, "doctor", args.row, "--driver", "cmake-presets"], EXAMPLE)
             + timed([*buildrows, "render", args.row, "--project", str(EXAMPLE)], EXAMPLE)
             for _ in range(args.repeat)]
    h, o = statistics.median(hand_times), statistics.median(ours_times)
    print(f"\nrow {args.row}: median by hand {h:.2f}s, median buildrows build {o:.2f}s, "
          f"ratio {o / h:.3f} ({(o / h - 1) * 100:+.1f}%), target < +3%")
    print(f"fixed cost of buildrows (cold doctor + cold render processes, median): "
          f"{statistics.median(fixed):.3f}s = {statistics.median(fixed) / h * 100:.1f}% of the hand-run")
    print(f"  by hand:   {' '.join(f'{t:.2f}' for t in hand_times)}")
    print(f"  buildrows: {' '.join(f'{t:.2f}' for t in ours_times)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

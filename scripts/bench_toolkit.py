"""Benchmark (SPEC §10): a provisioned toolkit is ready from the cache in under a second.

    python scripts/bench_toolkit.py [--train 13.2] [--runs 10] [--cache DIR]

First makes sure the train is in the cache (`buildrows toolkit install`, timed once: a download
when the cache is cold), then times, each in a fresh process as a user would run it:
  - `buildrows toolkit install TRAIN` when it is already there (reads the receipt only);
  - `buildrows toolkit path TRAIN`;
and, for scale, one cold verification pass over the downloaded archives (sha256 of each file,
read once), which is what a re-install from the download cache costs on top of unpacking.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _time(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", default="13.2")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--cache", help="BUILDROWS_CACHE to use (default: the environment's, else ~/.cache/buildrows)")
    args = ap.parse_args()
    env = dict(os.environ)
    if args.cache:
        env["BUILDROWS_CACHE"] = args.cache
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    br = [sys.executable, "-m", "buildrows"]
    first = _time([*br, "toolkit", "install", args.train], env)
    print(f"first `toolkit install {args.train}` (fills the cache if it was empty): {first:.2f} s")
    for what in (["toolkit", "install", args.train], ["toolkit", "path", args.train]):
        times = [_time([*br, *what], env) for _ in range(args.runs)]
        print(f"`buildrows {' '.join(what)}` from the cache, {args.runs} fresh processes: "
              f"median {statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms "
              f"({'under' if max(times) < 1 else 'OVER'} the 1 s target)")
    from buildrows.plan.provisioned import downloads_dir
    from buildrows.provision.archives import sha256_file

    files = sorted(downloads_dir(env).glob("*"))
    if files:
        t0 = time.perf_counter()
        size = sum(f.stat().st_size for f in files)
        for f in files:
            sha256_file(f)
        dt = time.perf_counter() - t0
        print(f"verifying the {len(files)} downloaded archives ({size / 1e6:.0f} MB, each read once): {dt:.2f} s "
              f"({size / 1e6 / dt:.0f} MB/s); a toolkit already assembled is not re-verified")
    return 0


if __name__ == "__main__":
    sys.exit(main())

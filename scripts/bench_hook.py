"""Benchmark (SPEC §10): cold-process wall time of `buildrows hook` and `buildrows env`; targets < 150 ms and at most 5x `python -c pass`.

    python scripts/bench_hook.py [--runs 20] [--config examples/executorch/buildrows.toml]

Each run is a fresh interpreter (`python -m buildrows ...`), as in CI. The hook's time includes
`nvcc --version`, which it must run; that share is measured and reported on its own.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _time(argv: list[str], env: dict[str, str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        out.append((time.perf_counter() - t0) * 1000)
        if proc.returncode != 0:
            sys.exit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    return out


def _line(name: str, ms: list[float]) -> str:
    return (f"{name:34} median {statistics.median(ms):6.1f} ms   min {min(ms):6.1f}   max {max(ms):6.1f}"
            f"   ({len(ms)} runs)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--config", default=str(REPO / "examples" / "executorch" / "buildrows.toml"))
    ap.add_argument("--row", default=None, help="row for `env` (default: the hook's row)")
    a = ap.parse_args()
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    row = a.row or f"linux-x86_64-cu130-py{py.replace('.', '')}"
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, CU_VERSION=row.split("-")[2],
                   BUILD_ENV_FILE=str(Path(tmp) / "build.env"), GITHUB_ENV=str(Path(tmp) / "github.env"))
        base = [sys.executable, "-m", "buildrows", "--config", a.config]
        results = {
            "python -c pass (floor)": _time([sys.executable, "-c", "pass"], env, a.runs),
            "buildrows hook": _time([*base, "hook"], env, a.runs),
            "buildrows env ROW": _time([*base, "env", row], env, a.runs),
            "buildrows env ROW --no-toolchain-check": _time([*base, "env", row, "--no-toolchain-check"], env, a.runs),
        }
        nvcc = shutil.which("nvcc")
        if nvcc:
            results["nvcc --version (inside the hook)"] = _time([nvcc, "--version"], env, a.runs)
    for name, ms in results.items():
        print(_line(name, ms))
    worst = max(statistics.median(results[k]) for k in ("buildrows hook", "buildrows env ROW"))
    floor = statistics.median(results["python -c pass (floor)"])
    ratio = worst / floor
    print(f"target < 150 ms: {'met' if worst < 150 else 'MISSED'} (worst median {worst:.1f} ms)")
    print(f"target <= 5x python -c pass: {'met' if ratio <= 5 else 'MISSED'} ({ratio:.1f}x)")
    return 0 if worst < 150 and ratio <= 5 else 1


if __name__ == "__main__":
    sys.exit(main())

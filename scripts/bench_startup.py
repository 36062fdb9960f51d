"""Benchmark (SPEC §10): start-up of `buildrows env` and `buildrows hook` against a bare
`python -c pass` on the same machine; target at most 5x.

    python scripts/bench_startup.py [--runs 30] [--config POLICY] [--tree DIR ...]

Each run is a fresh interpreter, as in CI, with the package's bytecode compiled first (a pip
install compiles it; a checkout run with PYTHONDONTWRITEBYTECODE=1 would pay the compile every
time). Wall time (median) and CPU time (user + system of the child, median) are reported: on a
busy machine the CPU time is the steadier of the two (it includes the nvcc runs a call waits for),
and the target is judged on it. The commands run round robin, one run of each in turn, so that
all of them see the same load.
The runs share one buildrows cache, so `env ROW` and `hook` read the answer of nvcc an earlier
run kept (buildrows.plan.toolchain); `env ROW, first call` gets an empty cache each run, as a CI
job's first call in a fresh container does, and is shown, not held to the target. `--tree DIR` (repeatable) measures the
buildrows package found in DIR instead of this checkout's, e.g. an older commit's
(`git archive COMMIT buildrows cmake presets | tar -x -C /tmp/old`). The commands run in an empty directory:
`python -m` puts the current directory first on sys.path, so run from a checkout they would
otherwise all import that checkout's package.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _once(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float, int]:
    """One fresh process: (wall ms, CPU ms of it and the children it waited for, exit status)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    return (time.perf_counter() - t0) * 1000, (usage.ru_utime + usage.ru_stime) * 1000, os.waitstatus_to_exitcode(status)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--config", default=str(REPO / "tests" / "data" / "policies" / "executorch" / "buildrows.toml"))
    ap.add_argument("--row", default=None)
    ap.add_argument("--tree", action="append", default=[], help="a directory holding another buildrows package")
    a = ap.parse_args()
    py = f"{sys.version_info.major}{sys.version_info.minor}"
    row = a.row or f"linux-x86_64-cu130-py{py}"
    trees = [str(Path(t).resolve()) for t in (REPO, *a.tree)]
    config = str(Path(a.config).resolve())
    cmds = {
        "env ROW --no-toolchain-check": ["env", row, "--no-toolchain-check"],
        "env ROW, first call (nvcc asked)": ["env", row],
        "env ROW": ["env", row],
        "hook": ["hook"],
    }
    with tempfile.TemporaryDirectory() as tmp:
        base = dict(os.environ, CU_VERSION="cu130", BUILD_ENV_FILE=str(Path(tmp) / "build.env"),
                    GITHUB_ENV=str(Path(tmp) / "github.env"), BUILDROWS_CACHE=str(Path(tmp) / "cache"))
        base.pop("PYTHONDONTWRITEBYTECODE", None)
        # (label, argv, env, first call?, held to the target?)
        jobs: list[tuple[str, list[str], dict[str, str], bool, bool]] = [
            ("python -c pass", [sys.executable, "-c", "pass"], base, False, False)]
        for tree in trees:
            compileall.compile_dir(str(Path(tree) / "buildrows"), quiet=1)
            where = "this checkout" if tree == str(REPO) else tree
            for name, args in cmds.items():
                jobs.append((f"{name} ({where})", [sys.executable, "-m", "buildrows", "--config", config, *args],
                             dict(base, PYTHONPATH=tree), "first call" in name,
                             tree == str(REPO) and name in ("env ROW", "hook")))
        results: dict[str, list[tuple[float, float, int]]] = {label: [] for label, *_ in jobs}
        # Round robin: every command sees the same load on a shared machine.
        for _ in range(a.runs):
            for label, argv, env, first, _held in jobs:
                if first:  # no answer of nvcc kept yet: a CI job's first call in a fresh container
                    env = dict(env, BUILDROWS_CACHE=tempfile.mkdtemp(dir=tmp))
                results[label].append(_once(argv, env, tmp))
    floor_wall = statistics.median(r[0] for r in results["python -c pass"])
    floor_cpu = statistics.median(r[1] for r in results["python -c pass"])
    ok = True
    for label, _argv, _env, _first, held in jobs:
        wall = statistics.median(r[0] for r in results[label])
        cpu = statistics.median(r[1] for r in results[label])
        code = next((r[2] for r in results[label] if r[2]), 0)
        ratios = "" if label == "python -c pass" else f"  {wall / floor_wall:4.1f}x wall {cpu / floor_cpu:4.1f}x cpu"
        print(f"{label:52} wall {wall:6.1f} ms  cpu {cpu:6.1f} ms{ratios}" + (f"  (exit {code})" if code else ""))
        if held:
            ok = ok and cpu / floor_cpu <= 5
    print(f"target <= 5x python -c pass in CPU time (env ROW and hook, this checkout): {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

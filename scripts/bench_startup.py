"""Benchmark (SPEC §10): start-up of `buildrows env` and `buildrows hook` against a bare
`python -c pass` on the same machine; target at most 5x.

    python scripts/bench_startup.py [--runs 30] [--config POLICY] [--tree DIR ...]

Each run is a fresh interpreter, as in CI, with the package's bytecode compiled first (a pip
install compiles it; a checkout run with PYTHONDONTWRITEBYTECODE=1 would pay the compile every
time). Wall time (median) and CPU time (user + system of the child, median) are reported: on a
busy machine the CPU time is the steadier of the two (it includes the nvcc runs a call waits for).
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


def _run(argv: list[str], env: dict[str, str], runs: int, cwd: str, *,
         fresh_cache: bool = False) -> tuple[float, float, int]:
    wall: list[float] = []
    cpu: list[float] = []
    code = 0
    for _ in range(runs):
        if fresh_cache:  # no answer of nvcc kept yet: a CI job's first call in a fresh container
            env = dict(env, BUILDROWS_CACHE=tempfile.mkdtemp(dir=cwd))
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((usage.ru_utime + usage.ru_stime) * 1000)
        code = os.waitstatus_to_exitcode(status)
    return statistics.median(wall), statistics.median(cpu), code


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
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        base = dict(os.environ, CU_VERSION="cu130", BUILD_ENV_FILE=str(Path(tmp) / "build.env"),
                    GITHUB_ENV=str(Path(tmp) / "github.env"), BUILDROWS_CACHE=str(Path(tmp) / "cache"))
        base.pop("PYTHONDONTWRITEBYTECODE", None)
        floor_wall, floor_cpu, _ = _run([sys.executable, "-c", "pass"], base, a.runs, tmp)
        print(f"{'python -c pass':44} wall {floor_wall:6.1f} ms  cpu {floor_cpu:6.1f} ms")
        for tree in trees:
            compileall.compile_dir(str(Path(tree) / "buildrows"), quiet=1)
            env = dict(base, PYTHONPATH=tree)
            cmds = {
                "env ROW --no-toolchain-check": ["env", row, "--no-toolchain-check"],
                "env ROW, first call (nvcc asked)": ["env", row],
                "env ROW": ["env", row],
                "hook": ["hook"],
            }
            for name, args in cmds.items():
                wall, cpu, code = _run([sys.executable, "-m", "buildrows", "--config", config, *args], env, a.runs, tmp,
                                       fresh_cache="first call" in name)
                ratio = max(wall / floor_wall, cpu / floor_cpu)
                label = f"{name} ({'this checkout' if tree == str(REPO) else tree})"
                print(f"{label:44} wall {wall:6.1f} ms  cpu {cpu:6.1f} ms  {wall / floor_wall:4.1f}x wall "
                      f"{cpu / floor_cpu:4.1f}x cpu" + (f"  (exit {code})" if code else ""))
                if tree == str(REPO) and name in ("env ROW", "hook"):
                    ok = ok and ratio <= 5
    print(f"target <= 5x python -c pass (env ROW and hook, this checkout): {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

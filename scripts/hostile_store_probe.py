"""Replay issue 37's misbehaving stores against `buildrows hook` and report, per store, the exit
code, the seconds, the peak memory and what it said (the closing table's numbers).

    python scripts/hostile_store_probe.py [--tree DIR] [--limit SECONDS]

`--tree` runs another checkout's buildrows (e.g. /work/main, for the "before" column); each hook
runs in a fresh process, killed after `--limit` seconds (a probe without a deadline never ends on
`drip`). The stores are tests/hostile_store.py's, on loopback.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.hostile_store import MODES, hostile_store  # noqa: E402

# The hook in a process of its own, its peak resident memory printed last (ru_maxrss: KB on Linux).
RUNNER = ("import resource, sys\nfrom buildrows.cli import main\ncode = main(sys.argv[1:])\n"
          "print(f'PEAK_KB {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}', file=sys.stderr)\nsys.exit(code)\n")


def run_hook(tree: Path, policy: Path, port: int, work: Path, limit: float) -> tuple[str, float, str, str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "BUILD_ENV_FILE": str(work / "build.env"),
           "BUILDROWS_CACHE": str(work / "cache"), "CU_VERSION": "cpu", "GITHUB_EVENT_NAME": "pull_request",
           "GITHUB_REF": "refs/pull/1/merge", "BUILDROWS_CACHE_REMOTE": f"redis://127.0.0.1:{port}"}
    env.pop("GITHUB_ENV", None)
    start = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", RUNNER, "--config", str(policy), "hook", "--python", "3.11",
                               "--platform", "linux-x86_64"], env=env, capture_output=True, text=True,
                              timeout=limit, check=False, cwd=work)
    except subprocess.TimeoutExpired:
        return "killed", time.monotonic() - start, "-", f"still running after {limit:g} s"
    took = time.monotonic() - start
    peak = next((ln.split()[1] for ln in done.stderr.splitlines() if ln.startswith("PEAK_KB")), "?")
    said = next((ln.strip() for ln in done.stderr.splitlines() if "does not answer" in ln or "internal error" in ln), "")
    env_file = "env file written" if (work / "build.env").is_file() else "NO env file"
    return f"exit {done.returncode}, {env_file}", took, f"{int(peak) // 1024} MB" if peak.isdigit() else peak, said


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tree", type=Path, default=REPO, help="the buildrows checkout to run (default: this one)")
    ap.add_argument("--limit", type=float, default=30.0, help="seconds before a hook is killed")
    ap.add_argument("--modes", nargs="*", default=list(MODES))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="hostile-store-") as tmp:
        project = Path(tmp) / "project"
        shutil.copytree(REPO / "examples" / "cuda-extension", project,
                        ignore=shutil.ignore_patterns("build", "dist", "__pycache__"))
        policy = project / "buildrows.toml"
        print(f"buildrows from {args.tree}; limit {args.limit:g} s")
        for mode in args.modes:
            work = Path(tmp) / mode
            work.mkdir()
            with hostile_store(mode) as port:
                result, took, peak, said = run_hook(args.tree, policy, port, work, args.limit)
            print(f"{mode:10} {result:32} {took:6.1f} s  peak {peak:>7}  {said[:150]}")


if __name__ == "__main__":
    main()

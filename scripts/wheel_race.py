"""Two processes placing same-named wheels into one wheel directory at once, round after round
(issue 37, item 5): every wheel must survive, at its name or kept aside under `earlier-*/`.

    python scripts/wheel_race.py [--rounds 1000] [--tree DIR]

Each round, both processes wait at a barrier, then place a wheel of the same name and different
content into the round's directory through `buildrows.build.placement._unstage` (what `build`
does once a row's wheel is checked). A round loses a wheel when one of the two contents is nowhere
under its directory afterwards. `--tree` runs another checkout's buildrows (e.g. /work/main, for the
"before" column). Prints the rounds, the wheels lost, errors and the seconds; exits 1 on a loss.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

NAME = "race-0.1.0-py3-none-any.whl"


def _wheel(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("race/owner.txt", content)


def worker(tree: str, me: int, rounds: int, root: str, barrier: Any, errors: Any) -> None:
    sys.path.insert(0, tree)
    import io
    import threading
    from types import SimpleNamespace

    from buildrows.build.placement import _unstage
    from buildrows.ui import UI

    state = SimpleNamespace(lock=threading.Lock(), written={}, ui=UI(out=io.StringIO(), err=io.StringIO()))
    row = SimpleNamespace(name=f"row-{me}")
    for i in range(rounds):
        wheel = Path(root) / f"staging-{me}" / str(i) / NAME
        _wheel(wheel, f"{me}-{i}")
        barrier.wait()
        try:
            _unstage(state, row, wheel, Path(root) / "dist" / str(i))  # type: ignore[arg-type]
        except Exception as e:  # counted, not fatal: the other rounds go on
            with errors.get_lock():
                errors.value += 1
            print(f"process {me}, round {i}: {type(e).__name__}: {e}", file=sys.stderr)


def contents(directory: Path) -> set[str]:
    found = set()
    for p in directory.rglob("*.whl"):
        with zipfile.ZipFile(p) as z:
            found.add(z.read("race/owner.txt").decode())
    return found


def race(tree: Path, rounds: int) -> tuple[int, int, float]:
    """(rounds that lost a wheel, errors, seconds)."""
    ctx = multiprocessing.get_context("fork")
    barrier, errors = ctx.Barrier(2), ctx.Value("i", 0)
    with tempfile.TemporaryDirectory(prefix="wheel-race-") as root:
        start = time.monotonic()
        procs = [ctx.Process(target=worker, args=(str(tree), me, rounds, root, barrier, errors)) for me in (0, 1)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        took = time.monotonic() - start
        lost = sum(1 for i in range(rounds) if contents(Path(root) / "dist" / str(i)) != {f"0-{i}", f"1-{i}"})
    return lost, errors.value, took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent,
                    help="the buildrows checkout to run (default: this one)")
    args = ap.parse_args()
    lost, errors, took = race(args.tree, args.rounds)
    print(f"buildrows from {args.tree}: {args.rounds} rounds, two processes, {2 * args.rounds} wheels placed: "
          f"{lost} round{'s' if lost != 1 else ''} lost a wheel, {errors} error{'s' if errors != 1 else ''}, "
          f"{took:.1f} s")
    return 1 if lost or errors else 0


if __name__ == "__main__":
    sys.exit(main())

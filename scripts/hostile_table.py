"""Replay issue 37's hostile inputs (tests/hostile_wheels.py) against two checkouts of buildrows and
print a markdown table: case, exit code, seconds and peak RSS before and after.

    python scripts/hostile_table.py --before /path/to/old/checkout [--after .] [--corpus]

Each case runs in a forked child with a 3 GB address-space limit and its own wall-clock limit (a
case killed at its limit shows rc -14); --corpus adds a summary of the 320-case generated corpus.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.hostile_wheels import corpus, replay_cases, run_cases  # noqa: E402


def _cell(o: object) -> str:
    rc, s, cpu, mb = o.rc, o.seconds, o.cpu, o.rss_mb  # type: ignore[attr-defined]
    what = {1: "internal error", -14: "killed at limit", -9: "killed"}.get(rc, f"exit {rc}")
    return f"{what}, {s:.2f} s ({cpu:.2f} s CPU), {mb:.0f} MB"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, default=REPO)
    ap.add_argument("--corpus", action="store_true")
    args = ap.parse_args(argv)
    cases = [c for c, _ in replay_cases()]
    budgets = {c.name: b for c, b in replay_cases()}
    with tempfile.TemporaryDirectory() as d:
        before = run_cases(cases, Path(d) / "before", code_root=args.before.resolve())
        after = run_cases(cases, Path(d) / "after", code_root=args.after.resolve())
        print("| case | before | after | budget |\n| --- | --- | --- | --- |")
        for b, a in zip(before, after, strict=True):
            budget = budgets[a.name]
            print(f"| {a.name} | {_cell(b)} | {_cell(a)} | {budget.seconds} s, {budget.rss_mb} MB |")
        if args.corpus:
            cs = corpus()
            for label, root in (("before", args.before), ("after", args.after)):
                out = run_cases(cs, Path(d) / f"corpus-{label}", code_root=root.resolve())
                bad = [o for o in out if o.rc not in c_codes(cs, o.name)]
                print(f"\ncorpus {label}: {len(out)} cases, {sum(o.rc == 1 for o in out)} internal errors, "
                      f"{sum(o.rc < 0 for o in out)} killed, {len(bad)} not as expected, slowest "
                      f"{max(o.seconds for o in out):.2f} s, largest {max(o.rss_mb for o in out):.0f} MB, "
                      f"total {sum(o.seconds for o in out):.1f} s")
    return 0


def c_codes(cases: list[object], name: str) -> tuple[int, ...]:
    return next(c.codes for c in cases if c.name == name)  # type: ignore[attr-defined]


if __name__ == "__main__":
    sys.exit(main())

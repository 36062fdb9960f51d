"""`buildrows check WHEEL`: hold a built wheel to its row, without a GPU and without installing it
(buildrows.check.expect builds the expectation and judges; this module prints the report)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from buildrows.errors import CheckFailed
from buildrows.ui import UI


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("wheel", metavar="WHEEL",
                   help="the built .whl file, or a shared library or directory (an install tree) with the checks "
                        "that apply to loose files")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--row", help="the row the wheel was built for (default: inferred from the wheel's name)")
    g.add_argument("--archs", metavar="LIST", help="check against this architecture list instead of the row's, e.g. '9.0'")
    p.add_argument("--cuda", metavar="TRAIN",
                   help="the wheel's CUDA train (13.0 or cu130) when its name carries no +cuXYZ tag")
    p.add_argument("--json", action="store_true", help="print a machine-readable report")
    p.add_argument("--torch", metavar="VERSION",
                   help="the torch a PyTorch extension was compiled against (e.g. 2.8.0), for a wheel with no "
                        "buildrows build record")


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.check.expect import CheckRequest, check_wheel, policy_for
    from buildrows.check.judges import library_json, unused_exceptions

    req = CheckRequest(args.wheel, args.row, args.archs, args.cuda, getattr(args, "config", None), args.json,
                       torch=args.torch)
    wheel = Path(args.wheel)
    exp, info, results = check_wheel(req, wheel, policy_for(req))
    ok = all(r.ok for r in results)
    unused = unused_exceptions(exp, info)
    if args.json:
        ui.print(json.dumps({
            "ok": ok,
            "wheel": str(wheel),
            "row": exp.row,
            "runtime_mode": exp.mode if exp.cuda else None,
            "expected": {"elf": exp.archs.cubin_names if exp.archs else [], "ptx": exp.archs.ptx_names if exp.archs else []},
            "checks": [r.json() for r in results],
            "libraries": library_json(info.libraries),
            "unused_exceptions": unused,
        }, indent=2))
    else:
        ui.print(f"{wheel.name}: row {exp.row}")
        for r in results:
            ui.print(f"  [{'PASS' if r.ok else 'FAIL'}] {r.name}")
            for d in r.details:
                ui.print(f"         {d}")
        if unused:
            ui.print(f"  [NOTE] {len(unused)} {'exception' if len(unused) == 1 else 'exceptions'} of the policy matched "
                     "nothing in this wheel (stale or mistyped?)")
            for u in unused:
                ui.print(f"         {u['rule']}: {u['reason']} [{u['source']}]")
        ui.print(f"verdict: {'PASS' if ok else 'FAIL'}")
    if not ok:
        failed = ", ".join(r.name for r in results if not r.ok)
        if args.json:
            return CheckFailed.exit_code
        raise CheckFailed(f"{wheel.name} fails {failed}")
    return 0

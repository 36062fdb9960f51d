from __future__ import annotations

import argparse
import json

from buildrows.commands.policy_arg import policy
from buildrows.ui import UI


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("selectors", nargs="*", metavar="SELECTOR", help="row names or globs, e.g. 'linux-*-cu13*-py312'")
    p.add_argument("--json", action="store_true", help="print a JSON list of row objects")
    p.add_argument("--coverage", action="store_true",
                   help="print rows x GPU architectures (cubin, PTX, missing) instead of the list; rows that "
                        "differ only in Python share a line")


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.policy.rows import row_json, select

    pol = policy(args, ui)
    rows = select(pol, args.selectors)
    if args.json:
        ui.print(json.dumps([{**row_json(r), "published": pol.publishes(r)} for r in rows], indent=2))
        return 0
    if args.coverage:
        from buildrows.policy.coverage import Coverage, collapse, of_names, render

        lines = [Coverage(r.name, of_names(r.archs.cubin_names, r.archs.ptx_names)) for r in rows if r.archs is not None]
        for line in render(collapse(lines), "GPU architectures the policy promises:"):
            ui.print(line)
        others = [r for r in rows if r.archs is None]
        if others:
            ui.print(f"not in the view: {len(others)} CPU or empty row{'s' if len(others) != 1 else ''}")
        return 0
    for r in rows:
        if r.empty_reason is not None:
            ui.print(f"{r.name:32} (empty: {r.empty_reason})")
        elif r.archs is not None:
            # a build-only train's row builds here but is not in the release matrix
            note = "" if pol.publishes(r) else "  (build-only: not published)"
            ui.print(f"{r.name:32} {r.archs.torch_cuda_arch_list or r.archs.text}{note}")
        else:
            ui.print(f"{r.name:32} cpu")
    return 0

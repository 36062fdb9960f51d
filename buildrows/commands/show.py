from __future__ import annotations

import argparse
import json

from buildrows.commands.policy_arg import policy
from buildrows.ui import UI


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("row", metavar="ROW", help="one row name (or a glob matching exactly one)")
    p.add_argument("--json", action="store_true", help="print the row and the provenance of each value as JSON")


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.policy.rows import check_json, row_json, select_one, show_lines

    pol = policy(args, ui)
    row = select_one(pol, args.row)
    if args.json:
        data = row_json(row)
        data["driver"] = pol.project.driver
        data["source_dir"] = pol.project.source_dir
        data["nvcc_flags"] = row.archs.nvcc_flags if row.archs else []
        data["provenance"] = dict(row.provenance)
        data["check"] = check_json(pol, row)
        ui.print(json.dumps(data, indent=2))
    else:
        for line in show_lines(pol, row):
            ui.print(line)
    return 0

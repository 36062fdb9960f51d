"""`buildrows render ROW...`: write CMake presets for rows and include them from CMakeUserPresets.json."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from buildrows.commands._common import policy
from buildrows.ui import UI

if TYPE_CHECKING:
    from buildrows.plan import RowPlan


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("rows", metavar="ROW", nargs="+", help="row names or globs (linux-*-cu13*-py312)")
    p.add_argument("--project", metavar="DIR",
                   help="the CMake project to render into (default: the policy's source-dir)")
    p.add_argument("--gitignore", action="store_true",
                   help="append the rendered files that are not ignored yet to the project's .gitignore")
    p.add_argument("--no-toolchain-check", action="store_true",
                   help="do not look for nvcc or check its train (the presets then name no CUDA compiler)")


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.plan import plan_row
    from buildrows.presets import render_plans
    from buildrows.provision.interpreters import find_interpreter, install_hint
    from buildrows.rows import select

    pol = policy(args)
    rows = select(pol, args.rows)
    project = Path(args.project) if args.project else Path(pol.path).parent / pol.project.source_dir
    check = not args.no_toolchain_check
    plans = []
    for row in rows:
        # The row's interpreter is pinned (Python_EXECUTABLE), so a preset never builds a module
        # for whichever Python CMake finds first.
        found = find_interpreter(row.python, os.environ).found if check else None
        if check and found is None:
            ui.warn(f"{row.name}: no Python {row.python} on this machine, so its preset does not pin one; "
                    f"get it with {install_hint(row.python, os.environ)}")
        plans.append(plan_row(pol, row, os.environ, check_toolchain=check, interpreter=found))
    result = render_plans(plans, project)
    for line in decisions(result.plans):
        ui.info(line)
    for path in result.paths:
        ui.print(str(path))
    gitignore_advice(Path(project), args.gitignore, ui)
    ui.ok(f"rendered {len(result.plans)} row(s); run: cmake --workflow --preset {result.plans[0].row.name}")
    return 0


def decisions(plans: Sequence[RowPlan]) -> list[str]:
    """The generator and CUDA compiler chosen, each with its reason once (not once per row)."""
    lines: list[str] = []
    for what, key in (("generator", _generator), ("CUDA compiler", _compiler), ("interpreter", _interpreter)):
        groups: dict[str, list[str]] = {}
        for plan in plans:
            text = key(plan)
            if text:
                groups.setdefault(text, []).append(plan.row.name)
        for text, names in groups.items():
            who = "every row" if len(names) == len(plans) and len(plans) > 1 else ", ".join(names)
            lines.append(f"{what} for {who}: {text}")
    return lines


def _generator(plan: RowPlan) -> str:
    g = plan.generator
    return f"{g.generator}" + (f" (toolset {g.toolset})" if g.toolset else "") + f" - {g.reason}"


def _compiler(plan: RowPlan) -> str:
    return plan.compiler.describe() if plan.compiler is not None else ""


def _interpreter(plan: RowPlan) -> str:
    return plan.interpreter.describe() if plan.interpreter is not None else ""


def gitignore_advice(project: Path, write: bool, ui: UI) -> None:
    """Say which rendered files belong in .gitignore; with `write`, append them."""
    from buildrows.presets import add_to_gitignore, gitignore_entries

    missing = gitignore_entries(project)
    if not missing:
        return
    if write:
        path = add_to_gitignore(project, missing)
        ui.info(f"added to {path}: {' '.join(missing)}")
    else:
        ui.info(f"add to {project / '.gitignore'} (rendered, machine-specific files): {' '.join(missing)}  "
                "(`buildrows render --gitignore ...` appends them)")

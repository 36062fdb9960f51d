"""`buildrows render ROW...`: write CMake presets for rows and include them from CMakeUserPresets.json."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from buildrows.commands._common import policy
from buildrows.ui import UI


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("rows", metavar="ROW", nargs="+", help="row names or globs (linux-*-cu13*-py312)")
    p.add_argument("--project", metavar="DIR",
                   help="the CMake project to render into (default: the policy's source-dir)")
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
    for plan in result.plans:
        g = plan.generator
        ui.info(f"{plan.row.name}: generator {g.generator}"
                + (f" (toolset {g.toolset})" if g.toolset else "") + f" - {g.reason}")
        if plan.compiler is not None:
            ui.info(f"{plan.row.name}: CUDA compiler {plan.compiler.describe()}")
        if plan.interpreter is not None:
            ui.info(f"{plan.row.name}: {plan.interpreter.describe()}")
    for path in result.paths:
        ui.print(str(path))
    ui.ok(f"rendered {len(result.plans)} row(s); run: cmake --workflow --preset {result.plans[0].row.name}")
    return 0

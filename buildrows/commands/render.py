"""`buildrows render ROW...`: write CMake presets for rows and include them from CMakeUserPresets.json."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from buildrows.commands.policy_arg import policy
from buildrows.render.presets import decisions, gitignore_advice
from buildrows.ui import UI

if TYPE_CHECKING:
    pass


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("rows", metavar="ROW", nargs="+", help="row names or globs (linux-*-cu13*-py312)")
    p.add_argument("--project", metavar="DIR",
                   help="the CMake project to render into (default: the policy's source-dir)")
    p.add_argument("--gitignore", action="store_true",
                   help="append the rendered files that are not ignored yet to the project's .gitignore")
    p.add_argument("--no-toolchain-check", action="store_true",
                   help="do not look for nvcc or check its train (the presets then name no CUDA compiler)")


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.plan.row import plan_row
    from buildrows.policy.rows import select
    from buildrows.provision.interpreters import find_interpreter, install_hint
    from buildrows.render.presets import render_plans

    pol = policy(args, ui)
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
    for note in result.notes:
        ui.warn(note)
    for path in result.paths:
        ui.print(str(path))
    gitignore_advice(Path(project), args.gitignore, ui)
    ui.ok(f"rendered {len(result.plans)} row(s); {next_step(pol.path, Path(project), result.plans[0].row.name)}")
    return 0


def next_step(policy_path: str, project: Path, row: str) -> str:
    """What to run after `render`: `cmake --workflow` where it can work (a CMakeLists.txt beside
    the presets); else the `buildrows build` that builds the row (a scikit-build-core project whose
    CMake lives in its cmake.source-dir, a setup.py project without CMake)."""
    import shlex

    if (project / "CMakeLists.txt").is_file():
        return f"run: cmake --workflow --preset {row}"
    build = shlex.join(["buildrows", "--config", policy_path, "build", row])
    return f"{project} has no CMakeLists.txt, so `cmake --workflow` cannot build there; build the row with: {build}"

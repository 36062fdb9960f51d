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
    from buildrows.presets import render_presets
    from buildrows.rows import select

    pol = policy(args)
    rows = select(pol, args.rows)
    project = Path(args.project) if args.project else Path(pol.path).parent / pol.project.source_dir
    result = render_presets(pol, rows, project, os.environ, check_toolchain=not args.no_toolchain_check)
    for plan in result.plans:
        g = plan.generator
        ui.info(f"{plan.row.name}: generator {g.generator}"
                + (f" (toolset {g.toolset})" if g.toolset else "") + f" - {g.reason}")
        if plan.compiler is not None:
            ui.info(f"{plan.row.name}: CUDA compiler {plan.compiler.describe()}")
    for note in result.notes:
        ui.warn(note)
    for path in result.paths:
        ui.print(str(path))
    ui.ok(f"rendered {len(result.plans)} row(s); run: cmake --workflow --preset {result.plans[0].row.name}")
    return 0

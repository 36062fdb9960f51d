"""`buildrows build ROW...`: resolve, doctor, render, build, check the wheel - the way CI does."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from buildrows.ui import UI

if TYPE_CHECKING:
    from collections.abc import Mapping

    from buildrows.model import Policy, Row
    from buildrows.toolchain import HostOs


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("selectors", nargs="*", metavar="ROW",
                   help="row names or globs (default: this machine's row: its platform, this Python, "
                        "and the CUDA train of the nvcc found, else CPU)")
    p.add_argument("--project", metavar="DIR", help="the project to build (default: the policy's source-dir)")
    p.add_argument("--wheel-dir", metavar="DIR", help="where wheels are written (default: PROJECT/dist)")
    p.add_argument("--driver", choices=("cmake-presets", "scikit-build-core", "setup.py"),
                   help="build with this driver instead of the policy's")
    p.add_argument("--isolation", action="store_true",
                   help="let the PEP 517 frontend install the build requirements into a fresh environment "
                        "from the registry (default: build with the row's Python as it is)")
    p.add_argument("--no-check", action="store_true", help="skip the wheel check (not for release builds)")


def run(args: argparse.Namespace, ui: UI) -> int:
    import time

    from buildrows.commands._build import doctor_rows, resolve_rows, setup
    from buildrows.runner import duration

    start = time.perf_counter()
    pol, env, host = setup(args)
    rows = resolve_rows(pol, args.selectors, env, host, ui)
    for row in rows:
        row.require_archs("build")
    with ui.group("doctor"):
        doctor_rows(pol, rows, env, host, args, ui)
    wheels: list[tuple[Row, Path | None, bool | None]] = []
    for row in rows:
        with ui.group(f"build {row.name}"):
            wheels.append(build_row(pol, row, env, host, args, ui))
    for row, wheel, ok in wheels:
        if wheel is None:
            ui.print(f"{row.name}: built (the {args.driver or pol.project.driver} driver makes no wheel)")
        else:
            verdict = "not checked" if ok is None else ("check PASS" if ok else "check FAIL")
            ui.print(f"{wheel}  ({size_text(wheel.stat().st_size)}) [{row.name}: {verdict}]")
    ui.info(f"built {len(wheels)} row{'s' if len(wheels) != 1 else ''} in {duration(time.perf_counter() - start)}")
    failed = [r.name for r, _, ok in wheels if ok is False]
    if failed:
        from buildrows.errors import CheckFailed

        raise CheckFailed(f"the wheel check failed for {', '.join(failed)} (its report is above)")
    return 0


def build_row(pol: Policy, row: Row, env: Mapping[str, str], host: HostOs, args: argparse.Namespace,
              ui: UI) -> tuple[Row, Path | None, bool | None]:
    """Render, build and check one row; returns its wheel (None when the driver makes none) and the verdict."""
    from buildrows import drivers
    from buildrows.commands._build import doctor_command, driver_of, project_of
    from buildrows.errors import ExternalFailure, Refused
    from buildrows.presets import plan_row, render_presets
    from buildrows.runner import run_step

    driver = driver_of(pol, args)
    project = project_of(pol, args)
    wheel_dir = drivers.default_wheel_dir(project, args.wheel_dir)
    if driver == "cmake-presets":
        ui.step(f"render presets for {row.name} into {project}")
        rendered = render_presets(pol, [row], project, env, host=host)
        for path in rendered.paths:
            ui.info(f"  wrote {path}")
        bp = drivers.cmake_presets_plan(row, project)
    else:
        ui.step(f"render {row.name}: generator, cache variables and environment")
        plan = plan_row(pol, row, env, host=host, step="build")
        python = drivers.row_python(row, env)
        if python is None:
            raise Refused(f"no Python {row.python} to build {row.name} with\n    fix: `{doctor_command(pol, row)}` says how to get one")
        if driver == "scikit-build-core":
            bp = drivers.scikit_build_core_plan(plan, python, project, wheel_dir, isolation=args.isolation)
        else:
            bp = drivers.setup_py_plan(plan, python, project, wheel_dir, env, isolation=args.isolation)
    before = drivers.snapshot(wheel_dir)
    for cmd in bp.commands:
        run_step(ui, cmd, env, doctor=doctor_command(pol, row))
    if bp.wheel_dir is None:
        ui.warn(f"the {driver} driver builds the tree, not a wheel: nothing to check for {row.name}")
        return row, None, None
    made = drivers.new_wheels(bp.wheel_dir, before)
    if not made:
        raise ExternalFailure(f"step 'build' for {row.name} finished but wrote no wheel into {bp.wheel_dir}")
    wheel = made[0]
    ui.info(f"  wheel: {wheel} ({size_text(wheel.stat().st_size)})")
    return row, wheel, None if args.no_check else check_built_wheel(pol, row, wheel, ui)


def local_tag_problem(row: Row, wheel: Path) -> str | None:
    """Why the wheel's version does not carry the row's local tag (+cu130; none for CPU), or None."""
    from buildrows.wheelread import parse_wheel_filename

    version = parse_wheel_filename(wheel.name).version
    _, plus, local = version.partition("+")
    want = row.local_tag.lstrip("+")
    if want and local != want:
        return (f"{wheel.name} is version {version}, not tagged +{want} for row {row.name}: the project must take "
                "its local version from BUILDROWS_LOCAL_VERSION (see examples/cuda-extension/build_support/row_metadata.py)")
    if not want and plus and local.startswith("cu"):
        return f"{wheel.name} is a CPU row's wheel ({row.name}) but carries the CUDA tag +{local}"
    return None


def size_text(n: int) -> str:
    """A file size as people read it: `812 KB`, `4.2 MB`."""
    if n < 1000 * 1000:
        return f"{max(1, round(n / 1000))} KB"
    if n < 1000 ** 3:
        return f"{n / 1000 ** 2:.1f} MB"
    return f"{n / 1000 ** 3:.2f} GB"


def check_built_wheel(pol: Policy, row: Row, wheel: Path, ui: UI) -> bool:
    """`buildrows check` on the new wheel against its row; prints the report, returns the verdict."""
    import time

    from buildrows.check import CheckResult
    from buildrows.commands.check import check_wheel
    from buildrows.runner import duration

    start = time.perf_counter()

    args = argparse.Namespace(row=row.name, archs=None, cuda=None, config=pol.path, json=False)
    ui.step(f"check {wheel.name} against {row.name}", ["buildrows", "--config", pol.path, "check", str(wheel), "--row", row.name])
    _, _, results = check_wheel(args, wheel, pol)
    tag = local_tag_problem(row, wheel)
    results.insert(0, CheckResult("local-version-tag", tag is None, [tag or f"version tag matches {row.name}"]))
    for r in results:
        ui.info(f"  [{'PASS' if r.ok else 'FAIL'}] {r.name}")
        for d in r.details:
            ui.info(f"         {d}")
    ok = all(r.ok for r in results)
    ui.info(f"  verdict: {'PASS' if ok else 'FAIL'}")
    ui.info(f"  check took {duration(time.perf_counter() - start)}")
    return ok

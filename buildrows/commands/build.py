"""`buildrows build ROW...`: resolve, doctor, render, build, check the wheel - the way CI does."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from buildrows.ui import UI

if TYPE_CHECKING:
    from collections.abc import Mapping

    from buildrows.commands._build import Provided
    from buildrows.model import Driver, Policy, Row
    from buildrows.provision.interpreters import Interpreter
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
    p.add_argument("--provision", action="store_true",
                   help="provision what a row lacks: a cached per-row environment of the row's Python holding the "
                        "project's build requirements, and the row's CUDA toolkit when this machine has no nvcc "
                        "of its train (`buildrows toolkit install`; BUILDROWS_CUDA_MIRROR for the archives)")
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
    provided: dict[str, Provided] = {}
    for row in rows:
        with ui.group(f"provision {row.name}"):
            provided[row.name] = provide(pol, row, env, host, args, ui)
    with ui.group("doctor"):
        doctor_rows(pol, rows, env, host, args, ui, provided=provided)
    wheels: list[tuple[Row, Path | None, bool | None]] = []
    for row in rows:
        with ui.group(f"build {row.name}"):
            wheels.append(build_row(pol, row, env, host, args, ui, provided.get(row.name)))
    for row, wheel, ok in wheels:
        if wheel is None:
            ui.print(f"{row.name}: built (the {args.driver or pol.project.driver} driver makes no wheel)")
        else:
            verdict = "not checked" if ok is None else ("check PASS" if ok else "check FAIL")
            ui.print(f"{wheel}  ({size_text(_size(wheel))}) [{row.name}: {verdict}]")
    ui.info(f"built {len(wheels)} row{'s' if len(wheels) != 1 else ''} in {duration(time.perf_counter() - start)}")
    failed = [r.name for r, _, ok in wheels if ok is False]
    if failed:
        from buildrows.errors import CheckFailed

        raise CheckFailed(f"the wheel check failed for {', '.join(failed)} (its report is above)")
    return 0


def provide(pol: Policy, row: Row, env: Mapping[str, str], host: HostOs, args: argparse.Namespace,
            ui: UI) -> Provided:
    """The row's interpreter (a real one: run and checked) and, with --provision, its build
    environment and toolkit. Without --provision nothing is installed: the interpreter found is
    the one that builds, and doctor reports what it lacks."""
    from buildrows.commands._build import Provided, driver_of, project_of
    from buildrows.errors import BadInput, Refused
    from buildrows.provision.interpreters import find_interpreter, install_hint

    search = find_interpreter(row.python, env)
    interp = search.found
    if interp is None:
        turned = "".join(f"\n    {r.path} ({r.source}) {r.why}" for r in search.rejected[:6])
        raise Refused(f"no Python {row.python} that runs to build {row.name} with (looked in {', '.join(search.looked)})"
                      f"{turned}\n    fix: {install_hint(row.python, env)}")
    ui.info(f"{row.name}: {interp.describe()}")
    toolkit: str | None = None
    if not args.provision:
        return Provided(interp, None)
    if row.cuda is not None:
        from buildrows.toolchain import check_cuda_compiler

        try:
            comp = check_cuda_compiler(row, env, host)
            ui.info(f"{row.name}: this machine's nvcc is the row's train: {comp.describe()}")
        except (Refused, BadInput) as e:
            from buildrows.provision import toolkit as tk

            ui.info(f"{row.name}: {str(e).splitlines()[0]}")
            ui.step(f"provision CUDA {row.cuda.dotted} for {row.name}")
            got = tk.install(row.cuda, row.platform, env, progress=ui.info)
            ui.info(f"  toolkit: {got.describe()}")
            toolkit = str(got.root)
    if driver_of(pol, args) == "cmake-presets":
        return Provided(interp, toolkit)
    return Provided(build_environment(interp, project_of(pol, args), driver_of(pol, args), env, ui), toolkit)


def build_environment(interp: Interpreter, project: Path, driver: Driver, env: Mapping[str, str], ui: UI) -> Interpreter:
    """The row's cached build environment (a venv of `interp` with the frontend and the project's
    build requirements), created or reused."""
    from buildrows.doctor import FRONTEND, build_requirements
    from buildrows.errors import BadInput
    from buildrows.provision import buildenv
    from buildrows.runner import run_step

    reqs, problem = build_requirements(project, driver)
    if problem is not None:
        raise BadInput(f"{problem}\n    fix: give the project a pyproject.toml with [build-system] requires")
    be = buildenv.plan_env(interp, [FRONTEND, *reqs], env)
    if be.ready:
        ui.info(f"  build environment: {be.root} (reused: same interpreter and requirements)")
        return be.interpreter
    ui.step(f"build environment for Python {interp.python}: {be.root}")
    buildenv.start(be)
    for cmd in be.commands():
        run_step(ui, cmd, env)
    buildenv.finish(be)
    return be.interpreter


def build_row(pol: Policy, row: Row, env: Mapping[str, str], host: HostOs, args: argparse.Namespace,
              ui: UI, provided: Provided | None = None) -> tuple[Row, Path | None, bool | None]:
    """Render, build and check one row; returns its wheel (None when the driver makes none) and the verdict."""
    from buildrows import drivers
    from buildrows.commands._build import doctor_command, driver_of, project_of
    from buildrows.errors import ExternalFailure, Refused
    from buildrows.plan import plan_row
    from buildrows.presets import render_plans
    from buildrows.runner import run_step

    driver = driver_of(pol, args)
    project = project_of(pol, args)
    wheel_dir = drivers.default_wheel_dir(project, args.wheel_dir)
    interp = provided.interpreter if provided else None
    toolkit = provided.toolkit if provided else None
    if driver == "cmake-presets":
        ui.step(f"render presets for {row.name} into {project}")
        rendered = render_plans([plan_row(pol, row, env, host=host, step="build", interpreter=interp,
                                          toolkit=toolkit)], project)
        for path in rendered.paths:
            ui.info(f"  wrote {path}")
        from buildrows.commands.render import gitignore_advice

        gitignore_advice(project, False, ui)
        bp = drivers.cmake_presets_plan(row, project)
    else:
        ui.step(f"render {row.name}: generator, cache variables and environment")
        plan = plan_row(pol, row, env, host=host, step="build", interpreter=interp, toolkit=toolkit)
        python = interp.path if interp else drivers.row_python(row, env)
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
        if bp.install_dir is None:
            ui.warn(f"the {driver} driver builds the tree, not a wheel: nothing to check for {row.name}")
            return row, None, None
        ui.info(f"  install tree: {bp.install_dir}")
        return row, bp.install_dir, None if args.no_check else check_built_wheel(pol, row, bp.install_dir, ui)
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


def _size(path: Path) -> int:
    """A wheel's size, or an install tree's (the cmake-presets driver): its files together."""
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return path.stat().st_size


def python_tag_problem(row: Row, wheel: Path) -> str | None:
    """Why the wheel is not for the row's Python (a cp311 module under a py312 row's name), or None.
    A CPython tag must be the row's (cp313t for a free-threaded row); abi3 passes when its minimum
    is at most the row's version; a pure py3 wheel passes."""
    from buildrows.wheelread import parse_wheel_filename

    name = parse_wheel_filename(wheel.name)
    free = row.python.endswith("t")
    want = "cp" + row.python.rstrip("t").replace(".", "")
    abi_want = want + ("t" if free else "")
    minor = int(row.python.rstrip("t").split(".")[1])
    for py in name.python_tags:
        for abi in name.abi_tags:
            if py == want and abi == abi_want:
                return None
            if abi == "abi3" and not free and py.startswith("cp3") and py[3:].isdigit() and int(py[3:]) <= minor:
                return None
            if py in ("py3", "py2.py3") and abi == "none":
                return None
    tags = f"{'.'.join(name.python_tags)}-{'.'.join(name.abi_tags)}"
    return (f"{wheel.name} is tagged {tags}, not {want}-{abi_want} for row {row.name}: it was built by another "
            f"Python than the row's {row.python} (pin the interpreter: `buildrows build {row.name}` finds it)")


def size_text(n: int) -> str:
    """A file size as people read it: `812 KB`, `4.2 MB`."""
    if n < 1000 * 1000:
        return f"{max(1, round(n / 1000))} KB"
    if n < 1000 ** 3:
        return f"{n / 1000 ** 2:.1f} MB"
    return f"{n / 1000 ** 3:.2f} GB"


def check_built_wheel(pol: Policy, row: Row, wheel: Path, ui: UI) -> bool:
    """`buildrows check` on the new wheel (or install tree) against its row; prints the report, returns the verdict."""
    import time

    from buildrows.check import CheckResult
    from buildrows.commands.check import check_wheel
    from buildrows.runner import duration

    start = time.perf_counter()

    args = argparse.Namespace(row=row.name, archs=None, cuda=None, config=pol.path, json=False)
    ui.step(f"check {wheel.name} against {row.name}", ["buildrows", "--config", pol.path, "check", str(wheel), "--row", row.name])
    _, _, results = check_wheel(args, wheel, pol)
    if not wheel.is_dir():  # an install tree (cmake-presets) has no version or Python tag
        tag = local_tag_problem(row, wheel)
        results.insert(0, CheckResult("local-version-tag", tag is None, [tag or f"version tag matches {row.name}"]))
        py = python_tag_problem(row, wheel)
        results.insert(1, CheckResult("python-tag", py is None, [py or f"Python tag matches {row.name}"]))
    for r in results:
        ui.info(f"  [{'PASS' if r.ok else 'FAIL'}] {r.name}")
        for d in r.details:
            ui.info(f"         {d}")
    ok = all(r.ok for r in results)
    ui.info(f"  verdict: {'PASS' if ok else 'FAIL'}")
    ui.info(f"  check took {duration(time.perf_counter() - start)}")
    return ok

"""Finishing a built wheel: its stamp (the build record, with [project] stamp its version and requirement) and its check.

For `build` (`stamp_built_wheel`, `check_built_wheel`), for `buildrows stamp` and the CI post-script
(`stamp_foreign_wheel`), and for a container build's check (`buildrows.ci.container_run`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from buildrows.build.prepare import BuildOptions
    from buildrows.plan.row import RowPlan
    from buildrows.policy.model import Driver, Policy, Row
    from buildrows.ui import UI


def stamp_built_wheel(pol: Policy, plan: RowPlan, python: str, project: Path, driver: Driver, wheel: Path,
                      env: Mapping[str, str], args: BuildOptions, ui: UI) -> Path:
    """Add the build record to the wheel and, when the policy opts in, the row's local version and
    runtime requirement its project's build left out (buildrows.build.stamp)."""
    from buildrows.render.envfile import environment_from_plan

    compiler = plan.compiler
    cuda = compiler.train.dotted if compiler is not None and compiler.train is not None else None
    return finish_wheel(pol, plan.row, wheel, python=python, project=project, driver=driver,
                        torch_env=None if args.isolation else {**env, **environment_from_plan(plan, env)},
                        compiler_cuda=cuda, ui=ui)


def finish_wheel(pol: Policy, row: Row, wheel: Path, *, python: str, project: Path, driver: Driver,
                 torch_env: Mapping[str, str] | None, compiler_cuda: str | None, ui: UI) -> Path:
    """What `build` gives every wheel it makes, for `build` and for a wheel another build made
    (`buildrows stamp`, the CI post-script after test-infra's build step): the build record and,
    with [project] stamp, the row's local version and runtime requirement; a PyTorch extension's
    pin to the torch it compiled against. `torch_env` is the environment torch is asked in (None:
    the build was isolated, so this Python's torch is not the one it compiled against)."""
    from buildrows.build.doctor_python import build_requirements
    from buildrows.build.stamp import stamp_wheel, torch_pin
    from buildrows.check.record import BuildRecord
    from buildrows.plan.torchenv import ask_torch, uses_torch

    torch = torch_cuda = None
    reqs, _ = build_requirements(project, driver)
    if torch_env is not None and uses_torch(project, reqs):
        info, error = ask_torch(python, torch_env)
        if info is None:
            ui.warn(f"  could not ask the build environment's torch for its version: {error}")
        else:
            torch, torch_cuda = info.version, info.cuda
    record = BuildRecord(row=row.name, cuda=compiler_cuda if row.is_cuda else None, torch=torch, torch_cuda=torch_cuda)
    ui.step(f"stamp {wheel.name}" + ("" if pol.project.stamp else " (build record only; [project] stamp is off)"))
    # A PyTorch extension (runtime mode torch) must require the torch it was compiled against.
    # A CPU row's wheel of one is tied to its torch as much as a CUDA row's.
    pins = [torch_pin(torch)] if torch and pol.torch_extension(row) else []
    stamped = stamp_wheel(wheel, local_tag=row.local_tag, requirements=row.requires_dist, record=record,
                          metadata=pol.project.stamp, pins=pins)
    for change in stamped.changes:
        ui.info(f"  {change}")
    if stamped.wheel != wheel:
        ui.info(f"  wheel: {stamped.wheel}")
    return stamped.wheel


def stamp_foreign_wheel(pol: Policy, row_name: str, wheel: str, ui: UI) -> Path:
    """finish_wheel for a wheel another build made in this environment (the CI post-script after
    test-infra's build step): the row by name, the project from the policy, torch asked in this
    Python. The record's CUDA is the row's train: the hook refused any other nvcc before the build."""
    import os
    import sys

    from buildrows.build.drivers import project_dir
    from buildrows.errors import BadInput
    from buildrows.policy.rows import select_one

    row = select_one(pol, row_name)
    path = Path(wheel)
    if not path.is_file() or path.suffix != ".whl":
        raise BadInput(f"{wheel}: not a .whl file\n    fix: pass the wheel the build made (dist/*.whl)")
    project = project_dir(pol.path, pol.project.source_dir, None)
    stamped = finish_wheel(pol, row, path, python=sys.executable, project=project, driver=pol.project.driver,
                           torch_env=os.environ, compiler_cuda=row.cuda.dotted if row.cuda is not None else None, ui=ui)
    from buildrows.build.repair import repair_wheel
    from buildrows.errors import ExternalFailure

    # [repair] auditwheel: repaired here too, as `build` repairs its wheels before the check.
    repaired, problem = repair_wheel(pol, row, stamped, os.environ, ui,
                                     doctor=f"buildrows --config {pol.path} doctor {row.name}")
    if problem:
        raise ExternalFailure(f"{problem}\n    the wheel is left as built, unrepaired, at {stamped}")
    return repaired


def _uses_torch(pol: Policy, row: Row) -> bool:
    """Whether the row's wheel is built against torch or uses its runtime (its libraries need torch's)."""
    return pol.torch_extension(row) or (row.runtime is not None and row.runtime.mode == "torch-runtime")


def _torch_dir(python: str) -> str | None:
    """Where the build environment's torch package lies (found without importing torch), or None."""
    from buildrows.process.runner import capture

    got = capture([python, "-c", "import importlib.util as u; s = u.find_spec('torch'); "
                   "print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')"], timeout=60)
    text = got.output.strip().splitlines()[-1:] if got.code == 0 else []
    return text[0] if text and Path(text[0], "lib").is_dir() else None


def _size(path: Path) -> int:
    """A wheel's size, or an install tree's (the cmake-presets driver): its files together."""
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return path.stat().st_size


def check_built_wheel(pol: Policy, row: Row, wheel: Path, ui: UI, *, torch_python: str | None = None) -> bool:
    """`buildrows check` on the new wheel (or install tree) against its row; prints the report, returns the verdict.
    `torch_python`: the build environment's Python, whose torch a PyTorch extension compiled against; the
    libraries are then loaded against that torch's libraries (libraries-load)."""
    import time

    from buildrows.check.expect import CheckRequest, check_wheel
    from buildrows.process.progress import duration

    start = time.perf_counter()

    torch_dir = _torch_dir(torch_python) if torch_python is not None and _uses_torch(pol, row) else None
    args = CheckRequest(wheel=str(wheel), row=row.name, config=pol.path, torch=torch_dir)
    ui.step(f"check {wheel.name} against {row.name}", ["buildrows", "--config", pol.path, "check", str(wheel), "--row",
                                                       row.name, *(["--torch", torch_dir] if torch_dir else [])])
    # With --row the check holds the wheel's name to the row too (local version, Python and platform
    # tags: buildrows.check.tags); an install tree (cmake-presets) has no name to hold.
    _, _, results = check_wheel(args, wheel, pol)
    for r in results:
        ui.info(f"  [{'PASS' if r.ok else 'FAIL'}] {r.name}")
        for d in r.details:
            ui.info(f"         {d}")
    ok = all(r.ok for r in results)
    ui.info(f"  verdict: {'PASS' if ok else 'FAIL'}")
    ui.info(f"  check took {duration(time.perf_counter() - start)}")
    return ok

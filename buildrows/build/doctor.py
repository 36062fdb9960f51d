"""What a row needs on this machine before a long build, as findings: what was seen, and the fix.

`diagnose` runs each check and returns every finding (it does not stop at the first); the
command prints them and refuses when any failed. The checks themselves are plain functions of
what was observed (a version string, a path, installed distributions), so tests feed them
observations; `Probe` (`doctor_python`) is the one place that looks at the machine. The checks
live by what they examine: `doctor_tools`, `doctor_python`, `doctor_cuda`, `doctor_project`,
`doctor_link`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from buildrows.build.doctor_cuda import (
    _torch_cuda_home,
    check_cuda,
    check_cuda_components,
    check_generator,
)
from buildrows.build.doctor_link import check_torch_installed, link_rpath_findings
from buildrows.build.doctor_project import (
    check_network_fetches,
    check_project,
    check_project_cmake,
    cmake_source_dir,
    driver_runs_cmake,
    not_run_by_driver,
    row_live,
)
from buildrows.build.doctor_python import (
    FRONTEND,
    MachineProbe,
    Probe,
    build_requirements,
    check_python,
    check_requirements,
)
from buildrows.build.doctor_tools import MIN_CMAKE, MIN_NINJA, check_tool, cmake_fix, ninja_fix
from buildrows.build.findings import Finding
from buildrows.errors import Refused
from buildrows.plan.toolchain import HostOs
from buildrows.policy.model import Driver, Policy, Row
from buildrows.provision.interpreters import Interpreter


def diagnose(policy: Policy, row: Row, env: Mapping[str, str], project: Path, *, driver: Driver,
             host: HostOs, isolation: bool = False, probe: Probe | None = None,
             interpreter: Interpreter | None = None, toolkit: str | None = None) -> list[Finding]:
    """Every finding for building `row` of `policy` in `project` with `driver` on this machine."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    from buildrows.plan.host import refuse_other_machine
    from buildrows.plan.toolchain import choose_generator
    from buildrows.provision.interpreters import find_interpreter

    probe = probe or MachineProbe()
    row.require_archs("doctor")
    findings: list[Finding] = []
    if row.os != host:
        findings.append(Finding("host", "refused", f"row {row.name} is built on {row.os}, and this host is {host}",
                                f"run it on a {row.os} builder"))
        return findings
    try:
        refuse_other_machine(row.name, row.platform, env, "doctor")
    except Refused as e:
        what, _, fix = str(e).partition("\n    fix: ")
        findings.append(Finding("host", "refused", what.removeprefix("doctor: "), fix))
        return findings
    runs_cmake = driver_runs_cmake(project, driver)
    if runs_cmake:
        findings.append(check_tool("cmake", *probe.tool("cmake", env), MIN_CMAKE, cmake_fix()))
        if choose_generator(row, env, host).is_ninja:
            findings.append(check_tool("ninja", *probe.tool("ninja", env), MIN_NINJA, ninja_fix()))
    else:
        findings.append(not_run_by_driver(project))
    findings.append(check_cuda(row, policy, env, host, toolkit))
    if runs_cmake:
        project_cmake = check_project_cmake(row, project, driver, probe.tool("cmake", env), env)
        if not any(f.check == "generator" for f in project_cmake):  # else it says the generator is left unset
            findings += check_generator(row, env, host)
        findings += project_cmake
        fetches = check_network_fetches(cmake_source_dir(project, driver), row_live(row, project, driver, env),
                                        dict(row.cache))
        if fetches is not None:
            findings.append(fetches)
        if row.is_cuda:
            findings += check_cuda_components(row, project, policy, env, host, driver, toolkit)
    elif row.is_cuda:
        findings += check_cuda_components(row, project, policy, env, host, driver, toolkit)
    project_problem = check_project(project, driver)
    if project_problem is not None:
        findings.append(project_problem)
    from buildrows.build.doctor_predict import predict

    findings += predict(policy, row, project, driver, isolation=isolation)  # the check init foretold
    if driver == "cmake-presets":
        return findings
    from buildrows.build.repair import findings as repair_findings

    findings += repair_findings(policy, row, env)  # [repair] auditwheel: auditwheel and patchelf
    from buildrows.build.doctor_sources import machine_has_gpu, source_findings

    findings += source_findings(policy, row, project, env, gpu=machine_has_gpu())  # downloads, -gencode, GPU
    provided = interpreter is not None  # build --provision passes its row environment's interpreter
    if interpreter is None:
        search = find_interpreter(row.python, env)
        interpreter = search.found
        if interpreter is None:
            finding = check_python(row, None, rejected=search.rejected, env=env, places=search.looked)
        else:
            finding = check_python(row, interpreter.path, probe.interpreter(interpreter.path), env=env)
    else:
        finding = check_python(row, interpreter.path, probe.interpreter(interpreter.path), env=env)
    python = interpreter.path if interpreter else None
    findings.append(finding)
    if python is None or finding.failed:
        return findings
    reqs = [FRONTEND]
    if not isolation and project_problem is None:
        project_reqs, problem = build_requirements(project, driver)
        if problem is not None:
            findings.append(Finding("build requirements", "missing", problem,
                                    "give the project a pyproject.toml with [build-system] requires"))
        reqs += project_reqs
    names: list[str] = []
    for text in reqs:
        with contextlib.suppress(InvalidRequirement):
            names.append(canonicalize_name(Requirement(text).name))
    if not provided and not isolation and project_problem is None:
        # The row environment `build --provision` made earlier (same interpreter, same requirements)
        # is what a provisioned build uses: judge that one.
        from buildrows.provision.buildenv import plan_row_env

        be = plan_row_env(policy, row, interpreter, project, reqs, env) if interpreter is not None else None
        if be is not None and be.ready:
            python = be.python
            findings.append(Finding("row environment", "ok", f"{be.root} (made by `buildrows build "
                                    f"{row.name} --provision`; the build requirements are judged there)"))
    checked = check_requirements(python, reqs, probe.distributions(python, names), isolation=isolation)
    provision = (f"; or `buildrows build {row.name} --provision`, which builds in a cached environment of "
                 "this interpreter holding them")
    findings += [Finding(f.check, f.status, f.seen, f.fix + provision) if f.failed and not provided else f
                 for f in checked]
    if driver == "setup.py" and row.os == "linux":
        linked = link_rpath_findings(policy, python, env)
        findings += linked
    from buildrows.plan.torchenv import uses_torch

    if uses_torch(project, reqs):
        missing = check_torch_installed(policy, row, python, probe.distributions(python, ["torch"])["torch"], env)
        if missing is not None:
            findings.append(missing)
        elif row.is_cuda:
            findings += _torch_cuda_home(policy, row, env, host, python, project)
    return findings


def verdict(findings: Sequence[Finding], row: Row) -> None:
    """Refuse (exit 3) when any finding failed. The findings themselves, with their fixes, are the
    report printed just before; the refusal names them without repeating them."""
    failed = [f for f in findings if f.failed]
    if failed:
        raise Refused(f"row {row.name} cannot be built on this machine ({len(failed)} problem"
                      f"{'s' if len(failed) != 1 else ''}: {', '.join(f.check for f in failed)}; each with its fix above)")


"""Judges of a wheel's members (SPEC §8): the binaries' machine (binary-machine), the files a project
requires, and the libraries that must not link CUDA (its own promises, buildrows.check.promises)."""

from __future__ import annotations

from buildrows.check.judging import Artifact, CheckResult, Expectation
from buildrows.check.promises import check_no_cuda, check_required
from buildrows.check.runtime import _grouped


def check_machine(exp: Expectation, info: Artifact) -> CheckResult:
    """Every shipped binary is built for the machine the wheel's platform tag names."""
    name = "binary-machine"
    if not info.libraries:
        return CheckResult(name, True, ["no binary to inspect"])
    wrong = [(lib.path, lib.machine) for lib in info.libraries if lib.machine != exp.machine]
    if wrong:
        return CheckResult(name, False, _grouped([(p, f"is built for {m}, but {exp.machine_from} {exp.machine}; "
                                                      "it cannot be loaded there (cross-compile for the tagged "
                                                      "machine, or tag the wheel for the machine it holds)")
                                                  for p, m in wrong]))
    return CheckResult(name, True, [f"{len(info.libraries)} binaries, all {exp.machine}"])


def check_required_files(exp: Expectation, info: Artifact) -> CheckResult:
    ok, details = check_required([r for r in exp.files if r.kind == "required"], info.members)
    return CheckResult("required-files", ok, details)


def check_no_cuda_link(exp: Expectation, info: Artifact) -> CheckResult:
    ok, details = check_no_cuda([r for r in exp.files if r.kind == "no-cuda"], info.libraries)
    return CheckResult("no-cuda-link", ok, details)

"""The wheel check (SPEC §8): the judges run for a row, in order. Pure functions from what the wheel
holds to named verdicts; reading the wheel is buildrows.binaries' job.

Each judge lives in the module of what it reads: `runtime` (NEEDED, RPATH, Requires-Dist), `device`
(fat binaries), `contents` (members and machines), `torchabi` (imported symbols), `sonames`, `loading`
(would each library load; with `hostcode` and `dlopens`), `device_train`; what they share is in `judging`. Every check that inspects
libraries fails when it inspected none: it never passes vacuously."""

from __future__ import annotations

from typing import TYPE_CHECKING

from buildrows.check.contents import check_machine, check_no_cuda_link, check_required_files
from buildrows.check.device import check_cuda_libraries, check_device_code
from buildrows.check.judging import Artifact, CheckResult, Expectation
from buildrows.check.runtime import check_rpath, check_runtime_declared, check_windows_imports
from buildrows.check.sonames import check_soname_majors
from buildrows.check.torchabi import check_torch_pin, check_torch_runtime_only

if TYPE_CHECKING:
    from buildrows.check.symbol_sources import LoadInputs


def run_checks(exp: Expectation, info: Artifact, symbols: dict[str, tuple[str, ...]] | None = None,
               loading: LoadInputs | None = None) -> list[CheckResult]:
    results = [check_cuda_libraries(exp, info)]
    if not exp.loose:
        results.append(check_runtime_declared(exp, info))
    results += [check_rpath(exp, info), check_device_code(exp, info)]
    if exp.cuda is not None:
        from buildrows.check.device_train import check_device_train

        results.append(check_device_train(exp, info))
        if exp.jit:  # kernels compiled at run time: what compiles them is there (buildrows.check.jit)
            from buildrows.check.jit import check_jit

            results.append(check_jit(exp, info))
    if exp.machine is not None:
        results.append(check_machine(exp, info))
    if exp.platform.startswith("windows"):
        results.append(check_windows_imports(exp, info))
    if exp.cuda is not None:
        results.append(check_soname_majors(exp, info))
    if not exp.loose:
        if any(r.kind == "required" for r in exp.files):
            results.append(check_required_files(exp, info))
        if any(r.kind == "no-cuda" for r in exp.files):
            results.append(check_no_cuda_link(exp, info))
        if (exp.cuda is not None and exp.mode == "torch") or exp.torch_extension:
            results.append(check_torch_pin(exp, info, symbols))
        if exp.pure:
            from buildrows.check.purewheel import check_pure_wheel

            results.append(check_pure_wheel(exp, info))
        if exp.cuda is not None and exp.mode == "torch-runtime":
            results.append(check_torch_runtime_only(exp, info, symbols or {}))
    if loading is not None:  # would each library load (buildrows.check.loading)
        from buildrows.check.loading import loading_checks

        results += loading_checks(exp, info, loading)
    return results


def needs_symbols(exp: Expectation) -> bool:
    """Whether judging this row reads the libraries' imported symbols (the torch modes)."""
    return (exp.cuda is not None and exp.mode in ("torch", "torch-runtime")) or exp.torch_extension

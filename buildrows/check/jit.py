"""Judges of a JIT-only wheel (`[cuda.runtime.N] jit`): its kernels are compiled at run time, so it ships
no precompiled device code of its own (device-code-covers-row), and what compiles them is there
(jit-compiler): each compiler it names is of the row's CUDA major and carried by a package the wheel
declares (any extra), and the row's list is one the train's compiler targets. A statement that holds
nothing is never a pass: every promise here fails on a wheel that breaks it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from buildrows.binaries.wheelread import LibraryInfo
    from buildrows.check.judging import Artifact, CheckResult, Expectation
    from buildrows.policy.model import LibraryRule

__all__ = ["check_jit", "jit_device_code", "jit_stated"]


def jit_stated(exp: Expectation) -> str:
    """How messages name the statement: `[cuda.runtime.13] jit (buildrows.toml:12): its reason`."""
    return f"{exp.jit_source}: {exp.jit_reason}" if exp.jit_reason else exp.jit_source


def jit_device_code(exp: Expectation, libs: list[LibraryInfo],
                    rules: dict[str, LibraryRule | None], describe: dict[str, str]) -> CheckResult:
    """device-code-covers-row for a JIT-only row: no library or kernel-file unit of the project's own
    carries device code (vendored code is reported, not judged); the row's list is what the JIT
    compiles for, which jit-compiler holds to the train."""
    from buildrows.check.judging import CheckResult

    assert exp.archs is not None
    name = "device-code-covers-row"
    problems: list[str] = []
    notes: list[str] = []
    for lib in libs:
        rule = rules.get(lib.path)
        if rule is not None and rule.vendored:
            notes.append(f"{lib.path}: vendored, not held to the row's list: {rule.reason} [{rule.source}] "
                         f"(carries {describe[lib.path]})")
            continue
        problems.append(
            f"{lib.path}: carries precompiled device code ({describe[lib.path]}), but the policy states that the "
            f"wheel's kernels are compiled at run time and that it ships none of its own ({exp.jit_source}); fix: if "
            "that code is bundled from elsewhere or a test fixture, state it ([[check.libraries]] files = "
            f"[\"{lib.path}\"], vendored = true, reason); if the project compiles it, drop jit and hold it to the row's "
            "list")
    if problems:
        return CheckResult(name, False, problems + notes)
    return CheckResult(name, True, [
        f"no device code of the project's own: its kernels are compiled at run time, as stated ({jit_stated(exp)}); "
        f"the row's list ({exp.archs.text}) is what they are compiled for (jit-compiler holds it to CUDA "
        f"{exp.cuda}'s compiler)", *notes])


def check_jit(exp: Expectation, info: Artifact) -> CheckResult:
    """jit-compiler: the compilers the statement names reach the wheel for the row's train, and the row's
    list is one that train's compiler targets."""
    from buildrows.check.judging import CheckResult

    assert exp.cuda is not None
    problems: list[str] = []
    held: list[str] = []
    for entry in exp.jit:
        problem, ok = (_soname(exp, info, entry) if entry.startswith("lib") else _package(exp, info, entry))
        (held if ok else problems).append(problem)
    archs_problem, archs_held = _targets(exp)
    (held if archs_held else problems).append(archs_problem)
    return CheckResult("jit-compiler", not problems, problems + [f"held: {h}" for h in held])


def _soname(exp: Expectation, info: Artifact, so: str) -> tuple[str, bool]:
    from buildrows.check.providers import _nvidia_carriers, _offer, _requires_torch
    from buildrows.check.sonames import nvidia_soname

    assert exp.cuda is not None
    s = nvidia_soname(so)
    want = s.expected(exp.cuda.major) if s is not None else None
    if s is not None and want != s.major:
        made = [str(c) for c, v in sorted(s.majors.items()) if v == s.major]
        of = f"{s.library} of CUDA {'/'.join(made)}" if made else f"{s.library} of no CUDA buildrows knows"
        ships = f"ships {s.spelled(want)}" if want is not None else f"has no {s.library}"
        return (f"{exp.jit_source} names {so} ({of}), but the row is CUDA {exp.cuda}, which {ships}: the JIT "
                f"loads the row's compiler, not that one; fix: name "
                + (f"{s.spelled(want)} (and declare its package)" if want is not None else "a compiler of the row's "
                   "CUDA") + ", or check the wheel against a row of the CUDA that soname belongs to"), False
    if exp.loose:
        return f"{so}: CUDA {exp.cuda.major}'s (loose files have no Requires-Dist: its package is not judged)", True
    carriers = _nvidia_carriers(exp, info)
    if so in carriers:
        return f"{so}: carried by {carriers[so]}", True
    if exp.mode in ("torch", "torch-runtime") and _requires_torch(exp, info):
        return f"{so}: torch's CUDA dependencies bring it", True
    return (f"{exp.jit_source} names {so}, which no NVIDIA package the wheel declares carries (Requires-Dist, under "
            "any extra): its kernels cannot be compiled where it is not installed by hand; fix: "
            f"{_offer(so, exp)} (under the extra that enables CUDA, if any)"), False


def _package(exp: Expectation, info: Artifact, name: str) -> tuple[str, bool]:
    from packaging.utils import canonicalize_name

    from buildrows.check.nvidia import declared_nvidia, packages
    from buildrows.check.providers import _extras, _package_major
    from buildrows.policy.jit import JIT_SONAME

    assert exp.cuda is not None
    pkg = str(canonicalize_name(name))
    known = packages().get(pkg)
    if known is None:
        return (f"{exp.jit_source} names {name}, which is no NVIDIA package buildrows knows "
                "(buildrows/data/nvidia_packages.toml): nothing says it carries a run-time compiler; fix: name the "
                "compiler by soname (\"libnvrtc.so.13\"), or the package that carries it (\"nvidia-cuda-nvrtc\")"), False
    compilers = [so for so in known.sonames if JIT_SONAME.match(so)]
    if not compilers:
        return (f"{exp.jit_source} names {name}, which carries no run-time compiler ({', '.join(known.sonames)}); fix: "
                "name the package of NVRTC, NVVM or nvJitLink"), False
    major = _package_major(pkg)
    if major is not None and major != exp.cuda.major:
        return (f"{exp.jit_source} names {name}, a CUDA {major} package, but the row is CUDA {exp.cuda}; fix: name "
                f"the CUDA {exp.cuda.major} package that carries {', '.join(compilers)}"), False
    if exp.loose:
        return f"{name}: CUDA {exp.cuda.major}'s (loose files have no Requires-Dist: not judged)", True
    for extra in (None, *_extras(info.requires_dist)):
        if pkg in declared_nvidia(info.requires_dist, exp.platform, extra, exp.cuda.major):
            where = "" if extra is None else f" [extra {extra}]"
            return f"{name}{where}: carries {', '.join(compilers)}", True
    return (f"{exp.jit_source} names {name}, which the wheel does not declare on {exp.platform} (Requires-Dist, under "
            f"any extra): its kernels cannot be compiled where it is not installed by hand; fix: declare {name} (under "
            "the extra that enables CUDA, if any)"), False


def _targets(exp: Expectation) -> tuple[str, bool]:
    """Whether every architecture of the row's list is one the train's compiler targets (the data, or the
    newest train's for a train newer than the data, as a build assumes)."""
    from buildrows.policy.archs import ArchError, beyond_data, check_train_supports, newest_train
    from buildrows.policy.trains import train_source

    assert exp.cuda is not None and exp.archs is not None
    try:
        check_train_supports(exp.cuda, exp.archs.entries)
    except ArchError as e:
        return (f"the row's list ({exp.archs.text}) names what the JIT cannot compile: {e}"
                + (f"; fix: {e.hint}" if e.hint else "")), False
    whose = (f"CUDA {newest_train()}'s (CUDA {exp.cuda} is newer than buildrows' data)" if beyond_data(exp.cuda)
             else f"CUDA {exp.cuda}'s")
    source = train_source(exp.cuda)
    return f"the row's list ({exp.archs.text}) is one {whose} compiler targets" + (f" ({source})" if source else ""), True

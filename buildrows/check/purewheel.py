"""Judge a CPU row's wheel that the policy says is pure Python (`[project] cpu-wheel = "pure"`).

Some torch projects publish a CPU wheel with no compiled code: their package compiles its kernels
at run time with `torch.utils.cpp_extension` (gsplat 1.5.3, built with BUILD_NO_CUDA=1). Such a
wheel links no libtorch and is tied to no torch minor, so the torch extension's judge
(torch-matches-build) does not apply; what must hold instead is that it really carries no
compiled library, or it is a compiled wheel the policy misdescribes.
"""

from __future__ import annotations

from buildrows.check.judging import Artifact, CheckResult, Expectation


def check_pure_wheel(exp: Expectation, info: Artifact) -> CheckResult:
    """pure-cpu-wheel: no shared library (ELF, PE, Mach-O) in a CPU row's wheel declared pure."""
    name = "pure-cpu-wheel"
    libraries = sorted(lib.path for lib in info.libraries)
    if libraries:
        more = f", and {len(libraries) - 3} more" if len(libraries) > 3 else ""
        return CheckResult(name, False, [
            f"[project] cpu-wheel = \"pure\", but the {exp.row} wheel carries compiled libraries: "
            f"{', '.join(libraries[:3])}{more}",
            "fix: if the CPU build compiles extensions, remove cpu-wheel (the default \"compiled\" holds the wheel to "
            "its torch); else find what turned the extensions on for this CPU row (its env-switches)"])
    return CheckResult(name, True, ["a pure-Python wheel, as [project] cpu-wheel = \"pure\" says: no compiled "
                                    "library, no libtorch link; it is pinned to no torch minor"])

"""The ``dlopen-libraries`` judge: NVIDIA libraries a library loads only by ``dlopen``.

They are stated per library (``[[check.libraries]] dlopens = ["libcublas.so.12"]``): a declared
NVIDIA package (or torch, in the torch modes) must carry each (their soname majors are held by
``cuda-soname-majors``). ``lib*.so.N`` strings of NVIDIA libraries that a library carries but neither
NEEDS nor states are reported as a warning, not a failure: a string is evidence, not proof (an error
message, or a list of fallbacks tried in turn, names sonames the library may never load).
"""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING, Final

from buildrows.check.providers import MAX_NAMED, _offer, _Resolver

if TYPE_CHECKING:
    from buildrows.check.judging import Artifact, CheckResult, Expectation
    from buildrows.check.symbol_sources import LoadInputs

__all__ = ["check_dlopen"]

# A soname as the string scan reads it (one version number): libnvrtc-builtins.so.13 of libnvrtc-builtins.so.13.0.
_SCANNED_AS: Final = re.compile(r"^lib[A-Za-z0-9_+-]{1,64}\.so\.[0-9]{1,4}")


def check_dlopen(exp: Expectation, info: Artifact, inputs: LoadInputs) -> CheckResult | None:
    """Stated dlopen sonames are carried by a declared NVIDIA package (or torch's); NVIDIA sonames named
    in a library's strings but neither NEEDED nor stated are reported (a warning). None: nothing to say."""
    from buildrows.check.judging import CheckResult, library_rule
    from buildrows.check.nvidia import nvidia_soname, optional

    name = "dlopen-libraries"
    resolver = _Resolver(exp, info, inputs)
    problems: list[str] = []
    held: list[str] = []
    warnings: list[str] = []
    # What the wheel's libraries NEED, under the name the string scan reads (libnvrtc-builtins.so.13.0 is
    # read as libnvrtc-builtins.so.13): loaded, and judged, as NEEDED; never a dlopen warning.
    needed = {n for lib in info.libraries for n in lib.needed}
    needed |= {m.group() for n in needed if (m := _SCANNED_AS.match(n))}
    for lib in info.libraries:
        if lib.format != "elf":
            continue
        rule, _ = library_rule(exp, lib.path)
        stated = rule.dlopens if rule is not None else ()
        for so in stated:
            if so in resolver.carriers:
                held.append(f"{lib.path} dlopens {so} (carried by {resolver.carriers[so]}): {rule.reason if rule else ''}")
            elif exp.mode == "preload" and optional(so, exp.optional_sonames):
                held.append(f"{lib.path} dlopens {so} (loaded only when present, optional)")
            elif resolver.torch_required and exp.cuda is not None:
                held.append(f"{lib.path} dlopens {so} (torch's CUDA dependencies bring it)")
            else:
                problems.append(f"{lib.path} dlopens {so} [{rule.source if rule else ''}], which no NVIDIA package the "
                                f"wheel declares carries: the dlopen fails where it is not installed by hand; fix: "
                                f"{_offer(so, exp)} (under the extra that enables it, if any)")
        syms = inputs.libraries.get(lib.path)
        if syms is None:
            continue
        candidates = [s for s in syms.sonames_named
                      if nvidia_soname(s) and s not in needed and s not in stated
                      and posixpath.basename(lib.path) != s and s != syms.soname]
        if candidates:
            warnings.append(f"{lib.path} names {', '.join(candidates[:MAX_NAMED])}"
                            + (f" and {len(candidates) - MAX_NAMED} more" if len(candidates) > MAX_NAMED else "")
                            + " but neither NEEDS nor states them: if it dlopens them, state it ([[check.libraries]] "
                            f"files = [\"{lib.path}\"], dlopens = [...], reason) so their majors and packages are held")
    if not (problems or held or warnings):
        return None
    details = problems + [f"held: {h}" for h in held] + [f"warning: {w}" for w in warnings]
    return CheckResult(name, not problems, details)

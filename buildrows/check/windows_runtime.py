"""How a Windows wheel's DLLs reach the CUDA runtime, judged against the row's runtime mode (issue 36).

Windows has no RPATH: what a DLL loads is what it imports (its PE import and delay-import tables).
Every mode of `[cuda.runtime.N]` is a promise a Windows wheel can keep or break there too:

- `static`, `none` and `dynamic` (SPEC §8.5: Windows wheels link the runtime in and declare no
  NVIDIA package, so `dynamic` is Linux's promise; on Windows it is the static one): no DLL
  imports `cudart64_*.dll`;
- `torch` and `torch-runtime`: a DLL that imports `cudart64_*.dll` imports torch too (torch/lib
  brings that DLL), and some DLL imports torch;
- `preload`: every NVIDIA DLL a DLL imports is carried by an NVIDIA package the wheel declares for
  Windows (under the policy's `extra`, which the wheel must declare), or is shipped, or optional.

`extra_problem` also serves Linux: an `extra` the wheel's Requires-Dist never names installs nothing.
"""

from __future__ import annotations

import re

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from buildrows.binaries.wheelread import LibraryInfo
from buildrows.check.judging import Artifact, CheckResult, Expectation

__all__ = ["cudart_import_judged", "extra_problem", "wheel_extras", "windows_mode"]

_CUDART_DLL = re.compile(r"^cudart64_\d+\.dll$", re.IGNORECASE)
#: The DLLs torch's own wheel installs in torch/lib, which an extension imports.
_TORCH_DLL = re.compile(r"^(?:c10|c10_cuda|torch|torch_cpu|torch_cuda|torch_python)\.dll$", re.IGNORECASE)
_EXTRA = re.compile(r"""\bextra\s*==\s*['"]([^'"]+)['"]""")


def wheel_extras(info: Artifact) -> list[str]:
    """The extras the wheel's Requires-Dist names (`extra == "cu13"` markers), normalised."""
    found: set[str] = set()
    for text in info.requires_dist:
        try:
            marker = str(Requirement(text).marker or "")
        except InvalidRequirement:
            continue
        found.update(canonicalize_name(x) for x in _EXTRA.findall(marker))
    return sorted(found)


def extra_problem(exp: Expectation, info: Artifact) -> str | None:
    """Why the policy's preload `extra` is a promise the wheel does not keep; None when it does."""
    if exp.mode != "preload" or exp.runtime_extra is None or exp.cuda is None:
        return None
    extras = wheel_extras(info)
    if canonicalize_name(exp.runtime_extra) in extras:
        return None
    have = ", ".join(repr(x) for x in extras) if extras else "none"
    return (f"missing: [cuda.runtime.{exp.cuda.major}] extra = {exp.runtime_extra!r}, but the wheel declares no such "
            f"extra (the extras its Requires-Dist names: {have}): `pip install 'pkg[{exp.runtime_extra}]'` installs "
            "no NVIDIA package; fix: declare the NVIDIA packages under that extra in the project's metadata "
            "(extras_require / [project.optional-dependencies]), or set extra to the one the wheel declares"
            + (f" ({extras[0]!r})" if len(extras) == 1 else ""))


def _imports(lib: LibraryInfo) -> tuple[str, ...]:
    return (*lib.imports, *lib.delay_imports)


def _cudart(pe: list[LibraryInfo]) -> list[tuple[str, str]]:
    return [(lib.path, n) for lib in pe for n in _imports(lib) if _CUDART_DLL.match(n)]


def cudart_import_judged(exp: Expectation) -> bool:
    """Whether a cudart64_*.dll import may be right for this mode (runtime-reached judges it), so
    no-cudart-import does not fail it outright."""
    return exp.mode in ("torch", "torch-runtime", "preload")


def windows_mode(exp: Expectation, info: Artifact) -> CheckResult:
    """runtime-reached for a Windows CUDA row: the DLLs' imports against the row's runtime mode."""
    assert exp.cuda is not None
    name = "runtime-reached"
    pe = [lib for lib in info.libraries if lib.format == "pe"]
    cudart = _cudart(pe)
    major = exp.cuda.major
    where = f"[cuda.runtime.{major}] mode"
    bad: list[str] = []
    if exp.mode in ("static", "none", "dynamic"):
        why = {"static": "\"static\": the runtime is linked in",
               "none": "\"none\": the wheel links no CUDA runtime",
               "dynamic": ("\"dynamic\", which on Windows means the runtime is linked in (Windows wheels declare no "
                           "NVIDIA package for a DLL to load: the runtime package's requirements are Linux's)")}[exp.mode]
        if cudart:  # one failure per mistake: no-cudart-import names each import and its fix
            return CheckResult(name, True, [f"Windows, {where} {why}: {len(cudart)} cudart64_*.dll imports, which "
                                            "no-cudart-import fails"])
        limit = ("; a cudart linked in statically is not judged on Windows: a DLL's tables name none of its "
                 "entry points (cuda-host-code judges that in ELF libraries only)" if exp.mode == "none" else "")
        return CheckResult(name, True, [f"Windows, {where} {why}: none of the {len(pe)} DLLs imports "
                                        f"cudart64_*.dll{limit}"])
    elif exp.mode in ("torch", "torch-runtime"):
        torch_users = [lib.path for lib in pe if any(_TORCH_DLL.match(n) for n in _imports(lib))]
        for p, n in cudart:
            if p not in torch_users:
                bad.append(f"{p} imports {n} but no torch DLL (c10.dll, torch_cpu.dll, ...): in {where} "
                           f"\"{exp.mode}\" torch/lib brings {n}, and only a DLL that loads torch first finds it; "
                           "fix: link the extension against torch, or link cudart statically and set mode = \"static\"")
        if not torch_users and not bad:
            bad.append(f"{where} is \"{exp.mode}\" (torch brings the CUDA runtime), but none of the {len(pe)} DLLs "
                       "imports torch (c10.dll, torch_cpu.dll, torch_cuda.dll); fix: set the mode the DLLs use "
                       "(\"static\" when cudart is linked in)")
        if not bad:
            return CheckResult(name, True, [f"Windows, {where} \"{exp.mode}\": {len(torch_users)} of {len(pe)} DLLs "
                                            "import torch, which brings the CUDA runtime"
                                            + (f" ({', '.join(sorted({n for _, n in cudart}))})" if cudart else "")])
    else:  # preload
        bad = _preload_problems(exp, info, pe)
        if not bad:
            return CheckResult(name, True, [f"Windows, {where} \"preload\" ({exp.mode_reason}): every NVIDIA DLL the "
                                            f"{len(pe)} DLLs import is carried by a declared package, shipped, or "
                                            "optional"])
    return CheckResult(name, False, bad)


def _preload_problems(exp: Expectation, info: Artifact, pe: list[LibraryInfo]) -> list[str]:
    from buildrows.check.nvidia import declared_nvidia, optional, packages
    from buildrows.check.sonames import nvidia_dll

    assert exp.cuda is not None
    scope = f"under extra {exp.runtime_extra!r}" if exp.runtime_extra else "among its unconditional requirements"
    declared = declared_nvidia(info.requires_dist, exp.platform, exp.runtime_extra, exp.cuda.major)
    known = packages()
    carried = {so for p in declared if p in known for so in known[p].sonames}
    shipped = {m.rsplit("/", 1)[-1].lower() for m in info.members}
    bad: list[str] = []
    for lib in pe:
        for dll in _imports(lib):
            found = nvidia_dll(dll)
            if found is None or dll.lower() in shipped:
                continue
            soname = f"{found.base}.so.{found.major}"
            if soname in carried or optional(soname, exp.optional_sonames):
                continue
            bad.append(f"{lib.path} imports {dll}, which none of the NVIDIA packages the wheel declares for Windows "
                       f"{scope} carries ({', '.join(sorted(declared)) or 'none declared'}); fix: declare the package "
                       "that installs it without a Linux-only marker, or optional = "
                       f"[\"{found.base}.so.*\"] under [cuda.runtime.{exp.cuda.major}] if it is loaded only when present")
    return bad

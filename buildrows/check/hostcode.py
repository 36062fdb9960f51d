"""The ``cuda-host-code`` judge: a CUDA library without device code (the CUDA runtime linked, linked in statically, or called).

In a CPU row it fails (a CPU row must not ship code that needs a GPU runtime); in a CUDA row it is
reported, and ``[[check.libraries]] host-only = true`` states it (with its reason) so a wheel whose
only CUDA library has no kernels passes. ``host_cuda_evidence`` says why a library is CUDA host code
(``init --from-wheel`` asks it too).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from buildrows.binaries.symbols import DynamicSymbols

if TYPE_CHECKING:
    from buildrows.check.judging import Artifact, CheckResult, Expectation
    from buildrows.check.symbol_sources import LoadInputs

__all__ = ["check_host_code", "host_cuda_evidence", "static_runtime_markers"]

_CUDART_NEEDED: Final = re.compile(r"^libcudart(?:[-.][0-9a-f]{8})?\.so(?:\.\d+)*$|^libcuda\.so\.1$")
# What marks the CUDA runtime in a library that links it statically (its registration and entry points).
_RUNTIME_SYMBOLS: Final = frozenset({"__cudaRegisterFatBinary", "cudaGetDeviceCount", "cudaLaunchKernel"})


def static_runtime_markers(syms: DynamicSymbols) -> list[str]:
    """The runtime's entry-point names a library's read-only strings hold whole, where they are evidence
    of cudart linked in: its name table holds several of them, or the library also defines or imports
    one. One name alone is a string, not a runtime: a JIT compiler that embeds Clang's CUDA code
    generator names them, and cuDNN's frontend looks cudaLaunchKernel up with dlsym in the runtime it
    dlopens; neither links CUDA."""
    markers = sorted(set(syms.cuda_markers) & _RUNTIME_SYMBOLS)
    symbols = {i.name for i in syms.imports} | {n for n in _RUNTIME_SYMBOLS if n in syms.exported}
    if symbols & _RUNTIME_SYMBOLS or len(markers) >= 2:
        return markers
    return []


def host_cuda_evidence(lib_needed: tuple[str, ...], syms: DynamicSymbols | None, *, dlopen: bool = False) -> str | None:
    """Why a library is CUDA host code (links the runtime or the driver, or carries the runtime's entry
    points: linked in statically; with `dlopen`, names the runtime or the driver it loads), or None."""
    links = [n for n in lib_needed if _CUDART_NEEDED.match(n)]
    if links:
        return f"links {', '.join(links)}"
    if syms is None:
        return None
    loads = sorted(n for n in syms.sonames_named if _CUDART_NEEDED.match(n)) if dlopen else []
    names = {i.name for i in syms.imports} | set(static_runtime_markers(syms))
    found = sorted(names & _RUNTIME_SYMBOLS) + sorted({n for n in _RUNTIME_SYMBOLS if n in syms.exported} - names)
    if found:
        return f"carries the CUDA runtime's entry points ({', '.join(found)}): cudart linked in statically"
    if loads:
        return f"names {', '.join(loads)}, which it loads by dlopen"
    return None


def _runtime_linked_in(exp: Expectation, info: Artifact, inputs: LoadInputs) -> list[str]:
    """Runtime mode "none" (the wheel links no CUDA runtime): each library that carries the CUDA
    runtime's entry points or its fat-binary registration (cudart linked in statically, nvcc's
    default when it links) contradicts it. runtime-reached judges a libcudart it NEEDS."""
    assert exp.cuda is not None
    out = []
    for lib in info.libraries:
        syms = inputs.libraries.get(lib.path)
        if lib.format != "elf" or syms is None:
            continue
        found = sorted((set(static_runtime_markers(syms)) & _RUNTIME_SYMBOLS) | {n for n in _RUNTIME_SYMBOLS if n in syms.exported})
        if found:
            out.append(f"{lib.path} carries the CUDA runtime's entry points ({', '.join(found)}): cudart is linked in "
                       f"statically, but [cuda.runtime.{exp.cuda.major}] mode is \"none\" (the wheel links no CUDA "
                       "runtime); fix: set mode = \"static\", or build it without the runtime (nvcc -cudart none, "
                       "CMake CUDA_RUNTIME_LIBRARY None)")
    return out


def check_host_code(exp: Expectation, info: Artifact, inputs: LoadInputs) -> CheckResult | None:
    """CPU row: no library needs a GPU runtime. CUDA row: a host-only rule names libraries that are
    CUDA host code indeed; unstated host CUDA libraries are listed. None when there is nothing to say."""
    from buildrows.check.judging import CheckResult, library_rule

    name = "cuda-host-code"
    found: list[tuple[str, str]] = []
    for lib in info.libraries:
        if lib.format != "elf" or lib.has_device_code:
            continue
        # A CUDA row's host-only rule may rest on the runtime a library dlopens; a CPU row fails only on what links.
        why = host_cuda_evidence(lib.needed, inputs.libraries.get(lib.path), dlopen=exp.cuda is not None)
        if why is not None:
            found.append((lib.path, why))
    if exp.cuda is None:
        if not found:
            return None
        return CheckResult(name, False, [
            f"{p}: a CUDA library without device code ({why}) in a CPU row: a CPU row must not ship code that needs a "
            "GPU runtime (it fails to load, or at its first CUDA call, where no CUDA is installed); fix: build the CPU "
            "row with the project's CUDA switch off, or check the wheel as the CUDA row it is (--cuda TRAIN)"
            for p, why in found])
    stated: list[str] = []
    problems: list[str] = _runtime_linked_in(exp, info, inputs) if exp.mode == "none" else []
    evidence = dict(found)
    for lib in info.libraries:
        rule, _ = library_rule(exp, lib.path)
        if rule is None or not rule.host_only:
            continue
        if lib.has_device_code:
            continue  # device-code-covers-row says it
        if lib.path not in evidence:
            problems.append(f"{lib.path}: stated host-only [{rule.source}], but it neither links the CUDA runtime "
                            "nor carries its entry points: it is not CUDA code; fix: drop the rule, or check that the "
                            "right library is built")
            continue
        stated.append(f"{lib.path} ({evidence[lib.path]}): {rule.reason} [{rule.source}]")
    if problems:
        return CheckResult(name, False, problems)
    unstated = [f"{p} ({why})" for p, why in found if not any(s.startswith(p + " ") for s in stated)]
    read = sum(1 for lib in info.libraries if lib.format == "elf" and lib.path in inputs.libraries)
    none = [f"runtime mode none: none of the {read} libraries read carries the CUDA runtime's entry points "
            "(no cudart linked in)"] if exp.mode == "none" else []
    if not stated and not unstated and not none:
        return None
    details = none + [f"host-only, as stated: {s}" for s in stated]
    if unstated:
        details.append("CUDA host code without device code (state it with [[check.libraries]] host-only = true and "
                       "its reason if it is meant): " + ", ".join(unstated))
    return CheckResult(name, True, details)

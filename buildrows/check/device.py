"""Judges of device code (SPEC §8): which libraries carry it (cuda-libraries-present) and whether it
covers the row's architecture list, cubins and PTX both ways (device-code-covers-row). They read the
fat binaries' entries, as the readers in buildrows.binaries report them."""

from __future__ import annotations

import re

from buildrows.binaries.wheelread import LibraryInfo
from buildrows.check.consequences import missing_code
from buildrows.check.consequences import missing_ptx as missing_ptx_line
from buildrows.check.judging import (
    Artifact,
    CheckResult,
    Expectation,
    _arch_key,
    library_rule,
    train_of_digits,
)
from buildrows.policy.archs import ArchList
from buildrows.policy.model import LibraryRule


def _train_hint(info: Artifact) -> str:
    """`--cuda`'s value for an untagged wheel, as far as its device code tells (the train of its newest PTX)."""
    from buildrows.check.device_train import cubin_train, train_of_code

    found = train_of_code(info.libraries)
    cubins = cubin_train(info.libraries)
    if cubins is not None and (found is None or cubins > found[0]):
        return f"{cubins} --archs LIST (its cubins' toolkit notes name CUDA {cubins})"
    if found is None:
        return "TRAIN --archs LIST"
    return f"{found[0]} --archs LIST (its newest PTX is ISA {found[1]}, first written by CUDA {found[0]})"


def check_cuda_libraries(exp: Expectation, info: Artifact) -> CheckResult:
    from buildrows.check.kernels import kernel_summary, kernels_of

    with_code = [lib.path for lib in info.libraries if lib.has_device_code]
    kernels = kernels_of(info)  # device code in files of its own (buildrows.check.kernels)
    kernel_lines = kernel_summary(kernels, _arch_key)
    name = "cuda-libraries-present"
    if exp.cuda is None:
        if with_code or kernels:
            return CheckResult(name, False, [f"a CPU row's wheel ships device code in {p}" for p in with_code]
                               + [f"a CPU row's wheel ships device code in {line}" for line in kernel_lines]
                               + ["if this is a CUDA wheel whose name carries no +cuXYZ tag, check it with "
                                  f"--cuda {_train_hint(info)}, or --row ROW"])
        return CheckResult(name, True, [f"CPU row: {len(info.libraries)} libraries, none with device code"])
    if exp.jit and not with_code and not kernels:
        from buildrows.check.jit import jit_stated

        return CheckResult(name, True, [f"no library carries device code ({len(info.libraries)} shared libraries, no "
                                        f"kernel file): its kernels are compiled at run time, as stated ({jit_stated(exp)})"])
    if not info.libraries and not kernels:
        return CheckResult(name, False, ["the wheel ships no shared library at all, and no kernel file (cubin, fat "
                                         "binary, PTX); a CUDA row's wheel needs its CUDA libraries"])
    if not with_code and not kernels:
        host = _host_only(exp, info)  # [[check.libraries]] host-only: CUDA code without kernels, stated
        if host:
            return CheckResult(name, True, [f"no library carries device code; host-only, as stated: {p}: {r.reason} "
                                            f"[{r.source}]" for p, r in host])
        first = f"none of the {len(info.libraries)} shared libraries carries device code: " + ", ".join(
            lib.path for lib in info.libraries)
        if not any(_links_cuda(lib.needed) for lib in info.libraries):
            # Nothing links a CUDA library: most likely the build compiled no CUDA (the row's switch
            # unset), which a host-only rule would only hide (issue 40): that fix first.
            return CheckResult(name, False, [first + "; none links a CUDA library (cudart, the driver, torch's CUDA "
                                             "libraries) dynamically",
                                             "if the build compiled no CUDA (the row's CUDA switch unset), turn it on "
                                             "for the row: [project] cuda-option (its CMake switch) or env-switches "
                                             "(its setup.py's; `buildrows init` lists those it reads)",
                                             "only if a library is CUDA host code with the runtime linked in statically "
                                             "(libraries-load names its entry points), state it: [[check.libraries]] "
                                             "files = [...], host-only = true, reason"])
        return CheckResult(name, False, [first,
                                         "if a library is CUDA host code without kernels (the runtime linked in), "
                                         "state it: [[check.libraries]] files = [...], host-only = true, reason"])
    details = [f"{len(with_code)} of {len(info.libraries)} libraries carry device code"
               + (": " + ", ".join(with_code) if with_code else "")]
    if kernels:
        details.append(f"{len(kernels)} kernel file{'s' if len(kernels) != 1 else ''} carry device code:")
        details += [f"  {line}" for line in kernel_lines]
    return CheckResult(name, True, details)


def _links_cuda(needed: tuple[str, ...]) -> bool:
    """Whether a library's NEEDED entries name a CUDA library (the runtime, the driver, a CUDA math
    library, NVRTC, or torch's CUDA parts)."""
    return any(n.startswith(("libcud", "libcublas", "libcufft", "libcurand", "libcusolver", "libcusparse", "libnvrtc",
                             "libnvJitLink", "libnccl", "libtorch_cuda", "libc10_cuda", "cudart", "nvcuda"))
               for n in needed)


def _host_only(exp: Expectation, info: Artifact) -> list[tuple[str, LibraryRule]]:
    """Libraries without device code that a host-only rule states (cuda-host-code checks they are CUDA code)."""
    out = []
    for lib in info.libraries:
        rule, _ = library_rule(exp, lib.path)
        if rule is not None and rule.host_only and not lib.has_device_code:
            out.append((lib.path, rule))
    return out


def check_device_code(exp: Expectation, info: Artifact) -> CheckResult:
    """Every library with device code covers its list on its own, both ways, PTX included: the
    row's, or what the first [[check.libraries]] rule matching it says (its own list, its train's
    list, or none for a vendored library)."""
    from buildrows.check.kernels import kernel_units

    name = "device-code-covers-row"
    # Kernel files are judged as units, the union of their code (buildrows.check.kernels).
    kernels = kernel_units(exp, info)
    units = {u.library.path: (u.rule, u.digits) for u in kernels}
    libs = [lib for lib in info.libraries if lib.has_device_code] + [u.library for u in kernels]
    if exp.cuda is None or exp.archs is None:
        return CheckResult(name, not libs, ["CPU row: no device code expected"] if not libs else
                           [f"{lib.path}: device code in a CPU wheel" for lib in libs])
    if exp.jit:  # kernels compiled at run time: nothing of the project's own may carry device code (check.jit)
        from buildrows.check.jit import jit_device_code

        return jit_device_code(exp, libs, {lib.path: (units.get(lib.path) or library_rule(exp, lib.path))[0]
                                           for lib in libs}, {lib.path: _arch_text(lib) for lib in libs})
    if not libs:
        host = _host_only(exp, info)
        if host:
            return CheckResult(name, True, [f"no library carries device code: {len(host)} host-only, as stated "
                                            "(cuda-host-code says what they are)"])
        expected = " ".join(sorted(exp.archs.cubin_names, key=_arch_key)) or "-"
        ptx = " ".join(sorted(exp.archs.ptx_names, key=_arch_key))
        return CheckResult(name, False, [f"inspected no library with device code; expected {expected}"
                                         + (f" with PTX {ptx}" if ptx else "")])
    details: list[str] = []
    held: dict[str, list[str]] = {}  # what a list is called -> the libraries that carry it exactly
    wants: dict[str, ArchList] = {}
    notes: list[str] = []
    vendored: list[tuple[LibraryInfo, LibraryRule]] = []
    trains = dict(exp.train_archs)
    for lib in libs:
        want, label, suffix = exp.archs, "the row", ""
        rule, digits = units.get(lib.path) or library_rule(exp, lib.path)
        if rule is not None and rule.host_only:
            details.append(f"{lib.path}: stated host-only (no device code) [{rule.source}], but it carries "
                           f"{_arch_text(lib)}; fix: drop host-only, or give the rule its archs")
            continue
        if rule is not None and rule.vendored:
            notes.append(f"{lib.path}: vendored, not held to the row's list: {rule.reason} [{rule.source}] "
                         f"(carries {_arch_text(lib)})")
            vendored.append((lib, rule))
            continue
        if rule is not None and rule.archs is not None:
            want, label, suffix = rule.archs, "its own list", f" [{rule.source}]"
        elif rule is not None and rule.per_train:
            train = train_of_digits(digits)
            found = trains.get(train) if train is not None else None
            if found is None or train is None:
                what = f"CUDA {train.dotted}" if train is not None else f"the train {digits!r}"
                details.append(f"{lib.path}: its name says {what}, but the policy has no architecture list for it on "
                               f"{exp.platform} [{rule.source}]; fix: publish the train with its list, or put a "
                               "[[check.libraries]] rule with its own archs before this one")
                continue
            want, label, suffix = found, f"CUDA {train.dotted}'s list", ""
        problems = _compare_device_code(lib, want, label)
        details += [p + suffix for p in problems]
        if not problems:
            key = label + suffix
            held.setdefault(key, []).append(lib.path)
            wants[key] = want
    if vendored and not held and not details:
        return _only_vendored(exp, info, vendored, notes)
    ok = not details
    if ok:
        for label, paths in held.items():
            want = wants[label]
            where = "" if label == "the row" else f": {label}"
            libs_n = sum(1 for p in paths if p not in units)
            who = " and ".join(  # kernel files count as one unit each (buildrows.check.kernels)
                ([f"{libs_n} {'library' if libs_n == 1 else 'libraries'}"] if libs_n else [])
                + [p for p in paths if p in units])
            verb = "each carry" if len(paths) > 1 else "carries" if libs_n else "carry"
            details.append(f"{who} {verb} exactly "
                           f"{' '.join(sorted(want.cubin_names, key=_arch_key))}"
                           + (f" with PTX {' '.join(sorted(want.ptx_names, key=_arch_key))}" if want.ptx_names else "")
                           + where)
    return CheckResult(name, ok, details + notes)


def _only_vendored(exp: Expectation, info: Artifact, vendored: list[tuple[LibraryInfo, LibraryRule]],
                   notes: list[str]) -> CheckResult:
    """All the device code is vendored: it neither keeps the row's list nor excuses it. It passes only
    where the wheel's own libraries are stated host-only (no device code of the project's own)."""
    assert exp.archs is not None
    name = "device-code-covers-row"
    expected = " ".join(sorted(exp.archs.cubin_names, key=_arch_key)) or "-"
    ptx = " ".join(sorted(exp.archs.ptx_names, key=_arch_key))
    row_list = expected + (f" with PTX {ptx}" if ptx else "")
    host = _host_only(exp, info)
    if host:
        return CheckResult(name, True, [f"no library of the project's own carries device code ({len(host)} host-only, "
                                        f"as stated: {', '.join(p for p, _ in host)}); the row's list ({row_list}) "
                                        "is carried by nothing, and the device code it ships is vendored:", *notes])
    carried = [f"{lib.path} ({_arch_text(lib)}) [{rule.source}]" for lib, rule in vendored]
    states = "; ".join(f"{lib.path}: archs = \"{_carried_list(lib)}\"" for lib, _ in vendored)
    return CheckResult(name, False, [
        f"the only device code in the wheel is vendored ({'; '.join(carried)}): nothing of the project's own carries "
        f"the row's list ({row_list}), and vendored code neither keeps nor excuses that promise",
        "fix: state what the wheel really carries: if the vendored code is the device code that runs for this row, "
        f"give its [[check.libraries]] rule the list it carries instead of vendored = true ({states}); if the "
        "project's own libraries compile their kernels at run time (NVRTC, a JIT), state it with the compilers "
        f"they need (jit = [\"libnvrtc.so.{exp.cuda.major if exp.cuda else 13}\", ...] in [cuda.runtime."
        f"{exp.cuda.major if exp.cuda else 13}], their packages declared); else build the row's list into the wheel",
        *notes])


def _carried_list(lib: LibraryInfo) -> str:
    """The list a library's device code is, as a policy writes it (`8.0 9.0+PTX`, `2.0-virtual`)."""
    have_elf, have_ptx = set(lib.cubins), set(lib.ptx)
    return " ".join(_list_token(sm, sm in have_elf) if sm in have_ptx else _dotted(sm)
                    for sm in sorted(have_elf | have_ptx, key=_arch_key))


def _arch_text(lib: LibraryInfo) -> str:
    elf = " ".join(sorted(set(lib.cubins), key=_arch_key)) or "-"
    ptx = " ".join(sorted(set(lib.ptx), key=_arch_key)) or "-"
    return f"elf {elf}; ptx {ptx}"


def _compare_device_code(lib: LibraryInfo, archs: ArchList, label: str) -> list[str]:
    """What one library lacks or adds against one list."""
    want_elf, want_ptx = set(archs.cubin_names), set(archs.ptx_names)
    details: list[str] = []
    have_elf, have_ptx = set(lib.cubins), set(lib.ptx)
    missing = sorted(want_elf - have_elf, key=_arch_key)
    extra = sorted(have_elf - want_elf, key=_arch_key)
    missing_ptx = sorted(want_ptx - have_ptx, key=_arch_key)
    extra_ptx = sorted(have_ptx - want_ptx, key=_arch_key)
    if missing:  # what each such GPU does instead is said truly (buildrows.check.consequences)
        details.append(missing_code(lib.path, missing, lib.cubins, lib.ptx))
    if extra:
        details.append(f"{lib.path}: device code for {', '.join(extra)}, which {label} does not list"
                       + _variant_fix(extra, missing))
    relocatable = [a for a in missing_ptx if a in lib.relocatable_ptx]
    if relocatable:
        details.append(f"{lib.path}: PTX for {', '.join(relocatable)} exists only in __nv_relfatbin, the relocatable "
                       "device code that separable compilation (CUDA_SEPARABLE_COMPILATION ON, nvcc -rdc=true) "
                       "leaves for the device linker; the runtime never JIT-compiles it, so a newer GPU gets "
                       "'no kernel image is available'. Fix: turn separable compilation off where it is not "
                       "needed, or have the device link embed PTX (CUDA_RESOLVE_DEVICE_SYMBOLS with "
                       f"-gencode=arch=compute_XX,code=compute_XX in the device link flags)")
    missing_ptx = [a for a in missing_ptx if a not in relocatable]
    if missing_ptx:
        details.append(missing_ptx_line(lib.path, missing_ptx, lib.cubins, lib.ptx))
    if extra_ptx:
        spelled = " ".join(_list_token(a, a in have_elf) for a in extra_ptx)
        details.append(f"{lib.path}: PTX for {', '.join(extra_ptx)}, which {label} does not list as PTX "
                       f"(to promise it, write {spelled} in the list)")
    return details


def _dotted(sm: str) -> str:
    """`sm_120a` -> `12.0a`, as a list writes it."""
    m = re.match(r"^sm_(\d+?)(\d)([af]?)$", sm)
    return f"{m.group(1)}.{m.group(2)}{m.group(3)}" if m else sm


def _list_token(sm: str, cubin: bool) -> str:
    """How a list says PTX of `sm` (`sm_120` -> 12.0+PTX beside its cubin, 12.0-virtual without one)."""
    return f"{_dotted(sm)}+PTX" if cubin else f"{_dotted(sm)}-virtual"


def _variant_fix(extra: list[str], missing: list[str]) -> str:
    """For an a/f cubin carried where the list names the plain one (or the other way round): how to promise it."""
    pairs = [f"{_dotted(sm)} instead of {_dotted(twin)}" for sm in extra
             for twin in missing if twin.rstrip("af") == sm.rstrip("af")]
    if pairs:
        return f" (if the project promises that cubin, write {', '.join(pairs)} in the list)"
    variants = [_dotted(sm) for sm in extra if sm[-1] in "af"]  # an a/f cubin beside the plain one the list names
    if variants:
        return f" (if the project promises {'that cubin' if len(variants) == 1 else 'those cubins'}, add " \
               f"{' '.join(variants)} to the list)"
    return ""


def library_json(libs: tuple[LibraryInfo, ...]) -> dict[str, dict[str, list[str]]]:
    return {lib.path: {"elf": sorted(set(lib.cubins), key=_arch_key), "ptx": sorted(set(lib.ptx), key=_arch_key)}
            for lib in libs}

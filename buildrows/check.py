"""The wheel check (SPEC §8): pure functions from what the wheel holds to named verdicts.

Reading the wheel is buildrows.wheelread's job; this module only judges. Every check that
inspects libraries fails when it inspected none: it never passes vacuously.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from buildrows.archs import ArchList, Train
from buildrows.requirements import applies, expected_requirements
from buildrows.wheelread import LibraryInfo, WheelInfo

_CUDART_ELF = re.compile(r"^libcudart\.so(\.\d+)*$")
_CUDART_DLL = re.compile(r"^cudart64_\d+\.dll$", re.IGNORECASE)

PLATFORM_OF_TAG = (
    (re.compile(r"^(manylinux|musllinux|linux)_.*x86_64$"), "linux-x86_64"),
    (re.compile(r"^(manylinux|musllinux|linux)_.*aarch64$"), "linux-aarch64"),
    (re.compile(r"^win_amd64$"), "windows-amd64"),
)


@dataclass(frozen=True)
class Expectation:
    """What a wheel of one row must carry."""

    row: str
    platform: str
    cuda: Train | None
    archs: ArchList | None
    requirements: tuple[str, ...] = ()  # the runtime set for the train, markers included
    library_dir: str | None = None


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    details: list[str] = field(default_factory=list)

    def json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "details": self.details}


def platform_of_wheel(info: WheelInfo) -> str | None:
    for tag in info.name.platform_tags:
        for pattern, platform in PLATFORM_OF_TAG:
            if pattern.match(tag):
                return platform
    return None


def python_of_wheel(info: WheelInfo) -> str | None:
    for tag in info.name.python_tags:
        m = re.fullmatch(r"cp3(\d+)(t?)", tag)
        if m:
            return f"3.{m.group(1)}{m.group(2)}"
    return None


def train_of_wheel(info: WheelInfo) -> Train | None:
    local = info.name.local_version
    if local is None:
        return None
    for part in re.split(r"[._]", local):
        if re.fullmatch(r"cu\d{2,3}", part):
            return Train.parse(part)
    return None


def _is_nvidia(req: Requirement) -> bool:
    return canonicalize_name(req.name).startswith("nvidia-")


def _req_key(req: Requirement) -> tuple[str, frozenset[str], frozenset[str]]:
    """Names normalised, extras and specifiers as sets: pins in any order compare equal."""
    return canonicalize_name(req.name), frozenset(req.extras), frozenset(str(s) for s in req.specifier)


def check_cuda_libraries(exp: Expectation, info: WheelInfo) -> CheckResult:
    with_code = [lib.path for lib in info.libraries if lib.has_device_code]
    name = "cuda-libraries-present"
    if exp.cuda is None:
        if with_code:
            return CheckResult(name, False, [f"a CPU row's wheel ships device code in {p}" for p in with_code]
                               + ["if this is a CUDA wheel whose name carries no +cuXYZ tag, check it with "
                                  "--cuda TRAIN --archs LIST, or --row ROW"])
        return CheckResult(name, True, [f"CPU row: {len(info.libraries)} libraries, none with device code"])
    if not info.libraries:
        return CheckResult(name, False, ["the wheel ships no shared library at all; a CUDA row's wheel needs its CUDA libraries"])
    if not with_code:
        return CheckResult(name, False, [f"none of the {len(info.libraries)} shared libraries carries device code: "
                                         + ", ".join(lib.path for lib in info.libraries)])
    return CheckResult(name, True, [f"{len(with_code)} of {len(info.libraries)} libraries carry device code: " + ", ".join(with_code)])


def check_runtime_declared(exp: Expectation, info: WheelInfo) -> CheckResult:
    """Requires-Dist's NVIDIA packages equal the train's set, as parsed requirements, both ways."""
    name = "runtime-declared"
    details: list[str] = []
    expected: dict[tuple[str, frozenset[str], frozenset[str]], str] = {}
    for text in expected_requirements(exp.platform, exp.cuda, exp.requirements):
        expected[_req_key(Requirement(text))] = text
    expected_names = {k[0] for k in expected}
    declared: dict[tuple[str, frozenset[str], frozenset[str]], str] = {}
    for text in info.requires_dist:
        try:
            req = Requirement(text)
        except InvalidRequirement as e:
            details.append(f"Requires-Dist {text!r} does not parse: {e}")
            continue
        if "extra" in str(req.marker or ""):
            continue  # optional dependencies are not the runtime the row declares
        if not (_is_nvidia(req) or canonicalize_name(req.name) in expected_names):
            continue
        if not applies(req, exp.platform):
            continue  # does not apply on this row's platform (a Linux-only pin in a Windows wheel)
        declared[_req_key(req)] = text
    missing = [v for k, v in expected.items() if k not in declared]
    extra = [v for k, v in declared.items() if k not in expected]
    for m in missing:
        details.append(f"missing: the wheel must declare {m!r}")
    for x in extra:
        what = "a CPU row" if exp.cuda is None else (f"CUDA {exp.cuda.dotted}" + (" on Windows" if exp.platform.startswith("windows") else ""))
        details.append(f"unexpected: {x!r} is not in the set for {what}")
    ok = not details
    if ok:
        details.append("declares exactly: " + (", ".join(sorted(declared.values())) or "no NVIDIA package"))
    return CheckResult(name, ok, details)


def _install_dir(member: str) -> str | None:
    """Where a wheel member lands relative to site-packages (None for data/scripts)."""
    parts = member.split("/")
    if parts[0].endswith(".data"):
        if len(parts) > 2 and parts[1] in ("purelib", "platlib"):
            return posixpath.dirname("/".join(parts[2:]))
        return None
    return posixpath.dirname(member)


def _wheel_dirs(info: WheelInfo) -> set[str]:
    dirs: set[str] = {""}
    for m in info.members:
        d = _install_dir(m)
        while d:
            dirs.add(d)
            d = posixpath.dirname(d)
    return dirs


def check_rpath(exp: Expectation, info: WheelInfo) -> CheckResult:
    """Libraries linking the CUDA runtime reach the train's library dir through $ORIGIN."""
    name = "runtime-reached"
    details: list[str] = []
    elf = [lib for lib in info.libraries if lib.format == "elf"]
    if exp.platform.startswith("windows") or exp.cuda is None:
        absolute = [(lib.path, e) for lib in elf for e in lib.rpaths if not e.startswith("$ORIGIN") and not e.startswith("${ORIGIN}")]
        if absolute:
            return CheckResult(name, False, [f"{p}: search path {e!r} is absolute; it resolves on the builder only" for p, e in absolute])
        return CheckResult(name, True, ["no CUDA runtime to reach" if exp.cuda is None else "Windows: checked by no-cudart-import"])
    dirs = _wheel_dirs(info)
    target = exp.library_dir.strip("/") if exp.library_dir else None
    linking = [lib for lib in elf if any(_CUDART_ELF.match(n) for n in lib.needed)]
    found: list[tuple[str, str]] = []  # (library, problem): grouped below, torch-sized wheels repeat them
    for lib in elf:
        origin = _install_dir(lib.path)
        if origin is None:
            found.append((lib.path, "not installed into site-packages, so $ORIGIN cannot be reasoned about"))
            continue
        reaches = False
        for entry in lib.rpaths:
            if not (entry.startswith("$ORIGIN") or entry.startswith("${ORIGIN}")):
                found.append((lib.path, f"search path {entry!r} is absolute (the builder's toolkit or build tree); "
                                        "use an $ORIGIN-relative entry"))
                continue
            rel = entry.replace("${ORIGIN}", "$ORIGIN")[len("$ORIGIN"):].lstrip("/")
            resolved = posixpath.normpath(posixpath.join(origin, rel)) if rel else origin
            if resolved == ".":
                resolved = ""
            if resolved.startswith(".."):
                found.append((lib.path, f"{entry!r} climbs out of site-packages to {resolved!r}"))
                continue
            if resolved == target:
                reaches = True
            elif resolved not in dirs:
                found.append((lib.path, f"{entry!r} resolves to site-packages/{resolved}, which neither the wheel "
                                        f"nor the CUDA runtime ({target}) provides"))
        if lib in linking and not reaches:
            found.append((lib.path, f"links {', '.join(n for n in lib.needed if _CUDART_ELF.match(n))} but no "
                                    f"RPATH/RUNPATH entry reaches site-packages/{target} (has: {list(lib.rpaths) or 'none'})"))
    details = _grouped(found)
    ok = not details
    if ok:
        details.append(f"{len(linking)} libraries link the CUDA runtime and reach site-packages/{target}" if linking
                       else "no library links libcudart dynamically")
    return CheckResult(name, ok, details)


def _grouped(found: list[tuple[str, str]]) -> list[str]:
    """One line per problem, naming every library that has it (the first few by name)."""
    by_problem: dict[str, list[str]] = {}
    for lib, problem in found:
        by_problem.setdefault(problem, []).append(lib)
    out = []
    for problem, libs in by_problem.items():
        if len(libs) == 1:
            out.append(f"{libs[0]}: {problem}")
        else:
            names = ", ".join(libs[:3]) + (f" and {len(libs) - 3} more" if len(libs) > 3 else "")
            out.append(f"{len(libs)} libraries ({names}): {problem}")
    return out


def check_device_code(exp: Expectation, info: WheelInfo) -> CheckResult:
    """Every library with device code covers the row on its own, both ways, PTX included."""
    name = "device-code-covers-row"
    libs = [lib for lib in info.libraries if lib.has_device_code]
    if exp.cuda is None or exp.archs is None:
        return CheckResult(name, not libs, ["CPU row: no device code expected"] if not libs else
                           [f"{lib.path}: device code in a CPU wheel" for lib in libs])
    want_elf = set(exp.archs.cubin_names)
    want_ptx = set(exp.archs.ptx_names)
    if not libs:
        return CheckResult(name, False, [f"inspected no library with device code; expected {sorted(want_elf)}"])
    details: list[str] = []
    for lib in libs:
        have_elf, have_ptx = set(lib.cubins), set(lib.ptx)
        missing = sorted(want_elf - have_elf, key=_arch_key)
        extra = sorted(have_elf - want_elf, key=_arch_key)
        missing_ptx = sorted(want_ptx - have_ptx, key=_arch_key)
        extra_ptx = sorted(have_ptx - want_ptx, key=_arch_key)
        if missing:
            details.append(f"{lib.path}: missing device code for {', '.join(missing)} (a GPU of that architecture "
                           "gets 'no kernel image is available')")
        if extra:
            details.append(f"{lib.path}: device code for {', '.join(extra)}, which the row does not list")
        if missing_ptx:
            details.append(f"{lib.path}: missing PTX for {', '.join(missing_ptx)} (newer GPUs cannot JIT-compile it)")
        if extra_ptx:
            details.append(f"{lib.path}: PTX for {', '.join(extra_ptx)}, which the row does not mark +PTX")
    ok = not details
    if ok:
        details.append(f"{len(libs)} libraries each carry exactly {' '.join(sorted(want_elf, key=_arch_key))}"
                       + (f" with PTX {' '.join(sorted(want_ptx, key=_arch_key))}" if want_ptx else ""))
    return CheckResult(name, ok, details)


def check_windows_imports(exp: Expectation, info: WheelInfo) -> CheckResult:
    name = "no-cudart-import"
    pe = [lib for lib in info.libraries if lib.format == "pe"]
    bad = [(lib.path, n) for lib in pe for n in (*lib.imports, *lib.delay_imports) if _CUDART_DLL.match(n)]
    if bad:
        return CheckResult(name, False, [f"{p} imports {n}: link cudart statically so the DLL reaches the driver "
                                         "(nvcuda.dll) instead of a cudart DLL no wheel provides" for p, n in bad])
    return CheckResult(name, True, [f"{len(pe)} DLLs import no cudart64_*.dll"])


def _arch_key(name: str) -> tuple[int, str]:
    m = re.match(r"sm_(\d+)([a-z]?)", name)
    return (int(m.group(1)), m.group(2)) if m else (0, name)


def run_checks(exp: Expectation, info: WheelInfo) -> list[CheckResult]:
    results = [
        check_cuda_libraries(exp, info),
        check_runtime_declared(exp, info),
        check_rpath(exp, info),
        check_device_code(exp, info),
    ]
    if exp.platform.startswith("windows"):
        results.append(check_windows_imports(exp, info))
    return results


def library_json(libs: tuple[LibraryInfo, ...]) -> dict[str, dict[str, list[str]]]:
    return {lib.path: {"elf": sorted(set(lib.cubins), key=_arch_key), "ptx": sorted(set(lib.ptx), key=_arch_key)}
            for lib in libs}

"""The wheel check (SPEC §8): pure functions from what the wheel holds to named verdicts.

Reading the wheel is buildrows.binaries.wheelread's job; this module only judges. Every check that
inspects libraries fails when it inspected none: it never passes vacuously.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from buildrows.binaries.wheelread import LibraryInfo, WheelInfo
from buildrows.check.consequences import missing_code
from buildrows.check.consequences import missing_ptx as missing_ptx_line
from buildrows.check.promises import check_no_cuda, check_required, rpath_exception
from buildrows.check.sonames import check_soname_majors
from buildrows.check.tags import WheelPython, platform_of_name, python_of_name, train_of_name
from buildrows.policy.archs import ArchList, Train
from buildrows.policy.model import FileRule, LibraryRule, RpathException, RuntimeMode
from buildrows.policy.requirements import applies, expected_requirements

if TYPE_CHECKING:
    from buildrows.check.loading import LoadInputs


class Artifact(Protocol):
    """What the check reads: a wheel (wheelread.WheelInfo) or loose files (looseread.LooseInfo)."""

    @property
    def libraries(self) -> tuple[LibraryInfo, ...]: ...
    @property
    def members(self) -> tuple[str, ...]: ...
    @property
    def requires_dist(self) -> tuple[str, ...]: ...
    @property
    def build_record(self) -> bytes | None: ...

_CUDART_ELF = re.compile(r"^libcudart\.so(\.\d+)*$")
_CUDART_DLL = re.compile(r"^cudart64_\d+\.dll$", re.IGNORECASE)


@dataclass(frozen=True)
class Expectation:
    """What a wheel of one row must carry."""

    row: str
    platform: str
    cuda: Train | None
    archs: ArchList | None
    requirements: tuple[str, ...] = ()  # the runtime set for the train, markers included
    library_dir: str | None = None
    mode: RuntimeMode = "dynamic"  # how the CUDA runtime reaches the libraries
    rpath_exceptions: tuple[RpathException, ...] = ()
    files: tuple[FileRule, ...] = ()  # the policy's file promises that apply to this row
    machine: str | None = None  # every binary's machine (from the wheel's platform tag), if known
    machine_from: str = "the wheel is tagged for"
    loose: bool = False  # a library or a directory: no metadata, no install location
    mode_reason: str = ""  # why the project loads CUDA itself (preload, torch-runtime)
    runtime_extra: str | None = None  # preload: the extra under which NVIDIA packages are declared
    optional_sonames: tuple[str, ...] = ()  # preload: sonames loaded only when present (globs)
    torch_given: str | None = None  # `check --torch`: the torch a wheel built elsewhere was compiled against
    library_rules: tuple[LibraryRule, ...] = ()  # [[check.libraries]] that apply to this row
    train_archs: tuple[tuple[Train, ArchList], ...] = ()  # the policy's list per train on this platform (per-train)
    torch_extension: bool = False  # a PyTorch extension's CPU row: pinned to its torch like a CUDA row (mode torch)


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    details: list[str] = field(default_factory=list)

    def json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "details": self.details}


def platform_of_wheel(info: WheelInfo) -> str | None:
    """The platform the wheel's tags name (buildrows.check.tags reads every tag pip accepts)."""
    return platform_of_name(info.name)


def python_of_wheel(info: WheelInfo) -> WheelPython | None:
    """The Python the wheel's tags name (buildrows.check.tags)."""
    return python_of_name(info.name)


def train_of_wheel(info: WheelInfo) -> Train | None:
    """The CUDA train of the wheel's local version tag (`+cu130`), if any."""
    return train_of_name(info.name)


def _is_nvidia(req: Requirement) -> bool:
    return canonicalize_name(req.name).startswith("nvidia-")


def _req_key(req: Requirement) -> tuple[str, frozenset[str], frozenset[str]]:
    """Names normalised, extras and specifiers as sets: pins in any order compare equal."""
    return canonicalize_name(req.name), frozenset(req.extras), frozenset(str(s) for s in req.specifier)


def _train_hint(info: Artifact) -> str:
    """`--cuda`'s value for an untagged wheel, as far as its device code tells (the train of its newest PTX)."""
    from buildrows.check.device_train import train_of_code

    found = train_of_code(info.libraries)
    if found is None:
        return "TRAIN --archs LIST"
    return f"{found[0]} --archs LIST (its newest PTX is ISA {found[1]}, first written by CUDA {found[0]})"


def check_cuda_libraries(exp: Expectation, info: Artifact) -> CheckResult:
    with_code = [lib.path for lib in info.libraries if lib.has_device_code]
    name = "cuda-libraries-present"
    if exp.cuda is None:
        if with_code:
            return CheckResult(name, False, [f"a CPU row's wheel ships device code in {p}" for p in with_code]
                               + ["if this is a CUDA wheel whose name carries no +cuXYZ tag, check it with "
                                  f"--cuda {_train_hint(info)}, or --row ROW"])
        return CheckResult(name, True, [f"CPU row: {len(info.libraries)} libraries, none with device code"])
    if not info.libraries:
        return CheckResult(name, False, ["the wheel ships no shared library at all; a CUDA row's wheel needs its CUDA libraries"])
    if not with_code:
        host = _host_only(exp, info)  # [[check.libraries]] host-only: CUDA code without kernels, stated
        if host:
            return CheckResult(name, True, [f"no library carries device code; host-only, as stated: {p}: {r.reason} "
                                            f"[{r.source}]" for p, r in host])
        return CheckResult(name, False, [f"none of the {len(info.libraries)} shared libraries carries device code: "
                                         + ", ".join(lib.path for lib in info.libraries),
                                         "if a library is CUDA host code without kernels (the runtime linked in), "
                                         "state it: [[check.libraries]] files = [...], host-only = true, reason"])
    return CheckResult(name, True, [f"{len(with_code)} of {len(info.libraries)} libraries carry device code: " + ", ".join(with_code)])


def _host_only(exp: Expectation, info: Artifact) -> list[tuple[str, LibraryRule]]:
    """Libraries without device code that a host-only rule states (cuda-host-code checks they are CUDA code)."""
    out = []
    for lib in info.libraries:
        rule, _ = library_rule(exp, lib.path)
        if rule is not None and rule.host_only and not lib.has_device_code:
            out.append((lib.path, rule))
    return out


def check_runtime_declared(exp: Expectation, info: Artifact) -> CheckResult:
    """Requires-Dist's NVIDIA packages equal the train's set, as parsed requirements, both ways
    (preload mode: they carry what the libraries NEED; torch-runtime: torch is required too)."""
    name = "runtime-declared"
    if exp.mode == "preload" and exp.cuda is not None and not exp.platform.startswith("windows"):
        return _preload_declared(exp, info)
    details: list[str] = []
    if exp.mode == "torch-runtime" and exp.cuda is not None:
        torch = _torch_requirements(exp, info)
        if not torch:
            details.append("missing: mode \"torch-runtime\" uses the CUDA runtime that torch brings, so the wheel must "
                           f"require torch (Requires-Dist has none) [{exp.mode_reason}]")
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
        if exp.mode == "torch-runtime":
            details.append(f"requires {', '.join(str(r) for r in _torch_requirements(exp, info))}, which brings the "
                           f"CUDA runtime: {exp.mode_reason}")
    return CheckResult(name, ok, details)


def _torch_requirements(exp: Expectation, info: Artifact) -> list[Requirement]:
    out = []
    for text in info.requires_dist:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue  # reported by runtime-declared
        if canonicalize_name(req.name) == "torch" and "extra" not in str(req.marker or "") and applies(req, exp.platform):
            out.append(req)
    return out


def _nvidia_needed(info: Artifact) -> dict[str, list[str]]:
    """NVIDIA soname -> the shipped libraries that NEED it."""
    from buildrows.check.nvidia import nvidia_soname

    out: dict[str, list[str]] = {}
    for lib in info.libraries:
        for n in lib.needed:
            if nvidia_soname(n):
                out.setdefault(n, []).append(lib.path)
    return out


def _declared_dirs(exp: Expectation, info: Artifact) -> dict[str, str]:
    """Preload mode: library directory -> the declared NVIDIA package that installs it."""
    from buildrows.check.nvidia import declared_nvidia, packages

    assert exp.cuda is not None
    known = packages()
    return {known[p].dir: p for p in declared_nvidia(info.requires_dist, exp.platform, exp.runtime_extra, exp.cuda.major)
            if p in known}


def _package_of_dir(directory: str, major: int) -> str | None:
    """An NVIDIA package of this CUDA major that installs into `directory`, if the table knows one."""
    from buildrows.check.nvidia import packages

    hits = [p.name for p in packages().values() if p.dir == directory and _package_major(p.name) == major]
    return hits[0] if hits else None


def _package_major(name: str) -> int | None:
    from buildrows.check.nvidia import packages

    m = re.search(r"-cu(\d+)$", name)
    if m:
        return int(m.group(1))
    return 13 if name in packages() else None  # CUDA 13's packages dropped the suffix


def _preload_declared(exp: Expectation, info: Artifact) -> CheckResult:
    """The project loads NVIDIA's libraries itself: no exact set to hold it to, but every NVIDIA
    soname a library NEEDS must come from a declared package (or be loaded only when present),
    and no declared package may be of another CUDA major than the row's."""
    from buildrows.check.nvidia import carriers, declared_nvidia, optional, packages

    assert exp.cuda is not None
    name = "runtime-declared"
    scope = f"under extra {exp.runtime_extra!r}" if exp.runtime_extra else "among its unconditional requirements"
    declared = declared_nvidia(info.requires_dist, exp.platform, exp.runtime_extra, exp.cuda.major)
    known = packages()
    details: list[str] = []
    notes: list[str] = []
    for pkg, text in sorted(declared.items()):
        major = _package_major(pkg)
        if major is not None and major != exp.cuda.major:
            details.append(f"unexpected: {text!r} is a CUDA {major} package, but the row is CUDA {exp.cuda.dotted}")
    carried = {so for p in declared if p in known for so in known[p].sonames}
    shipped = {m.rsplit("/", 1)[-1] for m in info.members}
    for soname, libs in sorted(_nvidia_needed(info).items()):
        names = ", ".join(libs[:3]) + (f" and {len(libs) - 3} more" if len(libs) > 3 else "")
        if soname in carried:
            continue
        if soname in shipped:  # the wheel brings it itself (an NVIDIA package's own libraries, a bundled copy)
            notes.append(f"{soname} (NEEDED by {names}): shipped in the wheel")
            continue
        if optional(soname, exp.optional_sonames):
            notes.append(f"{soname} (NEEDED by {names}): loaded only when present (optional)")
            continue
        offer = [p for p in carriers(soname) if _package_major(p) in (None, exp.cuda.major)]
        fix = (f"declare {offer[0]} {scope}" if offer else
               "no NVIDIA wheel buildrows knows carries it; if the project loads it only when present, list it "
               "under optional")
        details.append(f"missing: {names} NEEDS {soname}, which none of the NVIDIA packages the wheel declares "
                       f"{scope} carries; fix: {fix}, or optional = [\"{soname.split('.so')[0]}.so.*\"] "
                       f"under [cuda.runtime.{exp.cuda.major}] if it is loaded only when present")
    unknown = [p for p in declared if p not in known]
    if unknown:
        notes.append(f"not in buildrows' table of NVIDIA packages, so not judged: {', '.join(sorted(unknown))}")
    if details:
        return CheckResult(name, False, details + notes)
    needed = len(_nvidia_needed(info))
    if declared:
        head = (f"mode preload ({exp.mode_reason}): declares {', '.join(sorted(declared))} {scope}; they carry "
                f"every NVIDIA soname the libraries NEED ({needed})")
    else:
        head = (f"mode preload ({exp.mode_reason}): no NVIDIA package is declared {scope}, and "
                + (f"every NVIDIA soname the libraries NEED ({needed}) is optional" if needed
                   else "the libraries NEED no NVIDIA soname"))
    return CheckResult(name, True, [head, *notes])


def _install_dir(member: str) -> str | None:
    """Where a wheel member lands relative to site-packages (None for data/scripts)."""
    parts = member.split("/")
    if parts[0].endswith(".data"):
        if len(parts) > 2 and parts[1] in ("purelib", "platlib"):
            return posixpath.dirname("/".join(parts[2:]))
        return None
    return posixpath.dirname(member)


def _wheel_dirs(info: Artifact) -> set[str]:
    dirs: set[str] = {""}
    for m in info.members:
        d = _install_dir(m)
        while d:
            dirs.add(d)
            d = posixpath.dirname(d)
    return dirs


def _origin_entry(entry: str) -> bool:
    return entry.startswith("$ORIGIN") or entry.startswith("${ORIGIN}")


def _links_cudart(lib: LibraryInfo) -> list[str]:
    return [n for n in lib.needed if _CUDART_ELF.match(n)]


def check_rpath(exp: Expectation, info: Artifact) -> CheckResult:
    """RPATH/RUNPATH entries land inside the wheel, on the runtime, or on an entry the policy
    accepts; and the runtime is linked as the policy's mode says (dynamic: at least one library
    links it and reaches it; static: none links it; torch: torch brings it)."""
    name = "runtime-reached"
    elf = [lib for lib in info.libraries if lib.format == "elf"]
    found: list[tuple[str, str]] = []  # (library, problem): grouped below, torch-sized wheels repeat them
    accepted: dict[RpathException, int] = {}

    def accept(lib: LibraryInfo, entry: str, resolved: str | None) -> bool:
        exc = rpath_exception(exp.rpath_exceptions, lib.path, entry, resolved)
        if exc is not None:
            accepted[exc] = accepted.get(exc, 0) + 1
        return exc is not None

    def absolute(lib: LibraryInfo, entry: str) -> None:
        if not accept(lib, entry, None):
            found.append((lib.path, f"search path {entry!r} is absolute (the builder's toolkit or build tree); "
                                    "use an $ORIGIN-relative entry, or list it under [[check.rpath-exceptions]] "
                                    "with its reason if it is kept on purpose"))

    linux_cuda = exp.cuda is not None and not exp.platform.startswith("windows")
    if not linux_cuda or exp.loose:
        for lib in elf:
            for entry in lib.rpaths:
                if not _origin_entry(entry):
                    absolute(lib, entry)
        if linux_cuda:  # loose files: no install location, so only how the runtime is linked
            _runtime_mode_problems(exp, elf, found, target=None)
        details = _grouped(found) + _accepted_lines(accepted)
        if found:
            return CheckResult(name, False, details)
        if exp.cuda is None:
            return CheckResult(name, True, ["no CUDA runtime to reach", *_accepted_lines(accepted)])
        if exp.platform.startswith("windows"):
            return CheckResult(name, True, ["Windows: checked by no-cudart-import", *_accepted_lines(accepted)])
        return CheckResult(name, True, [_mode_summary(exp, elf, None), *_accepted_lines(accepted)])

    dirs = _wheel_dirs(info)
    target = exp.library_dir.strip("/") if exp.mode == "dynamic" and exp.library_dir else None
    # Preload mode: an entry landing in a declared NVIDIA package's directory is how the project
    # finds the libraries it loads, so it is reached on purpose.
    preload_dirs = _declared_dirs(exp, info) if exp.mode == "preload" else {}
    reached_packages: set[str] = set()
    for lib in elf:
        origin = _install_dir(lib.path)
        if origin is None:
            found.append((lib.path, "not installed into site-packages, so $ORIGIN cannot be reasoned about"))
            continue
        for entry in lib.rpaths:
            if not _origin_entry(entry):
                absolute(lib, entry)
                continue
            rel = entry.replace("${ORIGIN}", "$ORIGIN")[len("$ORIGIN"):].lstrip("/")
            resolved = posixpath.normpath(posixpath.join(origin, rel)) if rel else origin
            if resolved == ".":
                resolved = ""
            if resolved.startswith(".."):
                climbs = rpath_exception([e for e in exp.rpath_exceptions if e.climbs_out], lib.path, entry, None)
                if climbs is not None:
                    accepted[climbs] = accepted.get(climbs, 0) + 1
                    continue
                found.append((lib.path, f"{entry!r} climbs out of site-packages to {resolved!r}; if another install "
                                        "layout needs it on purpose, list it under [[check.rpath-exceptions]] with "
                                        "entry, climbs-out = true and its reason"))
                continue
            if resolved == target or resolved in dirs or resolved in preload_dirs or accept(lib, entry, resolved):
                if resolved in preload_dirs:
                    reached_packages.add(preload_dirs[resolved])
                continue
            if exp.mode == "preload":
                offer = _package_of_dir(resolved, exp.cuda.major if exp.cuda else 0)
                if offer:
                    scope = (f"under extra {exp.runtime_extra!r}" if exp.runtime_extra
                             else "among its unconditional requirements")
                    found.append((lib.path, f"{entry!r} resolves to site-packages/{resolved}, which none of the NVIDIA "
                                            f"packages the wheel declares {scope} installs; fix: declare {offer} {scope}, "
                                            "or drop the entry"))
                    continue
            runtime = f"the CUDA runtime ({target})" if target else "the CUDA runtime"
            found.append((lib.path, f"{entry!r} resolves to site-packages/{resolved}, which neither the wheel "
                                    f"nor {runtime} provides; list it under [[check.rpath-exceptions]] "
                                    f"(reaches = {resolved!r}) with its reason if it is another package's on purpose"))
    _runtime_mode_problems(exp, elf, found, target)
    details = _grouped(found)
    ok = not details
    if ok:
        details.append(_mode_summary(exp, elf, target))
        if reached_packages:
            details.append("RPATH entries reach the directories of the declared " + ", ".join(sorted(reached_packages)))
    return CheckResult(name, ok, details + _accepted_lines(accepted))


def _runtime_mode_problems(exp: Expectation, elf: list[LibraryInfo], found: list[tuple[str, str]],
                           target: str | None) -> None:
    assert exp.cuda is not None
    major = exp.cuda.major
    linking = [lib for lib in elf if _links_cudart(lib)]
    where = f"[cuda.runtime.{major}] mode"
    if exp.mode == "dynamic":
        if not linking:
            found.append(("the wheel" if not exp.loose else "these files",
                          f"no shipped library links the CUDA runtime (libcudart.so.{major}) dynamically, yet {where} "
                          f"is \"dynamic\" ({len(elf)} libraries inspected); if the libraries link cudart statically "
                          f"(CMake's CUDA::cudart_static, CUDA_RUNTIME_LIBRARY Static) set mode = \"static\", if torch "
                          "brings it set mode = \"torch\""))
        for lib in linking:
            if target is not None and not _reaches(lib, target):
                found.append((lib.path, f"links {', '.join(_links_cudart(lib))} but no RPATH/RUNPATH entry reaches "
                                        f"site-packages/{target} (has: {list(lib.rpaths) or 'none'}); "
                                        + _rpath_fix(lib.path, target)))
    elif exp.mode == "static":
        for lib in linking:
            found.append((lib.path, f"links {', '.join(_links_cudart(lib))} dynamically, but {where} is \"static\": "
                                    "no runtime is declared for it to load; link cudart statically "
                                    "(CUDA_RUNTIME_LIBRARY Static), or set mode = \"dynamic\""))


def _rpath_fix(path: str, target: str) -> str:
    """The fix for a library that does not reach the runtime: its $ORIGIN-relative entry, and where a
    CMake build and a setup.py build set it."""
    origin = _install_dir(path)
    rel = posixpath.relpath(target, origin or ".") if origin is not None else target
    entry = f"$ORIGIN/{rel}"
    return (f"fix: give it the RPATH entry '{entry}': in CMake, set_target_properties(TARGET PROPERTIES "
            f"INSTALL_RPATH \"{entry}\"); in setup.py, Extension(..., runtime_library_dirs=[\"{entry}\"]) "
            f"(or extra_link_args=[\"-Wl,-rpath,{entry}\"])")


def _reaches(lib: LibraryInfo, target: str) -> bool:
    origin = _install_dir(lib.path)
    if origin is None:
        return False
    for entry in lib.rpaths:
        if _origin_entry(entry):
            rel = entry.replace("${ORIGIN}", "$ORIGIN")[len("$ORIGIN"):].lstrip("/")
            if posixpath.normpath(posixpath.join(origin, rel)) == target:
                return True
    return False


def _mode_summary(exp: Expectation, elf: list[LibraryInfo], target: str | None) -> str:
    linking = [lib for lib in elf if _links_cudart(lib)]
    if exp.mode == "static":
        return f"runtime mode static: none of the {len(elf)} libraries links libcudart dynamically"
    if exp.mode == "torch":
        return (f"runtime mode torch: {len(linking)} libraries link the CUDA runtime, which importing torch loads; "
                "no entry points outside the wheel")
    if exp.mode == "preload":
        return (f"runtime mode preload: the project loads the NVIDIA libraries itself ({exp.mode_reason}); "
                f"{len(linking)} of {len(elf)} libraries link the CUDA runtime; no entry points outside the wheel "
                "except as accepted")
    if exp.mode == "torch-runtime":
        return (f"runtime mode torch-runtime: torch brings the CUDA runtime ({exp.mode_reason}); "
                f"{len(linking)} of {len(elf)} libraries link it")
    if target is None:
        return f"{len(linking)} libraries link the CUDA runtime dynamically (loose files: install location unknown)"
    return f"{len(linking)} libraries link the CUDA runtime and reach site-packages/{target}"


def _accepted_lines(accepted: dict[RpathException, int]) -> list[str]:
    out = []
    for exc, n in accepted.items():
        what = f"{exc.entry!r}" if exc.entry is not None else f"reaching site-packages/{exc.reaches}"
        climbs = " (climbing out of site-packages)" if exc.climbs_out else ""
        out.append(f"accepted {n} {'entry' if n == 1 else 'entries'}: {what}{climbs}: {exc.reason} [{exc.source}]")
    return out


def _grouped(found: list[tuple[str, str]]) -> list[str]:
    """One line per problem, naming every library that has it (the first few by name)."""
    by_problem: dict[str, list[str]] = {}
    for lib, problem in found:
        if lib not in by_problem.setdefault(problem, []):  # a library repeating an entry counts once
            by_problem[problem].append(lib)
    out = []
    for problem, libs in by_problem.items():
        if len(libs) == 1:
            out.append(f"{libs[0]}: {problem}")
        else:
            names = ", ".join(libs[:3]) + (f" and {len(libs) - 3} more" if len(libs) > 3 else "")
            out.append(f"{len(libs)} libraries ({names}): {problem}")
    return out


def check_device_code(exp: Expectation, info: Artifact) -> CheckResult:
    """Every library with device code covers its list on its own, both ways, PTX included: the
    row's, or what the first [[check.libraries]] rule matching it says (its own list, its train's
    list, or none for a vendored library)."""
    name = "device-code-covers-row"
    libs = [lib for lib in info.libraries if lib.has_device_code]
    if exp.cuda is None or exp.archs is None:
        return CheckResult(name, not libs, ["CPU row: no device code expected"] if not libs else
                           [f"{lib.path}: device code in a CPU wheel" for lib in libs])
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
    trains = dict(exp.train_archs)
    for lib in libs:
        want, label, suffix = exp.archs, "the row", ""
        rule, digits = library_rule(exp, lib.path)
        if rule is not None and rule.host_only:
            details.append(f"{lib.path}: stated host-only (no device code) [{rule.source}], but it carries "
                           f"{_arch_text(lib)}; fix: drop host-only, or give the rule its archs")
            continue
        if rule is not None and rule.vendored:
            notes.append(f"{lib.path}: vendored, not held to the row's list: {rule.reason} [{rule.source}] "
                         f"(carries {_arch_text(lib)})")
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
    ok = not details
    if ok:
        for label, paths in held.items():
            want = wants[label]
            where = "" if label == "the row" else f": {label}"
            details.append(f"{len(paths)} {'library carries' if len(paths) == 1 else 'libraries each carry'} exactly "
                           f"{' '.join(sorted(want.cubin_names, key=_arch_key))}"
                           + (f" with PTX {' '.join(sorted(want.ptx_names, key=_arch_key))}" if want.ptx_names else "")
                           + where)
    return CheckResult(name, ok, details + notes)


def library_rule(exp: Expectation, path: str) -> tuple[LibraryRule | None, str | None]:
    """The first [[check.libraries]] rule that matches `path`, with the {cu} digits it carries."""
    for rule in exp.library_rules:
        hit, digits = rule.match(path)
        if hit:
            return rule, digits
    return None, None


def train_of_digits(digits: str | None) -> Train | None:
    """The train a per-train library's name carries (118 -> 11.8), None if none or not a train."""
    if digits is None:
        return None
    try:
        return Train.parse("cu" + digits)
    except ValueError:
        return None


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


def unused_exceptions(exp: Expectation, info: Artifact) -> list[dict[str, str]]:
    """Every exception of the policy that applies to this row and matched nothing in the artifact:
    a stale or mistyped one would otherwise look like it works."""
    out: list[dict[str, str]] = []
    elf = [lib for lib in info.libraries if lib.format == "elf"]
    for exc in exp.rpath_exceptions:
        if not any(_exception_matches(exc, lib, entry) for lib in elf for entry in lib.rpaths):
            what = f"entry = {exc.entry!r}" if exc.entry is not None else f"reaches = {exc.reaches!r}"
            out.append({"source": exc.source, "rule": f"RPATH exception {what}", "reason": exc.reason})
    for rule in exp.files:
        for glob in rule.files:
            names = info.members if rule.kind == "required" else [lib.path for lib in info.libraries]
            if not any(fnmatch.fnmatchcase(m, glob) for m in names):
                out.append({"source": rule.source, "rule": f"{rule.kind} files {glob!r}", "reason": rule.reason})
    for lrule in exp.library_rules:
        if not any(lrule.match(lib.path)[0] for lib in info.libraries):
            out.append({"source": lrule.source, "rule": f"libraries files {list(lrule.files)!r}", "reason": lrule.reason})
    return out


def _exception_matches(exc: RpathException, lib: LibraryInfo, entry: str) -> bool:
    resolved: str | None = None
    origin = _install_dir(lib.path)
    if _origin_entry(entry) and origin is not None:
        rel = entry.replace("${ORIGIN}", "$ORIGIN")[len("$ORIGIN"):].lstrip("/")
        resolved = posixpath.normpath(posixpath.join(origin, rel)) if rel else origin
    return rpath_exception([exc], lib.path, entry, resolved) is not None


def check_windows_imports(exp: Expectation, info: Artifact) -> CheckResult:
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


def check_torch_pin(exp: Expectation, info: Artifact, symbols: dict[str, tuple[str, ...]] | None = None) -> CheckResult:
    """A PyTorch extension requires a torch it runs on. What it imports decides the rule: libtorch's
    C++ API ties it to the minor version it was built against (torch==X.Y.*); torch's stable C ABI
    only (aoti_torch_*, torch_*) does not, so torch>=X with no upper bound is right. The torch it was
    built against comes from the build record, or from `check --torch` for a wheel built elsewhere."""
    from buildrows.build.record import RECORD_NAME, BuildRecordError, parse_record
    from buildrows.check.torchpin import pin_problem

    name = "torch-matches-build"
    # A PyTorch extension's CPU row is held to its torch too (its CUDA rows are mode torch).
    where = f"[cuda.runtime.{exp.cuda.major}]" if exp.cuda is not None else "the CUDA rows' [cuda.runtime.N]"
    other_modes = (f"or, if the libraries are not compiled against torch, set mode = \"torch-runtime\" (torch brings "
                   f"the runtime) or \"dynamic\" under {where}")
    abi = _wheel_torch_abi(info, symbols or {})
    if not abi:
        return CheckResult(name, False, [
            "mode \"torch\", but no library links libtorch or imports torch's C++ or stable C ABI",
            f"fix: {other_modes.removeprefix('or, if the libraries are not compiled against torch, ')}"])
    # A library that links libtorch but imports none of its stable C ABI (no symbol table to tell,
    # or only C++ symbols) is held to the torch minor: only imports can prove the stable ABI.
    cxx = sorted((p for p, a in abi.items() if a.kind in ("c++", "none")), key=lambda p: (-len(abi[p].cxx), p))
    kind = "c++" if cxx else "stable"
    if cxx and abi[cxx[0]].cxx:
        abi_line = (f"{cxx[0]} imports libtorch's C++ API ({len(abi[cxx[0]].cxx)} symbols, e.g. {abi[cxx[0]].cxx[0]}): "
                    "tied to the torch minor it was built against")
    elif cxx:
        abi_line = (f"{cxx[0]} links libtorch and imports none of torch's stable C ABI: held to the torch minor it "
                    "was built against")
    else:
        abi_line = (f"{len(abi)} libraries import only torch's stable C ABI "
                    f"({sum(len(a.stable) for a in abi.values())} aoti_torch_*/torch_* symbols, no libtorch C++ symbol)")
    built: str | None = None
    built_cuda: str | None = None
    record_cuda: str | None = None
    details: list[str] = []
    if info.build_record is not None:
        try:
            record = parse_record(info.build_record, RECORD_NAME)
        except BuildRecordError as e:
            return CheckResult(name, False, [f"{e}", "fix: rebuild with `buildrows build` to rewrite the record"])
        if record.torch is None:
            return CheckResult(name, False, [f"the build record names no torch (row {record.row}): the build did not "
                                             f"compile against torch; {other_modes}"])
        built, built_cuda, record_cuda = record.torch, record.torch_cuda, record.cuda
        if exp.torch_given is not None and _minor(exp.torch_given) != _minor(built):
            details.append(f"--torch {exp.torch_given} contradicts the build record, which says torch {built}")
    elif exp.torch_given is not None:
        built = exp.torch_given
    torch_reqs = _torch_requirements(exp, info)
    # The stable ABI holds across minors: without the built version, a lower bound can still be judged.
    if built is None and kind == "c++":
        return CheckResult(name, False, [
            abi_line,
            f"the wheel has no build record (.dist-info/{RECORD_NAME}), so which torch it was compiled against "
            "is unknown",
            "fix: give it: `buildrows check WHEEL --torch 2.8.0` (the torch the wheel was built against), or "
            "build it with `buildrows build`, which records it"])
    if not torch_reqs:
        want = f"torch=={_minor(built)}.*" if kind == "c++" and built else f"torch>={_minor(built) if built else 'X.Y'}"
        built_with = f"the wheel was built against torch {built}: " if built else ""
        details.append(f"Requires-Dist has no torch requirement; {built_with}declare {want}")
    for req in torch_reqs:
        if kind == "c++":
            assert built is not None
            problem = pin_problem(req.specifier, built)
            if problem:
                details.append(f"Requires-Dist {str(req)!r}: {problem}; declare torch=={_minor(built)}.*")
            continue
        problem = _stable_problem(req, built)
        if problem:
            details.append(f"Requires-Dist {str(req)!r}: {problem}")
    if exp.cuda is not None and built is not None and info.build_record is not None:
        want = exp.cuda.dotted
        if built_cuda is None:
            details.append(f"the recorded torch {built} has no CUDA (a CPU torch), but the row is CUDA {want}")
        elif Train.parse(built_cuda) != exp.cuda:
            details.append(f"built against torch {built} for CUDA {built_cuda}, but the row is CUDA {want}: "
                           f"build against the torch of the row's train (its +{exp.cuda.cu} wheel)")
        if record_cuda is not None and Train.parse(record_cuda) != exp.cuda:
            details.append(f"compiled with CUDA {record_cuda}, but the row is CUDA {want}")
    if details:
        return CheckResult(name, False, [abi_line, *details])
    source = "recorded" if info.build_record is not None else "given with --torch"
    reqs = ", ".join(str(r) for r in torch_reqs)
    if kind == "c++":
        return CheckResult(name, True, [abi_line, f"requires {reqs}: admits torch {built}"
                                        + (f" (CUDA {built_cuda})" if built_cuda else "") + f", {source}," + " and no other minor version"])
    return CheckResult(name, True, [abi_line, f"requires {reqs}: a lower bound and no pin to one minor, as the stable "
                                    f"ABI allows" + (f"; admits torch {built}, {source}" if built else "")])


def _wheel_torch_abi(info: Artifact, symbols: dict[str, tuple[str, ...]]) -> dict[str, TorchAbi]:
    """library -> what it imports of torch, for the libraries that use torch at all."""
    out: dict[str, TorchAbi] = {}
    for lib in info.libraries:
        abi = torch_abi(symbols.get(lib.path, ()))
        if abi.kind != "none" or any(_LIBTORCH.match(n) for n in lib.needed):
            out[lib.path] = abi
    return out


def _stable_problem(req: Requirement, built: str | None) -> str | None:
    """A stable-ABI extension needs a torch lower bound (the ABI it calls appeared in some version)
    that admits the torch it was built against; an upper bound is allowed but not needed."""
    from packaging.version import InvalidVersion, Version

    if not any(s.operator in (">=", ">", "~=", "==", "===") for s in req.specifier):
        return "no lower bound: torch's stable ABI grows with each release, so declare torch>=" + (
            _minor(built) if built else "X.Y (the oldest torch whose stable ABI the wheel calls)")
    if built is not None:
        try:
            version = Version(built)
        except InvalidVersion:
            return f"{built!r} (--torch) is not a version"
        if not req.specifier.contains(version, prereleases=True):
            return f"{req.specifier} does not admit torch {built}, which the wheel was built against"
    return None


def _minor(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


def _next_minor(version: str) -> str:
    parts = _minor(version).split(".")
    return f"{parts[0]}.{int(parts[1]) + 1}" if len(parts) == 2 and parts[1].isdigit() else version


# libtorch's C++ API as a library imports it: mangled names in c10::, at::, torch:: or caffe2::.
_TORCH_CXX = re.compile(r"^_ZN[KVRO]*(?:3c10|2at|5torch|6caffe2)")
# torch's stable C ABI (torch/csrc/stable, torch/csrc/inductor/aoti_torch/c/shim.h).
_TORCH_STABLE = re.compile(r"^(?:aoti_torch_|torch_)\w+$")
_LIBTORCH = re.compile(r"^lib(?:torch\w*|c10\w*)\.so$")


@dataclass(frozen=True)
class TorchAbi:
    """What one library imports of torch: libtorch's C++ symbols, and the stable C ABI's."""

    cxx: tuple[str, ...]
    stable: tuple[str, ...]

    @property
    def kind(self) -> str:
        """"c++" (tied to the minor), "stable" (only the C ABI), or "none"."""
        return "c++" if self.cxx else "stable" if self.stable else "none"


def torch_abi(symbols: tuple[str, ...]) -> TorchAbi:
    return TorchAbi(tuple(s for s in symbols if _TORCH_CXX.match(s)), tuple(s for s in symbols if _TORCH_STABLE.match(s)))


def check_torch_runtime_only(exp: Expectation, info: Artifact, symbols: dict[str, tuple[str, ...]]) -> CheckResult:
    """torch-runtime mode: the libraries use torch's CUDA runtime but are not compiled against
    torch, so none may link libtorch or import its C++ API (that would tie it to one minor)."""
    name = "not-compiled-against-torch"
    bad: list[str] = []
    elf = [lib for lib in info.libraries if lib.format == "elf"]
    for lib in elf:
        abi = torch_abi(symbols.get(lib.path, ()))
        links = [n for n in lib.needed if _LIBTORCH.match(n)]
        if abi.cxx or links:
            what = (f"imports {len(abi.cxx)} libtorch C++ symbols (e.g. {abi.cxx[0]})" if abi.cxx
                    else f"links {', '.join(links)}")
            bad.append(f"{lib.path} {what}: it is compiled against torch, so mode \"torch\" fits it (the wheel pins "
                       f"the torch minor it was built against), not \"torch-runtime\"")
    if bad:
        return CheckResult(name, False, bad)
    return CheckResult(name, True, [f"{len(elf)} libraries link no libtorch and import none of its C++ symbols"])


def run_checks(exp: Expectation, info: Artifact, symbols: dict[str, tuple[str, ...]] | None = None,
               loading: LoadInputs | None = None) -> list[CheckResult]:
    results = [check_cuda_libraries(exp, info)]
    if not exp.loose:
        results.append(check_runtime_declared(exp, info))
    results += [check_rpath(exp, info), check_device_code(exp, info)]
    if exp.cuda is not None:
        from buildrows.check.device_train import check_device_train

        results.append(check_device_train(exp, info))
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
        if exp.cuda is not None and exp.mode == "torch-runtime":
            results.append(check_torch_runtime_only(exp, info, symbols or {}))
    if loading is not None:  # would each library load (buildrows.check.loading)
        from buildrows.check.loading import loading_checks

        results += loading_checks(exp, info, loading)
    return results


def needs_symbols(exp: Expectation) -> bool:
    """Whether judging this row reads the libraries' imported symbols (the torch modes)."""
    return (exp.cuda is not None and exp.mode in ("torch", "torch-runtime")) or exp.torch_extension


def library_json(libs: tuple[LibraryInfo, ...]) -> dict[str, dict[str, list[str]]]:
    return {lib.path: {"elf": sorted(set(lib.cubins), key=_arch_key), "ptx": sorted(set(lib.ptx), key=_arch_key)}
            for lib in libs}

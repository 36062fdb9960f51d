"""Judges of how a wheel reaches the CUDA runtime (SPEC §8): what it declares (runtime-declared), where
its libraries' RPATH leads and the runtime mode (runtime-reached), and Windows imports. They read
NEEDED, RPATH/RUNPATH and Requires-Dist, never device code."""

from __future__ import annotations

import fnmatch
import posixpath
import re

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from buildrows.binaries.wheelread import LibraryInfo
from buildrows.check.judging import Artifact, CheckResult, Expectation
from buildrows.check.promises import rpath_exception
from buildrows.policy.model import RpathException
from buildrows.policy.requirements import applies, expected_requirements

_CUDART_ELF = re.compile(r"^libcudart\.so(\.\d+)*$")


_CUDART_DLL = re.compile(r"^cudart64_\d+\.dll$", re.IGNORECASE)


def _is_nvidia(req: Requirement) -> bool:
    return canonicalize_name(req.name).startswith("nvidia-")


def _req_key(req: Requirement) -> tuple[str, frozenset[str], frozenset[str]]:
    """Names normalised, extras and specifiers as sets: pins in any order compare equal."""
    return canonicalize_name(req.name), frozenset(req.extras), frozenset(str(s) for s in req.specifier)


def check_runtime_declared(exp: Expectation, info: Artifact) -> CheckResult:
    """Requires-Dist's NVIDIA packages equal the train's set, as parsed requirements, both ways
    (preload mode: they carry what the libraries NEED; torch-runtime: torch is required too)."""
    name = "runtime-declared"
    if exp.mode == "preload" and exp.cuda is not None:
        from buildrows.check.windows_runtime import extra_problem

        result, problem = _preload_declared(exp, info), extra_problem(exp, info)  # on every platform
        return result if problem is None else CheckResult(name, False, [problem, *result.details])
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
    """Library directory -> the declared NVIDIA package that installs it (modes preload, dynamic, static):
    unconditional or under the runtime's extra first, then under any extra, as libraries-load counts them
    (an RPATH entry into a package of another extra is reached when that extra is installed)."""
    from buildrows.check.nvidia import declared_nvidia, packages
    from buildrows.check.providers import _extras

    assert exp.cuda is not None
    known = packages()
    out: dict[str, str] = {}
    for extra in dict.fromkeys((exp.runtime_extra, None, *_extras(info.requires_dist))):
        for p in declared_nvidia(info.requires_dist, exp.platform, extra, exp.cuda.major):
            if p in known:
                out.setdefault(known[p].dir, p if extra in (None, exp.runtime_extra) else f"{p} [extra {extra}]")
    return out


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
    top, _, rest = member.partition("/")
    if top.endswith(".data"):
        scheme, sep, rest = rest.partition("/")
        if sep and scheme in ("purelib", "platlib"):
            return rest.rpartition("/")[0]
        return None
    return member.rpartition("/")[0]


def _wheel_dirs(info: Artifact) -> set[str]:
    dirs: set[str] = {""}
    for m in info.members:
        d = _install_dir(m)
        while d and d not in dirs:  # a directory seen already brought its parents
            dirs.add(d)
            d = d.rpartition("/")[0]
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
        if exp.platform.startswith("windows"):  # the DLLs' imports against the mode (buildrows.check.windows_runtime)
            from buildrows.check.windows_runtime import windows_mode

            judged = windows_mode(exp, info)
            return CheckResult(name, judged.ok, [*judged.details, *_accepted_lines(accepted)])
        return CheckResult(name, True, [_mode_summary(exp, elf, None), *_accepted_lines(accepted)])

    dirs = _wheel_dirs(info)
    target = exp.library_dir.strip("/") if exp.mode == "dynamic" and exp.library_dir else None
    # An entry landing in a declared NVIDIA package's directory is reached on purpose: how a preload
    # project finds the libraries it loads, and how a dynamic or static one's loader finds the
    # package's libraries it NEEDS (pyvkfft's libnvrtc.so.13 beside a cudart linked in statically;
    # libraries-load asks for exactly that entry).
    preload_dirs = _declared_dirs(exp, info) if exp.mode in ("preload", "dynamic", "static", "none") else {}
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
                          f"(CMake's CUDA::cudart_static, CUDA_RUNTIME_LIBRARY Static) set mode = \"static\", if they "
                          "link no CUDA runtime at all (the driver API, NVRTC or CUDA libraries only) set mode = "
                          "\"none\", if torch brings it set mode = \"torch\""))
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
    elif exp.mode == "none":
        for lib in linking:
            found.append((lib.path, f"links {', '.join(_links_cudart(lib))}, but {where} is \"none\" (the wheel "
                                    "links no CUDA runtime): nothing declares the runtime for it to load; fix: set "
                                    "mode = \"dynamic\" (the runtime package is then declared and reached), or build "
                                    "it without cudart (setup.py: drop 'cudart' from libraries; nvcc: -cudart none)"))


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
    if exp.mode == "none":
        return (f"runtime mode none: none of the {len(elf)} libraries links libcudart (the static runtime is "
                "judged by cuda-host-code)")
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
    # A rule may name kernel files (.cubin, .fatbin, .ptx) as well as libraries: both are what it judges.
    judged = [lib.path for lib in info.libraries] + [k.path for k in getattr(info, "kernels", ())]
    for lrule in exp.library_rules:
        if not any(lrule.match(path)[0] for path in judged):
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
    from buildrows.check.windows_runtime import cudart_import_judged

    if bad and exp.cuda is not None and cudart_import_judged(exp):  # torch's or a declared package's DLL
        return CheckResult(name, True, [f"{len(bad)} cudart64_*.dll imports ({', '.join(sorted({p for p, _ in bad}))}): "
                                        f"mode {exp.mode!r} may load one, judged by runtime-reached"])
    if bad:
        return CheckResult(name, False, [f"{p} imports {n}: link cudart statically so the DLL reaches the driver "
                                         "(nvcuda.dll) instead of a cudart DLL no wheel provides" for p, n in bad])
    return CheckResult(name, True, [f"{len(pe)} DLLs import no cudart64_*.dll"])

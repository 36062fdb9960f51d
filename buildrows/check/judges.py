"""The wheel check (SPEC §8): pure functions from what the wheel holds to named verdicts.

Reading the wheel is buildrows.binaries.wheelread's job; this module only judges. Every check that
inspects libraries fails when it inspected none: it never passes vacuously.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from buildrows.binaries.wheelread import LibraryInfo, WheelInfo
from buildrows.check.promises import check_no_cuda, check_required, rpath_exception
from buildrows.policy.archs import ArchList, Train
from buildrows.policy.model import FileRule, RpathException, RuntimeMode
from buildrows.policy.requirements import applies, expected_requirements


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
    mode: RuntimeMode = "dynamic"  # how the CUDA runtime reaches the libraries
    rpath_exceptions: tuple[RpathException, ...] = ()
    files: tuple[FileRule, ...] = ()  # the policy's file promises that apply to this row
    machine: str | None = None  # every binary's machine (from the wheel's platform tag), if known
    machine_from: str = "the wheel is tagged for"
    loose: bool = False  # a library or a directory: no metadata, no install location
    torch_extension: bool = False  # a PyTorch extension's CPU row: pinned to its torch like a CUDA row (mode torch)


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


@dataclass(frozen=True)
class WheelPython:
    """The Python a wheel's tags name: `3.12`, `3.13t` (free-threaded), or `3.9` with abi3 (and newer)."""

    version: str
    abi3: bool = False


def python_of_wheel(info: WheelInfo) -> WheelPython | None:
    """From the python and ABI tags: `cp312-cp312`, `cp313-cp313t` (free-threaded), `cp39-abi3`."""
    abis = info.name.abi_tags
    for tag in info.name.python_tags:
        m = re.fullmatch(r"cp3(\d+)(t?)", tag)
        if not m:
            continue
        threaded = m.group(2) or ("t" if f"cp3{m.group(1)}t" in abis else "")
        if "abi3" in abis and not threaded:
            return WheelPython(f"3.{m.group(1)}", abi3=True)
        return WheelPython(f"3.{m.group(1)}{threaded}")
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


def check_cuda_libraries(exp: Expectation, info: Artifact) -> CheckResult:
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


def check_runtime_declared(exp: Expectation, info: Artifact) -> CheckResult:
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
                found.append((lib.path, f"{entry!r} climbs out of site-packages to {resolved!r}"))
                continue
            if resolved == target or resolved in dirs or accept(lib, entry, resolved):
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
                                        f"site-packages/{target} (has: {list(lib.rpaths) or 'none'})"))
    elif exp.mode == "static":
        for lib in linking:
            found.append((lib.path, f"links {', '.join(_links_cudart(lib))} dynamically, but {where} is \"static\": "
                                    "no runtime is declared for it to load; link cudart statically "
                                    "(CUDA_RUNTIME_LIBRARY Static), or set mode = \"dynamic\""))


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
    if target is None:
        return f"{len(linking)} libraries link the CUDA runtime dynamically (loose files: install location unknown)"
    return f"{len(linking)} libraries link the CUDA runtime and reach site-packages/{target}"


def _accepted_lines(accepted: dict[RpathException, int]) -> list[str]:
    out = []
    for exc, n in accepted.items():
        what = f"{exc.entry!r}" if exc.entry is not None else f"reaching site-packages/{exc.reaches}"
        out.append(f"accepted {n} {'entry' if n == 1 else 'entries'}: {what}: {exc.reason} [{exc.source}]")
    return out


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


def check_device_code(exp: Expectation, info: Artifact) -> CheckResult:
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
            details.append(f"{lib.path}: missing PTX for {', '.join(missing_ptx)} (newer GPUs cannot JIT-compile it)")
        if extra_ptx:
            details.append(f"{lib.path}: PTX for {', '.join(extra_ptx)}, which the row does not mark +PTX")
    ok = not details
    if ok:
        details.append(f"{len(libs)} libraries each carry exactly {' '.join(sorted(want_elf, key=_arch_key))}"
                       + (f" with PTX {' '.join(sorted(want_ptx, key=_arch_key))}" if want_ptx else ""))
    return CheckResult(name, ok, details)


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


def check_torch_pin(exp: Expectation, info: Artifact) -> CheckResult:
    """A PyTorch extension requires the torch it was built against (recorded), no other minor version,
    and that torch's CUDA is the row's train."""
    from buildrows.build.record import RECORD_NAME, BuildRecordError, parse_record
    from buildrows.check.torchpin import pin_problem

    name = "torch-matches-build"
    fix_mode = (f"or, if this is not a PyTorch extension, set mode under [cuda.runtime.{exp.cuda.major}]"
                if exp.cuda is not None else "or, if this is not a PyTorch extension, set no runtime's mode to torch")
    if info.build_record is None:
        return CheckResult(name, False, [
            f"the wheel has no build record (.dist-info/{RECORD_NAME}), so which torch it was compiled against is unknown",
            f"fix: build it with `buildrows build`, which records the torch it compiled against; {fix_mode}"])
    try:
        record = parse_record(info.build_record, RECORD_NAME)
    except BuildRecordError as e:
        return CheckResult(name, False, [f"{e}", "fix: rebuild with `buildrows build` to rewrite the record"])
    details: list[str] = []
    if record.torch is None:
        return CheckResult(name, False, [f"the build record names no torch (row {record.row}): the build did not "
                                         f"compile against torch; {fix_mode}"])
    torch_reqs: list[Requirement] = []
    for text in info.requires_dist:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue  # reported by runtime-declared
        if canonicalize_name(req.name) == "torch" and "extra" not in str(req.marker or "") and applies(req, exp.platform):
            torch_reqs.append(req)
    if not torch_reqs:
        details.append(f"Requires-Dist has no torch requirement; the wheel was built against torch {record.torch}: "
                       f"declare torch=={_minor(record.torch)}.* (or >={record.torch},<{_next_minor(record.torch)})")
    for req in torch_reqs:
        problem = pin_problem(req.specifier, record.torch)
        if problem:
            details.append(f"Requires-Dist {str(req)!r}: {problem}; declare torch=={_minor(record.torch)}.*")
    if exp.cuda is None:  # a CPU row: the pin is all (a CUDA torch's C++ ABI is its CPU torch's)
        if details:
            return CheckResult(name, False, details)
        return CheckResult(name, True, [f"requires {', '.join(str(r) for r in torch_reqs)}: admits the recorded "
                                        f"torch {record.torch} and no other minor version"])
    want = exp.cuda.dotted
    if record.torch_cuda is None:
        details.append(f"the recorded torch {record.torch} has no CUDA (a CPU torch), but the row is CUDA {want}")
    elif Train.parse(record.torch_cuda) != exp.cuda:
        details.append(f"built against torch {record.torch} for CUDA {record.torch_cuda}, but the row is CUDA {want}: "
                       f"build against the torch of the row's train (its +{exp.cuda.cu} wheel)")
    if record.cuda is not None and Train.parse(record.cuda) != exp.cuda:
        details.append(f"compiled with CUDA {record.cuda}, but the row is CUDA {want}")
    if details:
        return CheckResult(name, False, details)
    return CheckResult(name, True, [f"requires {', '.join(str(r) for r in torch_reqs)}: admits the recorded torch "
                                    f"{record.torch} (CUDA {record.torch_cuda}) and no other minor version"])


def _minor(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


def _next_minor(version: str) -> str:
    parts = _minor(version).split(".")
    return f"{parts[0]}.{int(parts[1]) + 1}" if len(parts) == 2 and parts[1].isdigit() else version


def run_checks(exp: Expectation, info: Artifact) -> list[CheckResult]:
    results = [check_cuda_libraries(exp, info)]
    if not exp.loose:
        results.append(check_runtime_declared(exp, info))
    results += [check_rpath(exp, info), check_device_code(exp, info)]
    if exp.machine is not None:
        results.append(check_machine(exp, info))
    if exp.platform.startswith("windows"):
        results.append(check_windows_imports(exp, info))
    if not exp.loose:
        if any(r.kind == "required" for r in exp.files):
            results.append(check_required_files(exp, info))
        if any(r.kind == "no-cuda" for r in exp.files):
            results.append(check_no_cuda_link(exp, info))
        if (exp.cuda is not None and exp.mode == "torch") or exp.torch_extension:
            results.append(check_torch_pin(exp, info))
    return results


def library_json(libs: tuple[LibraryInfo, ...]) -> dict[str, dict[str, list[str]]]:
    return {lib.path: {"elf": sorted(set(lib.cubins), key=_arch_key), "ptx": sorted(set(lib.ptx), key=_arch_key)}
            for lib in libs}

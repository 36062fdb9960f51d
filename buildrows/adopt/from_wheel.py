"""What a published wheel says about how it is built and loaded, as policy text (`init --from-wheel`).

The aim is a starting policy under which `buildrows check` passes on the wheel it was read from:
the runtime mode (a PyTorch extension, a ctypes kernel library on torch's runtime, a project that
loads NVIDIA's wheels itself, a statically linked runtime), the row's list (the list most of the
project's libraries carry, PTX included), a rule for each library that carries another list or is
a bundled NVIDIA library, and an exception for each RPATH entry the check would otherwise reject.
Every mode that needs a reason gets one that says what init saw; the user is told to review it.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from buildrows.binaries.wheelread import LibraryInfo, WheelInfo
    from buildrows.policy.archs import Arch, Train

__all__ = ["WheelFacts", "infer"]

# NVIDIA's libraries as a wheel repair step bundles them (libnvjpeg.8dd2b5e6.so.12, libcudart-1a2b.so.13).
_BUNDLED_NVIDIA = re.compile(r"^lib(?:cudart|nvjpeg|cublas|cublasLt|cufft|curand|cusolver|cusparse|nvrtc|nvJitLink|"
                             r"cupti|nvToolsExt|npp\w*)[.-]")


@dataclass(frozen=True)
class ListGroup:
    """Libraries that carry one list exactly."""

    elf: frozenset[str]
    ptx: frozenset[str]
    paths: tuple[str, ...]


@dataclass
class WheelFacts:
    """What init writes beyond the project: the mode, the row's list, library rules, exceptions."""

    mode: str = "dynamic"
    reason: str = ""
    extra: str | None = None
    optional: list[str] = field(default_factory=list)
    # Why each optional glob was written (a binding module named after the library it NEEDS).
    optional_why: dict[str, str] = field(default_factory=dict)
    # NVIDIA sonames a library NEEDS that no declared package carries and the wheel does not ship:
    # (soname, the libraries, a package that carries it). Never written as optional: `check` must fail.
    unresolved: list[tuple[str, list[str], str | None]] = field(default_factory=list)
    # Dynamic mode: the wheel's NVIDIA requirements where they are not the train's default set.
    requirements: list[str] = field(default_factory=list)
    row: ListGroup | None = None
    own_lists: list[ListGroup] = field(default_factory=list)
    vendored: list[str] = field(default_factory=list)
    # Kernel files under a tests directory (numba-cuda's sm_20 jitlink.ptx): fixtures, not the project's code.
    fixtures: list[str] = field(default_factory=list)
    rpath_entries: list[tuple[str, bool]] = field(default_factory=list)  # (entry glob, climbs out)
    # One kernel library per CUDA train (libbitsandbytes_cuda118.so ... _cuda130.so): the {cu} glob,
    # and each train's list as its library carries it; empty when the wheel has no such set.
    per_train_glob: str = ""
    per_train: dict[Train, ListGroup] = field(default_factory=dict)
    # Library -> the NVIDIA sonames it names but does not NEED (loaded by dlopen), written as a
    # [[check.libraries]] dlopens rule where this buildrows reads and states them (i28load).
    dlopens: dict[str, list[str]] = field(default_factory=dict)
    # No library carries device code, and these link CUDA libraries: host-only CUDA code (a
    # [[check.libraries]] host-only rule, where this buildrows' policy schema has that key).
    host_only: list[str] = field(default_factory=list)
    # Nothing of the project's carries device code or links CUDA (a JIT-only or Python-only CUDA wheel):
    # the starting list is written, and check's cuda-libraries-present names the gap.
    no_code: bool = False
    # Dynamic mode, and the wheel declares no NVIDIA package, the runtime neither: written as it is (the
    # check then names the libcudart no declared package carries), never as the default set it lacks.
    declares_none: bool = False
    # Library -> {NEEDED soname: the non-NVIDIA requirement named after it that installs it} (provided-by).
    provided: dict[str, dict[str, str]] = field(default_factory=dict)
    summary: list[str] = field(default_factory=list)
    train_note: str = ""  # where the train came from, when not from a tag or --cuda


def infer(info: WheelInfo, wheel: Path, train: Train, platform: str) -> WheelFacts:
    """Read what `check` will judge, and describe it so that the check passes."""
    facts = WheelFacts()
    libs = list(info.libraries)
    facts.vendored = sorted(lib.path for lib in libs if lib.has_device_code and _bundled_nvidia(lib.path))
    coded = [lib for lib in libs if lib.has_device_code and lib.path not in facts.vendored]
    facts.per_train_glob, per_train = _per_train(coded, train)
    if per_train:  # the row's train's library gives the row's list; the others are held to theirs
        facts.per_train = {t: _groups([lib])[0] for t, lib in per_train.items()}
        facts.row = facts.per_train[train]
        coded = [lib for lib in coded if lib not in per_train.values()]
    groups = _groups(coded)
    if groups and facts.row is None:
        facts.row = max(groups, key=lambda g: (len(g.paths), len(g.elf)))
    facts.fixtures = _fixtures(info)
    unit = _kernel_unit(info, set(facts.fixtures))
    if unit is not None:  # kernel files (.cubin, .fatbin, .ptx) are judged together, as one unit
        if facts.row is None:
            facts.row = unit
        elif (unit.elf, unit.ptx) != (facts.row.elf, facts.row.ptx):
            groups.append(unit)
    facts.own_lists = [g for g in groups if g is not facts.row]
    if facts.row is None and not facts.vendored:
        facts.host_only = _host_code(info, wheel)
    if facts.row is None and not facts.host_only and not facts.vendored:
        facts.no_code = True
    _mode(facts, info, wheel, train, platform)
    facts.rpath_entries = _rpath_entries(facts, info, train, platform)
    # Libraries another rule covers (the first matching rule wins, so a dlopens rule would shadow it);
    # host-only ones name their bundled copies' sonames, which check reports as a warning.
    ruled = {*facts.vendored, *facts.host_only, *(p for g in facts.own_lists for p in g.paths),
             *(lib.path for lib in per_train.values())}
    facts.dlopens = _dlopened(info, wheel, ruled, train)
    facts.provided = _provided(info)
    return facts


def _provided(info: WheelInfo) -> dict[str, dict[str, str]]:
    """Library -> {soname: distribution} for what it NEEDS that the wheel does not ship and a non-NVIDIA
    requirement named after it installs (RAPIDS' librmm.so from librmm-cu13), where the policy can say so."""
    import posixpath as pp

    from buildrows.policy.model import LibraryRule
    from buildrows.policy.provided import distribution_for

    if "provided_by" not in getattr(LibraryRule, "__dataclass_fields__", {}):
        return {}
    shipped = {pp.basename(m) for m in info.members}
    out: dict[str, dict[str, str]] = {}
    for lib in info.libraries:
        for name in lib.needed:
            dist = distribution_for(name, info.requires_dist) if name not in shipped else None
            if dist is not None:
                out.setdefault(lib.path, {})[name] = dist
    return out


def _dlopened(info: WheelInfo, wheel: Path, ruled: set[str], train: Train) -> dict[str, list[str]]:
    """Library -> the NVIDIA sonames it names but neither NEEDS nor ships (it dlopens them by name),
    for the libraries no other rule covers; empty where this buildrows cannot read or state them.
    Read as `check` reads them for its dlopen judge: streamed, one library at a time."""
    import importlib
    import posixpath as pp

    from buildrows.check.nvidia import nvidia_soname
    from buildrows.policy.model import LibraryRule

    reader = getattr(importlib.import_module("buildrows.binaries.symbols"), "wheel_library_symbols", None)
    if reader is None or "dlopens" not in getattr(LibraryRule, "__dataclass_fields__", {}):
        return {}
    from buildrows.check.sonames import nvidia_soname as toolkit_soname

    # What the wheel ships: names as written, and the plain soname of each private copy
    # (libnvrtc-d7c32a86.so.12.0.140 is libnvrtc.so.12), which its loader finds beside it.
    shipped = {pp.basename(m) for m in info.members}
    shipped |= {ns.plain for m in shipped if (ns := toolkit_soname(m)) is not None}
    # An NVIDIA library itself (a bundled copy, an NVIDIA wheel's own) names its own and its siblings' sonames.
    elf = [lib for lib in info.libraries if lib.format == "elf" and lib.path not in ruled
           and toolkit_soname(pp.basename(lib.path)) is None]
    out: dict[str, list[str]] = {}
    for path, syms in reader(wheel, [lib.path for lib in elf]).items():
        lib = next(x for x in elf if x.path == path)
        # Only the row's CUDA major's: a library that tries libcudart.so.13, then .so.12, loads the row's one.
        named = sorted({n for n in getattr(syms, "sonames_named", ()) if nvidia_soname(n) and n not in lib.needed
                        and n not in shipped and n != getattr(syms, "soname", None) and _of_major(n, train.major)})
        if named:
            out[path] = named
    return out


def _of_major(soname: str, major: int) -> bool:
    """Whether an NVIDIA soname is the one CUDA `major` ships (or one buildrows' table does not place)."""
    from buildrows.check.sonames import nvidia_soname as toolkit_soname

    s = toolkit_soname(soname)
    return s is None or major not in s.majors or s.majors[major] == s.major


# A library whose name carries a CUDA train: lib_cuda128.so, ops_cu130.so (the digits are the train).
_TRAIN_IN_NAME = re.compile(r"^(?P<head>.*cu(?:da)?)(?P<digits>\d{3})(?P<tail>[^/\d][^/]*)$")


def _per_train(libs: list[LibraryInfo], train: Train) -> tuple[str, dict[Train, LibraryInfo]]:
    """The largest set of libraries that differ only in a train in their name, one per known train,
    the row's train among them: a wheel that ships one kernel library per CUDA train."""
    from buildrows.policy.trains import Train as TrainType
    from buildrows.policy.trains import beyond_data, train_table

    known = train_table()
    sets: dict[str, dict[TrainType, LibraryInfo]] = {}
    for lib in libs:
        m = _TRAIN_IN_NAME.match(lib.path)
        if not m:
            continue
        try:
            t = TrainType.parse("cu" + m.group("digits"))
        except ValueError:
            continue
        if t in known or beyond_data(t):
            sets.setdefault(m.group("head") + "{cu}" + m.group("tail"), {})[t] = lib
    best = max(((g, by) for g, by in sets.items() if len(by) >= 2 and train in by), key=lambda x: len(x[1]), default=None)
    return best if best is not None else ("", {})


_TESTS_DIR = re.compile(r"(?:^|/)tests?/")


def _fixtures(info: WheelInfo) -> list[str]:
    """Globs for the kernel files under a tests directory: test fixtures (numba-cuda ships an sm_20 PTX
    to test its linker), which no GPU runs as the project's code: a vendored rule, never the row's list."""
    paths = [k.path for k in getattr(info, "kernels", ()) if (k.cubins or k.ptx) and _TESTS_DIR.search(k.path)]
    if not paths:
        return []
    common = posixpath.commonpath(paths) if len(paths) > 1 else paths[0]
    return [common + "/*"] if len(paths) > 1 else [common]


def _kernel_unit(info: WheelInfo, fixtures: frozenset[str] | set[str] = frozenset()) -> ListGroup | None:
    """The wheel's kernel files (members that are no shared library but carry device code, where
    this buildrows reads them), test fixtures aside, as one group: the union of their code, under
    their common directory."""
    import fnmatch

    kernels = [k for k in getattr(info, "kernels", ()) if (k.cubins or k.ptx)
               and not any(fnmatch.fnmatchcase(k.path, g) for g in fixtures)]
    if not kernels:
        return None
    common = posixpath.commonpath([k.path for k in kernels]) if len(kernels) > 1 else kernels[0].path
    glob = common if len(kernels) == 1 else (common + "/*" if common else "*")
    return ListGroup(frozenset(c for k in kernels for c in k.cubins), frozenset(p for k in kernels for p in k.ptx),
                     (glob,))


def host_only_supported() -> bool:
    """Whether this buildrows' policy has [[check.libraries]] host-only (a rule for CUDA host code)."""
    from buildrows.policy.model import LibraryRule

    return "host_only" in getattr(LibraryRule, "__dataclass_fields__", {})


def _host_code(info: WheelInfo, wheel: Path) -> list[str]:
    """Libraries without device code that link a CUDA toolkit library (a private copy included)
    or the driver, carry the runtime linked in statically or dlopen it, as `check` reads them: CUDA
    host code, such as a library that compiles its kernels at run time."""
    from buildrows.binaries.wheelsymbols import wheel_library_symbols
    from buildrows.check.hostcode import host_cuda_evidence
    from buildrows.check.sonames import nvidia_soname

    elf = [lib for lib in info.libraries if lib.format == "elf" and not lib.has_device_code]
    linking = {lib.path for lib in elf if any(nvidia_soname(n) is not None or n == "libcuda.so.1" for n in lib.needed)}
    rest = [lib.path for lib in elf if lib.path not in linking and nvidia_soname(posixpath.basename(lib.path)) is None]
    if rest:
        for path, syms in wheel_library_symbols(wheel, rest, markers=rest).items():
            if host_cuda_evidence((), syms, dlopen=True) is not None:
                linking.add(path)
    return sorted(linking)


def _bundled_nvidia(path: str) -> bool:
    parts = path.split("/")
    return len(parts) >= 2 and parts[-2].endswith(".libs") and _BUNDLED_NVIDIA.match(parts[-1]) is not None


def _groups(libs: list[LibraryInfo]) -> list[ListGroup]:
    by: dict[tuple[frozenset[str], frozenset[str]], list[str]] = {}
    for lib in libs:
        by.setdefault((frozenset(lib.cubins), frozenset(lib.ptx)), []).append(lib.path)
    return [ListGroup(elf, ptx, tuple(paths)) for (elf, ptx), paths in by.items()]


def _mode(facts: WheelFacts, info: WheelInfo, wheel: Path, train: Train, platform: str) -> None:
    from buildrows.check.torchabi import _LIBTORCH, torch_abi

    elf = [lib for lib in info.libraries if lib.format == "elf"]
    requires_torch = any(re.match(r"^\s*torch\b(?![-_.\w])", r) and "extra" not in r for r in info.requires_dist)
    needs_libtorch = [lib.path for lib in elf if any(_LIBTORCH.match(n) for n in lib.needed)]
    kinds: dict[str, str] = {}
    if requires_torch or needs_libtorch:
        # Symbols are read only where `check` reads them (the torch modes): a wheel that neither
        # requires torch nor links it cannot use torch's ABI, and an NVIDIA library wheel's
        # 500 MB libraries are then never inflated whole (init stays within check's memory).
        from buildrows.binaries.wheelsymbols import wheel_imported_symbols

        kinds = {p: torch_abi(s).kind for p, s in wheel_imported_symbols(wheel, [lib.path for lib in elf]).items()}
    links_torch = [lib.path for lib in elf if lib.path in needs_libtorch or kinds.get(lib.path, "none") != "none"]
    if links_torch:
        facts.mode = "torch"
        stable = all(kinds.get(p) != "c++" for p in links_torch)
        facts.summary.append(f"mode torch: {len(links_torch)} libraries link libtorch ("
                             + ("only torch's stable C ABI: torch>=X suffices" if stable else
                                "libtorch's C++ API: pinned to the torch minor; check it with --torch VERSION") + ")")
        return
    links_cudart = [lib for lib in elf if any(n.startswith("libcudart.so") for n in lib.needed)]
    if requires_torch:
        facts.mode = "torch-runtime"
        facts.reason = ("init saw: the wheel requires torch, and no library links libtorch; review: say how the "
                        "libraries are loaded (ctypes after `import torch`?)")
        facts.summary.append("mode torch-runtime: requires torch, no library links libtorch")
        return
    if links_cudart and _dynamic(facts, info, links_cudart, train, platform):
        return
    if _preload(facts, info, elf, train, platform):
        return
    if not links_cudart:
        facts.mode = "none" if facts.no_code else "static"
        facts.requirements = _nvidia_requirements(info, platform)  # outside buildrows' table too (a CUTLASS DSL)
        facts.summary.append("mode none: no library carries device code or links the CUDA runtime" if facts.no_code
                             else "mode static: no library links libcudart dynamically")
        if facts.requirements:
            facts.summary[-1] += f"; the wheel's NVIDIA requirements written as the train's set ({len(facts.requirements)})"
        return
    facts.summary.append("mode dynamic: libraries link libcudart and declare no NVIDIA package beside the runtime")
    if not _nvidia_requirements(info, platform):  # not even the runtime (NVIDIA's CUDA 13 library wheels)
        facts.declares_none = True


def _nvidia_requirements(info: WheelInfo, platform: str) -> list[str]:
    """The wheel's unconditional NVIDIA requirements that apply on `platform` (what dynamic mode compares)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    from buildrows.policy.requirements import applies

    out = []
    for text in info.requires_dist:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name).startswith("nvidia-") and "extra" not in str(req.marker or "") \
                and applies(req, platform):
            out.append(text)
    return out


def _dynamic(facts: WheelFacts, info: WheelInfo, linking: list[LibraryInfo], train: Train, platform: str) -> bool:
    """Dynamic mode, when every library that links cudart reaches the train's runtime directory
    through RPATH (the bundled example's `$ORIGIN/../nvidia/cu13/lib`): the wheel loads the runtime
    wheel it declares by itself. The requirements are written where they are not the default set."""
    from packaging.requirements import Requirement

    from buildrows.check.runtime import _reaches, _req_key
    from buildrows.policy.build_rows import default_runtimes

    rt = default_runtimes().get(train.major)
    if rt is None or not all(_reaches(lib, rt.library_dir.strip("/")) for lib in linking):
        return False
    declared = _nvidia_requirements(info, platform)
    if not declared:
        return False  # the runtime comes with an extra (a plugin), or not at all: preload or the default
    default = list(rt.requirements)
    if {_req_key(Requirement(r)) for r in declared} != {_req_key(Requirement(r)) for r in default}:
        facts.requirements = declared
    facts.mode = "dynamic"
    facts.summary.append(f"mode dynamic: {len(linking)} libraries link libcudart and reach site-packages/"
                         f"{rt.library_dir} through RPATH"
                         + (f"; the wheel's NVIDIA requirements written as the train's set ({len(declared)})"
                            if facts.requirements else ""))
    return True


def _preload(facts: WheelFacts, info: WheelInfo, elf: list[LibraryInfo], train: Train, platform: str) -> bool:
    """Preload mode, when the wheel declares NVIDIA library packages (unconditionally or under one
    extra) that carry what its libraries NEED. Only the packages of buildrows' table count (a
    Sphinx theme named nvidia-* is no CUDA library); the extra chosen is the one whose packages of the
    train's major carry most of what is NEEDED."""
    from buildrows.check.nvidia import carriers, declared_nvidia, nvidia_soname, packages
    from buildrows.check.runtime import _package_major

    known = packages()
    needed: dict[str, list[str]] = {}
    for lib in elf:
        for n in lib.needed:
            if nvidia_soname(n):
                needed.setdefault(n, []).append(lib.path)
    extras = [None, *sorted({m.group(1) for r in info.requires_dist
                             if (m := re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", r))})]
    best: tuple[tuple[int, int], str | None, list[str]] | None = None
    for extra in extras:
        declared = [p for p in declared_nvidia(info.requires_dist, platform, extra, train.major)
                    if p in known and _package_major(p) in (None, train.major)]
        if not declared:
            continue
        carried = {so for p in declared for so in known[p].sonames}
        score = (sum(1 for n in needed if n in carried), len(declared))
        if best is None or score > best[0]:
            best = (score, extra, declared)
    if best is None:
        return False
    _, extra, declared = best
    carried = {so for p in declared for so in known[p].sonames}
    shipped = {m.rsplit("/", 1)[-1] for m in info.members}
    for soname, libs in sorted(needed.items()):
        if soname in carried or soname in shipped:
            continue  # a declared package brings it, or the wheel ships it itself
        glob = re.sub(r"\.so\..*$", ".so.*", soname)
        if all(_binding_of(lib, soname) for lib in libs):
            # Only a binding module named after the library NEEDS it (cupy's nccl.cpython-*.so): such
            # a module is imported when the library is present, so it is optional, and the comment says why.
            facts.optional.append(glob)
            facts.optional_why[glob] = ", ".join(libs[:2]) + (" and more" if len(libs) > 2 else "")
            continue
        offers = [p for p in carriers(soname) if _package_major(p) in (None, train.major)]
        facts.unresolved.append((soname, libs, offers[0] if offers else None))
    facts.optional = sorted(set(facts.optional))
    facts.mode, facts.extra = "preload", extra
    where = f"under extra {extra!r}" if extra else "unconditionally"
    facts.reason = (f"init saw: NVIDIA packages declared {where} ({', '.join(sorted(declared))}) and "
                    "libraries that do not reach them through RPATH; review: say how the project loads them")
    facts.summary.append(f"mode preload: NVIDIA packages declared {where}"
                         + (f"; loaded only when present: {', '.join(facts.optional)}" if facts.optional else ""))
    for soname, needing, offer in facts.unresolved:
        facts.summary.append(f"NOT HIDDEN: {needing[0]} NEEDS {soname}, which no declared NVIDIA package carries"
                             + (f" (declare {offer})" if offer else "") + "; check fails until the wheel declares it")
    return True


def _binding_of(library: str, soname: str) -> bool:
    """Whether `library` is a binding module named after the NVIDIA library `soname` (cupy's
    cutensor.cpython-312-*.so for libcutensor.so.2 and libcutensorMg.so.2; nccl.cpython-*.so for libnccl)."""
    module = library.rsplit("/", 1)[-1].split(".")[0].lstrip("_").lower()
    stem = soname.split(".so")[0].removeprefix("lib").lower()
    return module == stem or (len(module) >= 5 and stem.startswith(module))


def _rpath_entries(facts: WheelFacts, info: WheelInfo, train: Train, platform: str) -> list[tuple[str, bool]]:
    """The RPATH entries the check would reject under the inferred mode, generalised where they
    differ in one path component (`$ORIGIN/../../nvidia/*/lib`)."""
    from buildrows.check.nvidia import declared_nvidia, packages
    from buildrows.check.runtime import _install_dir, _origin_entry, _wheel_dirs
    from buildrows.policy.build_rows import default_runtimes

    dirs = _wheel_dirs(info)
    target = default_runtimes()[train.major].library_dir if facts.mode == "dynamic" and train.major in default_runtimes() else None
    preload: set[str] = set()
    if facts.mode == "preload":
        known = packages()
        preload = {known[p].dir for p in declared_nvidia(info.requires_dist, platform, facts.extra, train.major) if p in known}
    absolute: set[str] = set()
    climbing: set[str] = set()
    elsewhere: set[str] = set()
    for lib in info.libraries:
        origin = _install_dir(lib.path)
        for entry in lib.rpaths:
            if not _origin_entry(entry):
                absolute.add(entry)
                continue
            if origin is None:
                continue
            rel = entry.replace("${ORIGIN}", "$ORIGIN")[len("$ORIGIN"):].lstrip("/")
            resolved = posixpath.normpath(posixpath.join(origin, rel)) if rel else origin
            resolved = "" if resolved == "." else resolved
            if resolved.startswith(".."):
                climbing.add(entry)
            elif not (resolved == target or resolved in dirs or resolved in preload):
                elsewhere.add(entry)
    return ([(g, False) for g in _absolute_globs(sorted(absolute)) + _generalise(sorted(elsewhere))]
            + [(g, True) for g in _generalise(sorted(climbing))])


def _absolute_globs(entries: list[str]) -> list[str]:
    """Absolute entries (a builder's paths: /home/runner/work/p/p/build/lib, /usr/local/cuda/lib64)
    by their first two directories: several under one become one glob of their common directory
    (`/home/runner/work/p/p/build/*`); a lone one stays as written."""
    by: dict[tuple[str, ...], list[str]] = {}
    for e in entries:
        by.setdefault(tuple(e.strip("/").split("/")[:2]), []).append(e)
    out: list[str] = []
    for group in by.values():
        if len(group) == 1:
            out += group
            continue
        common = posixpath.commonpath(group)
        out.append(common.rstrip("/") + "/*" if common not in ("", "/") else group[0])
        if common in ("", "/"):
            out += group[1:]
    return sorted(out)


def _generalise(entries: list[str]) -> list[str]:
    """Entries that differ in exactly one component become one glob; the rest stay as written."""
    by_len: dict[int, list[list[str]]] = {}
    for e in entries:
        by_len.setdefault(len(e.split("/")), []).append(e.split("/"))
    out: list[str] = []
    for group in by_len.values():
        if len(group) > 1:
            differ = [i for i in range(len(group[0])) if len({parts[i] for parts in group}) > 1]
            if len(differ) == 1:
                parts = list(group[0])
                parts[differ[0]] = "*"
                out.append("/".join(parts))
                continue
        out += ["/".join(parts) for parts in group]
    return sorted(out)


def _q(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def ptx_only_token(arch: Arch) -> str:
    """PTX with no cubin of its architecture, as a list entry: CMake's `-virtual` spelling (`12.0-virtual`),
    the spelling `parse_arch_list` reads. Kept in one place so that list writers agree with the parser."""
    return f"{arch.dotted}-virtual"


def list_text(group: ListGroup) -> tuple[str, bool]:
    """A group's list as the policy writes it, and whether it needs ptx = "none". PTX for an
    architecture the group has a cubin of is `+PTX` (or left to the default `newest`); PTX with no
    cubin beside it is a PTX-only entry; a group without PTX says `ptx = "none"`."""
    from buildrows.policy.archs import Arch
    from buildrows.policy.edit import arch_text, archs_from_names

    elf = set(group.elf)
    ptx = set(group.ptx)
    cubin_archs = {Arch.parse(n) for n in elf}
    only = sorted({Arch.parse(n) for n in ptx} - cubin_archs, key=lambda a: (a.number, a.suffix))
    if not only:
        return arch_text(archs_from_names(elf, ptx))
    # With a PTX-only entry, every PTX is marked in the list (a mark anywhere turns the ptx key's default off).
    entries = [(a, a.dotted + ("+PTX" if a.sm in ptx else "")) for a in cubin_archs]
    entries += [(a, ptx_only_token(a)) for a in only]
    return " ".join(t for _, t in sorted(entries, key=lambda e: (e[0].number, e[0].suffix, e[1]))), False


def runtime_toml(facts: WheelFacts, train: Train, prefix: str = "") -> list[str]:
    """[cuda.runtime.N] for a mode other than the default: one per CUDA major of the trains."""
    if facts.mode == "dynamic" and not facts.requirements and not facts.declares_none:
        return []
    lines: list[str] = []
    for major in sorted({train.major, *(t.major for t in facts.per_train)}):
        lines += ["", f"[{prefix}cuda.runtime.{major}]", f"mode = {_q(facts.mode)}"]
        if facts.requirements and major == train.major:
            lines.append("requirements = [" + ", ".join(_q(r) for r in facts.requirements) + "]  # as the wheel "
                         "declares them")
        elif facts.declares_none and major == train.major:
            lines.append("requirements = []  # init saw: the wheel declares no NVIDIA package, the runtime its "
                         "libraries link neither; `check` fails libraries-load naming it: declare nvidia-cuda-runtime")
        if facts.reason:
            lines.append(f"reason = {_q(facts.reason)}")
        if facts.extra:
            lines.append(f"extra = {_q(facts.extra)}")
        for glob in facts.optional:
            lines.append(f"# init saw: {glob} is NEEDED only by {facts.optional_why.get(glob, '?')}, a module named "
                         "after it (imported when present); review: say so, or declare its package")
        if facts.optional:
            lines.append("optional = [" + ", ".join(_q(o) for o in facts.optional) + "]")
        for soname, libs, offer in facts.unresolved:
            lines.append(f"# init saw: {', '.join(libs[:2])}{' and more' if len(libs) > 2 else ''} NEEDS {soname}, "
                         "which no NVIDIA package the wheel declares carries, so `check` fails: "
                         + (f"declare {offer}" if offer else "declare the package that carries it")
                         + ", or, if that library is loaded only when present, add it to optional with why")
    return lines


def trains_of(facts: WheelFacts | None, train: Train) -> list[Train]:
    """The trains the policy publishes: the row's, and each per-train library's."""
    return sorted({train, *(facts.per_train if facts else ())}, key=lambda t: (t.major, t.minor))


def train_lists(facts: WheelFacts, train: Train) -> list[tuple[list[Train], str, bool]]:
    """The other trains' lists of a per-train wheel, as (trains, list text, ptx none), trains sharing one list together."""
    by: dict[tuple[str, bool], list[Train]] = {}
    for t, group in facts.per_train.items():
        if t != train:
            by.setdefault(list_text(group), []).append(t)
    return [(sorted(ts, key=lambda t: (t.major, t.minor)), text, none) for (text, none), ts in by.items()]


def check_toml(facts: WheelFacts, prefix: str = "") -> list[str]:
    """[[check.rpath-exceptions]] and [[check.libraries]] for what init found."""
    lines: list[str] = []
    for entry, climbs in facts.rpath_entries:
        lines += ["", f"[[{prefix}check.rpath-exceptions]]", f"entry = {_q(entry)}"]
        if climbs:
            lines.append("climbs-out = true")
        why = ("init found the builder's absolute paths in the wheel; review: they point nowhere on a user's machine, "
               "drop them from the build" if entry.startswith("/") and entry.endswith("/*") else
               "init found it in the wheel; review: say why it is kept, or drop it from the build")
        lines.append(f"reason = {_q(why)}")
    if facts.per_train and facts.per_train_glob:
        lines += ["", f"[[{prefix}check.libraries]]", f"files = [{_q(facts.per_train_glob)}]", "per-train = true",
                  f"reason = {_q('init saw one library per CUDA train; review: say how the one that loads is chosen')}"]
    for path, sonames in sorted(facts.dlopens.items()):
        lines += ["", f"[[{prefix}check.libraries]]", f"files = [{_q(path)}]",
                  "dlopens = [" + ", ".join(_q(n) for n in sonames) + "]",
                  f"reason = {_q('init saw these NVIDIA sonames named in the library but not NEEDED (loaded by dlopen?); review: say when it loads them, or drop the ones it never loads')}"]
    if facts.host_only:
        lines += ["", f"[[{prefix}check.libraries]]", "files = [" + ", ".join(_q(v) for v in facts.host_only) + "]",
                  "host-only = true", f"reason = {_q('init saw CUDA host code and no device code in the wheel; review: say how its kernels come (compiled at run time? another wheel?)')}"]
    if facts.fixtures:
        lines += ["", f"[[{prefix}check.libraries]]", "files = [" + ", ".join(_q(v) for v in facts.fixtures) + "]",
                  "vendored = true", f"reason = {_q('init saw device code only in test fixtures (a tests directory): not the code a GPU runs; review: say what they test')}"]
    if facts.vendored:
        lines += ["", f"[[{prefix}check.libraries]]", "files = [" + ", ".join(_q(v) for v in facts.vendored) + "]",
                  "vendored = true", f"reason = {_q('init saw a bundled NVIDIA library (its architectures are NVIDIA choice)')}"]
    for group in sorted(facts.own_lists, key=lambda g: g.paths):
        text, ptx_none = list_text(group)
        lines += ["", f"[[{prefix}check.libraries]]", "files = [" + ", ".join(_q(p) for p in group.paths) + "]",
                  f"archs = {_q(text)}"]
        if ptx_none:
            lines.append('ptx = "none"')
        lines.append(f"reason = {_q('init saw these libraries carry another list than the rest; review: say why')}")
    for path, provided in sorted(facts.provided.items()):  # last: a library's first matching rule judges its code
        lines += ["", f"[[{prefix}check.libraries]]", f"files = [{_q(path)}]",
                  "provided-by = { " + ", ".join(f"{_q(so)} = {_q(d)}" for so, d in sorted(provided.items())) + " }",
                  f"reason = {_q('init saw the wheel require these by the names of libraries it NEEDS; review: say how their packages load them before it (an import in __init__.py?)')}"]
    return lines

"""A wheel's runtime mode and requirements, and the RPATH entries the check would reject, as policy text (`init --from-wheel`).

The runtime mode: a PyTorch extension, a ctypes kernel library on torch's runtime, a project that
loads NVIDIA's wheels itself, a statically linked runtime. Split from `buildrows.adopt.from_wheel`.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import TYPE_CHECKING

from buildrows.adopt.wheel_lists import WheelFacts, _q

if TYPE_CHECKING:
    from buildrows.binaries.wheelread import LibraryInfo, WheelInfo
    from buildrows.policy.archs import Train


def _mode(facts: WheelFacts, info: WheelInfo, wheel: Path, train: Train, platform: str) -> None:
    from buildrows.check.torchabi import _LIBTORCH, torch_abi

    elf = [lib for lib in info.libraries if lib.format == "elf"]
    requires_torch = any(re.match(r"^\s*torch\b(?![-_.\w])", r) and "extra" not in r for r in info.requires_dist)
    # libtorch the wheel ships itself is its own code, not torch's ABI: PyTorch's own wheel (its libtorch_python.so
    # NEEDS its libtorch_cpu.so) is no extension of torch, and its libraries load NVIDIA's wheels themselves.
    own = {lib.path.rsplit("/", 1)[-1] for lib in elf}
    needs_libtorch = [lib.path for lib in elf if any(_LIBTORCH.match(n) and n not in own for n in lib.needed)]
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


def _jit(facts: WheelFacts, info: WheelInfo, train: Train, platform: str) -> None:
    """A wheel with no device code of its own that declares run-time compilers of the train's major (any
    extra): its kernels are compiled at run time, stated as jit with the compilers' sonames."""
    from buildrows.check.nvidia import declared_nvidia, packages
    from buildrows.check.runtime import _package_major
    from buildrows.policy.jit import JIT_SONAME

    known = packages()
    extras = [None, *sorted({m.group(1) for r in info.requires_dist
                             if (m := re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", r))})]
    found: dict[str, str] = {}
    for extra in extras:
        for p in declared_nvidia(info.requires_dist, platform, extra, train.major):
            if p in known and _package_major(p) in (None, train.major):
                for so in known[p].sonames:
                    if JIT_SONAME.match(so):
                        found.setdefault(so, p)
    if not found:
        return
    facts.jit = sorted(found, key=str.lower)
    facts.jit_packages = sorted(set(found.values()))
    where = f" under extra {facts.extra!r}" if facts.extra else ""
    facts.reason = (f"init saw: no device code of its own, and run-time compilers declared{where} "
                    f"({', '.join(facts.jit_packages)}): its kernels are compiled at run time; review: say how it "
                    "compiles them" + (" and loads the NVIDIA packages" if facts.mode == "preload" else ""))
    facts.summary.append(f"jit: no device code of its own; kernels compiled at run time by {', '.join(facts.jit)}")


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


def runtime_toml(facts: WheelFacts, train: Train, prefix: str = "") -> list[str]:
    """[cuda.runtime.N] for a mode other than the default: one per CUDA major of the trains."""
    if facts.mode == "dynamic" and not facts.requirements and not facts.declares_none and not facts.jit:
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
        if facts.jit and major == train.major:
            lines.append("jit = [" + ", ".join(_q(j) for j in facts.jit) + "]  # init saw: no device code of its own "
                         f"(its kernels compiled at run time); the wheel declares {', '.join(facts.jit_packages)}")
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

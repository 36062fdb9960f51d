"""A wheel's per-library rules as policy text (`init --from-wheel`): host code, dlopens, vendored, provided-by.

A rule for each library that carries another list, is a bundled NVIDIA library, is host code only,
dlopens NVIDIA sonames or NEEDS a library a requirement provides; an exception for each RPATH
entry the check would otherwise reject. Split from `buildrows.adopt.from_wheel`.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import TYPE_CHECKING

from buildrows.adopt.wheel_lists import WheelFacts, _q, list_text

if TYPE_CHECKING:
    from buildrows.binaries.wheelread import WheelInfo
    from buildrows.policy.archs import Train

# NVIDIA's libraries as a wheel repair step bundles them (libnvjpeg.8dd2b5e6.so.12, libcudart-1a2b.so.13).
_BUNDLED_NVIDIA = re.compile(r"^lib(?:cudart|nvjpeg|cublas|cublasLt|cufft|curand|cusolver|cusparse|nvrtc|nvJitLink|"
                             r"cupti|nvToolsExt|npp\w*)[.-]")


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
    import posixpath as pp

    from buildrows.binaries.wheelsymbols import wheel_library_symbols as reader
    from buildrows.check.nvidia import nvidia_soname
    from buildrows.policy.model import LibraryRule

    if "dlopens" not in getattr(LibraryRule, "__dataclass_fields__", {}):
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

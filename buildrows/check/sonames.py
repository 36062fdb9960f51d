"""NVIDIA sonames held to the row's train (SPEC §8, any published wheel).

A library that needs `libcudart.so.12` does not load in a CUDA 13 environment, whatever its device
code: the runtime's soname major, and that of every NVIDIA library whose soname carries one
(cuBLAS, cuFFT, cuSOLVER, cuSPARSE, cuRAND, NVRTC, nvJitLink, NPP, nvJPEG, ...; the table is
buildrows/data/cuda_sonames.toml), must be the one the row's CUDA major ships. Both what the
libraries NEED and what the wheel ships are judged, including private copies that auditwheel
(`libcudart-1a2b3c4d.so.13`) or torch's relocation (`libcudart.1a2b3c4d.so.12`) renamed, which are
reported by name.
"""

from __future__ import annotations

import posixpath
import re
import sys
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Final

from buildrows.resources import data_file

if TYPE_CHECKING:
    from buildrows.check.judging import Artifact, CheckResult, Expectation

__all__ = ["NvidiaSoname", "check_soname_majors", "nvidia_dll", "nvidia_soname"]

# lib<name>[-<hash>|.<hash>|.alt].so.<major>[.<minor>...]: auditwheel appends -<8 hex>, torch's
# relocation .<8 hex>; NVIDIA's own alternates are `.alt` (libnvrtc.alt.so.13).
_SONAME: Final = re.compile(r"^(?P<base>lib[A-Za-z][A-Za-z0-9_]*(?:-builtins)?)"
                            r"(?:(?P<sep>[-.])(?P<tag>[0-9a-f]{8}|alt))?\.so\.(?P<major>\d+)(?:\.\d+)*$")
# Windows: <name>64_<major>.dll (cudart64_13.dll, cufft64_12.dll), <name>64_<major><minor>_0.dll
# (nvrtc64_130_0.dll), nvJitLink_<major><minor>_0.dll; CUDA 11's runtime is cudart64_110.dll.
_DLL: Final = re.compile(r"^(?P<base>[A-Za-z][A-Za-z]*(?:-builtins)?)(?P<bits>64)?_(?P<ver>\d{2,3})(?P<rest>_\d+)?\.dll$",
                         re.IGNORECASE)


@dataclass(frozen=True)
class _Library:
    name: str
    majors: dict[int, int]


@dataclass(frozen=True)
class NvidiaSoname:
    """One NVIDIA soname as a binary names it or the wheel ships it."""

    text: str  # as written: libcudart.e8e8b82a.so.12
    base: str  # libcudart (libnppc for NPP's parts)
    library: str  # how messages call it: "the CUDA runtime"
    major: int
    majors: dict[int, int]  # CUDA major -> the soname major it ships
    private: bool  # renamed by auditwheel or torch's relocation (a hash in the name)
    dll: str | None = None  # a Windows DLL: its name with `{}` where the major goes (cudart64_{}.dll)

    def expected(self, cuda_major: int) -> int | None:
        return self.majors.get(cuda_major)

    def spelled(self, major: int) -> str:
        """The name of this library at another major: libcudart.so.13, cudart64_13.dll."""
        if self.dll and self.base == "libcudart":  # CUDA 11's runtime alone carries its minor
            return self.dll.format("110" if major == 11 else major)
        return self.dll.format(major) if self.dll else f"{self.base}.so.{major}"

    @property
    def plain(self) -> str:
        """The soname without the private copy's hash: libcudart.so.12."""
        return self.spelled(self.major)


@cache
def _table() -> tuple[dict[str, _Library], dict[str, _Library]]:
    """(exact base names, prefixes) from buildrows/data/cuda_sonames.toml."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib

    doc = tomllib.loads(data_file("cuda_sonames.toml").read_text(encoding="utf-8"))
    exact: dict[str, _Library] = {}
    prefixes: dict[str, _Library] = {}
    for base, entry in doc["libraries"].items():
        lib = _Library(entry["name"], {int(k): int(v) for k, v in entry["majors"].items()})
        (prefixes if entry.get("prefix") else exact)[base] = lib
    return exact, prefixes


def nvidia_soname(name: str) -> NvidiaSoname | None:
    """The NVIDIA library a file or NEEDED name is, with its soname major; None for anything else
    (libcudnn, libc, a project's own library, an unversioned libcudart.so)."""
    m = _SONAME.match(posixpath.basename(name))
    if not m:
        return None
    base = m.group("base")
    exact, prefixes = _table()
    lib = exact.get(base) or next((v for k, v in prefixes.items() if base.startswith(k)), None)
    if lib is None:
        return None
    private = m.group("tag") is not None and m.group("tag") != "alt"
    return NvidiaSoname(name, base, lib.name, int(m.group("major")), lib.majors, private)


def nvidia_dll(name: str) -> NvidiaSoname | None:
    """The NVIDIA library a Windows DLL name is (cudart64_12.dll, nvrtc64_130_0.dll), with its major."""
    m = _DLL.match(posixpath.basename(name))
    if not m:
        return None
    base = m.group("base")
    if base.lower() == "nvvm":  # nvvm64_40_0.dll: NVVM's own version (4.0), not a CUDA major
        return None
    exact, prefixes = _table()
    key = next((k for k in exact if k.lower() == "lib" + base.lower()), None)
    lib = exact[key] if key else next((v for k, v in prefixes.items() if ("lib" + base.lower()).startswith(k)), None)
    if lib is None:
        return None
    ver = m.group("ver")
    major = int(ver[:-1]) if len(ver) == 3 else int(ver)  # 130 -> 13, 110 -> 11, 12 -> 12
    # A three-digit version is major and minor (nvrtc64_128_0.dll): another train's is <major>0.
    minor = "0" if len(ver) == 3 and base.lower() != "cudart" else ""
    form = f"{base}{m.group('bits') or ''}_{{}}{minor}{m.group('rest') or ''}.dll"
    return NvidiaSoname(name, key or "lib" + base, lib.name, major, lib.majors, False, dll=form)


def _problem(s: NvidiaSoname, cuda_major: int, train: str, shipped: bool) -> str | None:
    want = s.expected(cuda_major)
    if want == s.major:
        return None
    made = [str(c) for c, v in sorted(s.majors.items()) if v == s.major]
    of = f"{s.library} of CUDA {'/'.join(made)}" if made else f"{s.library} of no CUDA buildrows knows"
    if shipped:
        what = f"is {of} ({'a private copy of ' if s.private else ''}{s.plain})"
    else:
        what = f"links {s.text} ({of}{', a private copy of ' + s.plain if s.private else ''})"
    if want is None:
        return (f"{what}, but the row is CUDA {train}, which has no {s.library}; fix: drop it, or check the "
                f"wheel against {'a CUDA ' + made[-1] + '.x row' if made else 'a row of the train it was built with'}")
    if shipped or s.private:  # the wheel carries the other train's library: it loads, as that train's code
        return (f"{what}, but the row is CUDA {train} ({s.spelled(want)}): the wheel carries another train's "
                f"{s.library}, so its CUDA code runs as CUDA {'/'.join(made) or '?'}'s, not the row's; "
                f"fix: bundle the CUDA {train} one (build with the CUDA {train} toolkit), or check the wheel "
                f"against {'a CUDA ' + made[-1] + '.x row' if made else 'a row of the train it was built with'}")
    fix = (f"fix: build it with the CUDA {train} toolkit and libraries, or check the wheel against "
           f"{'a CUDA ' + made[-1] + '.x row' if made else 'a row of the train it was built with'}")
    return (f"{what}, but the row is CUDA {train}, which ships {s.spelled(want)}: it does not load where the "
            f"row's CUDA is installed; {fix}")


def check_soname_majors(exp: Expectation, info: Artifact) -> CheckResult:
    """Every NVIDIA soname a library NEEDS, and every NVIDIA library the wheel ships (private copies
    included), has the soname major of the row's CUDA major.

    `[[check.libraries]]` rules decide whose major a library is held to:
    - a `per-train` library (libbitsandbytes_cuda118.so) is held to ITS train's major, the one its
      name carries: it is loaded only where that CUDA is (torch's CUDA picks it), so
      libcudart.so.11.0 is right for it on a CUDA 12.8 row;
    - a `vendored` library (and a library a vendored rule matches, e.g. a bundled libcudart copy)
      brings its own CUDA: what it ships, and what it NEEDS that the wheel ships beside it, is
      reported (a note), not failed. What it NEEDS from the environment is still held to the row,
      because the row's CUDA is what the environment has.
    """
    from buildrows.check.judging import CheckResult, library_rule, train_of_digits

    name = "cuda-soname-majors"
    assert exp.cuda is not None
    found: list[tuple[str, str]] = []  # (library, problem), grouped below: a torch-sized wheel repeats them
    noted: list[tuple[str, str]] = []  # the same for vendored libraries: reported, not failed
    seen: dict[str, NvidiaSoname] = {}
    private: list[str] = []
    shipped_names = {posixpath.basename(lib.path) for lib in info.libraries}
    own_trains: list[str] = []  # per-train libraries of another train than the row's, in wheel order
    for lib in info.libraries:
        windows = lib.format == "pe"
        read = nvidia_dll if windows else nvidia_soname
        rule, digits = library_rule(exp, lib.path)
        cuda = exp.cuda
        if rule is not None and rule.per_train:
            cuda = train_of_digits(digits) or exp.cuda  # an unknown train fails device-code already
            if cuda != exp.cuda:
                own_trains.append(f"{lib.path} (CUDA {cuda.dotted})")
        vendored = rule is not None and rule.vendored
        major, train = cuda.major, cuda.dotted
        shipped = read(lib.path)
        if shipped is not None:
            seen[posixpath.basename(shipped.text)] = shipped
            if shipped.private:
                private.append(f"{lib.path} ({shipped.library}, {shipped.plain})")
            problem = _problem(shipped, major, train, shipped=True)
            if problem:
                (noted if vendored else found).append((lib.path, problem))
        # What it dlopens by name, as a [[check.libraries]] rule states it, is held like what it NEEDS.
        dlopens = rule.dlopens if rule is not None and not windows else ()
        for needed in (*lib.imports, *lib.delay_imports) if windows else (*lib.needed, *dlopens):
            s = read(needed)
            if s is None:
                continue
            seen[s.text] = s
            problem = _problem(s, major, train, shipped=False)
            if problem and needed in dlopens and needed not in lib.needed:
                problem = problem.replace(f"links {s.text}", f"dlopens {s.text} [{rule.source if rule else ''}]", 1)
            if problem:
                beside = posixpath.basename(needed) in shipped_names  # the wheel brings it: loads from there
                (noted if vendored and beside else found).append((lib.path, problem))
    details = _grouped(found)
    if private:
        details.append("private copies (renamed by auditwheel or torch's relocation): " + ", ".join(private))
    if own_trains:
        details.append("held to their own train's majors ([[check.libraries]] per-train): " + ", ".join(own_trains))
    if not found:
        if seen:
            names = ", ".join(sorted(seen))
            whose = "the majors each library is held to" if own_trains or noted else f"CUDA {exp.cuda.major}'s"
            details.insert(0, f"CUDA {exp.cuda.dotted}: {names} are {whose}")
        else:
            details.insert(0, "no library links or ships an NVIDIA library with a versioned name")
    details += [f"vendored, reported not failed: {line}" for line in _grouped(noted)]
    return CheckResult(name, not found, details)


def _grouped(found: list[tuple[str, str]]) -> list[str]:
    """One line per problem, naming every library that has it (the first few by name)."""
    by_problem: dict[str, list[str]] = {}
    for lib, problem in found:
        if lib not in by_problem.setdefault(problem, []):
            by_problem[problem].append(lib)
    out = []
    for problem, libs in by_problem.items():
        names = ", ".join(libs[:3]) + (f" and {len(libs) - 3} more" if len(libs) > 3 else "")
        out.append(f"{names}: {problem}" if len(libs) == 1 else f"{len(libs)} libraries ({names}): {problem}")
    return out

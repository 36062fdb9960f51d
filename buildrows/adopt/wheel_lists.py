"""The device-code lists and PTX a wheel carries, as policy text (`init --from-wheel`): `ListGroup`, `WheelFacts`, `list_text`.

The row's list is the list most of the project's libraries carry, PTX included; a wheel with one
kernel library per CUDA train gives each train its list. Split from `buildrows.adopt.from_wheel`.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from buildrows.binaries.wheelread import LibraryInfo, WheelInfo
    from buildrows.policy.archs import Arch, Train


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
    # Nothing of its own carries device code and it declares run-time compilers (NVRTC, NVVM, nvJitLink) of the
    # train's major: a JIT-only wheel, written as [cuda.runtime.N] jit with these sonames.
    jit: list[str] = field(default_factory=list)
    jit_packages: list[str] = field(default_factory=list)
    # Dynamic mode, and the wheel declares no NVIDIA package, the runtime neither: written as it is (the
    # check then names the libcudart no declared package carries), never as the default set it lacks.
    declares_none: bool = False
    # Library -> {NEEDED soname: the non-NVIDIA requirement named after it that installs it} (provided-by).
    provided: dict[str, dict[str, str]] = field(default_factory=dict)
    summary: list[str] = field(default_factory=list)
    train_note: str = ""  # where the train came from, when not from a tag or --cuda


# A library whose name carries a CUDA train: lib_cuda128.so, ops_cu130.so (the digits are the train).
_TRAIN_IN_NAME = re.compile(r"^(?P<head>.*cu(?:da)?)(?P<digits>\d{3})(?P<tail>[^/\d][^/]*)$")


def _per_train(libs: list[LibraryInfo], train: Train) -> tuple[str, dict[Train, LibraryInfo]]:
    """The largest set of libraries that differ only in a train in their name, one per known train,
    the row's train among them: a wheel that ships one kernel library per CUDA train."""
    from buildrows.policy.archs import Train as TrainType
    from buildrows.policy.archs import beyond_data, train_table

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


def _groups(libs: list[LibraryInfo]) -> list[ListGroup]:
    by: dict[tuple[frozenset[str], frozenset[str]], list[str]] = {}
    for lib in libs:
        by.setdefault((frozenset(lib.cubins), frozenset(lib.ptx)), []).append(lib.path)
    return [ListGroup(elf, ptx, tuple(paths)) for (elf, ptx), paths in by.items()]


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

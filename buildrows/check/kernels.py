"""Kernel files (device code outside shared libraries) as the check judges and reports them.

A shared library carries all its architectures in one ``.nv_fatbin``; kernel files split them: a
cubin holds exactly one architecture, and a wheel ships one file per kernel and architecture. So
no single kernel file can be held to the row's list. The rule:

* the kernel files that no ``[[check.libraries]]`` rule matches are **one unit**, the union of
  their cubins and PTX, held to the row's list like one library (both directions, PTX included);
* the kernel files a rule matches are one unit per rule (and per train, for ``per-train``), held
  to what the rule says; ``vendored`` ones are reported, not judged.

Reports group files per directory, so 3,000 cubins print a few lines, not 3,000.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from buildrows.binaries.wheelread import KernelFile, LibraryInfo

if TYPE_CHECKING:
    from buildrows.check.judging import Expectation
    from buildrows.policy.model import LibraryRule

__all__ = ["KernelUnit", "kernel_directories", "kernel_json", "kernel_summary", "kernel_units", "kernels_of"]


def kernels_of(info: object) -> tuple[KernelFile, ...]:
    """The kernel files an artifact carries (a wheel's or a directory's; none for older callers)."""
    kernels: tuple[KernelFile, ...] = getattr(info, "kernels", ())
    return tuple(k for k in kernels if k.has_device_code)


@dataclass(frozen=True)
class KernelUnit:
    """Kernel files judged together, as one pseudo-library named by ``library.path``."""

    library: LibraryInfo
    rule: LibraryRule | None
    digits: str | None
    files: tuple[KernelFile, ...]


def _ordered(items: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return tuple(seen)


def _label(files: tuple[KernelFile, ...]) -> str:
    dirs = {posixpath.dirname(k.path) for k in files}
    common = posixpath.commonpath(sorted(dirs)) if len(dirs) > 1 else dirs.pop()
    n = len(files)
    where = f"{common}/" if common else "the wheel's top level"
    return f"{n} kernel file{'s' if n != 1 else ''} under {where}"


def union(path: str, files: tuple[KernelFile, ...]) -> LibraryInfo:
    """The files' device code as one library: each architecture once, in file order."""
    return LibraryInfo(path=path, format="elf", size=sum(k.size for k in files),
                       cubins=_ordered(a for k in files for a in k.cubins),
                       ptx=_ordered(a for k in files for a in k.ptx),
                       # what dates them: every file's (not one per architecture)
                       ptx_isa=tuple(isa for k in files for isa in k.ptx_isa),
                       cubin_toolkits=tuple(tk for k in files for tk in k.cubin_toolkits))


def kernel_units(exp: Expectation, info: object) -> list[KernelUnit]:
    """The units the device-code check holds to a list (see the module's rule)."""
    from buildrows.check.judging import library_rule

    groups: dict[tuple[int, str | None], list[KernelFile]] = {}
    rules: dict[tuple[int, str | None], LibraryRule | None] = {}
    for kernel in kernels_of(info):
        rule, digits = library_rule(exp, kernel.path)
        key = (-1 if rule is None else exp.library_rules.index(rule), digits)
        groups.setdefault(key, []).append(kernel)
        rules[key] = rule
    units: list[KernelUnit] = []
    for key, files in groups.items():
        group = tuple(files)
        units.append(KernelUnit(union(_label(group), group), rules[key], key[1], group))
    return units


def kernel_directories(kernels: tuple[KernelFile, ...]) -> dict[str, dict[str, Any]]:
    """Kernel files per directory: how many of each kind, and the union of their device code."""
    by: dict[str, list[KernelFile]] = {}
    for k in kernels:
        by.setdefault(posixpath.dirname(k.path), []).append(k)
    out: dict[str, dict[str, Any]] = {}
    for directory, files in by.items():
        kinds: dict[str, int] = {}
        for k in files:
            kinds[k.kind] = kinds.get(k.kind, 0) + 1
        lib = union(directory, tuple(files))
        out[directory] = {"files": len(files), "kinds": kinds, "elf": list(lib.cubins), "ptx": list(lib.ptx)}
    return out


def kernel_summary(kernels: tuple[KernelFile, ...], arch_key: Any) -> list[str]:
    """One line per directory of kernel files (what `check` and `archs` print)."""
    lines = []
    for directory, d in kernel_directories(kernels).items():
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(d["kinds"].items()))
        elf = " ".join(sorted(d["elf"], key=arch_key)) or "-"
        ptx = " ".join(sorted(d["ptx"], key=arch_key)) or "-"
        lines.append(f"{directory or '.'}/: {d['files']} kernel file{'s' if d['files'] != 1 else ''} ({kinds}): "
                     f"elf {elf}; ptx {ptx}")
    return lines


def kernel_json(kernels: tuple[KernelFile, ...], arch_key: Any) -> dict[str, dict[str, Any]]:
    """Every kernel file with its kind and device code (``--json``)."""
    return {k.path: {"kind": k.kind, "elf": sorted(set(k.cubins), key=arch_key), "ptx": sorted(set(k.ptx), key=arch_key)}
            for k in kernels}

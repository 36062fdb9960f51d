"""Compare the wheels of rows built together (issue 21): a wheel that lost modules must not pass.

One wheel checked alone cannot know it lacks a module its build skipped (cuvec's py312 row built
without swig on PATH shipped no SWIG modules, 1.3 MB instead of 1.7 MB, and passed). Rows built in
one invocation can be held to each other:

- rows that differ only in their Python ship the same members, once the Python's tags are taken
  out of the names (``_m.cpython-312-x86_64-linux-gnu.so`` and ``_m.cpython-313-...so`` are one
  member; so are the ``.dist-info`` directories of two versions);
- a CPU row ships what the CUDA row of its platform and Python ships, but the CUDA-only
  libraries: those with device code or linking a CUDA library (the runtime, the math libraries,
  torch's CUDA libraries), and the CUDA builds of modules the CPU row ships under their CPU
  name (`_version_cuda` beside `_version_cpu`). A name alone never makes a library CUDA-only.
  Anything else one ships and the other lacks is a difference.

Pure functions over member lists and library facts; `buildrows.build.orchestrate` reads the
wheels and reports (and, with ``--strict`` or ``[check] same-members = true``, fails) the rows
that lack members.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from buildrows.policy.model import Row

#: An extension module's Python tag: `.cpython-312-x86_64-linux-gnu`, `.cpython-313t-darwin`,
#: `.cp312-win_amd64`, `.pypy310-pp73-x86_64-linux-gnu`, before `.so`/`.pyd`/`.pyc`.
_PY_TAG = re.compile(r"\.(?:cpython-3\d+t?|cp3\d+t?|pypy3\d+(?:-pp\d+)?)(?:-[A-Za-z0-9_]+)*(?=\.(?:so|pyd|pyc)$)")
#: Libraries whose linking makes a library CUDA-only (by the start of their file name).
CUDA_LIBRARIES = ("libcuda", "libcudart", "libcublas", "libcufft", "libcurand", "libcusparse", "libcusolver",
                  "libnvrtc", "libnvjitlink", "libnvtoolsext", "libnccl", "libcudnn", "libc10_cuda",
                  "libtorch_cuda", "nvcuda", "cudart", "cublas", "cufft", "curand", "cusparse", "cusolver",
                  "nvrtc", "c10_cuda", "torch_cuda")


@dataclass(frozen=True)
class BuiltWheel:
    """One row's wheel as the comparison needs it: its members (names as in the wheel) and the
    members that are CUDA-only libraries."""

    row: Row
    path: Path
    members: tuple[str, ...]
    cuda_only: frozenset[str] = frozenset()


@dataclass(frozen=True)
class MemberDifference:
    """`row` lacks `members` (normalised names) that `other` ships, though `why` says it should not."""

    row: str
    other: str
    members: tuple[str, ...]
    why: str

    def describe(self, limit: int = 6) -> str:
        shown = ", ".join(self.members[:limit]) + (f", and {len(self.members) - limit} more"
                                                    if len(self.members) > limit else "")
        n = len(self.members)
        return f"{self.row} lacks {n} member{'s' if n != 1 else ''} that {self.other} ships ({self.why}): {shown}"


def normalise(member: str) -> str:
    """The member's name without what only the Python (or the version) changes."""
    head, sep, rest = member.partition("/")
    if sep and head.endswith(".dist-info"):
        member = "{dist-info}/" + rest
    elif sep and head.endswith(".data"):
        member = "{data}/" + rest
    return _PY_TAG.sub(".{python}", member)


def is_cuda_only(needed: Iterable[str], has_device_code: bool) -> bool:
    """Whether a library belongs only in a CUDA wheel: it has device code or links a CUDA library."""
    if has_device_code:
        return True
    return any(Path(n).name.lower().startswith(CUDA_LIBRARIES) for n in needed)


#: "cuda" as a word of a member's file name (`_basis_cuda`, `ops.cuda.so`, `cuda_ops`), not inside another word.
_CUDA_WORD = re.compile(r"(?<![A-Za-z0-9])cuda(?![A-Za-z0-9])")


def counterparts(cuda_members: set[str], cpu_members: set[str]) -> set[str]:
    """The CUDA wheel's members that are the CUDA build of a module the CPU wheel ships: the same
    name with `cpu` for `cuda` (torch_spline_conv's `_version_cuda.so` beside `_version_cpu.so`:
    built from one source for each backend, with no device code and, under --as-needed, no CUDA
    link). The pair is the evidence, never the name alone: a `_cuda` module without a `_cpu`
    counterpart, device code or CUDA links is still one the CPU row lacks (issue 28)."""
    out = set()
    for m in cuda_members:
        head, _, name = m.rpartition("/")
        if _CUDA_WORD.search(name):
            twin = (head + "/" if head else "") + _CUDA_WORD.sub("cpu", name)
            if twin in cpu_members:
                out.add(m)
    return out


def _members(w: BuiltWheel) -> dict[str, str]:
    """Normalised name -> the member's name in the wheel (directories and RECORD's signatures left out)."""
    out = {}
    for m in w.members:
        if m.endswith("/") or re.search(r"\.dist-info/RECORD\.(jws|p7s)$", m):
            continue
        out[normalise(m)] = m
    return out


def compare(wheels: Sequence[BuiltWheel]) -> list[MemberDifference]:
    """Every difference among wheels of rows built together, in the order of `wheels`."""
    sets = [_members(w) for w in wheels]
    out: list[MemberDifference] = []
    # Rows that differ only in Python: one platform and train.
    for i, a in enumerate(wheels):
        for j, b in enumerate(wheels):
            if i == j or (a.row.platform, a.row.cuda) != (b.row.platform, b.row.cuda):
                continue
            lacking = sorted(set(sets[j]) - set(sets[i]))
            if lacking:
                out.append(MemberDifference(a.row.name, b.row.name, tuple(lacking),
                                            "rows that differ only in Python ship the same members"))
    # A CPU row and a CUDA row of one platform and Python.
    for i, cpu in enumerate(wheels):
        if cpu.row.cuda is not None:
            continue
        for j, cuda in enumerate(wheels):
            if cuda.row.cuda is None or (cuda.row.platform, cuda.row.python) != (cpu.row.platform, cpu.row.python):
                continue
            cuda_only = {normalise(m) for m in cuda.cuda_only} | counterparts(set(sets[j]), set(sets[i]))
            cpu_lacks = sorted(set(sets[j]) - set(sets[i]) - cuda_only)
            if cpu_lacks:
                out.append(MemberDifference(cpu.row.name, cuda.row.name, tuple(cpu_lacks),
                                            "a CPU row ships what its CUDA row ships but the CUDA-only libraries"))
            cuda_lacks = sorted(set(sets[i]) - set(sets[j]))
            if cuda_lacks:
                out.append(MemberDifference(cuda.row.name, cpu.row.name, tuple(cuda_lacks),
                                            "a CUDA row ships every member of its CPU row"))
    return out


def read_built(rows: Mapping[str, Row], wheels: Mapping[str, Path]) -> list[BuiltWheel]:
    """The wheels of the rows (row name -> wheel path, in row order), read for `compare`."""
    from buildrows.binaries.wheelread import read_wheel

    out = []
    for name, path in wheels.items():
        info = read_wheel(path)
        cuda_only = frozenset(lib.path for lib in info.libraries
                              if is_cuda_only((*lib.needed, *lib.imports), lib.has_device_code))
        out.append(BuiltWheel(rows[name], path, info.members, cuda_only))
    return out

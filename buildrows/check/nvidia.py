"""NVIDIA's library wheels as data (buildrows/data/nvidia_packages.toml): which sonames each
package installs and where. The "preload" runtime mode judges a wheel that loads these libraries
itself by them: its declared NVIDIA packages must be the ones that carry what its libraries NEED."""

from __future__ import annotations

import fnmatch
import functools
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from buildrows.policy.requirements import marker_environment
from buildrows.resources import data_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["NvidiaPackage", "carriers", "declared_nvidia", "nvidia_soname", "packages"]

# A soname of NVIDIA's libraries with its major (libcublasLt.so.13, libcudart.so.11.0, libnccl.so.2).
_NVIDIA_SONAME = re.compile(
    r"^lib(?:cudart|cublas|cublasLt|nvblas|cufft|cufftw|curand|cusolver|cusolverMg|cusparse|cusparseLt|nvrtc|"
    r"nvrtc-builtins|nvJitLink|cupti|nvjpeg|nvToolsExt|cudnn\w*|nccl|nvshmem\w*|cufile|cutensor\w*|nvvm|npp\w*|"
    r"cublasmp|cusolverMp)"
    r"\.so\.\d+(?:\.\d+)*$")


@dataclass(frozen=True)
class NvidiaPackage:
    """One NVIDIA library wheel: its sonames and its library directory (relative to site-packages)."""

    name: str
    sonames: tuple[str, ...]
    dir: str


@functools.cache
def _table() -> tuple[dict[str, NvidiaPackage], dict[int, dict[str, str]]]:
    raw = tomllib.loads(data_file("nvidia_packages.toml").read_text(encoding="utf-8"))
    pkgs: dict[str, NvidiaPackage] = {str(canonicalize_name(k)): NvidiaPackage(str(canonicalize_name(k)),
                                                                                tuple(v["sonames"]), v["dir"])
                                      for k, v in raw["packages"].items()}
    toolkit = {int(k): {str(e): str(canonicalize_name(p)) for e, p in v.items()} for k, v in raw["cuda-toolkit"].items()}
    return pkgs, toolkit


def packages() -> dict[str, NvidiaPackage]:
    """Every NVIDIA package the table knows, by canonical name."""
    return _table()[0]


def nvidia_soname(name: str) -> bool:
    """Whether a NEEDED name is one of NVIDIA's CUDA libraries (the driver libcuda.so.1 is not: no wheel carries it)."""
    return _NVIDIA_SONAME.match(name) is not None


def carriers(soname: str) -> list[str]:
    """The packages that install `soname`, CUDA 12's first."""
    return [p.name for p in packages().values() if soname in p.sonames]


class _AllBut(frozenset[str]):
    """Every extra but these (what `extra != "x"` selects)."""


_Extras = frozenset[str]  # the extras a marker holds under; an _AllBut for "every extra but ..."


def _in_scope(text: str, req: Requirement, platform: str, extra: str | None) -> bool:
    scope = _scope(text, platform)
    if isinstance(scope, bool):
        return extra is None and scope
    return extra is not None and (canonicalize_name(extra) not in scope if isinstance(scope, _AllBut)
                                  else canonicalize_name(extra) in scope)


@functools.lru_cache(maxsize=1024)
def _scope(text: str, platform: str) -> bool | _Extras:
    """Where the requirement `text` applies on `platform`: True/False for one without an `extra`
    clause, else the extras it holds under. Cached per requirement: asked once per extra."""
    req = _requirement(text)
    marker = str(req.marker or "") if req is not None else ""
    if "extra" not in marker:
        return req is not None and (req.marker is None or req.marker.evaluate(marker_environment(platform)))
    assert req is not None and req.marker is not None
    return _extras_where(req.marker, platform)


def _extras_where(parsed: Marker, platform: str) -> _Extras:
    """The extras under which `marker` holds on `platform`, in one pass over the marker, parsed once
    (issue 37: a marker of 10,000 `extra == ...` clauses was parsed and evaluated again for each of
    its 10,000 extras: minutes). Each clause on `extra` is a set, every other clause true or false,
    combined as packaging evaluates markers (`and` binds tighter than `or`)."""
    env = marker_environment(platform)
    try:
        return _where(parsed._markers, env)
    except _Unsure:
        # A clause this reading does not model (`extra in "a b"`, `"x" == extra`...): packaging decides, per extra named.
        named = {canonicalize_name(m) for m in re.findall(r"""['"]([^'"]+)['"]""", str(parsed))}
        return frozenset(e for e in named if parsed.evaluate(dict(env, extra=e)))


class _Unsure(Exception):
    pass


_ALL: _Extras = _AllBut()
_NONE: _Extras = frozenset()


def _both(a: _Extras, b: _Extras) -> _Extras:
    if isinstance(a, _AllBut) and isinstance(b, _AllBut):
        return _AllBut(a | b)
    if isinstance(a, _AllBut):
        return frozenset(b - a)
    if isinstance(b, _AllBut):
        return frozenset(a - b)
    return a & b


def _either(a: _Extras, b: _Extras) -> _Extras:
    if isinstance(a, _AllBut) and isinstance(b, _AllBut):
        return _AllBut(a & b)
    if isinstance(a, _AllBut):
        return _AllBut(a - b)
    if isinstance(b, _AllBut):
        return _AllBut(b - a)
    return a | b


def _where(markers: Sequence[object], env: dict[str, str]) -> _Extras:
    groups: list[_Extras] = [_ALL]
    for item in markers:
        if isinstance(item, list):
            groups[-1] = _both(groups[-1], _where(item, env))
        elif isinstance(item, tuple):
            groups[-1] = _both(groups[-1], _clause(item, env))
        elif item == "or":
            groups.append(_ALL)
        elif item != "and":
            raise _Unsure
    plain = [g for g in groups if not isinstance(g, _AllBut)]
    but = [g for g in groups if isinstance(g, _AllBut)]
    anyof = frozenset().union(*plain)
    if not but:
        return anyof
    return _AllBut(frozenset.intersection(*but) - anyof)


def _clause(item: tuple[object, ...], env: dict[str, str]) -> _Extras:
    lhs, op, rhs = item
    names = [getattr(x, "value", None) for x in (lhs, rhs)]
    kinds = [type(x).__name__ for x in (lhs, rhs)]
    if "extra" not in names or kinds[0] != "Variable":
        if "extra" in names:
            raise _Unsure
        one = Marker(_spelled(item))
        return _ALL if one.evaluate(dict(env, extra="")) else _NONE
    value = canonicalize_name(str(names[1]))
    if str(getattr(op, "value", "")) == "==":
        return frozenset({value})
    if str(getattr(op, "value", "")) == "!=":
        return _AllBut({value})
    raise _Unsure


def _spelled(item: tuple[object, ...]) -> str:
    lhs, op, rhs = item
    return " ".join(x.serialize() if hasattr(x, "serialize") else str(x) for x in (lhs, op, rhs))


@functools.lru_cache(maxsize=1024)
def _requirement(text: str) -> Requirement | None:
    """`text` parsed once: declared_nvidia is asked once per extra the wheel names."""
    try:
        return Requirement(text)
    except InvalidRequirement:
        return None


def declared_nvidia(requires_dist: Iterable[str], platform: str, extra: str | None,
                    major: int) -> dict[str, str]:
    """The NVIDIA packages the wheel declares on `platform` (unconditionally, or under `extra`):
    canonical name -> the Requires-Dist entry. `cuda-toolkit[cublas,...]` counts as the packages
    its extras install."""
    known = packages()
    toolkit = _table()[1].get(major, {})
    out: dict[str, str] = {}
    for text in requires_dist:
        req = _requirement(text)
        if req is None:
            continue  # reported by runtime-declared's parse check
        if not _in_scope(text, req, platform, extra):
            continue
        name = canonicalize_name(req.name)
        if name == "cuda-toolkit":
            for e in req.extras:
                if e in toolkit:
                    out[toolkit[e]] = text
        elif name in known or name.startswith("nvidia-"):
            out[name] = text
    return out


def optional(soname: str, globs: Iterable[str]) -> bool:
    """Whether a soname is one the policy marks as loaded only when present."""
    return any(fnmatch.fnmatchcase(soname, g) for g in globs)

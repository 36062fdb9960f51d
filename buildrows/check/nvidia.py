"""NVIDIA's library wheels as data (buildrows/data/nvidia_packages.toml): which sonames each
package installs and where. The "preload" runtime mode judges a wheel that loads these libraries
itself by them: its declared NVIDIA packages must be the ones that carry what its libraries NEED."""

from __future__ import annotations

import fnmatch
import functools
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from buildrows.check.extras import Extras, extras_where
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
def _table() -> tuple[dict[str, NvidiaPackage], dict[int, dict[str, tuple[str, ...]]]]:
    raw = tomllib.loads(data_file("nvidia_packages.toml").read_text(encoding="utf-8"))
    pkgs: dict[str, NvidiaPackage] = {str(canonicalize_name(k)): NvidiaPackage(str(canonicalize_name(k)),
                                                                                tuple(v["sonames"]), v["dir"])
                                      for k, v in raw["packages"].items()}
    toolkit = {int(k): {str(e): tuple(str(canonicalize_name(p)) for p in ([ps] if isinstance(ps, str) else ps))
                        for e, ps in v.items()} for k, v in raw["cuda-toolkit"].items()}
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


def _in_scope(text: str, req: Requirement, platform: str, extra: str | None) -> bool:
    scope = _scope(text, platform)
    if isinstance(scope, bool):
        return extra is None and scope
    return extra is not None and scope.holds(extra)


@functools.lru_cache(maxsize=1024)
def _scope(text: str, platform: str) -> bool | Extras:
    """Where the requirement `text` applies on `platform`: True/False for one without an `extra`
    clause, else the extras it holds under. Cached per requirement: asked once per extra."""
    req = _requirement(text)
    marker = str(req.marker or "") if req is not None else ""
    if "extra" not in marker:
        return req is not None and (req.marker is None or req.marker.evaluate(marker_environment(platform)))
    assert req is not None and req.marker is not None
    return extras_where(req.marker, marker_environment(platform))


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
            if not admits_major(req.specifier, major):
                continue  # another major's toolkit (numba-cuda's `cuda-toolkit[nvrtc]==12.*; extra == "cu12"`)
            for e in req.extras:
                for package in toolkit.get(e, ()):
                    out[package] = text
        elif name in known or name.startswith("nvidia-"):
            out[name] = text
    return out


def admits_major(specifier: SpecifierSet, major: int) -> bool:
    """Whether some release of CUDA ``major`` satisfies ``specifier``: ``==13.*``, ``>=13,<14`` and
    PyTorch 2.14's exact pin ``==13.0.3`` all admit 13, none of them 12. The releases tried are the
    major's first and late ones, and each version the specifier names of that major and the one after it
    (``>13.0.3,<13.0.5`` admits 13.0.4)."""
    if not specifier:
        return True
    tried = {f"{major}.0", f"{major}.0.0", f"{major}.9", f"{major}.99"}
    for spec in specifier:
        release = re.match(r"(\d+)((?:\.\d+)*)", spec.version)
        if release is None or int(release.group(1)) != major:
            continue
        parts = release.group(0).split(".")
        tried.add(release.group(0))
        tried.add(".".join([*parts[:-1], str(int(parts[-1]) + 1)]))
    return any(specifier.contains(v, prereleases=True) for v in tried)


def optional(soname: str, globs: Iterable[str]) -> bool:
    """Whether a soname is one the policy marks as loaded only when present."""
    return any(fnmatch.fnmatchcase(soname, g) for g in globs)

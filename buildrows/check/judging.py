"""What every judge of the wheel check reads and returns (SPEC §8): the artifact, the expectation a row
holds it to, the verdict; the row a wheel's tags name; which [[check.libraries]] rule a library falls
under. The judges live beside it, one module per thing they read; `judges` runs them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from buildrows.binaries.wheelread import LibraryInfo, WheelInfo
from buildrows.check.tags import WheelPython, platform_of_name, python_of_name, train_of_name
from buildrows.policy.archs import ArchList, Train
from buildrows.policy.model import FileRule, LibraryRule, RpathException, RuntimeMode


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
    mode_reason: str = ""  # why the project loads CUDA itself (preload, torch-runtime)
    runtime_extra: str | None = None  # preload: the extra under which NVIDIA packages are declared
    optional_sonames: tuple[str, ...] = ()  # preload: sonames loaded only when present (globs)
    torch_given: str | None = None  # `check --torch`: the torch a wheel built elsewhere was compiled against
    library_rules: tuple[LibraryRule, ...] = ()  # [[check.libraries]] that apply to this row
    train_archs: tuple[tuple[Train, ArchList], ...] = ()  # the policy's list per train on this platform (per-train)
    torch_extension: bool = False  # a PyTorch extension's CPU row: pinned to its torch like a CUDA row (mode torch)
    pure: bool = False  # a CPU row whose wheel is pure Python ([project] cpu-wheel = "pure"): no compiled library
    jit: tuple[str, ...] = ()  # [cuda.runtime.N] jit: kernels compiled at run time by these compilers (check.jit)
    jit_reason: str = ""
    jit_source: str = ""  # where the policy states it


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    details: list[str] = field(default_factory=list)

    def json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "details": self.details}


def platform_of_wheel(info: WheelInfo) -> str | None:
    """The platform the wheel's tags name (buildrows.check.tags reads every tag pip accepts)."""
    return platform_of_name(info.name)


def python_of_wheel(info: WheelInfo) -> WheelPython | None:
    """The Python the wheel's tags name (buildrows.check.tags)."""
    return python_of_name(info.name)


def train_of_wheel(info: WheelInfo) -> Train | None:
    """The CUDA train of the wheel's local version tag (`+cu130`), if any."""
    return train_of_name(info.name)


def library_rule(exp: Expectation, path: str) -> tuple[LibraryRule | None, str | None]:
    """The first [[check.libraries]] rule that matches `path`, with the {cu} digits it carries."""
    for rule in exp.library_rules:
        hit, digits = rule.match(path)
        if hit:
            return rule, digits
    return None, None


def train_of_digits(digits: str | None) -> Train | None:
    """The train a per-train library's name carries (118 -> 11.8), None if none or not a train."""
    if digits is None:
        return None
    try:
        return Train.parse("cu" + digits)
    except ValueError:
        return None


def _arch_key(name: str) -> tuple[int, str]:
    m = re.match(r"sm_(\d+)([a-z]?)", name)
    return (int(m.group(1)), m.group(2)) if m else (0, name)

"""The rows and lists init chooses: the CUDA train (from nvcc, --cuda or a wheel), the Pythons, and the archs list (`CudaStart`).

Split from `buildrows.adopt.starter`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from buildrows.adopt.from_wheel import infer
from buildrows.adopt.project_facts import ProjectFacts, detect_project
from buildrows.adopt.wheel_lists import WheelFacts, list_text
from buildrows.errors import BadInput
from buildrows.policy.archs import ArchList, Train
from buildrows.policy.model import Driver

#: Python versions a starting policy builds (the seed's allowlist); the running one is added.
START_PYTHONS = ("3.10", "3.11", "3.12", "3.13")


@dataclass(frozen=True)
class CudaStart:
    """One train's starting list, and where it came from (a wheel, or buildrows' starting list)."""

    train: Train
    archs: ArchList
    text: str  # as the policy writes it
    ptx_none: bool
    source: str
    facts: WheelFacts | None = None  # what init --from-wheel read of how the wheel is built and loaded


def _nvcc_train(summary: list[str]) -> Train | None:
    """The train of the nvcc this machine has (CUDA_HOME, CUDACXX or PATH, as `build` finds it), with a
    summary line saying so and how to choose; None, with a line saying how to add one, without it."""
    import os

    from buildrows.errors import BuildrowsError
    from buildrows.plan.toolchain import find_cuda_compiler

    try:
        nvcc = find_cuda_compiler(os.environ)
    except BuildrowsError as e:
        summary.append(f"the nvcc found does not run ({str(e).splitlines()[0]}): CPU rows only; "
                       "`buildrows init --cuda 13.0` starts a CUDA train anyway")
        return None
    if nvcc is None or nvcc.train is None:
        summary.append("no nvcc on this machine: CPU rows only; `buildrows init --cuda 13.0` (any train) adds "
                       "the CUDA rows of that train")
        return None
    summary.append(f"CUDA {nvcc.train.dotted}: the train of this machine's nvcc, {nvcc.describe()}; "
                   "`--cuda TRAIN` names another, `--cpu` adds CPU rows")
    return nvcc.train


def _pythons(given: str | None, running: str) -> list[str]:
    import re


    if given is None:
        versions = list(START_PYTHONS)
        if running not in versions:
            versions.append(running)
        return versions
    versions = [v.strip() for v in given.split(",") if v.strip()]
    bad = [v for v in versions if not re.fullmatch(r"3\.\d{1,2}t?", v)]
    if bad or not versions:
        raise BadInput(f"--python {given!r}: {', '.join(bad) or 'no version'} is not a Python version\n"
                       "    fix: write them like --python 3.11,3.12")
    return versions


def _project_or_placeholder(project: Path, driver: Driver | None, wheels: list[Path]) -> ProjectFacts:
    """The project's facts; for `init --from-wheel` in a directory with no sources (auditing a
    published wheel), a placeholder named after the wheel, which the summary and the file say."""
    if wheels and driver is None and not any((project / f).is_file()
                                             for f in ("setup.py", "pyproject.toml", "CMakeLists.txt")):
        from packaging.utils import canonicalize_name

        name = canonicalize_name(wheels[0].name.split("-")[0])
        return ProjectFacts(name, "setup.py", "nothing: this directory has no setup.py, pyproject.toml or "
                            "CMakeLists.txt; a placeholder, set the project's driver where its sources are",
                            None, None, f"{wheels[0].name}'s name")
    return detect_project(project, driver)


def _from_wheels(wheels: list[Path], train: Train | None, platform: str) -> tuple[CudaStart, str]:
    """One wheel, or several of one project (one per CUDA train, or per Python): the first wheel's
    train gives the runtime and the rules; every other train gets the list its wheel carries."""
    starts = [_from_wheel(w, train, platform) for w in wheels]
    first, platform = starts[0]
    others = sorted({p for _, p in starts} - {platform})
    if others:
        raise BadInput(f"--from-wheel: the wheels are for {platform} and {', '.join(others)}; init starts one "
                       "platform\n    fix: pass the wheels of one platform (add the others' tables afterwards)")
    if len(starts) == 1:
        return first, platform
    facts = first.facts
    if facts is None or facts.row is None:
        raise BadInput(f"--from-wheel: {wheels[0].name} carries no device code to start a list from\n"
                       "    fix: pass it alone, or name a wheel with device code first")
    for (start, _), wheel in zip(starts[1:], wheels[1:], strict=True):
        other = start.facts
        if other is None or other.row is None:
            raise BadInput(f"--from-wheel: {wheel.name} carries no device code to start a list from\n"
                           "    fix: leave it out")
        if start.train == first.train:
            if (other.row.elf, other.row.ptx) != (facts.row.elf, facts.row.ptx):
                facts.summary.append(f"note: {wheel.name} carries another list than {wheels[0].name} for the same "
                                     f"train ({list_text(other.row)[0]}); the policy holds both to the first")
            continue
        if start.train.major != first.train.major and other.mode != facts.mode:
            facts.summary.append(f"note: {wheel.name} (CUDA {start.train.dotted}) looks like mode {other.mode}, "
                                 f"written as {facts.mode} for every major: review [cuda.runtime.{start.train.major}]")
        facts.per_train.setdefault(start.train, other.row)
        facts.rpath_entries = sorted(set(facts.rpath_entries) | set(other.rpath_entries))
        facts.vendored = sorted(set(facts.vendored) | set(other.vendored))
        facts.own_lists += [g for g in other.own_lists if g.paths not in {o.paths for o in facts.own_lists}]
    if facts.per_train and not facts.per_train_glob:
        facts.per_train.setdefault(first.train, facts.row)
    n = len({s.train for s, _ in starts})
    source = (f"from {len(wheels)} wheels ({n} train{'s' if n != 1 else ''}): the list the CUDA "
              f"{first.train.dotted} wheel carries; each other train's wheel gives that train's list")
    return CudaStart(first.train, first.archs, first.text, first.ptx_none, source, facts), platform


def _from_wheel(wheel: Path, train: Train | None, platform: str) -> tuple[CudaStart, str]:
    """The train's list as the wheel ships it (the cubins common to its libraries, PTX where all carry it)."""
    from buildrows.check.device_code import read_device_code
    from buildrows.check.judging import platform_of_wheel, train_of_wheel
    from buildrows.errors import Refused
    from buildrows.policy.edit import arch_text, archs_from_names

    code = read_device_code(wheel)
    train_note = ""
    tagged = train_of_wheel(code.info) if code.info is not None else None
    if train is not None and tagged is not None and train != tagged:
        raise BadInput(f"--cuda {train.dotted} contradicts {wheel.name}'s tag +{tagged.cu}\n"
                       "    fix: drop --cuda (the wheel names its train), or name the wheel of that train")
    train = train or tagged
    if train is None and code.info is not None:
        # PyTorch's PyPI wheel has no +cu130 but requires its runtime: cuda-toolkit[...]==13.0.2, nvidia-cuda-runtime==13.0.96
        train = train_from_requirements(code.info.requires_dist)
        if train is not None:
            train_note = (f"CUDA {train.dotted} from its requirements ("
                          + ", ".join(r for r in code.info.requires_dist if "cuda" in r.lower() and "extra" not in r)[:160]
                          + "); pass --cuda to state the train it was built with")
    if train is None:
        raise BadInput(f"{wheel.name} carries no +cuXYZ tag and requires no CUDA runtime of one train (cuda-toolkit, "
                       "nvidia-cuda-runtime), so its CUDA train is unknown\n"
                       "    fix: pass --cuda TRAIN (the train the wheel was built with, e.g. --cuda 13.0)")
    facts = infer(code.info, wheel, train, platform) if code.info is not None else None
    if facts is not None:
        facts.train_note = train_note
    if facts is not None and facts.row is not None:
        text, ptx_none = list_text(facts.row)
        n = len(facts.row.paths)
        others = [f"{len(facts.own_lists)} other list{'s' if len(facts.own_lists) != 1 else ''}"] if facts.own_lists else []
        others += [f"{len(facts.vendored)} bundled NVIDIA librar{'ies' if len(facts.vendored) != 1 else 'y'}"] if facts.vendored else []
        source = (f"from {wheel.name}: the list {n} of its librar{'ies' if n != 1 else 'y'} carry"
                  + (f"; {' and '.join(others)} get their own [[check.libraries]] rules" if others else ""))
        if facts.per_train:
            source = (f"from {wheel.name}: the list its CUDA {train.dotted} library carries; the libraries of "
                      f"{len(facts.per_train) - 1} other trains are held to their trains' lists (per-train rule)")
        from buildrows.policy.archs import ArchError, parse_arch_list

        try:
            archs = parse_arch_list(text, ptx="none" if ptx_none else "newest")
        except ArchError as e:  # a list the parser refuses (a PTX-only entry it does not read yet): said, not hidden
            raise BadInput(f"{wheel.name}: its list {text!r} cannot be written in this buildrows' list syntax: {e}\n"
                           "    fix: a buildrows that reads PTX-only entries (X.Y-virtual)") from None
        if facts.train_note:
            source += f"; {facts.train_note}"
        platform = platform_of_wheel(code.info) or platform if code.info is not None else platform
        return CudaStart(train, archs, text, ptx_none, source, facts), platform
    if facts is not None and facts.host_only:
        from buildrows.adopt.wheel_rules import host_only_supported
        from buildrows.policy.archs import parse_arch_list, suggested_archs

        if not host_only_supported():
            raise Refused(f"{wheel.name}: no library carries device code, and {', '.join(facts.host_only[:2])} link CUDA "
                          "libraries: host-only CUDA code, which this buildrows' policy cannot state\n"
                          "    fix: a buildrows with [[check.libraries]] host-only, or pass --cuda TRAIN without "
                          "--from-wheel")
        text = suggested_archs(train, platform)
        platform = (platform_of_wheel(code.info) if code.info else None) or platform
        source = (f"from {wheel.name}: no library carries device code ({len(facts.host_only)} host-only); the list is "
                  f"buildrows' starting list for CUDA {train.dotted}, which nothing in the wheel is held to")
        return CudaStart(train, parse_arch_list(text), text, False, source, facts), platform
    if facts is not None and facts.row is None:  # nothing of the project's carries device code
        from buildrows.policy.archs import parse_arch_list, suggested_archs

        text = suggested_archs(train, platform)
        platform = (platform_of_wheel(code.info) if code.info else None) or platform
        what = ([f"its device code is vendored ({len(facts.vendored)} bundled NVIDIA libraries)"] if facts.vendored else []) \
            + ([f"its only device code is test fixtures ({', '.join(facts.fixtures)})"] if facts.fixtures else [])
        if facts.jit:
            gap = (f"; its kernels are compiled at run time (jit, in [cuda.runtime.{train.major}]): the list is the GPUs "
                   f"they are compiled for, held to what CUDA {train.dotted}'s compiler targets")
        elif facts.no_code and not facts.fixtures:
            gap = ("; `check` fails cuda-libraries-present on it: nothing says how its kernels come (compiled at run "
                   "time? another wheel?); review: state it, or check it as a CPU row")
        elif facts.fixtures or facts.vendored:
            gap = ("; `check` fails device-code-covers-row on it: vendored code neither keeps nor excuses the row's "
                   "list, and nothing of its own carries device code (if its kernels are compiled at run time, state "
                   f"jit = [its compilers] in [cuda.runtime.{train.major}] and declare their packages)")
        else:
            gap = ""
        held = "" if facts.jit else ", which nothing in the wheel is held to"
        source = (f"from {wheel.name}: no library of its own carries device code"
                  + (f" ({'; '.join(what)})" if what else " or links CUDA") + f"; the list is buildrows' starting list "
                  f"for CUDA {train.dotted}{held}{gap}")
        return CudaStart(train, parse_arch_list(text), text, False, source, facts), platform
    if not code.common_elf:
        raise Refused(f"{wheel.name}: no GPU architecture is common to its libraries with device code "
                      f"({len(code.with_code)} of {len(code.libraries)} carry any); nothing to start a list from\n"
                      "    fix: name a CUDA wheel of the train (PyTorch's, say), or pass --cuda TRAIN without "
                      "--from-wheel for buildrows' starting list")
    archs = archs_from_names(code.common_elf, code.common_ptx)
    text, ptx_none = arch_text(archs)
    n = len(code.with_code)
    source = (f"from {wheel.name}: the architectures common to its {n} librar{'y' if n == 1 else 'ies'} "
              "with device code")
    return CudaStart(train, archs, text, ptx_none, source), (platform_of_wheel(code.info) if code.info else None) or platform


def train_from_requirements(requires: Sequence[str]) -> Train | None:
    """The one CUDA train a wheel's requirements pin (cuda-toolkit==13.0.2, nvidia-cuda-runtime==13.0.96,
    nvidia-cuda-runtime-cu12==12.6.77), or None when they pin none or several."""
    import re

    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    from buildrows.policy.archs import train_table

    found: set[Train] = set()
    majors: set[int] = set()  # requirements that name only the major: ==13.*, nvidia-cuda-runtime-cu12
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if "extra" in str(req.marker or ""):
            continue
        name = canonicalize_name(req.name)
        m = re.fullmatch(r"nvidia-cuda-(?:runtime|nvrtc|cupti)(?:-cu(\d+))?", name)
        if name != "cuda-toolkit" and not m:
            continue
        if m and m.group(1):
            majors.add(int(m.group(1)))
        for spec in req.specifier:
            v = re.match(r"(\d+)\.(\d+)", spec.version)
            if spec.operator in ("==", "~=", ">=") and v:
                found.add(Train(int(v.group(1)), int(v.group(2))))
            elif spec.operator == "==" and (v := re.fullmatch(r"(\d+)(?:\.\*)?", spec.version)):
                majors.add(int(v.group(1)))
    if len(found) == 1:
        return found.pop()
    if found or len(majors) != 1:
        return None
    # Only the major is pinned: the newest train of it that buildrows knows, which loads any code
    # its older trains built (the summary says so; --cuda states the one it was built with).
    major = majors.pop()
    return max((t for t in train_table() if t.major == major), default=None)


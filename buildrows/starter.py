"""A starting policy for an existing project (`buildrows init`): detect, then write text.

`detect_project` looks at the project's files (setup.py, pyproject.toml's build backend,
CMakeLists.txt and its presets, a CUDA `option()`); `starter_text` turns what was found, and the
architecture lists taken from a wheel, into a commented buildrows.toml. Both are pure functions of
what they are given; the command validates the text as a policy before writing it, and never
writes over an existing policy.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from buildrows.archs import ArchList, Train
from buildrows.errors import BadInput
from buildrows.model import Driver

#: Python versions a starting policy builds (the seed's allowlist); the running one is added.
START_PYTHONS = ("3.10", "3.11", "3.12", "3.13")
_OPTION = re.compile(r"^\s*option\s*\(\s*([A-Za-z0-9_]*CUDA[A-Za-z0-9_]*)\b", re.MULTILINE | re.IGNORECASE)


@dataclass(frozen=True)
class ProjectFacts:
    """What init found in the project directory, and where."""

    name: str
    driver: Driver
    why: str  # how the driver was detected
    cuda_option: str | None
    cuda_option_from: str | None


def _toml(path: Path) -> dict[str, object]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data: dict[str, object] = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise BadInput(f"{path}: cannot be read: {e}\n    fix: correct the file, then run buildrows init again") from e
    return data


def detect_project(project: Path, driver: Driver | None = None) -> ProjectFacts:
    """The project's name, build driver and CUDA switch, from its files."""
    pyproject = project / "pyproject.toml"
    doc = _toml(pyproject) if pyproject.is_file() else {}
    table = doc.get("project")
    name = table.get("name") if isinstance(table, dict) else None
    system = doc.get("build-system")
    backend = system.get("build-backend", "") if isinstance(system, dict) else ""
    cmakelists = project / "CMakeLists.txt"
    if driver is not None:
        why = "--driver"
    elif isinstance(backend, str) and backend.startswith("scikit_build_core"):
        driver, why = "scikit-build-core", f"pyproject.toml's build-backend {backend}"
    elif (project / "setup.py").is_file():
        driver, why = "setup.py", "setup.py"
    elif pyproject.is_file() and backend:
        driver, why = "setup.py", f"pyproject.toml's build-backend {backend} (built through PEP 517 with the row's environment)"
    elif cmakelists.is_file():
        presets = [p for p in ("CMakePresets.json", "CMakeUserPresets.json") if (project / p).is_file()]
        driver = "cmake-presets"
        why = "CMakeLists.txt" + (f" with {' and '.join(presets)}" if presets else "") + " and no Python packaging"
    else:
        raise BadInput(f"{project} has no setup.py, pyproject.toml or CMakeLists.txt: buildrows cannot tell how it "
                       "is built\n    fix: run buildrows init in the project's root directory (or pass --driver)")
    option, option_from = None, None
    if cmakelists.is_file():
        m = _OPTION.search(cmakelists.read_text(encoding="utf-8", errors="replace"))
        if m:
            option, option_from = m.group(1), f"option({m.group(1)} ...) in CMakeLists.txt"
    return ProjectFacts(str(name) if name else project.resolve().name, driver, why, option, option_from)


@dataclass(frozen=True)
class CudaStart:
    """One train's starting list, and where it came from (a wheel, or buildrows' starting list)."""

    train: Train
    archs: ArchList
    text: str  # as the policy writes it
    ptx_none: bool
    source: str


def _q(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def starter_text(facts: ProjectFacts, platform: str, pythons: list[str], cuda: CudaStart | None, cpu: bool) -> str:
    """A commented buildrows.toml for the project: one platform, its CUDA train (if any), CPU rows if asked."""
    lines = [
        "# buildrows policy, started by `buildrows init`: the wheels this project publishes, as rows",
        "# (platform x CUDA train x Python). `buildrows rows` lists them; the README explains every key.",
        "",
        "[project]",
        f"name = {_q(facts.name)}",
        f"driver = {_q(facts.driver)}  # detected from {facts.why}",
        'source-dir = "."',
    ]
    if facts.cuda_option:
        lines.append(f"cuda-option = {_q(facts.cuda_option)}  # from {facts.cuda_option_from}: ON for CUDA rows, OFF for CPU rows")
    else:
        lines.append("# cuda-option = \"MYPROJ_BUILD_CUDA\"  # the project's CMake switch for CUDA, if it has one")
    lines += ["", "[python]", "versions = [" + ", ".join(_q(v) for v in pythons) + "]"]
    if cuda is not None:
        lines += ["", "[cuda]", f"trains = [{_q(cuda.train.dotted)}]"]
    lines += ["", f"[platforms.{platform}]"]
    lines.append(f"trains = [{_q(cuda.train.dotted)}]" if cuda is not None else
                 "# trains = [\"13.0\"]  # CUDA trains, each with an archs list (see the README)")
    if cpu or cuda is None:
        lines.append("cpu = true  # CPU rows too (CUDA off)")
    if cuda is not None:
        lines += ["", f"# {cuda.source}", f"[[platforms.{platform}.cuda]]", f"trains = [{_q(cuda.train.dotted)}]",
                  f"archs = {_q(cuda.text)}"]
        if cuda.ptx_none:
            lines.append('ptx = "none"  # the wheel ships no PTX common to its libraries')
    return "\n".join(lines) + "\n"

"""A row's build tree, tied to what built it.

Each row builds in a tree of its own (``build/skbuild-ROW``, ``build/setuptools-ROW``,
``build/ROW`` for the cmake-presets driver), and a rebuild there is incremental. That is only
right while the tree's objects were made by what builds now: setuptools skips an extension whose
sources did not change even when the torch it compiles against did (a wheel stamped for torch 2.14
then carried 2.13's symbols and failed to import), and CMake keeps ``CMAKE_CUDA_COMPILER`` cached
whatever ``CUDACXX`` says on a later configure.

So the tree records, in ``buildrows-tree.json``, what it was built with (`facts`): the row's
interpreter (its path and version), torch (version and CUDA) when the project builds against it,
the CUDA compiler (path, version, options) and its root, the host compilers, CMake (path and
version) and the generator where CMake runs, and, for setup.py builds (setuptools tracks no flags),
the row's build variables (architecture list, switches). The compiler launcher is not among them: it
changes no object. Before a build, `settle` compares: the same facts reuse the tree; any change
(or a tree with no record, made before buildrows kept one or by hand) removes the tree's contents,
and the caller says so in one line naming what changed. Never a silent mix.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from buildrows.build.drivers import BuildPlan
    from buildrows.plan.row import RowPlan

RECORD = "buildrows-tree.json"
#: Bumped when what the record holds changes meaning: a tree of an older format starts afresh.
FORMAT = 1

#: How a change of each fact is named in the one line `build` prints.
LABELS: dict[str, str] = {
    "python": "Python",
    "torch": "torch",
    "nvcc": "nvcc",
    "cuda_root": "CUDA root",
    "cc": "C compiler",
    "cxx": "C++ compiler",
    "cuda_host": "CUDA host compiler",
    "cmake": "CMake",
    "generator": "generator",
    "variables": "build variables",
    "flags": "compile and link flags",
}
#: What setuptools compiles and links a setup.py row's extensions with beyond the compilers: it
#: skips an extension whose output is newer than its sources, so a change here must start afresh
#: (the build's own LDSHARED, `buildrows.build.ldshared`, is one).
SETUPTOOLS_FLAGS = ("LDSHARED", "LDFLAGS", "CFLAGS", "CPPFLAGS", "CXXFLAGS")

#: An isolated build (`--isolation`) gets its torch from a fresh environment only the frontend
#: sees: unknown here, so the tree of a project that builds against torch is never reused.
ISOLATED = "unknown (an isolated build installs its own)"

_PROBE = (
    "import importlib.util, json, os, sys\n"
    "spec = importlib.util.find_spec('torch')\n"
    "where = list(spec.submodule_search_locations or []) if spec else []\n"
    "print('BUILDROWS_TREE=' + json.dumps({'python': os.path.abspath(sys.executable), "
    "'version': sys.version.split()[0], 'torch': where[0] if where else None}))"
)


@dataclass(frozen=True)
class Settled:
    """What `settle` did with a tree: `state` is "new", "reused" or "afresh"; `changes` names
    what changed for "afresh" ("torch 2.13.1 -> 2.14.1")."""

    tree: Path
    state: str
    changes: tuple[str, ...] = ()
    recorded: tuple[str, ...] = ()  # the facts' keys, for the line that says what was compared

    def describe(self, project: Path) -> str:
        """The one line `build` prints about the tree."""
        try:
            where = self.tree.relative_to(project).as_posix()
        except ValueError:
            where = str(self.tree)
        if self.state == "afresh":
            return f"{', '.join(self.changes)}: build tree {where} started afresh"
        if self.state == "reused":
            same = [LABELS.get(k, k) for k in self.recorded]
            return f"build tree {where}: reused (built with the same {', '.join(same)})"
        return f"build tree {where}: new"


def torch_version_file(path: Path) -> tuple[str, str | None] | None:
    """(version, torch.version.cuda or None) from an installed torch's ``version.py``, read as
    text (nothing imported), or None when it cannot be read."""
    try:
        text = (path / "version.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    version = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
    cuda = re.search(r"^cuda\s*(?::[^=\n]*)?=\s*(?:None|['\"]([^'\"]*)['\"])", text, re.MULTILINE)
    if version is None:
        return None
    return version.group(1), (cuda.group(1) or None) if cuda else None


def _resolved(name: str, env: Mapping[str, str]) -> str | None:
    """The real file a compiler command (`gcc -pthread`, `/usr/bin/c++`, `ccache gcc`) runs, or None."""
    import shlex

    from buildrows.process.runner import find_tool

    try:
        words = shlex.split(name)
    except ValueError:
        words = name.split()
    words = [w for w in words if not w.startswith("-")]
    if words and os.path.basename(words[0]) in ("ccache", "sccache") and len(words) > 1:
        words = words[1:]  # a launcher is not what builds the objects
    found = find_tool(words[0], env) if words else None
    return os.path.realpath(found) if found else None


def _tool_version(tool: str, env: Mapping[str, str]) -> str:
    from buildrows.process.runner import capture

    got = capture([tool, "--version"], env, timeout=60)
    first = (got.output.strip().splitlines() or [""])[0].strip()
    return first if got.code == 0 and first else "(version unknown)"


def facts(plan: RowPlan, bp: BuildPlan, python: str | None, project: Path, env: Mapping[str, str], *,
          isolation: bool) -> dict[str, str]:
    """What the row's build tree is built with, as the build's command will find it (`env`: the
    environment its command runs with)."""
    from buildrows.build.doctor_python import build_requirements
    from buildrows.plan.torchenv import uses_torch
    from buildrows.process.runner import capture

    out: dict[str, str] = {}
    torch_dir: str | None = None
    if python is not None:
        got = capture([python, "-c", _PROBE], env, timeout=120)
        lines = [ln for ln in got.output.splitlines() if ln.startswith("BUILDROWS_TREE=")]
        if got.code == 0 and lines:
            data = json.loads(lines[-1].removeprefix("BUILDROWS_TREE="))
            out["python"] = f"{data['python']} {data['version']}"
            torch_dir = data.get("torch")
        else:
            out["python"] = f"{python} (did not run)"
    reqs, _ = build_requirements(project, bp.driver)
    if python is not None and uses_torch(project, reqs):
        if isolation:
            out["torch"] = ISOLATED
        elif torch_dir is None:
            out["torch"] = "not installed"
        else:
            read = torch_version_file(Path(torch_dir))
            # Its version and CUDA, not where it is: another environment's same torch builds the same objects.
            out["torch"] = f"{read[0]} ({'CUDA ' + read[1] if read[1] else 'CPU'})" if read else f"{torch_dir} (version unreadable)"
    comp = plan.compiler
    if comp is not None:
        options = " ".join(comp.argv[1:])
        out["nvcc"] = f"{comp.path} {comp.version or '?'}" + (f" {options}" if options else "")
        out["cuda_root"] = plan.cuda_home or comp.toolkit_root
    for key, var, default in (("cc", "CC", "cc"), ("cxx", "CXX", "c++"), ("cuda_host", "CUDAHOSTCXX", "")):
        name = env.get(var, "").strip() or default
        if name:
            out[key] = _resolved(name, env) or f"{name} (not found)"
    if _runs_cmake(bp, project):
        from buildrows.process.runner import find_tool

        cmake = find_tool("cmake", env)
        out["cmake"] = f"{os.path.realpath(cmake)} {_tool_version(cmake, env)}" if cmake else "not found"
        g = plan.generator
        out["generator"] = " ".join(x for x in (g.generator, g.toolset, g.architecture) if x)
    if bp.driver == "setup.py":
        out["variables"] = json.dumps(dict(sorted(plan.environment)), sort_keys=True)
        flags = {k: env[k] for k in SETUPTOOLS_FLAGS if k in env}
        if flags:
            out["flags"] = json.dumps(flags, sort_keys=True)
    return out


def _runs_cmake(bp: BuildPlan, project: Path) -> bool:
    """Whether the build runs CMake in the tree: the CMake drivers, and a setup.py that calls it."""
    if bp.driver != "setup.py":
        return True
    try:
        return "cmake" in (project / "setup.py").read_text(encoding="utf-8", errors="replace").lower()
    except OSError:
        return False


def read_record(tree: Path) -> dict[str, str] | None:
    """The facts a tree recorded, or None (no record, a malformed one, another format)."""
    try:
        raw = json.loads((tree / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # RecursionError: nested 100,000 deep, not ours
        return None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or not isinstance(raw.get("facts"), dict):
        return None
    got = raw["facts"]
    return {str(k): str(v) for k, v in got.items()}


def write_record(tree: Path, built_with: Mapping[str, str]) -> None:
    tree.mkdir(parents=True, exist_ok=True)
    data = {"format": FORMAT, "facts": dict(built_with),
            "note": "what built this tree (buildrows.build.buildtree); a change starts it afresh"}
    (tree / RECORD).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def changes(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    """Each fact that differs, as "torch 2.13.1 (CPU) at ... -> 2.14.1 (CPU) at ..."."""
    out = []
    for key in [*new, *(k for k in old if k not in new)]:
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        label = LABELS.get(key, key)
        if key in ("variables", "flags"):
            out.append(f"{label} {_variables_change(a, b)}")
        elif key == "torch" and b == ISOLATED:
            out.append("torch of an isolated build (not known before it runs)")
        else:
            out.append(f"{label} {a or 'none'} -> {b or 'none'}")
    return out


def _variables_change(a: str | None, b: str | None) -> str:
    """Which build variables changed: "TORCH_CUDA_ARCH_LIST 8.0 -> 9.0"."""
    try:
        old, new = json.loads(a or "{}"), json.loads(b or "{}")
    except ValueError:
        return "changed"
    diff = [f"{k} {old.get(k, '(unset)') or '(empty)'} -> {new.get(k, '(unset)') or '(empty)'}"
            for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return "; ".join(diff) or "changed"


def settle(tree: Path, built_with: Mapping[str, str]) -> Settled:
    """Reuse the tree when it was built with `built_with`; otherwise remove its contents (a tree
    with contents and no record too). Records `built_with` in the tree either way, before the
    build: a build that then fails leaves a tree made by exactly these."""
    if not tree.exists() or not any(tree.iterdir()):
        write_record(tree, built_with)
        return Settled(tree, "new")
    old = read_record(tree)
    if old is not None and old == dict(built_with) and built_with.get("torch") != ISOLATED:
        return Settled(tree, "reused", recorded=tuple(built_with))
    if old is None:
        why = ["no record of what built it (made before buildrows kept one, or by another build)"]
    else:
        why = changes(old, built_with) or ["torch of an isolated build (not known before it runs)"]
    _empty(tree)
    write_record(tree, built_with)
    return Settled(tree, "afresh", tuple(why))


def _empty(tree: Path) -> None:
    """Remove everything in the tree (the tree itself stays: a user's shell may be in it)."""
    for child in tree.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()

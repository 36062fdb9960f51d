"""A row's isolated build environment: a venv of the row's interpreter holding the project's build
requirements (and, for a PyTorch extension, the torch of the row's train), cached under the
buildrows cache and reused while the interpreter, the requirements, the torch and the project are
unchanged (the key hashes them all: one project's environment never serves another, so nothing
installed for one leaks into another's build). The commands are computed here and run by
`buildrows.process.runner`; the stamp is written last, so an interrupted set-up is redone, never reused."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from buildrows.plan.provisioned import envs_dir
from buildrows.policy.model import Policy, Row
from buildrows.process.runner import Command
from buildrows.provision.interpreters import Interpreter, probe
from buildrows.provision.torch import DEFAULT_INDEX, REPORT, InstalledTorch, TorchInstall

STAMP = "buildrows-env.json"
#: Bumped when the environment's layout changes, so old environments are not reused.
FORMAT = 2


@dataclass(frozen=True)
class BuildEnv:
    """Where the row's environment lives, and whether it is ready to use as it is."""

    base: Interpreter
    requirements: tuple[str, ...]
    root: Path
    ready: bool
    project: str = ""  # the project it serves (resolved path)
    torch: TorchInstall | None = None  # the torch of the row's train, installed first
    backend: bool = False  # also install what the backend asks for (the setup.py driver's frontend checks it)

    @property
    def python(self) -> str:
        return str(self.root / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))

    @property
    def interpreter(self) -> Interpreter:
        return Interpreter(self.python, self.base.python, self.base.version, f"row environment of {self.base.path}")

    def commands(self) -> tuple[Command, ...]:
        """Create the venv from the row's interpreter and install the requirements into it."""
        create = Command("build environment (venv)", (self.base.path, "-m", "venv", "--clear", str(self.root)))
        pip = (self.python, "-m", "pip", "install", "--disable-pip-version-check", "-q")
        install = Command("build environment (requirements)", (*pip, *self.requirements))
        out = [create]
        if self.torch is not None:
            # torch first, from its train's index (with the project's own torch requirement, so
            # both hold); the other requirements then find it installed.
            own = tuple(r for r in self.requirements if _is_torch(r))
            report = ("--report", str(self.root / REPORT))  # which file, from which index: verify_torch reads it
            out.append(Command(f"build environment (torch for {self.torch.accel})",
                               (*pip, *report, *self.torch.pip_arguments(), *own),
                               notes=(f"the torch of the row's train: {self.torch.describe()}",)))
        out.append(install)
        if self.backend and self.project:
            # The frontend checks what the backend's get_requires_for_build_wheel adds (an older
            # setuptools asks for `wheel`): install that too, as an isolated frontend would.
            out.append(Command("build environment (what the backend asks for)",
                               (self.python, "-c", _BACKEND_REQUIRES, self.project), cwd=self.project))
        return tuple(out)


#: Ask the project's PEP 517 backend (through `build`, the frontend the environment holds) what
#: it needs to build a wheel, and install it. A backend that cannot answer here is reported, not
#: fatal: the build itself then says what is wrong, with the row's environment.
_BACKEND_REQUIRES = (
    "import subprocess, sys\n"
    "try:\n"
    "    from build import ProjectBuilder\n"
    "    reqs = sorted(ProjectBuilder(sys.argv[1]).get_requires_for_build('wheel'))\n"
    "except Exception as e:\n"
    "    print(f'could not ask the build backend what it needs: {e}')\n"
    "    raise SystemExit(0)\n"
    "print('the backend asks for: ' + (', '.join(reqs) or 'nothing more'))\n"
    "if reqs:\n"
    "    subprocess.check_call([sys.executable, '-m', 'pip', 'install', '--disable-pip-version-check', '-q', *reqs])\n"
)


def _is_torch(requirement: str) -> bool:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(requirement).name.lower() == "torch"
    except InvalidRequirement:
        return False


def env_key(base: Interpreter, requirements: Sequence[str], project: str = "",
            torch: TorchInstall | None = None) -> str:
    """What the environment depends on: the interpreter (its real file and version), the
    requirements, the project it serves and the torch it holds."""
    # The torch's accelerator too (issue 35): with one index for every row (BUILDROWS_TORCH_INDEX=pypi,
    # or a template without {accel}) a CPU row once reused its CUDA row's environment.
    data = json.dumps([FORMAT, os.path.realpath(base.path), base.version, sorted(requirements), project,
                       None if torch is None else [torch.requirement, torch.index, torch.accel]])
    return hashlib.sha256(data.encode()).hexdigest()[:16]


def plan_env(base: Interpreter, requirements: Sequence[str], env: Mapping[str, str], *,
             project: Path | None = None, torch: TorchInstall | None = None) -> BuildEnv:
    """The environment for this interpreter, requirements, project and torch; `ready` when a
    complete one exists."""
    where = str(project.resolve()) if project is not None else ""
    root = envs_dir(env) / f"py{base.python}-{env_key(base, requirements, where, torch)}"
    built = BuildEnv(base, tuple(requirements), root, False, where, torch)
    stamp = root / STAMP
    if stamp.is_file() and os.access(built.python, os.X_OK) and probe(built.python, env)[0] is not None:
        return BuildEnv(base, tuple(requirements), root, True, where, torch)
    return built


def torch_of(policy: Policy, row: Row, project: Path, requirements: Sequence[str],
             env: Mapping[str, str]) -> TorchInstall | None:
    """The torch the row's environment needs: the row's train's, when the project builds against
    torch (buildrows.plan.torchenv.uses_torch), else None."""
    from buildrows.plan.torchenv import uses_torch
    from buildrows.provision.torch import torch_for_row

    if not uses_torch(project, requirements):
        return None
    return torch_for_row(row, policy.project.torch, env)


def plan_row_env(policy: Policy, row: Row, base: Interpreter, project: Path, requirements: Sequence[str],
                 env: Mapping[str, str], *, backend: bool = False) -> BuildEnv:
    """The row's environment of `base` for `project`: the frontend and the project's build
    `requirements` (the caller's list, FRONTEND first), and the torch of the row's train when the
    project builds against torch. `build --provision` makes it; doctor judges it when it exists."""
    from dataclasses import replace

    torch = torch_of(policy, row, project, requirements, env)
    return replace(plan_env(base, requirements, env, project=project, torch=torch), backend=backend)


def unreachable_index(build_env: BuildEnv, row: Row, command: str, env: Mapping[str, str]) -> str | None:
    """The refusal's text when the row's torch index does not answer (asked once, in seconds,
    before pip would retry it for minutes), with the routes that work; None when it answers or
    pip's own configuration is used. `command`: the build command the fix repeats."""
    from buildrows.provision.torch import INDEX_VARIABLE, index_problem, unreachable_fix

    torch = build_env.torch
    if torch is None or torch.index is None:
        return None
    problem = index_problem(torch.index)
    if problem is None:
        return None
    return (f"row {row.name}: the torch index of its train does not answer: {problem} (set by "
            f"{INDEX_VARIABLE if env.get(INDEX_VARIABLE, '').strip() else 'the default index'}); nothing was installed\n"
            + unreachable_fix(row, torch, command))


def start(build_env: BuildEnv) -> None:
    """Remove what an interrupted set-up left, before the commands run."""
    if build_env.root.exists():
        shutil.rmtree(build_env.root)
    build_env.root.parent.mkdir(parents=True, exist_ok=True)


def verify_torch(build_env: BuildEnv, row: Row, env: Mapping[str, str]) -> tuple[str, str | None]:
    """After the set-up: the torch the environment imports is the row's (its train's CUDA, none
    for a CPU row; the policy's version). Returns (what it imports, None) when it is, or
    (what, the refusal's text naming what pip installed it from); then the environment is
    removed, so nothing is cached under the row's key."""
    from buildrows.provision.torch import answered_from, ask_installed, torch_problem

    if build_env.torch is None:
        return "no torch", None
    got, why = ask_installed(build_env.python, env)
    problem = torch_problem(row, build_env.torch, got) if got is not None else f"a torch that does not import: {why}"
    if problem is None and got is not None:
        return got.describe(), None
    source = answered_from(str(build_env.root / REPORT))
    asked = build_env.torch.index or "pip's configured index"
    shutil.rmtree(build_env.root, ignore_errors=True)
    return (got.describe() if got else "torch"), (f"--provision installed {problem}\n"
            f"    pip installed it from: {source or 'unknown (pip wrote no report)'}\n"
            f"    the row's index: {asked}; pip also takes candidates from its configuration's extra indexes and "
            "find-links (pip config list; PIP_EXTRA_INDEX_URL, PIP_FIND_LINKS), and falls back to them when that "
            "index does not answer\n"
            f"    nothing was cached: the environment {build_env.root} is removed\n"
            + torch_fix(row, build_env.torch, got))


def torch_fix(row: Row, torch: TorchInstall, got: InstalledTorch | None) -> str:
    """The fix for a torch that is not the row's, offering only what can resolve: a local-version
    pin (`2.14.1+cu130`) exists on PyTorch's per-train indexes, never on PyPI (no local versions
    there), so it is offered only when the row's index is such an index; PyPI's Linux torch is a
    CUDA build, so `pypi` is never the way to a CPU row's torch there."""
    lines = ["    fix: make the row's index reachable, or point BUILDROWS_TORCH_INDEX at a mirror of "
             f"{DEFAULT_INDEX} (a URL with {{accel}})"]
    if torch.index is not None and got is not None:
        public = got.version.split("+", 1)[0]
        lines.append(f"or pin the policy's torch to the row's build of it: torch = \"{public}+{torch.accel}\" "
                     "under [project]")
    return "; ".join(lines)


def finish(build_env: BuildEnv) -> None:
    """Stamp the environment complete (after its commands succeeded)."""
    data = {"format": FORMAT, "interpreter": build_env.base.path, "version": build_env.base.version,
            "requirements": list(build_env.requirements), "project": build_env.project,
            "torch": None if build_env.torch is None else build_env.torch.describe()}
    (build_env.root / STAMP).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")

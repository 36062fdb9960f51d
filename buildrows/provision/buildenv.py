"""A row's isolated build environment: a venv of the row's interpreter holding the project's build
requirements, cached under the buildrows cache and reused while the interpreter and the
requirements are unchanged (the key hashes both). The commands are computed here and run by
`buildrows.build.runner`; the stamp is written last, so an interrupted set-up is redone, never reused."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from buildrows.build.runner import Command
from buildrows.provision.cache import envs_dir
from buildrows.provision.interpreters import Interpreter, probe

STAMP = "buildrows-env.json"
#: Bumped when the environment's layout changes, so old environments are not reused.
FORMAT = 1


@dataclass(frozen=True)
class BuildEnv:
    """Where the row's environment lives, and whether it is ready to use as it is."""

    base: Interpreter
    requirements: tuple[str, ...]
    root: Path
    ready: bool

    @property
    def python(self) -> str:
        return str(self.root / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))

    @property
    def interpreter(self) -> Interpreter:
        return Interpreter(self.python, self.base.python, self.base.version, f"row environment of {self.base.path}")

    def commands(self) -> tuple[Command, ...]:
        """Create the venv from the row's interpreter and install the requirements into it."""
        create = Command("build environment (venv)", (self.base.path, "-m", "venv", "--clear", str(self.root)))
        install = Command("build environment (requirements)",
                          (self.python, "-m", "pip", "install", "--disable-pip-version-check", "-q",
                           *self.requirements))
        return (create, install)


def env_key(base: Interpreter, requirements: Sequence[str]) -> str:
    """What the environment depends on: the interpreter (its real file and version) and the requirements."""
    data = json.dumps([FORMAT, os.path.realpath(base.path), base.version, sorted(requirements)])
    return hashlib.sha256(data.encode()).hexdigest()[:16]


def plan_env(base: Interpreter, requirements: Sequence[str], env: Mapping[str, str]) -> BuildEnv:
    """The environment for this interpreter and requirements; `ready` when a complete one exists."""
    root = envs_dir(env) / f"py{base.python}-{env_key(base, requirements)}"
    built = BuildEnv(base, tuple(requirements), root, False)
    stamp = root / STAMP
    if stamp.is_file() and os.access(built.python, os.X_OK) and probe(built.python, env)[0] is not None:
        return BuildEnv(base, tuple(requirements), root, True)
    return built


def start(build_env: BuildEnv) -> None:
    """Remove what an interrupted set-up left, before the commands run."""
    if build_env.root.exists():
        shutil.rmtree(build_env.root)
    build_env.root.parent.mkdir(parents=True, exist_ok=True)


def finish(build_env: BuildEnv) -> None:
    """Stamp the environment complete (after its commands succeeded)."""
    data = {"format": FORMAT, "interpreter": build_env.base.path, "version": build_env.base.version,
            "requirements": list(build_env.requirements)}
    (build_env.root / STAMP).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")

"""What a row's build sees in its environment: one builder that `build`, `env` and the CI hook share.

Issue 35: `build` dropped the interpreter's own `-Wl,-rpath,<LIBDIR>` from a setup.py row's
LDSHARED, while the hook and `env` (the CI path: BUILD_ENV_FILE, then the workflow's own build
command) did not, so the same row passed `buildrows build` and failed the post-script's
runtime-reached check. Everything a row's build gets from its plan and its interpreter is now
computed here, and every path takes it from here:

- the row's variables (`buildrows.render.envfile.environment_from_plan`: identity, architecture
  lists, BUILDROWS_CUDA_GENCODE / BUILDROWS_CUDA_ARCHS, CUDA variables, generator, CMAKE_ARGS,
  the wheel's per-row metadata);
- LDSHARED without the interpreter's own rpath, for a Linux setup.py row
  (`buildrows.build.ldshared`);
- SOURCE_DATE_EPOCH (the user's, else the project's last commit), so the wheel's bytes depend on
  the sources wherever it is built.

What differs between the paths, on purpose (docs/ci.md, "What the build sees"): `build` also
sets PYTHONPATH (the metadata provider), DIST_EXTRA_CONFIG (setup.py: the row's own build
directory), its compiler cache's variables and PATH entries (the row environment's bin, the row
toolkit's bin, ccache); the hook writes the compiler cache's variables only with a remote store
and BUILDROWS_CUDA_BIN for a toolkit it assembled; a scikit-build-core row's local build passes
the generator and cache as `-C` settings where the CI build reads CMAKE_ARGS; `build` pins the
interpreter it builds with in CMAKE_ARGS (Python_EXECUTABLE), where the CI build step's frontend
(an isolated one, in test-infra) picks its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from buildrows.frozen import Frozen, frozen_dataclass
from buildrows.plan.row import RowPlan
from buildrows.policy.model import Driver, Policy, Row

if TYPE_CHECKING:
    from buildrows.provision.interpreters import Interpreter


@frozen_dataclass(frozen=True, eq=False, repr=False)
class BuildVariables(Frozen):
    """The variables a row's build gets, and a line for each one chosen for a reason worth saying."""

    values: tuple[tuple[str, str], ...]
    notes: tuple[str, ...]

    def as_dict(self) -> dict[str, str]:
        return dict(self.values)


def link_variables(plan: RowPlan, driver: Driver, python: str | None,
                   env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """LDSHARED for a Linux setup.py row whose interpreter links with an rpath into its own lib
    (pyenv's, conda's): the interpreter's link command without it. Empty when the user set
    LDSHARED, the interpreter writes no such rpath, or it cannot be asked."""
    if driver != "setup.py" or plan.row.os != "linux" or not python:
        return {}, []
    from buildrows.build.ldshared import build_ldshared, interpreter_link, own_rpaths

    link = interpreter_link(python)
    ldshared = build_ldshared(link, env)
    if ldshared is None:
        return {}, []
    return {"LDSHARED": ldshared}, [
        f"LDSHARED: the interpreter's link command without -Wl,-rpath,{', '.join(own_rpaths(link.ldshared, link.libdir))} "
        "(its own lib directory: no extension needs it, and a wheel must not carry the builder's path)"]


def build_variables(plan: RowPlan, driver: Driver, python: str | None, project: Path | None,
                    env: Mapping[str, str], *, row_only: bool = False) -> BuildVariables:
    """The environment a build of `plan` sees, whichever path runs it. `python`: the interpreter
    that builds (its LDSHARED; None: not known here). `project`: where SOURCE_DATE_EPOCH's commit
    time is read (None: not set). `row_only`: the row's own variables without the toolchain,
    generator and CMAKE_ARGS (a local scikit-build-core build passes those as -C settings)."""
    from buildrows.render.envfile import environment_from_plan, row_variables

    values = row_variables(plan) if row_only else environment_from_plan(plan, env)
    notes: list[str] = []
    link, why = link_variables(plan, driver, python, {**env, **values})
    values.update(link)
    notes += why
    if project is not None:
        from buildrows.build.epoch import source_date_epoch

        epoch, where = source_date_epoch(project, env)
        values["SOURCE_DATE_EPOCH"] = epoch
        notes.append(f"SOURCE_DATE_EPOCH={epoch} ({where}): a rebuild of the same sources gives the same wheel")
    return BuildVariables(tuple(values.items()), tuple(notes))


def env_command_variables(policy: Policy, row: Row, env: Mapping[str, str], *,
                          check_toolchain: bool = True) -> dict[str, str]:
    """What `buildrows env ROW` writes: the row planned as `env` plans it (refusing like render),
    then `build_variables` with the row's interpreter on this machine (its LDSHARED; none found:
    none set) and the policy's project (SOURCE_DATE_EPOCH)."""
    from buildrows.plan.row import plan_row

    plan = plan_row(policy, row, env, check_toolchain=check_toolchain, step="env")
    python = None
    if row.os == "linux" and policy.project.driver == "setup.py":  # LDSHARED: only setuptools links with it
        from buildrows.plan.host import row_python

        python = row_python(row, env)
    return build_variables(plan, policy.project.driver, python, policy_project(policy), env).as_dict()


def policy_project(policy: Policy) -> Path:
    """The project the policy builds (its source-dir, relative to the policy file), as
    `buildrows.build.drivers.project_dir` gives it without --project; here without importing the
    drivers (the hook starts fast)."""
    return (Path(policy.path).resolve().parent / policy.project.source_dir).resolve()


def running_interpreter(row: Row) -> Interpreter | None:
    """This interpreter, when it is the row's Python: the hook's, which the CI build step runs."""
    import sys

    from buildrows.plan.host import host_python
    from buildrows.provision.interpreters import Interpreter

    if host_python() != row.python:
        return None
    # sys.version's first word is what platform.python_version() parses out of it (3.13.0rc1 too),
    # without importing platform at the hook's start-up.
    return Interpreter(sys.executable, row.python, sys.version.split()[0], "running")

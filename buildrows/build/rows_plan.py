"""Planning the rows of one `build`: the invocation's settings, which rows lead and which follow, how many build at once.

`_Run` holds one invocation's settings and what it memoises across rows (the compiler cache, the
remote store, CMake's detection); `provide` gives each row its interpreter and, with
--provision, its build environment and toolkit. `buildrows.build.orchestrate` runs the plan."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from buildrows.build import drivers
    from buildrows.build.compiler_cache import CompilerCache
    from buildrows.build.configure_seed import Seed
    from buildrows.build.prepare import BuildOptions, Provided
    from buildrows.build.remote_cache import Remote
    from buildrows.build.summary import RowOutcome
    from buildrows.plan.toolchain import CudaCompiler, HostOs
    from buildrows.policy.model import Driver, Policy, Row
    from buildrows.provision.buildenv import BuildEnv
    from buildrows.provision.interpreters import Interpreter
    from buildrows.ui import UI


class _Run:
    """One `build` invocation: its settings, and what it memoises across rows."""

    def __init__(self, pol: Policy, env: Mapping[str, str], host: HostOs, args: BuildOptions, ui: UI) -> None:
        self.pol, self.env, self.host, self.args, self.ui = pol, env, host, args, ui
        self.ccache: str | None = None
        self.remote: Remote | None = None  # the remote compiler cache, decided once for every row
        self._toolkit_files: dict[tuple[str, ...], tuple[str, ...]] = {}
        self.seeds: dict[str, Seed] = {}  # CMake compiler detection by key (buildrows.build.configure_seed)
        # The wheels this invocation moved into the wheel directory, by row: a row never replaces another's.
        self.written: dict[Path, str] = {}
        self.lock = threading.Lock()  # rows build in threads (followers): `written` is shared
        from buildrows.build.remote_cache import resolve, without_writer

        # Without a store, still without the writer's secret in the build (buildrows.build.remote_cache).
        self.remote = without_writer(pol.compiler_cache, env, "no compiler cache")
        if not args.no_compiler_cache:
            from buildrows.build.compiler_cache import INSTALL_HINT, find_ccache

            self.ccache = find_ccache(env)
            if self.ccache is None:
                ui.warn(f"no ccache found: building without the compiler cache\n    fix: {INSTALL_HINT}")
            else:
                self.remote = resolve(pol.compiler_cache, env, ui)
        from buildrows.build.remote_cache import withhold

        # Every step of a job that does not write runs without the writer's variables (a build
        # requirement's setup.py as much as the project's own build).
        self.env = withhold(self.remote, env)

    def seeding(self, bp: drivers.BuildPlan, base_env: Mapping[str, str]) -> tuple[str, Path] | None:
        """(key, build tree) under which this row's CMake compiler detection is shared with the
        other rows of this invocation, or None (only scikit-build-core builds that name their tree)."""
        if bp.driver != "scikit-build-core" or len(bp.commands) != 1:
            return None
        from buildrows.build import configure_seed

        cmd = bp.commands[0]
        tree = configure_seed.tree_of(cmd.argv)
        if tree is None:
            return None
        return configure_seed.key(cmd.argv, cmd.environment(base_env)), tree

    def compiler_cache(self, row: Row, project: Path, compiler: CudaCompiler | None,
                       cache: Mapping[str, str]) -> CompilerCache | None:
        """The compiler cache for this row's build, keyed on its toolkit and host compilers."""
        if self.ccache is None:
            return None
        import os

        from buildrows.build import compiler_cache as cc

        cuda_files: tuple[str, ...] = ()
        if compiler is not None:
            if compiler.argv not in self._toolkit_files:
                self._toolkit_files[compiler.argv] = cc.toolkit_files(compiler.argv, self.env)
            named = [cache.get("CMAKE_CUDA_HOST_COMPILER", "")]
            cuda_files = self._toolkit_files[compiler.argv] + cc.host_compilers(self.env, named)
        directory = cc.cache_dir(self.env)
        stats = directory / "stats" / f"{row.name}-{os.getpid()}.log"
        remote = self.remote.storage if self.remote is not None else None
        return cc.CompilerCache(self.ccache, directory, project, stats, cc.namespace(self.env), cuda_files, remote)


def _jobs(args: BuildOptions, rows: int, driver: Driver, ui: UI) -> int:
    """How many rows may build at once: --jobs, else the CPUs (at most 4); one without the
    compiler cache (the rows after a train's first would each compile everything), and one for
    the drivers whose builds write into the project itself (cmake-presets renders its presets
    there; setuptools writes build/ and *.egg-info beside setup.py)."""
    import os

    if driver != "scikit-build-core":
        if args.jobs is not None and args.jobs > 1:
            ui.warn(f"--jobs {args.jobs}: the {driver} driver's builds write into the project itself, so its rows "
                    "build one at a time")
        return 1
    if args.jobs is not None:
        return max(1, min(int(args.jobs), rows))
    if args.no_compiler_cache:
        return 1
    return max(1, min(os.cpu_count() or 1, 4, rows))


def _leaders_and_followers(rows: list[Row]) -> tuple[list[Row], list[Row]]:
    """Rows that differ only in their Python share a compile: the first of each such group (the
    leader) builds alone and fills the compiler cache and CMake's detection; the others (the
    followers) then build beside each other, taking both."""
    seen: set[tuple[object, ...]] = set()
    leaders: list[Row] = []
    followers: list[Row] = []
    for row in rows:
        group = (row.platform, row.cuda, row.archs, row.cache, row.generator, row.switches, row.runtime)
        (followers if group in seen else leaders).append(row)
        seen.add(group)
    return leaders, followers


def _stop_reason(outcomes: Mapping[str, RowOutcome], keep_going: bool) -> str:
    """Why the remaining rows are not built ("" to go on): without --keep-going, the first failure stops."""
    from buildrows.process import progress

    if progress.INTERRUPTED.is_set():
        return "not started: stopped by the user"
    if keep_going:
        return ""
    bad = [o for o in outcomes.values() if o.exit_code != 0]
    if not bad:
        return ""
    how = {"refused": "was refused", "interrupted": "was interrupted"}.get(bad[0].status, "failed")
    return f"stopped after {bad[0].row} {how} (--keep-going builds the rest)"


def provide(pol: Policy, row: Row, env: Mapping[str, str], host: HostOs, args: BuildOptions,
            ui: UI) -> Provided:
    """The row's interpreter (a real one: run and checked) and, with --provision, its build
    environment and toolkit. Without --provision nothing is installed: the interpreter found is
    the one that builds, and doctor reports what it lacks."""
    from buildrows.build.prepare import Provided, driver_of, project_of
    from buildrows.errors import BadInput, Refused
    from buildrows.provision.interpreters import find_interpreter, install_hint

    search = find_interpreter(row.python, env)
    interp = search.found
    if interp is None:
        turned = "".join(f"\n    {r.path} ({r.source}) {r.why}" for r in search.rejected[:6])
        raise Refused(f"no Python {row.python} that runs to build {row.name} with (looked in {', '.join(search.looked)})"
                      f"{turned}\n    fix: {install_hint(row.python, env)}")
    ui.info(f"{row.name}: {interp.describe()}")
    toolkit: str | None = None
    if not args.provision:
        return Provided(interp, None)
    if row.cuda is not None:
        from buildrows.plan.nvcc_archs import check_cuda_compiler

        try:
            comp = check_cuda_compiler(row, env, host)
            ui.info(f"{row.name}: this machine's nvcc is the row's train: {comp.describe()}")
        except (Refused, BadInput) as e:
            from buildrows.provision import toolkit as tk

            ui.info(f"{row.name}: {str(e).splitlines()[0]}")
            ui.step(f"provision CUDA {row.cuda.dotted} for {row.name}")
            got = tk.install(row.cuda, row.platform, env, progress=ui.info)
            ui.info(f"  toolkit: {got.describe()}")
            toolkit = str(got.root)
    if driver_of(pol, args) == "cmake-presets":
        return Provided(interp, toolkit)
    return Provided(build_environment(pol, row, interp, project_of(pol, args), driver_of(pol, args), env, ui), toolkit)


def build_environment(pol: Policy, row: Row, interp: Interpreter, project: Path, driver: Driver,
                      env: Mapping[str, str], ui: UI) -> Interpreter:
    """The row's cached build environment (a venv of `interp` with the frontend and the project's
    build requirements), created or reused."""
    from buildrows.build.doctor_python import FRONTEND, build_requirements
    from buildrows.errors import BadInput
    from buildrows.process.runner import run_step
    from buildrows.provision import buildenv

    reqs, problem = build_requirements(project, driver)
    if problem is not None:
        raise BadInput(f"{problem}\n    fix: give the project a pyproject.toml with [build-system] requires")
    be = buildenv.plan_row_env(pol, row, interp, project, [FRONTEND, *reqs], env, backend=driver == "setup.py")
    if be.ready:
        torch = f", {be.torch.describe()}" if be.torch is not None else ""
        ui.info(f"  build environment: {be.root} (reused: same interpreter, requirements and project{torch})")
        return be.interpreter
    import shlex

    unreachable = buildenv.unreachable_index(be, row, f"buildrows --config {shlex.quote(str(pol.path))} build {row.name} --provision", env)
    if unreachable is not None:
        from buildrows.errors import Refused

        raise Refused(unreachable)
    ui.step(f"build environment for Python {interp.python}: {be.root}")
    buildenv.start(be)
    from buildrows.build.prepare import with_interpreter_bin

    for cmd in be.commands():  # the environment's bin first once it exists: its programs, as in the build
        run_step(ui, cmd, with_interpreter_bin(env, be.python))
    _verify_torch(be, row, env, ui)
    buildenv.finish(be)
    return be.interpreter


def _verify_torch(be: BuildEnv, row: Row, env: Mapping[str, str], ui: UI) -> None:
    """The torch just installed is the row's, or the row is refused and nothing is cached (issue 28)."""
    from buildrows.errors import Refused
    from buildrows.provision import buildenv

    if be.torch is None:
        return
    got, problem = buildenv.verify_torch(be, row, env)
    if problem is not None:
        raise Refused(f"row {row.name}: {problem}")
    ui.info(f"  torch verified: the environment imports {got}, the torch of {row.name}")

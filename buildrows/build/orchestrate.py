"""`buildrows build ROW...` as a library: resolve, doctor, render, build, check the wheel - the way
CI does, for every selected row, with a summary at the end. `buildrows.commands.build` only parses
its arguments into `BuildOptions` and calls `build_rows`."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from buildrows.provision.wheel_dirs import KEPT, REJECTED, rejected_dir
from buildrows.ui import UI

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from contextlib import AbstractContextManager

    from buildrows.build import drivers
    from buildrows.build.compiler_cache import CacheStats, CompilerCache
    from buildrows.build.configure_seed import Seed
    from buildrows.build.prepare import BuildOptions, Provided
    from buildrows.build.remote_cache import Remote
    from buildrows.build.summary import RowOutcome
    from buildrows.build.wheeldir import Owned
    from buildrows.check.members import MemberDifference
    from buildrows.errors import BuildrowsError
    from buildrows.plan.row import RowPlan
    from buildrows.plan.toolchain import CudaCompiler, HostOs
    from buildrows.policy.model import Driver, Policy, Row
    from buildrows.provision.buildenv import BuildEnv
    from buildrows.provision.interpreters import Interpreter


#: Where a row built beside others writes its wheel first, under the wheel directory.
STAGING = ".buildrows-staging"
# A wheel that failed its check goes under the wheel directory's .buildrows/rejected/, an earlier
# build's wheel under .buildrows/earlier-*/ (buildrows.provision.wheel_dirs): never at the top.


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


def build_rows(args: BuildOptions, ui: UI) -> int:
    """`buildrows build`: every selected row end to end, then the summary; returns the worst exit code."""
    import time

    from buildrows.build.prepare import doctor_row, refuse_empty, resolve_rows, setup
    from buildrows.build.summary import RowOutcome, worst_exit
    from buildrows.errors import BuildrowsError
    from buildrows.process import progress
    from buildrows.process.progress import duration

    started = time.perf_counter()
    progress.INTERRUPTED.clear()
    json_out = None
    if args.json:  # the document on stdout; what a person reads (the table included) on stderr
        import copy

        json_out, ui = ui.out, copy.copy(ui)
        ui.out = ui.err
    pol, env, host = setup(args, ui)
    from buildrows.build.option_fit import refuse_unfit_options
    from buildrows.build.prepare import driver_of

    refuse_unfit_options(driver_of(pol, args), args.isolation, str(pol.path))
    _settle_wheel_dir(pol, args, ui)
    rows = resolve_rows(pol, args.selectors, env, host, ui, keep_empty=True)
    require_places(pol, env, args)
    _clean_wheel_dir(pol, args, ui)
    state = _Run(pol, env, host, args, ui)
    env = dict(state.env)  # without the writer's secret unless this job writes with it
    outcomes: dict[str, RowOutcome] = {}
    provided: dict[str, Provided] = {}
    # Every row's interpreter, toolkit and toolchain first: a row that cannot be built is known
    # before a long build starts. One ::group:: per row on GitHub Actions (groups do not nest).
    ready: list[Row] = []
    doctor_start = time.perf_counter()
    for row in rows:
        if progress.INTERRUPTED.is_set():
            outcomes[row.name] = RowOutcome(row.name, "skipped", reason="not started: stopped by the user")
            continue
        with ui.group(f"prepare {row.name}"):
            try:
                refuse_empty(row)
                row.require_archs("build")
                provided[row.name] = provide(pol, row, env, host, args, ui)
                doctor_row(pol, row, env, host, args, ui, provided=provided[row.name])
                ready.append(row)
            except BuildrowsError as e:
                ui.error(e.title, str(e))
                outcomes[row.name] = _outcome_of_error(row, e)
            except Exception as e:  # a bug: reported for this row, the summary still printed
                outcomes[row.name] = _outcome_of_bug(row, e, ui)
            except KeyboardInterrupt:
                progress.interrupt_all()
                outcomes[row.name] = _interrupted(row, ui)
    ui.info(f"  provisioning and doctor took {duration(time.perf_counter() - doctor_start)}")
    number = {row.name: i for i, row in enumerate(ready, 1)}
    from buildrows.build.prepare import driver_of

    jobs = _jobs(args, len(ready), driver_of(pol, args), ui)
    if jobs > 1:
        from buildrows.build import source_outputs
        from buildrows.build.doctor_project import cmake_source_dir
        from buildrows.build.prepare import project_of

        project = project_of(pol, args)
        into = source_outputs.writes_into_source(project, cmake_source_dir(project, driver_of(pol, args)))
        if into is not None:
            # Rows building at once would write the same files (LightGBM's lib_lightgbm.so) and pack each other's.
            ui.info(f"  rows build one at a time: the project's build writes into its source tree ({into}); each "
                    "row's files there are moved aside while another row builds")
            jobs = 1
    leaders, followers = _leaders_and_followers(ready) if jobs > 1 else (ready, [])
    if len(leaders) > 1 and jobs > 1:  # rows that share nothing build beside each other
        _build_together(state, leaders, number, len(ready), provided, outcomes, jobs, followers=False)
    else:
        for row in leaders:
            stop_reason = _stop_reason(outcomes, args.keep_going)
            if stop_reason:
                outcomes[row.name] = RowOutcome(row.name, "skipped", reason=stop_reason)
                continue
            outcomes[row.name] = _build_one(state, row, f"row {number[row.name]}/{len(ready)}", provided.get(row.name))
    if followers:
        _build_together(state, followers, number, len(ready), provided, outcomes, jobs, followers=True)
    _clean_wheel_dir(pol, args, ui)  # again: a killed build's steps this one waited for may have ended since
    differences = _compare_members(state, rows, outcomes) if not progress.INTERRUPTED.is_set() else []
    ordered = [outcomes[r.name] for r in rows]
    _report(ordered, env, ui, differences, args)
    built = sum(1 for o in ordered if o.status == "built")
    ui.info(f"built {built} row{'s' if built != 1 else ''} in {duration(time.perf_counter() - started)}")
    if json_out is not None:
        import json

        from buildrows.build.summary import to_json

        doc = to_json(ordered, time.perf_counter() - started, [d.describe() for d in differences])
        json_out.write(json.dumps(doc, indent=2) + "\n")
        json_out.flush()
    return worst_exit(ordered)


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


def _build_one(state: _Run, row: Row, label: str, provided: Provided | None, prefixed: bool = False) -> RowOutcome:
    """Build one row under its header, its output prefixed with its name when rows build beside
    each other and kept in its log (buildrows.process.logs); every error becomes its outcome, with
    its time and its log."""
    import contextlib
    import copy
    import time
    from dataclasses import replace

    from buildrows.build.prepare import project_of
    from buildrows.errors import EXIT_EXTERNAL, EXIT_INTERRUPTED, BuildrowsError
    from buildrows.process import progress
    from buildrows.process.logs import RowLogs, log_root

    logs: RowLogs | None = RowLogs(log_root(project_of(state.pol, state.args), state.args.log_dir) / row.name)
    handle = None
    try:
        assert logs is not None
        handle = logs.start()
    except OSError as e:
        state.ui.warn(f"{row.name}'s log cannot be written ({e}): its output is shown, not kept")
        logs = None
    mine = copy.copy(state)
    ui = mine.ui = state.ui.for_row(row.name, prefixed=prefixed, log=handle, logs=logs)
    try:
        with ui.section(f"{label}: {row.name}"):
            start = time.perf_counter()
            try:
                outcome = build_row(mine, row, provided)
            except BuildrowsError as e:
                ui.error(e.title, str(e))
                outcome = _outcome_of_error(row, e, project_of(state.pol, state.args))
            except KeyboardInterrupt:  # outside a step (a step turns it into Interrupted)
                progress.interrupt_all()
                outcome = _interrupted(row, ui)
            except Exception as e:  # a bug: reported for this row, the summary still printed
                outcome = _outcome_of_bug(row, e, ui)
            log = None
            if logs is not None:
                step_failed = outcome.exit_code in (EXIT_EXTERNAL, EXIT_INTERRUPTED) and logs.last_step is not None
                log = str(logs.last_step if step_failed else logs.row_log)
            took = time.perf_counter() - start
            if prefixed:  # the row's end, among the other rows' lines
                ui.info(f"{outcome.status} in {took:.1f}s" + (f": {outcome.reason}" if outcome.reason else ""))
            return replace(outcome, seconds=took, log=log)
    except OSError as e:  # the row's own log on a full disk: said once, without the log
        from buildrows.process.diskfull import disk_full, is_disk_full

        if not is_disk_full(e):
            raise
        full = disk_full(e, f"while building {row.name}", (logs.directory if logs is not None else Path("."),))
        state.ui.error(full.title, str(full))
        return _outcome_of_error(row, full)
    finally:
        if handle is not None:
            with contextlib.suppress(OSError):  # what could not be flushed was said above
                handle.close()


def _interrupted(row: Row, ui: UI) -> RowOutcome:
    from buildrows.errors import Interrupted
    from buildrows.process.progress import TERMINATED

    who = "by SIGTERM (a CI runner cancelling the job?)" if TERMINATED.is_set() else "by the user (Ctrl-C)"
    e = Interrupted(f"stopped {who}\n    fix: run the same build again: its tree is kept and reused")
    ui.error(e.title, str(e))
    return _outcome_of_error(row, e)


def _build_together(state: _Run, rows: list[Row], number: Mapping[str, int], total: int,
                    provided: Mapping[str, Provided], outcomes: dict[str, RowOutcome], jobs: int, *,
                    followers: bool) -> None:
    """Build `rows` `jobs` at a time, their lines streamed as they come, each prefixed with its
    row's name: first the rows that share nothing (the first row of each group), then the rest
    of each group (`_leaders_and_followers`). Without --keep-going a failure stops the rows not
    yet started; Ctrl-C (landing in this, the main thread) stops every running row's step."""
    from concurrent.futures import ThreadPoolExecutor

    from buildrows.build.summary import RowOutcome
    from buildrows.process import progress

    jobs = min(jobs, len(rows))
    s = "s" if len(rows) != 1 else ""
    what = (f"{len(rows)} more row{s} {jobs} at a time (each takes the compiler cache and CMake's detection from its "
            "train's first row" if followers else f"{len(rows)} rows that share no compile {jobs} at a time (the "
            "first row of each train and set of switches")
    state.ui.info(f"  building {what}; --jobs 1 builds one at a time)" + ("; each line is prefixed with its row" if jobs > 1 else ""))

    lock = threading.Lock()

    def task(row: Row) -> None:
        with lock:
            stop_reason = _stop_reason(outcomes, state.args.keep_going)
        if stop_reason:
            outcome = RowOutcome(row.name, "skipped", reason=stop_reason)
        else:
            outcome = _build_one(state, row, f"row {number[row.name]}/{total}", provided.get(row.name),
                                 prefixed=jobs > 1)
        with lock:
            outcomes[row.name] = outcome

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for future in [pool.submit(task, row) for row in rows]:
            while True:
                try:
                    future.result()
                    break
                except KeyboardInterrupt:
                    progress.interrupt_all()


def _outcome_of_bug(row: Row, e: Exception, ui: UI) -> RowOutcome:
    """An unexpected exception in one row: reported as buildrows' bug (exit 1) for that row."""
    import os

    from buildrows.build.summary import RowOutcome
    from buildrows.errors import EXIT_INTERNAL

    ui.error("internal error", f"{type(e).__name__}: {e}\n    this is a bug in buildrows; please report it "
             "with the command you ran (set BUILDROWS_DEBUG=1 for the traceback)")
    if os.environ.get("BUILDROWS_DEBUG"):
        import traceback

        traceback.print_exception(e)
    return RowOutcome(row.name, "failed", EXIT_INTERNAL, reason=f"internal error: {type(e).__name__}: {e}")


def _outcome_of_error(row: Row, e: BuildrowsError, project: Path | None = None) -> RowOutcome:
    """The row's outcome from its error: the first line (the step's first error line, for a
    failed step; paths inside the project shortened) and the fix."""
    from buildrows.build.summary import RowOutcome, Status
    from buildrows.errors import EXIT_EXTERNAL, EXIT_INTERRUPTED, EXIT_REFUSED

    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    first = lines[0] if lines else e.title
    first = first.removeprefix(f"row {row.name} ")
    if first.endswith(":") and len(lines) > 1:  # "cannot be built (2 problems):" - say the first
        first = f"{first} {lines[1]}"
    import re

    step = re.match(r"step '(.+)' failed after [0-9.ms]+: (.+)$", first)
    if step and e.exit_code == EXIT_EXTERNAL:  # the error line is what a person needs; the log names the step
        first = re.sub(r"^(\.\./)+", "", step.group(2))  # the compiler ran in build/skbuild-ROW
    stopped = re.match(r"step '(.+)' stopped by (the user|SIGTERM) after ([0-9.ms]+)", first)
    if stopped and e.exit_code == EXIT_INTERRUPTED:
        first = f"{'SIGTERM' if stopped.group(2) == 'SIGTERM' else 'Ctrl-C'} during step '{stopped.group(1)}'"
    if project is not None:
        first = first.replace(f"{project}{__import__('os').sep}", "")
    fix = next((ln.removeprefix("fix:").strip() for ln in lines if ln.startswith("fix:")), "")
    status: Status = ("refused" if e.exit_code == EXIT_REFUSED else "interrupted" if e.exit_code == EXIT_INTERRUPTED
                      else "failed")
    title = "" if step and e.exit_code == EXIT_EXTERNAL else f"{e.title}: "
    return RowOutcome(row.name, status, e.exit_code, reason=f"{title}{first}", fix=fix)


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


def _compare_members(state: _Run, rows: list[Row], outcomes: dict[str, RowOutcome]) -> list[MemberDifference]:
    """Hold the wheels of the rows built together to each other (buildrows.check.members). With
    --strict or `[check] same-members = true`, a row whose wheel lacks members fails (exit 5)."""
    from dataclasses import replace

    from buildrows.binaries.wheelread import WheelError
    from buildrows.check.members import compare, read_built
    from buildrows.errors import EXIT_CHECK_FAILED

    built: dict[str, Path] = {}
    for r in rows:
        o = outcomes.get(r.name)
        if o is not None and o.status == "built" and o.wheel_path and o.wheel_path.endswith(".whl"):
            built[r.name] = Path(o.wheel_path)
    if len(built) < 2:
        return []
    try:
        differences = compare(read_built({r.name: r for r in rows}, built))
    except (WheelError, OSError) as e:
        state.ui.warn(f"the wheels built together could not be compared: {e}")
        return []
    strict = state.args.strict or state.pol.check.same_members
    for d in differences:
        o = outcomes[d.row]
        if strict and o.exit_code in (0, EXIT_CHECK_FAILED):
            why = f"lacks {len(d.members)} member{'s' if len(d.members) != 1 else ''} {d.other} ships"
            o = _reject_late(state, o)
            outcomes[d.row] = replace(o, exit_code=EXIT_CHECK_FAILED, check=False,
                                      reason=o.reason or f"the members check failed: {why}")
    return differences


def _reject_late(state: _Run, o: RowOutcome) -> RowOutcome:
    """A wheel that failed a check made after it joined the wheel directory (the members check of
    --strict): moved under the directory's .buildrows/rejected/ as one that failed its own check."""
    from dataclasses import replace

    row = state.pol.row(o.row)
    if row is None or not o.wheel_path or o.check is False or not o.wheel_path.endswith(".whl"):
        return o
    wheel = Path(o.wheel_path)
    moved = _unstage(state, row, wheel, rejected_dir(wheel.parent))
    return replace(o, wheel=f"{KEPT}/{REJECTED}/{moved.name}", wheel_path=str(moved))


def _report(outcomes: list[RowOutcome], env: Mapping[str, str], ui: UI,
            differences: Sequence[MemberDifference] = (), args: BuildOptions | None = None) -> None:
    """The summary table, each row's log and fix, the rows whose members differ, and the wheel
    paths (stdout), and on GitHub Actions the step summary."""
    from buildrows.build.summary import (
        render_logs,
        render_markdown,
        render_table,
        size_text,
        totals,
    )

    ui.print()
    for line in render_table(outcomes):
        ui.print(line)
    ui.print(totals(outcomes))
    for line in render_logs(outcomes):
        ui.print(line)
    coverage = _wheel_coverage(outcomes)
    if coverage:
        ui.print()
        for line in coverage:
            ui.print(line)
    for d in differences:
        ui.print(f"members differ: {d.describe()}")
    if differences:
        ui.print("  (a build that skipped a module, e.g. a program it found on one row's PATH only; --strict or "
                 "[check] same-members = true fails these rows)")
    for o in outcomes:
        if o.status == "built" and o.wheel_path:
            verdict = "not checked" if o.check is None else ("check PASS" if o.check else "check FAIL")
            ui.print(f"{o.wheel_path}  ({size_text(o.size or 0)}) [{o.row}: {verdict}]")
    summary = env.get("GITHUB_STEP_SUMMARY", "").strip()
    if ui.github and summary:
        from buildrows.render.envfile import append_file

        text = "### buildrows build\n\n" + render_markdown(outcomes) + "\n" + totals(outcomes) + "\n"
        text += "".join(f"\n- members differ: {d.describe(limit=20)}" for d in differences)
        if coverage:
            text += "\n```text\n" + "\n".join(coverage) + "\n```\n"
        append_file(summary, text + ("\n" if differences else ""))


def _wheel_coverage(outcomes: Sequence[RowOutcome]) -> list[str]:
    """Rows x architectures of the wheels this build made (buildrows.policy.coverage); [] when
    none carries device code."""
    from buildrows.binaries.wheelread import WheelError, read_wheel
    from buildrows.policy.coverage import Coverage, collapse, of_libraries, render

    lines = []
    for o in outcomes:
        if o.status != "built" or not o.wheel_path or not o.wheel_path.endswith(".whl"):
            continue
        try:
            info = read_wheel(Path(o.wheel_path))
        except (WheelError, OSError):
            continue
        libs = [(lib.cubins, lib.ptx) for lib in info.libraries if lib.has_device_code]
        if libs:
            lines.append(Coverage(o.row, of_libraries(libs)))
    return render(collapse(lines), "GPU architectures the built wheels carry:")


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


def build_row(state: _Run, row: Row, provided: Provided | None = None) -> RowOutcome:
    """Render, build and check one row (doctor has passed); returns what it produced."""
    from buildrows.build import drivers
    from buildrows.build.prepare import driver_of, project_of
    from buildrows.errors import Interrupted

    final_dir = drivers.default_wheel_dir(project_of(state.pol, state.args), state.args.wheel_dir)
    if driver_of(state.pol, state.args) == "cmake-presets":  # it installs a tree, not a wheel
        with _tree_lock(state, row):
            return _build_row(state, row, provided, final_dir, final_dir)
    # Every row writes its wheel into a fresh directory of its own, so no row can take, overwrite
    # or (stamping renames) remove another's wheel or one already in the wheel directory: the CUDA
    # row's wheel, before stamping, has exactly the CPU wheel's name. It moves into the wheel
    # directory under its final name (`_unstage`).
    owned = _staging_dir(final_dir, row)
    staging = owned.path
    try:
        with _tree_lock(state, row):
            return _build_row(state, row, provided, staging, final_dir)
    except (Interrupted, KeyboardInterrupt):
        import shutil

        shutil.rmtree(staging, ignore_errors=True)  # a wheel half-written when the step stopped
        raise
    except OSError as e:
        from buildrows.process.diskfull import disk_full, is_disk_full

        if not is_disk_full(e):
            raise
        import shutil

        shutil.rmtree(staging, ignore_errors=True)  # no half-written or unchecked wheel stays
        raise disk_full(e, f"while building {row.name}") from e
    finally:
        owned.release()
        _remove_if_empty(staging)


def _clean_wheel_dir(pol: Policy, args: BuildOptions, ui: UI) -> None:
    """Remove what a killed build left in the wheel directory (buildrows.build.wheeldir), saying so."""
    from buildrows.build import drivers
    from buildrows.build.prepare import project_of
    from buildrows.build.wheeldir import clean_saying

    clean_saying(drivers.default_wheel_dir(project_of(pol, args), args.wheel_dir), ui)


def _tree_lock(state: _Run, row: Row) -> AbstractContextManager[None]:
    """The lock of the row's build tree (buildrows.process.lock): the row's own for
    scikit-build-core (build/skbuild-ROW), the project's for the drivers that write into it."""
    from buildrows.build.prepare import driver_of, project_of
    from buildrows.process.lock import holding, lock_path

    project = project_of(state.pol, state.args)
    if driver_of(state.pol, state.args) == "scikit-build-core":
        return holding(lock_path(project / "build", row.name), f"row {row.name} (build/skbuild-{row.name})", state.ui)
    return holding(lock_path(project / "build", "project"), f"{project}/build", state.ui)


def _settle_wheel_dir(pol: Policy, args: BuildOptions, ui: UI) -> None:
    """The old layout's rejected/ and earlier-*/ moved under the wheel directory's .buildrows/."""
    from buildrows.build import drivers
    from buildrows.build.prepare import project_of
    from buildrows.provision.wheel_dirs import settle

    for line in settle(drivers.default_wheel_dir(project_of(pol, args), args.wheel_dir)):
        ui.info(line)


def require_places(pol: Policy, env: Mapping[str, str], args: BuildOptions) -> None:
    """Exit 2 before any compile when a directory the build writes cannot be written: the wheel
    directory, the project's build directory, the log directory, buildrows' cache."""
    from buildrows.build import drivers
    from buildrows.build.prepare import project_of
    from buildrows.build.writable import require_writable
    from buildrows.plan.provisioned import cache_root
    from buildrows.process.logs import log_root

    project = project_of(pol, args)
    wheel_dir = drivers.default_wheel_dir(project, args.wheel_dir)
    require_writable(wheel_dir, "the wheel directory", "pass --wheel-dir a directory you can write (it is created "
                     "when missing)" if args.wheel_dir else f"make {wheel_dir} writable, or pass --wheel-dir DIR")
    require_writable(project / "build", "the project's build directory",
                     f"make {project / 'build'} writable (the rows' build trees go there), or build a copy of the project")
    if args.log_dir:
        require_writable(log_root(project, args.log_dir), "the log directory", "pass --log-dir a directory you can write")
    require_writable(cache_root(env), "buildrows' cache", "point BUILDROWS_CACHE at a directory you can write")


def _build_row(state: _Run, row: Row, provided: Provided | None, wheel_dir: Path, final_dir: Path) -> RowOutcome:
    from buildrows.build import drivers
    from buildrows.build.prepare import doctor_command, driver_of, project_of
    from buildrows.build.summary import RowOutcome, size_text
    from buildrows.errors import EXIT_CHECK_FAILED, ExternalFailure, Refused
    from buildrows.plan.row import plan_row
    from buildrows.process.runner import run_step
    from buildrows.render.presets import render_plans

    pol, env, host, args, ui = state.pol, state.env, state.host, state.args, state.ui
    driver = driver_of(pol, args)
    project = project_of(pol, args)
    interp = provided.interpreter if provided else None
    toolkit = provided.toolkit if provided else None
    python = None
    if driver == "cmake-presets":
        ui.step(f"render presets for {row.name} into {project}")
        plan = plan_row(pol, row, env, host=host, step="build", interpreter=interp, toolkit=toolkit)
        rendered = render_plans([plan], project)
        for note in rendered.notes:
            ui.warn(f"  {note}")
        for path in rendered.paths:
            ui.info(f"  wrote {path}")
        from buildrows.render.presets import gitignore_advice

        gitignore_advice(project, False, ui)
        bp = drivers.cmake_presets_plan(row, project)
    else:
        ui.step(f"render {row.name}: generator, cache variables and environment")
        plan = plan_row(pol, row, env, host=host, step="build", interpreter=interp, toolkit=toolkit)
        python = interp.path if interp else drivers.row_python(row, env)
        if python is None:
            raise Refused(f"no Python {row.python} to build {row.name} with\n    fix: `{doctor_command(pol, row)}` says how to get one")
        from buildrows.plan.provisioned import cache_root

        importable = drivers.provider_path(cache_root(env), env)  # buildrows.metadata for the build
        if driver == "scikit-build-core":
            bp = drivers.scikit_build_core_plan(plan, python, project, wheel_dir, isolation=args.isolation,
                                                provider_path=importable)
        else:
            bp = drivers.setup_py_plan(plan, python, project, wheel_dir, env, isolation=args.isolation,
                                       provider_path=importable)
    cache = state.compiler_cache(row, project, plan.compiler, dict(plan.cache))
    if cache is not None:
        from buildrows.build.compiler_cache import prepare
        from buildrows.process.diskfull import is_disk_full

        try:
            prepare(cache)
        except OSError as e:  # a full BUILDROWS_CACHE costs the cache, not the build
            if not is_disk_full(e):
                raise
            ui.warn(f"the compiler cache {cache.directory} cannot be written (no space left on its device): building "
                    "without the compiler cache\n    fix: free space there, or point BUILDROWS_CACHE at another disk")
            cache = None
    # A setup.py CUDA row's nvcc compiles get a stats log of their own (one path per row, so a
    # CMake tree the project's setup.py keeps still writes where this reads).
    nvcc_log = (cache.stats_log.parent / f"{row.name}-nvcc.log"
                if cache is not None and driver == "setup.py" and row.is_cuda else None)
    base_env: Mapping[str, str] = env  # state.env: the writer's secret only in a job that writes
    if cache is not None:
        from buildrows.build.compiler_cache import without_ccache_settings
        from buildrows.build.remote_cache import withhold

        # Without the user's ccache settings, and without the writer's secret unless this job writes.
        base_env = withhold(state.remote, without_ccache_settings(env))
        nvcc = plan.compiler.path if plan.compiler is not None and driver == "setup.py" else None
        if nvcc_log is not None:
            nvcc_log.unlink(missing_ok=True)
        bp = drivers.with_compiler_cache(bp, cache.environment(nvcc, nvcc_log), cache.launchers(nvcc_log))
        ui.info(f"  compiler cache: {cache.directory} (ccache {cache.executable}, base_dir {cache.base_dir})")
    elif driver == "scikit-build-core":
        bp = drivers.with_compiler_cache(bp, {}, drivers.launchers_without_cache(env))
    if python is not None:
        bp = drivers.with_environment_bin(bp, python, base_env)
        bp, epoch = drivers.with_source_date_epoch(bp, project, base_env)
        ui.info(f"  {epoch}")
    if cache is not None and driver == "setup.py":
        bp = drivers.with_ccache_on_path(bp, cache, base_env, python)
    if driver == "setup.py" and row.is_cuda:
        unchanged = bp
        bp = drivers.with_cuda_bin_on_path(bp, plan, base_env)  # a setup.py that finds nvcc on PATH (pycuda)
        if bp is not unchanged:
            ui.info(f"  PATH: {plan.cuda_home}/bin first, so a setup.py that finds nvcc on PATH builds with the row's toolkit")
    for path, text in bp.files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    _tie_tree(state, plan, bp, python, project, base_env)
    from buildrows.build import source_outputs

    for line in source_outputs.settle(project, row.name):  # another row's outputs in the source tree
        ui.info(f"  {line}")
    sources_before = source_outputs.snapshot(project, (wheel_dir, final_dir))
    before = drivers.snapshot(wheel_dir)
    seeded = False
    try:
        seeding = state.seeding(bp, base_env) if cache is not None else None
        if seeding is None:
            for cmd in bp.commands:
                run_step(ui, cmd, base_env, doctor=doctor_command(pol, row))
        else:
            seeded = _build_seeded(state, row, bp, base_env, seeding, project, python, before)
        sources_after = source_outputs.snapshot(project, (wheel_dir, final_dir)) if sources_before is not None else None
        if sources_before is not None and sources_after is not None:
            source_outputs.record(project, row.name, source_outputs.written(sources_before, sources_after, project))
    finally:
        stats = _read_stats(cache)
        nvcc_stats = _read_log(nvcc_log) if nvcc_log is not None else None
        if nvcc_stats is not None:
            from buildrows.build.compiler_cache import CacheStats as Stats

            stats = nvcc_stats if stats is None else Stats(stats.compiles + nvcc_stats.compiles,
                                                           stats.remote_errors + nvcc_stats.remote_errors)
        if stats is not None:
            ui.info(f"  compiler cache: {stats.report()}")
            if stats.remote_errors:
                ui.warn(f"the remote compiler cache failed {stats.remote_errors} compile"
                        f"{'s' if stats.remote_errors != 1 else ''} of {row.name} (it went away, timed out, "
                        "refused the credential, or refused a write: a full store): they were compiled here, and the wheel is the same\n"
                        f"    fix: check the store; export BUILDROWS_CACHE_REMOTE=off to build without it")
    cache_text = "off" if cache is None else (stats.describe() if stats is not None else "-")
    if cache is not None and driver == "setup.py":
        logs = getattr(ui, "logs", None)
        from buildrows.build.summary import cxx_compiles_in_logs

        cache_text = _setup_py_cache_text(stats, row.is_cuda, nvcc_stats,
                                          _nvcc_runs(logs.directory) if logs is not None else None,
                                          cxx_compiles_in_logs(logs.directory) if logs is not None else None)
        ui.info("  compiler cache: `ccache` is first on the build's PATH, where torch.utils.cpp_extension finds it "
                "for nvcc and C++, and PYTORCH_NVCC names it (ninja builds); ccache's masquerade directory "
                "is before it, so setuptools' own C/C++ compiles go through it too")
    if seeded:
        cache_text += ", detection reused"
    if bp.wheel_dir is None:
        if bp.install_dir is None:
            ui.warn(f"the {driver} driver builds the tree, not a wheel: nothing to check for {row.name}")
            return RowOutcome(row.name, "built", cache=cache_text)
        ui.info(f"  install tree: {bp.install_dir}")
        tree_ok = None if args.no_check else check_built_wheel(pol, row, bp.install_dir, ui)
        if tree_ok is False:
            ui.error("check failed", f"the check failed for {row.name}: {bp.install_dir} (its report is above)")
        return RowOutcome(row.name, "built", EXIT_CHECK_FAILED if tree_ok is False else 0,
                          f"{bp.install_dir.name}/ (install tree)", _size(bp.install_dir), tree_ok,
                          cache=cache_text, wheel_path=str(bp.install_dir),
                          reason="" if tree_ok is not False else "the check failed (its report is above)")
    made = drivers.new_wheels(bp.wheel_dir, before)
    if not made:
        raise ExternalFailure(f"step 'build' for {row.name} finished but wrote no wheel into {bp.wheel_dir}")
    wheel = made[0]
    ui.info(f"  wheel: {wheel} ({size_text(_size(wheel))})")
    if python is not None:
        wheel = stamp_built_wheel(pol, plan, python, project, driver, wheel, env, args, ui)
    from buildrows.build.repair import repair_wheel

    wheel, unrepaired = repair_wheel(pol, row, wheel, env, ui, doctor=doctor_command(pol, row))  # [repair]
    if unrepaired:
        ui.error("repair failed", f"{unrepaired}\n    fix: exclude what must not be bundled ([repair] exclude), "
                 "or make the library auditwheel could not find reachable (LD_LIBRARY_PATH); the check below judges "
                 "the wheel as built")
    # Checked where it was built: only a wheel that passed (or was not checked) joins the wheel
    # directory's top level; one that failed goes under its .buildrows/rejected/ (`dist/*` is what
    # passed, so `twine upload dist/*` never publishes a failed one).
    torch_python = python if python is not None and not args.isolation else None  # its torch built the wheel
    ok = None if args.no_check else check_built_wheel(pol, row, wheel, ui, torch_python=torch_python)
    if unrepaired:
        ok = False  # a wheel [repair] asks to repair is not published unrepaired
    if ok is False or wheel_dir != final_dir:
        wheel = _unstage(state, row, wheel, final_dir if ok is not False else rejected_dir(final_dir))
    shown = wheel.name if ok is not False else f"{KEPT}/{REJECTED}/{wheel.name}"
    if unrepaired:
        ui.error("not repaired", f"{row.name}'s wheel {wheel.name} was not repaired (auditwheel's output is above); "
                 f"it is kept out of {final_dir}, at {wheel}")
    elif ok is False:
        ui.error("check failed", f"the wheel check failed for {row.name}: {wheel.name} (its report is above); it is "
                 f"kept out of {final_dir}, at {wheel}\n    fix: correct what the report names and build again; to "
                 f"check it again: buildrows --config {pol.path} check {wheel} --row {row.name}")
    failure = "auditwheel could not repair it" if unrepaired else "the wheel check failed"
    return RowOutcome(row.name, "built", EXIT_CHECK_FAILED if ok is False else 0, shown,
                      _size(wheel), ok, cache=cache_text, wheel_path=str(wheel),
                      reason="" if ok is not False else f"{failure} (its report is above); the wheel is kept apart "
                      f"in {wheel.parent}")


# A compile command as setuptools and build_ext print it: the compiler first on its line.
_NVCC_LINE = re.compile(r"^(\S*ccache\s+)?(\S*nvcc)\s+\S", re.MULTILINE)


def _nvcc_runs(log_dir: Path) -> tuple[int, str] | None:
    """How many nvcc commands the row's step logs show that did not go through ccache, and the
    nvcc they named (None when the logs cannot be read)."""
    try:
        text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in sorted(log_dir.glob("[0-9]*.log")))
    except OSError:
        return None
    runs = [m.group(2) for m in _NVCC_LINE.finditer(text) if not m.group(1)]
    return (len(runs), runs[0]) if runs else (0, "")


def _setup_py_cache_text(stats: CacheStats | None, cuda: bool, nvcc_stats: CacheStats | None = None,
                         nvcc_runs: tuple[int, str] | None = None, cxx_runs: int | None = None) -> str:
    """A setup.py row's cache column: nvcc's compiles and the C/C++ ones apart, and, where none
    went through the cache, why ("no compiles" after a build that compiled would mislead).
    nvcc's are those its own stats log holds (`nvcc_stats`: CMake's CUDA launcher, PYTORCH_NVCC),
    whatever their names, and the `.cu` sources of the shared log (torch's ccache on PATH); the
    build's log says whether nvcc ran past the cache at all, and by what name (`nvcc_runs`)."""
    compiles = stats.compiles if stats is not None else ()
    own = list(nvcc_stats.compiles) if nvcc_stats is not None else []
    rest = list(compiles)
    for c in own:  # `stats` holds them too (merged for the row's log line)
        if c in rest:
            rest.remove(c)
    nvcc = own + [c for c in rest if c[0].lower().endswith(".cu")]
    other = [c for c in rest if not c[0].lower().endswith(".cu")]

    def hits(part: Sequence[tuple[str, str]]) -> str:
        return f"{sum(1 for _, how in part if how != 'miss')}/{len(part)} hits"

    parts = []
    if nvcc:
        parts.append(f"nvcc {hits(nvcc)}")
    elif cuda and nvcc_runs is not None and nvcc_runs[0] and "/" in nvcc_runs[1]:
        count, name = nvcc_runs
        parts.append(f"nvcc not cached ({count} compile{'s' if count != 1 else ''} ran {name} by its full path, "
                     "which the ccache first on PATH never sees: the project's build picks nvcc itself)")
    elif cuda and nvcc_runs is not None and not nvcc_runs[0]:
        parts.append("nvcc not cached (the build's log shows no nvcc command: nothing was compiled by nvcc)")
    elif cuda:
        parts.append("nvcc not cached (none went through ccache: nothing to compile, TORCH_NO_COMPILER_WRAPPER set, "
                     "or a torch whose cpp_extension runs CUDA_HOME/bin/nvcc itself without ninja)")
    else:
        parts.append("no nvcc compiles")
    if not other and cxx_runs == 0:  # `summary.cxx_compiles_in_logs`: ninja had no work, or a pure wheel
        parts.append("no C/C++ compiles (the build's log shows none: nothing to compile)")
    else:
        parts.append(f"C/C++ {hits(other)}" if other else "no C/C++ compiles" if os.name != "nt"
                     else "C/C++ not cached (setup.py on Windows: setuptools runs MSVC itself)")
    return "; ".join(parts)


def _tie_tree(state: _Run, plan: RowPlan, bp: drivers.BuildPlan, python: str | None, project: Path,
              base_env: Mapping[str, str]) -> None:
    """Tie the row's build tree to what builds it now: reused when it was built with the same
    interpreter, torch, compilers and CMake, else started afresh, and said so (buildrows.build.buildtree)."""
    if bp.tree is None or not bp.commands:
        return
    from buildrows.build import buildtree

    built_with = buildtree.facts(plan, bp, python, project, bp.commands[0].environment(base_env),
                                 isolation=state.args.isolation)
    state.ui.info("  " + buildtree.settle(bp.tree, built_with).describe(project))


def _staging_dir(final_dir: Path, row: Row) -> Owned:
    """A fresh directory for the row's wheel under the wheel directory (the same file system, so
    the wheel moves into place by a rename); fresh, so nothing an earlier run left is taken. This
    process holds it (buildrows.build.wheeldir): a later run removes it only if this one was killed."""
    from buildrows.build.wheeldir import owned_dir

    return owned_dir(final_dir / STAGING, f"{row.name}-")


def _remove_if_empty(staging: Path) -> None:
    """Remove the row's staging directory, then the staging root, when empty (a wheel that could
    not be moved into place stays, and its row's error says where)."""
    for d in (staging, staging.parent):
        try:
            d.rmdir()
        except FileNotFoundError:
            continue  # already removed (an interrupted row's)
        except OSError:
            break


def _unstage(state: _Run, row: Row, wheel: Path, final_dir: Path) -> Path:
    """Move the row's wheel from its own directory into the wheel directory under its final name.
    Nothing there is overwritten: the same bytes are already in place; a wheel of the same name
    that another row of this invocation wrote is a refusal (the new wheel stays where it was
    built, and the error says where); one from an earlier invocation is kept, moved aside into
    `.buildrows/earlier-<time>/` of the wheel directory, and the move is reported."""
    from buildrows.build.wheeldir import place_keeping_earlier, placing
    from buildrows.errors import Refused

    target = final_dir / wheel.name
    final_dir.mkdir(parents=True, exist_ok=True)

    with state.lock, placing(final_dir):  # other threads, then other processes placing here
        other = state.written.get(target)
        if other is not None and other != row.name:
            raise Refused(
                f"row {row.name}'s wheel {wheel.name} has the name of row {other}'s wheel, written by this build into "
                f"{final_dir}; it was not replaced, and {row.name}'s wheel stays at {wheel}\n"
                "    fix: give each row's wheel its own name ([project] stamp = true adds the row's local tag, "
                "+cu130, to CUDA wheels), or build these rows into different --wheel-dir directories")
        target, aside = place_keeping_earlier(wheel, final_dir, f"row {row.name}")
        if aside is not None:
            state.ui.warn(f"  {target} was there already (an earlier build, other content): kept as {aside}")
        state.written[target] = row.name
    state.ui.info(f"  wheel: {target}")
    return target


def _build_seeded(state: _Run, row: Row, bp: drivers.BuildPlan, base_env: Mapping[str, str],
                  seeding: tuple[str, Path], project: Path, python: str | None, before: Mapping[Path, int]) -> bool:
    """Run the row's build commands with CMake's compiler detection planted from an earlier row of
    the same key when its tree is fresh (buildrows.build.configure_seed), and keep this tree's detection
    for later rows when it ran its own. Returns whether the build that stands was seeded."""
    import shutil

    from buildrows.build import configure_seed, drivers
    from buildrows.build.prepare import doctor_command
    from buildrows.errors import ExternalFailure
    from buildrows.process.runner import run_step

    ui, doctor = state.ui, doctor_command(state.pol, row)
    key, tree = seeding
    fresh = not (tree / "CMakeCache.txt").exists()
    seed = state.seeds.get(key) if fresh else None
    if seed is not None:
        configure_seed.plant(seed, tree, project)
        ui.info(f"  CMake compiler detection: taken from {seed.donor}'s tree (same CMake, generator, compilers, "
                "flags, architecture list and environment), not run again")
    failed: ExternalFailure | None = None
    try:
        for cmd in bp.commands:
            run_step(ui, cmd, base_env, doctor=doctor)
    except ExternalFailure as e:
        if seed is None:
            raise
        failed = e  # perhaps the planted detection: the build without it decides
    if seed is not None:
        problem = "its build failed" if failed is not None else configure_seed.verify(seed, tree)
        if problem is None:
            return True
        ui.warn(f"  the planted detection does not fit {row.name}'s tree: {problem}; building it again in a fresh "
                "tree without it")
        shutil.rmtree(tree, ignore_errors=True)
        if bp.wheel_dir is not None:
            for wheel in drivers.new_wheels(bp.wheel_dir, before):
                wheel.unlink(missing_ok=True)
        for cmd in bp.commands:
            run_step(ui, cmd, base_env, doctor=doctor)
    if fresh and key not in state.seeds:
        private = [python or "", str(Path(python).parent.parent) if python else ""]
        got = configure_seed.harvest(tree, project, row.name, private)
        if got is not None:
            state.seeds[key] = got
    return False


def _read_log(path: Path) -> CacheStats | None:
    """A stats log read and removed (None when the build wrote none)."""
    from buildrows.build.compiler_cache import read_stats_log

    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    path.unlink(missing_ok=True)
    return read_stats_log(text)


def _read_stats(cache: CompilerCache | None) -> CacheStats | None:
    """What the compiler cache did for the row, read from (and then removing) its stats log."""
    if cache is None:
        return None
    from buildrows.build.compiler_cache import read_stats_log

    try:
        text = cache.stats_log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    cache.stats_log.unlink(missing_ok=True)
    stats = read_stats_log(text)
    return stats


def stamp_built_wheel(pol: Policy, plan: RowPlan, python: str, project: Path, driver: Driver, wheel: Path,
                      env: Mapping[str, str], args: BuildOptions, ui: UI) -> Path:
    """Add the build record to the wheel and, when the policy opts in, the row's local version and
    runtime requirement its project's build left out (buildrows.build.stamp)."""
    from buildrows.render.envfile import environment_from_plan

    compiler = plan.compiler
    cuda = compiler.train.dotted if compiler is not None and compiler.train is not None else None
    return finish_wheel(pol, plan.row, wheel, python=python, project=project, driver=driver,
                        torch_env=None if args.isolation else {**env, **environment_from_plan(plan, env)},
                        compiler_cuda=cuda, ui=ui)


def finish_wheel(pol: Policy, row: Row, wheel: Path, *, python: str, project: Path, driver: Driver,
                 torch_env: Mapping[str, str] | None, compiler_cuda: str | None, ui: UI) -> Path:
    """What `build` gives every wheel it makes, for `build` and for a wheel another build made
    (`buildrows stamp`, the CI post-script after test-infra's build step): the build record and,
    with [project] stamp, the row's local version and runtime requirement; a PyTorch extension's
    pin to the torch it compiled against. `torch_env` is the environment torch is asked in (None:
    the build was isolated, so this Python's torch is not the one it compiled against)."""
    from buildrows.build.doctor_python import build_requirements
    from buildrows.build.stamp import stamp_wheel, torch_pin
    from buildrows.check.record import BuildRecord
    from buildrows.plan.torchenv import ask_torch, uses_torch

    torch = torch_cuda = None
    reqs, _ = build_requirements(project, driver)
    if torch_env is not None and uses_torch(project, reqs):
        info, error = ask_torch(python, torch_env)
        if info is None:
            ui.warn(f"  could not ask the build environment's torch for its version: {error}")
        else:
            torch, torch_cuda = info.version, info.cuda
    record = BuildRecord(row=row.name, cuda=compiler_cuda if row.is_cuda else None, torch=torch, torch_cuda=torch_cuda)
    ui.step(f"stamp {wheel.name}" + ("" if pol.project.stamp else " (build record only; [project] stamp is off)"))
    # A PyTorch extension (runtime mode torch) must require the torch it was compiled against.
    # A CPU row's wheel of one is tied to its torch as much as a CUDA row's.
    pins = [torch_pin(torch)] if torch and pol.torch_extension(row) else []
    stamped = stamp_wheel(wheel, local_tag=row.local_tag, requirements=row.requires_dist, record=record,
                          metadata=pol.project.stamp, pins=pins)
    for change in stamped.changes:
        ui.info(f"  {change}")
    if stamped.wheel != wheel:
        ui.info(f"  wheel: {stamped.wheel}")
    return stamped.wheel


def stamp_foreign_wheel(pol: Policy, row_name: str, wheel: str, ui: UI) -> Path:
    """finish_wheel for a wheel another build made in this environment (the CI post-script after
    test-infra's build step): the row by name, the project from the policy, torch asked in this
    Python. The record's CUDA is the row's train: the hook refused any other nvcc before the build."""
    import os
    import sys

    from buildrows.build.drivers import project_dir
    from buildrows.errors import BadInput
    from buildrows.policy.rows import select_one

    row = select_one(pol, row_name)
    path = Path(wheel)
    if not path.is_file() or path.suffix != ".whl":
        raise BadInput(f"{wheel}: not a .whl file\n    fix: pass the wheel the build made (dist/*.whl)")
    project = project_dir(pol.path, pol.project.source_dir, None)
    stamped = finish_wheel(pol, row, path, python=sys.executable, project=project, driver=pol.project.driver,
                           torch_env=os.environ, compiler_cuda=row.cuda.dotted if row.cuda is not None else None, ui=ui)
    from buildrows.build.repair import repair_wheel
    from buildrows.errors import ExternalFailure

    # [repair] auditwheel: repaired here too, as `build` repairs its wheels before the check.
    repaired, problem = repair_wheel(pol, row, stamped, os.environ, ui,
                                     doctor=f"buildrows --config {pol.path} doctor {row.name}")
    if problem:
        raise ExternalFailure(f"{problem}\n    the wheel is left as built, unrepaired, at {stamped}")
    return repaired


def _uses_torch(pol: Policy, row: Row) -> bool:
    """Whether the row's wheel is built against torch or uses its runtime (its libraries need torch's)."""
    return pol.torch_extension(row) or (row.runtime is not None and row.runtime.mode == "torch-runtime")


def _torch_dir(python: str) -> str | None:
    """Where the build environment's torch package lies (found without importing torch), or None."""
    from buildrows.process.runner import capture

    got = capture([python, "-c", "import importlib.util as u; s = u.find_spec('torch'); "
                   "print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')"], timeout=60)
    text = got.output.strip().splitlines()[-1:] if got.code == 0 else []
    return text[0] if text and Path(text[0], "lib").is_dir() else None


def _size(path: Path) -> int:
    """A wheel's size, or an install tree's (the cmake-presets driver): its files together."""
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return path.stat().st_size


def check_built_wheel(pol: Policy, row: Row, wheel: Path, ui: UI, *, torch_python: str | None = None) -> bool:
    """`buildrows check` on the new wheel (or install tree) against its row; prints the report, returns the verdict.
    `torch_python`: the build environment's Python, whose torch a PyTorch extension compiled against; the
    libraries are then loaded against that torch's libraries (libraries-load)."""
    import time

    from buildrows.check.expect import CheckRequest, check_wheel
    from buildrows.process.progress import duration

    start = time.perf_counter()

    torch_dir = _torch_dir(torch_python) if torch_python is not None and _uses_torch(pol, row) else None
    args = CheckRequest(wheel=str(wheel), row=row.name, config=pol.path, torch=torch_dir)
    ui.step(f"check {wheel.name} against {row.name}", ["buildrows", "--config", pol.path, "check", str(wheel), "--row",
                                                       row.name, *(["--torch", torch_dir] if torch_dir else [])])
    # With --row the check holds the wheel's name to the row too (local version, Python and platform
    # tags: buildrows.check.tags); an install tree (cmake-presets) has no name to hold.
    _, _, results = check_wheel(args, wheel, pol)
    for r in results:
        ui.info(f"  [{'PASS' if r.ok else 'FAIL'}] {r.name}")
        for d in r.details:
            ui.info(f"         {d}")
    ok = all(r.ok for r in results)
    ui.info(f"  verdict: {'PASS' if ok else 'FAIL'}")
    ui.info(f"  check took {duration(time.perf_counter() - start)}")
    return ok

"""`buildrows build ROW...` as a library: resolve, doctor, render, build, check the wheel - the way
CI does, for every selected row, with a summary at the end. `buildrows.commands.build` only parses
its arguments into `BuildOptions` and calls `build_rows`.

The stages live beside it: planning the rows (`rows_plan`), each row's steps (`row_steps`,
finishing its wheel in `wheel_finish`), placing the wheels (`placement`) and the report (`report`);
this module runs them in order."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from buildrows.build.placement import (
    _clean_wheel_dir,
    _reject_late,
    _remove_if_empty,
    _settle_wheel_dir,
    _staging_dir,
    require_places,
)
from buildrows.build.report import _interrupted, _outcome_of_bug, _outcome_of_error, _report
from buildrows.build.row_steps import _build_row, _tree_lock
from buildrows.build.rows_plan import _jobs, _leaders_and_followers, _Run, _stop_reason, provide
from buildrows.ui import UI

if TYPE_CHECKING:
    from collections.abc import Mapping

    from buildrows.build.prepare import BuildOptions, Provided
    from buildrows.build.summary import RowOutcome
    from buildrows.check.members import MemberDifference
    from buildrows.policy.model import Row


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

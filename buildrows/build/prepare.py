"""What `buildrows build` and `buildrows doctor` share: choosing rows, and running doctor on them."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

from buildrows.errors import BuildrowsError, Refused
from buildrows.plan.toolchain import HostOs
from buildrows.policy.model import Driver, Policy, Row
from buildrows.provision.interpreters import Interpreter
from buildrows.ui import UI

if TYPE_CHECKING:
    from buildrows.build.findings import Finding


@dataclass
class BuildOptions:
    """What `build` and `doctor` are asked to do (their command-line options, as plain data)."""

    selectors: Sequence[str] = ()
    config: str | None = None  # the policy file (default: the current directory's)
    project: str | None = None
    wheel_dir: str | None = None
    driver: Driver | None = None
    isolation: bool = False
    provision: bool = False
    no_check: bool = False
    strict: bool = False  # a difference between the members of rows built together fails (buildrows.check.members)
    keep_going: bool = False
    jobs: int | None = None
    no_compiler_cache: bool = False
    log_dir: str | None = None  # where the rows' logs go (default: PROJECT/build/logs)
    json: bool = False  # one JSON document on stdout, the human report on stderr
    environment_bin: str | None = None  # set by `setup`: the environment's bin added to PATH, if any

    @classmethod
    def of(cls, args: object) -> BuildOptions:
        """The options an argparse namespace holds (absent ones keep their defaults)."""
        names = [f.name for f in fields(cls) if f.name != "environment_bin"]
        return cls(**{n: getattr(args, n) for n in names if hasattr(args, n)})


def setup(args: BuildOptions, ui: UI | None = None) -> tuple[Policy, dict[str, str], HostOs]:
    """The policy, the environment the steps run with, and the host. The environment is this
    one, plus the active Python environment's bin directory at the end of PATH when it is not
    on PATH (recorded in args.environment_bin for doctor's report). With `ui`, a note for each
    train newer than buildrows' CUDA data says what was assumed of it."""
    from buildrows.plan.toolchain import host_os
    from buildrows.process.runner import with_environment_bin

    env, added = with_environment_bin(os.environ)
    args.environment_bin = added
    from buildrows.policy.load import load_policy
    from buildrows.policy.trains import beyond_data_note

    pol = load_policy(args.config)
    for note in filter(None, map(beyond_data_note, pol.trains)):
        if ui is not None:
            ui.info(f"note: {note}")
    return pol, env, host_os(env)


def doctor_command(pol: Policy, row: Row) -> str:
    """`buildrows --config POLICY doctor ROW`, as a person would paste it."""
    import shlex

    return shlex.join(["buildrows", "--config", pol.path, "doctor", row.name])


def this_machines_row(pol: Policy, env: Mapping[str, str]) -> tuple[Row, str]:
    """The row this machine builds: its platform, this Python, and the train CU_VERSION (else
    DESIRED_CUDA) asks for, as the hook reads them; with neither set, the train of the nvcc found,
    or CPU when there is none. Returns the row and why."""
    from buildrows.plan.host import host_platform, host_python, requested_accel
    from buildrows.plan.toolchain import find_cuda_compiler
    from buildrows.policy.build_rows import row_name
    from buildrows.policy.trains import Train

    plat = host_platform(env)
    python = host_python()
    asked = requested_accel(env)
    train: Train | None
    if asked is not None:
        var, accel = asked
        train, why = (None if accel == "cpu" else Train.parse(accel)), f"{var}={accel}"
    else:
        comp = find_cuda_compiler(env)
        train = comp.train if comp is not None else None
        why = f"nvcc {comp.version} at {comp.path}" if comp is not None else "no nvcc found"
    name = row_name(plat, train, python)
    row = pol.row(name)
    if row is None and train is not None and asked is None:
        from buildrows.build.default_row import refuse_other_train

        refuse_other_train(pol, name, why, plat, python)  # never the CPU row in silence (issue 35)
    if row is None:
        from buildrows.policy.rows import refuse_excluded_python

        refuse_excluded_python(pol, name)
        raise Refused(f"this machine's row would be {name} ({plat}, Python {python}, {why}), and {pol.path} "
                      "has no such row\n    fix: name a row (`buildrows rows` lists them), or add this "
                      "platform, Python or train to the policy")
    return row, f"{plat}, Python {python}, {why}"


def resolve_rows(pol: Policy, selectors: Sequence[str], env: Mapping[str, str], host: HostOs, ui: UI, *,
                 keep_empty: bool = False) -> list[Row]:
    """The selected rows (this machine's row when none is named). A row declared empty is refused
    here, unless `keep_empty` (build reports it in its summary and builds the others)."""
    from buildrows.policy.rows import select

    if not selectors:
        row, why = this_machines_row(pol, env)
        ui.info(f"this machine's row: {row.name} ({why})")
        return [row]
    rows = select(pol, list(selectors))
    if not keep_empty:
        for r in rows:
            refuse_empty(r)
    return rows


def refuse_empty(row: Row) -> None:
    if row.empty_reason is not None:
        raise Refused(f"row {row.name} is declared empty: {row.empty_reason}\n"
                      "    fix: choose another row; an empty row is never built")


def driver_of(pol: Policy, args: BuildOptions) -> Driver:
    chosen: Driver = args.driver or pol.project.driver
    return chosen


def project_of(pol: Policy, args: BuildOptions) -> Path:
    from buildrows.build.drivers import project_dir

    path = project_dir(pol.path, pol.project.source_dir, args.project)
    if not path.is_dir():
        from buildrows.errors import BadInput

        raise BadInput(f"the project directory {path} does not exist\n"
                       "    fix: pass --project DIR, or fix [project] source-dir in the policy")
    return path


@dataclass(frozen=True)
class Provided:
    """What `build` found or provisioned for a row: the interpreter that builds it (a row
    environment's with --provision) and a provisioned toolkit root (None: this machine's nvcc)."""

    interpreter: Interpreter | None
    toolkit: str | None


def doctor_rows(pol: Policy, rows: Sequence[Row], env: Mapping[str, str], host: HostOs,
                args: BuildOptions, ui: UI, *, report: Callable[[str], None] | None = None,
                provided: Mapping[str, Provided] | None = None) -> float:
    """Print every finding for each row once (through `report`, default the UI's info stream);
    refuse (exit 3) when any row has a failed one. `provided` is what `build` found or provisioned
    for each row. Returns the seconds it took."""
    import time

    from buildrows.process.progress import duration

    start = time.perf_counter()
    failed: list[tuple[Row, BuildrowsError]] = []
    for row in rows:  # every row is reported, a refused one included (issue 28 point 7)
        try:
            doctor_row(pol, row, env, host, args, ui, report=report, provided=(provided or {}).get(row.name))
        except BuildrowsError as e:
            if len(rows) == 1:
                raise
            (report or ui.info)(f"  {row.name}: {e}")
            failed.append((row, e))
    elapsed = time.perf_counter() - start
    ui.info(f"  doctor took {duration(elapsed)}")
    if failed:
        raise worst_of(failed, len(rows))
    return elapsed


def worst_of(failed: Sequence[tuple[Row, BuildrowsError]], total: int) -> BuildrowsError:
    """One error for the rows doctor could not pass: the kind with the highest exit code (a refusal,
    exit 3, over bad input, exit 2), naming every failed row."""
    worst = max((e for _, e in failed), key=lambda e: e.exit_code)
    names = ", ".join(r.name for r, _ in failed)
    return type(worst)(f"{len(failed)} of {total} rows cannot be built on this machine: {names} (each with its "
                       "findings and fixes above)")


def doctor_row(pol: Policy, row: Row, env: Mapping[str, str], host: HostOs, args: BuildOptions,
               ui: UI, *, report: Callable[[str], None] | None = None, provided: Provided | None = None,
               collect: list[Finding] | None = None) -> None:
    """Print every finding for one row (through `report`, default the UI's info stream), and add
    them to `collect` when given (`doctor --json`); refuse (exit 3) when one failed."""
    from buildrows.build.doctor import diagnose, verdict
    from buildrows.build.doctor_python import check_environment_bin

    say = report or ui.info
    driver = driver_of(pol, args)
    project = project_of(pol, args)
    ui.step(f"doctor {row.name} (driver {driver}, project {project})")
    if provided is not None and provided.interpreter is not None:
        env = with_interpreter_bin(env, provided.interpreter.path)
    findings = diagnose(pol, row, env, project, driver=driver, host=host, isolation=args.isolation,
                        interpreter=provided.interpreter if provided else None,
                        toolkit=provided.toolkit if provided else None)
    if getattr(args, "no_check", False):  # no check runs: what doctor foretells of it is a note
        from dataclasses import replace

        findings = [replace(f, status="note") if f.check == "predicted check" else f for f in findings]
    note = check_environment_bin(getattr(args, "environment_bin", None))
    if note is not None:
        findings.insert(0, note)
    if collect is not None:
        collect.extend(findings)
    for f in findings:
        say("  " + f.render())
    verdict(findings, row)
    say(f"  {row.name}: everything the row needs is here")


def with_interpreter_bin(env: Mapping[str, str], python: str) -> Mapping[str, str]:
    """env with the scripts directory of `python`'s virtual environment first on PATH, as the
    build will have it (`buildrows.build.drivers.with_environment_bin`), so doctor finds the
    cmake, ninja and swig the build will run."""
    from buildrows.build.drivers import environment_bin

    scripts = environment_bin(python)
    if scripts is None:
        return env
    path = env.get("PATH", "")
    return {**env, "PATH": f"{scripts}{os.pathsep}{path}" if path else str(scripts)}


def doctor(opts: BuildOptions, ui: UI) -> None:
    """`buildrows doctor`: every finding for each selected row, printed as the result (stdout);
    refuses (exit 3) when a row lacks something."""
    pol, env, host = setup(opts, ui)
    rows = resolve_rows(pol, opts.selectors, env, host, ui)
    doctor_rows(pol, rows, env, host, opts, ui, report=ui.print)

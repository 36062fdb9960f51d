"""Reporting a `build`: each row's outcome from its error, and the summary, its logs and coverage, and the GitHub step summary.

The JSON document is written by `buildrows.build.orchestrate.build_rows` from the outcomes
(`buildrows.build.summary.to_json`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from buildrows.build.prepare import BuildOptions
    from buildrows.build.summary import RowOutcome
    from buildrows.check.members import MemberDifference
    from buildrows.errors import BuildrowsError
    from buildrows.policy.model import Row
    from buildrows.ui import UI


def _interrupted(row: Row, ui: UI) -> RowOutcome:
    from buildrows.errors import Interrupted
    from buildrows.process.progress import TERMINATED

    who = "by SIGTERM (a CI runner cancelling the job?)" if TERMINATED.is_set() else "by the user (Ctrl-C)"
    e = Interrupted(f"stopped {who}\n    fix: run the same build again: its tree is kept and reused")
    ui.error(e.title, str(e))
    return _outcome_of_error(row, e)


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

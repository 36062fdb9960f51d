"""Placing the wheels: each row's staging directory, the move into the wheel directory, rejected/ and earlier-*/.

Also what a killed build left there, the old layout settled, and the directories a build writes
checked writable before any compile (`require_places`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from buildrows.provision.wheel_dirs import KEPT, REJECTED, rejected_dir

if TYPE_CHECKING:
    from collections.abc import Mapping

    from buildrows.build.prepare import BuildOptions
    from buildrows.build.rows_plan import _Run
    from buildrows.build.summary import RowOutcome
    from buildrows.build.wheeldir import Owned
    from buildrows.policy.model import Policy, Row
    from buildrows.ui import UI


#: Where a row built beside others writes its wheel first, under the wheel directory.
STAGING = ".buildrows-staging"
# A wheel that failed its check goes under the wheel directory's .buildrows/rejected/, an earlier
# build's wheel under .buildrows/earlier-*/ (buildrows.provision.wheel_dirs): never at the top.


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


def _clean_wheel_dir(pol: Policy, args: BuildOptions, ui: UI) -> None:
    """Remove what a killed build left in the wheel directory (buildrows.build.wheeldir), saying so."""
    from buildrows.build import drivers
    from buildrows.build.prepare import project_of
    from buildrows.build.wheeldir import clean_saying

    clean_saying(drivers.default_wheel_dir(project_of(pol, args), args.wheel_dir), ui)


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

"""SOURCE_DATE_EPOCH for a row's build: the user's, else the project's last commit time.

Its own light module (moved from `buildrows.build.stamp`, which re-exports it): `build`, `env`
and the CI hook all set it (`buildrows.build.rowenv`), and the hook must start fast.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from buildrows.errors import BadInput

#: Zip timestamps start at 1980-01-01; the fallback when neither the user nor git gives a time.
ZIP_EPOCH = 315532800


def source_date_epoch(project: Path, env: Mapping[str, str]) -> tuple[str, str]:
    """The SOURCE_DATE_EPOCH a build gets (the timestamp of every member of its wheel), and where it
    came from: the environment's, when set (it must be whole seconds since 1970); else the time of
    the project's last git commit; else 1980-01-01, zip's earliest. The same sources give the same
    wheel bytes, so a rebuild replaces nothing (reproducible-builds.org's convention). The commit
    time is kept by HEAD's commit id (`buildrows.build.epoch_cache`): `env` and the hook start
    without running git when HEAD has not moved."""
    given = env.get("SOURCE_DATE_EPOCH")
    if given is not None:
        if not given.strip().isdigit():
            raise BadInput(f"SOURCE_DATE_EPOCH={given!r} is not a whole number of seconds since 1970-01-01 UTC\n"
                           "    fix: unset it (buildrows then takes the project's last commit time) or set it to "
                           "an integer, e.g. SOURCE_DATE_EPOCH=$(git log -1 --format=%ct)")
        return given.strip(), "SOURCE_DATE_EPOCH from the environment"
    from buildrows.build.epoch_cache import keep, kept

    entry, value = kept(project, env)
    if value is not None:
        return value, "the time of the project's last git commit"
    import subprocess

    try:
        res = subprocess.run(["git", "log", "-1", "--format=%ct", "--", "."], cwd=project, capture_output=True,
                             text=True, check=False, timeout=10)
    except (OSError, subprocess.SubprocessError):
        res = None
    if res is not None and res.returncode == 0 and res.stdout.strip().isdigit():
        value = str(max(int(res.stdout.strip()), ZIP_EPOCH))
        if entry is not None:
            keep(entry, value)
        return value, "the time of the project's last git commit"
    return str(ZIP_EPOCH), "1980-01-01 (no git history and no SOURCE_DATE_EPOCH)"

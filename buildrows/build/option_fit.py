"""Options of `buildrows build` that do not fit the project's driver: refused, never ignored in silence."""

from __future__ import annotations

from buildrows.errors import BadInput
from buildrows.policy.model import Driver


def refuse_unfit_options(driver: Driver, isolation: bool, config: str) -> None:
    """`--isolation` asks for an isolated PEP 517 frontend; a cmake-presets row runs
    `cmake --workflow` in the project and builds no wheel, so there is nothing to isolate (issue
    35: it was accepted and ignored)."""
    if isolation and driver == "cmake-presets":
        raise BadInput(f"--isolation was given, and {config} builds with the cmake-presets driver: `cmake --workflow "
                       "--preset ROW` builds in the project's own build tree and makes no wheel, so no isolated "
                       "build environment applies\n"
                       "    fix: leave out --isolation; or build the wheel with a PEP 517 driver "
                       "(--driver scikit-build-core, or [project] driver in the policy)")

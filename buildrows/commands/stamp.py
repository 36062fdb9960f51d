"""`buildrows stamp WHEEL --row ROW`: give a wheel another build made (test-infra's build step in
CI) what `buildrows build` gives the wheels it makes: the build record and, with [project] stamp,
the row's local version and runtime requirement (buildrows.build.wheel_finish.finish_wheel, the
code `build` runs), and with [repair] auditwheel the repair of a Linux wheel (buildrows.build.repair).
Prints the wheel's path afterwards (its name changes with its version, and with the repair's tag)."""

from __future__ import annotations

import argparse

from buildrows.commands.policy_arg import policy
from buildrows.ui import UI


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("wheel", metavar="WHEEL", help="the built .whl file (rewritten in place, renamed when its version changes)")
    p.add_argument("--row", required=True, help="the row it was built for (the hook's BUILDROWS_ROW in CI)")


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.build.wheel_finish import stamp_foreign_wheel

    # With forward slashes: the post-script strips `dist/` from it under Git Bash too.
    ui.print(stamp_foreign_wheel(policy(args), args.row, args.wheel, ui).as_posix())
    return 0

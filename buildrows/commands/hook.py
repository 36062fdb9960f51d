"""`buildrows hook`: the pre-build hook of a wheel workflow (SPEC §5).

Finds the CI row from CU_VERSION (falling back to DESIRED_CUDA: reading only one of them once
made every row fall back to detection), the running Python and the platform; checks the row's
nvcc; then appends the same values to $BUILD_ENV_FILE (shell) and $GITHUB_ENV (github). Every
check runs before the first write, so a refusal leaves both files as they were.
"""

from __future__ import annotations

import argparse
import os

from buildrows.commands.policy_arg import policy
from buildrows.ui import UI


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--python", metavar="X.Y", help="the row's Python (default: the running interpreter's)")
    p.add_argument("--platform", metavar="NAME",
                   help="the row's platform, e.g. linux-x86_64 (default: this machine's)")
    p.add_argument("--provision", choices=("auto", "redist", "pypi"),
                   help="assemble the row's train into buildrows' cache first when the builder has no nvcc of it "
                        "(the rendered pre-script passes [ci] provision-toolkit)")


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.ci.hook import hook
    from buildrows.plan.host import host_platform, host_python

    env = os.environ
    hook(policy(args, ui), env, args.python or host_python(), args.platform or host_platform(env), ui,
         provision=args.provision)
    return 0

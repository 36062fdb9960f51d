"""`buildrows env ROW`: the row's environment as github/shell/powershell/dotenv, printed or appended."""

from __future__ import annotations

import argparse
import os

from buildrows.commands.policy_arg import policy
from buildrows.errors import BadInput
from buildrows.ui import UI


def add_arguments(p: argparse.ArgumentParser) -> None:
    from buildrows.render.envfile import FORMATS

    p.add_argument("row", metavar="ROW", help="one row name (or a glob matching exactly one)")
    p.add_argument("--format", choices=FORMATS, default="shell",
                   help="format for stdout and --output (default: shell)")
    p.add_argument("--github-env", action="store_true", help="append to $GITHUB_ENV (github format)")
    p.add_argument("--build-env-file", action="store_true",
                   help="append to $BUILD_ENV_FILE (shell export lines, sourced after the hook)")
    p.add_argument("--output", metavar="FILE", help="append to FILE in --format")
    p.add_argument("--no-toolchain-check", action="store_true",
                   help="do not look for nvcc or check its train (CUDACXX is then not written)")


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.policy.rows import select_one
    from buildrows.render.envfile import Format, append_files, format_env, row_environment

    pol = policy(args, ui)
    row = select_one(pol, args.row)
    targets: list[tuple[str, Format]] = []  # (path, format)
    dests: tuple[tuple[str, str, Format], ...] = (("github_env", "GITHUB_ENV", "github"),
                                                  ("build_env_file", "BUILD_ENV_FILE", "shell"))
    for flag, var, fmt in dests:
        if getattr(args, flag):
            path = os.environ.get(var, "")
            if not path:
                raise BadInput(f"--{flag.replace('_', '-')} was given but ${var} is not set\n"
                               f"    fix: set {var} to the file to append to, or use --output FILE")
            targets.append((path, fmt))
    if args.output:
        targets.append((args.output, args.format))
    values = row_environment(pol, row, os.environ, check_toolchain=not args.no_toolchain_check)
    texts = [(path, format_env(values, fmt)) for path, fmt in targets]  # all rendered before any write
    append_files(texts)  # opens and locks every file before writing any
    for path, _ in texts:
        ui.info(f"appended {len(values)} variables of {row.name} to {path}")
    if not targets:
        ui.print(format_env(values, args.format).rstrip("\n"))
    return 0

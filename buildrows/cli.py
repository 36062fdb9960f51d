"""A thin CLI: `main(argv) -> int`. Each command lives in buildrows/commands/<name>.py.

Command modules keep heavy imports inside `run`, so `buildrows hook` starts fast.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from buildrows import __version__
from buildrows.errors import EXIT_BAD_INPUT, EXIT_INTERNAL, BuildrowsError
from buildrows.ui import UI

# name -> one-line help; the module buildrows.commands.<module> provides add_arguments and run.
COMMANDS: dict[str, tuple[str, str]] = {
    "rows": ("rows", "List the policy's rows (names or globs select)."),
    "show": ("show", "Print every resolved value of one row and where it came from."),
    "render": ("render", "Render CMake presets for rows and include them from CMakeUserPresets.json."),
    "env": ("env", "Write a row's environment (TORCH_CUDA_ARCH_LIST, CMAKE_ARGS, ...) as github/shell/powershell/dotenv."),
    "hook": ("hook", "Pre-build hook: find the CI row, check the toolchain, write BUILD_ENV_FILE and GITHUB_ENV."),
    "doctor": ("doctor", "Check that this machine has everything a row needs before a long build."),
    "build": ("build", "Build rows end to end: doctor, render, build, check the wheel."),
    "toolkit": ("toolkit", "Provision a CUDA train's toolkit into the cache (install), or show it (path, list)."),
    "matrix": ("matrix", "Narrow the shared generator's matrix to what the policy publishes (the release gate)."),
    "workflow": ("workflow", "Render the GitHub workflows that use the policy."),
    "stamp": ("stamp", "Give a wheel another build made what `build` gives its wheels: the build record and, "
                       "with [project] stamp, the row's local version and runtime requirement; with [repair] "
                       "auditwheel, the repair of a Linux wheel."),
    "check": ("check", "Check a built wheel: device code per library, declared runtime, RPATH."),
    "archs": ("archs", "List the device code of a wheel, and optionally write it into the policy."),
    "schema": ("schema", "Print the JSON Schema of buildrows.toml."),
    "init": ("init", "Write a starting buildrows.toml for the project in the current directory."),
    "cache": ("cache", "Show what buildrows keeps on disk (toolkits, environments, downloads, compiler cache, build "
                       "trees, logs, earlier wheels) with sizes, and prune it by age or kind."),
}

DESCRIPTION = (
    "Declare the wheels a C++/CUDA Python project publishes once, as rows (platform x CUDA train x "
    "Python, each CUDA row with its GPU architecture list) in buildrows.toml, and let buildrows render "
    "the rest: CMake presets, the wheel workflow's environment, the CI matrix, and the checks a built "
    "wheel must pass."
)
EPILOG = (
    "Start with `buildrows init` in a project (or `--config PATH` to an existing policy), then "
    "`buildrows rows`, `buildrows doctor`, `buildrows build`. `buildrows COMMAND --help` describes a command. "
    "Exit codes: 0 success, 1 internal error, 2 bad input, 3 refused by policy, 4 an external command "
    "failed (or the disk is full), 5 the wheel check failed; 130 after Ctrl-C, 143 after SIGTERM."
)


def _terminal_columns() -> int:
    """shutil.get_terminal_size().columns without importing shutil (and its compression modules):
    COLUMNS when it is a positive number, else the terminal on stdout, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, its width found as argparse finds it, but without importing shutil:
    every add_argument builds one, and `env` and `hook` start on every CI job."""

    def __init__(self, prog: str, *args: Any, **kwargs: Any) -> None:
        if len(args) < 3 and kwargs.get("width") is None:  # width: the third after prog
            kwargs["width"] = _terminal_columns() - 2
        super().__init__(prog, *args, **kwargs)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_BAD_INPUT, f"buildrows: bad input: {message}\n    fix: see `{self.prog} --help`\n")


def _chosen_command(argv: Sequence[str] | None) -> str | None:
    """The command named in argv (skipping --config's value), so only its module is imported."""
    if argv is None:
        return None
    skip = False
    for tok in argv:
        if skip:
            skip = False
        elif tok == "--config":
            skip = True
        elif tok in COMMANDS:
            return tok
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The CLI parser; given argv, only the chosen command's module is imported (the hook starts fast)."""
    common = _Parser(add_help=False)
    common.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS,
                        help="policy file: buildrows.toml or a pyproject.toml with [tool.buildrows] (default: current directory)")
    common.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                        help="print only warnings, errors and results (a build's steps and their output go to its logs)")
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="print more: every variable a build step sets, and why its command looks as it does")
    epilog = EPILOG
    if argv is None or any(tok in ("-h", "--help") for tok in argv):
        from buildrows.envvars import help_epilog  # only when help is printed: `hook` starts fast
        epilog = f"{EPILOG} {help_epilog()}"
    parser = _Parser(prog="buildrows", description=DESCRIPTION, epilog=epilog, parents=[common])
    parser.add_argument("--version", action="version", version=f"buildrows {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    chosen = _chosen_command(argv)
    for name, (module, help_text) in COMMANDS.items():
        if chosen is not None and name != chosen:
            continue  # the hook starts fast: only the chosen command's parser is built
        p = sub.add_parser(name, help=help_text, description=help_text, parents=[common])
        importlib.import_module(f"buildrows.commands.{module}").add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None, ui: UI | None = None) -> int:
    ui = ui or UI()
    argv = list(argv) if argv is not None else sys.argv[1:]
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if args.command not in SHORT_LIVED or getattr(args, "provision", None):
        gc.enable()  # entry() turned it off for start-up; a build, a check or a toolkit's download runs long
    if not getattr(args, "config", None):
        args.config = os.environ.get("BUILDROWS_CONFIG") or None
    if getattr(args, "quiet", False) and getattr(args, "verbose", False):
        parser.error("-q and -v contradict each other: pass one")
    ui.quiet = ui.quiet or bool(getattr(args, "quiet", False))
    ui.verbose = bool(getattr(args, "verbose", False))
    if not args.command:
        parser.print_help(sys.stderr)
        return EXIT_BAD_INPUT
    module, _ = COMMANDS[args.command]
    mod = importlib.import_module(f"buildrows.commands.{module}")
    try:
        code: int = mod.run(args, ui)
        return code
    except BuildrowsError as e:
        ui.error(e.title, str(e))
        return e.exit_code
    except KeyboardInterrupt:
        ui.error("interrupted", "stopped by the user")
        return 130
    except BrokenPipeError:
        return _closed_pipe()
    except Exception as e:  # a bug in buildrows, not bad input
        from buildrows.process.diskfull import disk_full, is_disk_full

        if is_disk_full(e):  # the machine's failure, not a bug: the path, exit 4
            full = disk_full(e, f"during `buildrows {args.command}`")
            ui.error(full.title, str(full))
        else:
            ui.error("internal error", f"{type(e).__name__}: {e}\n    this is a bug in buildrows; please report it "
                     "with the command you ran (set BUILDROWS_DEBUG=1 for the traceback)")
        if os.environ.get("BUILDROWS_DEBUG"):
            import traceback

            traceback.print_exc()
        return full.exit_code if is_disk_full(e) else EXIT_INTERNAL


#: A reader closed the pipe (`buildrows schema | head -1`): the exit status a shell gives a
#: program SIGPIPE ended (128 + 13), with nothing printed.
EXIT_CLOSED_PIPE = 141


def _closed_pipe() -> int:
    """Point stdout at /dev/null, so Python's last flush at exit does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return EXIT_CLOSED_PIPE


#: Commands that run for a few milliseconds, on every CI job: entry() keeps Python's cyclic
#: garbage collector off for them (a tenth of their start-up; the process ends before it matters).
SHORT_LIVED = ("env", "hook")


def entry() -> None:
    gc.disable()  # main() turns it back on for every command but the short-lived ones
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        code = _closed_pipe()
    sys.exit(code)

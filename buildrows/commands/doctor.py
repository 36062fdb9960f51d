"""`buildrows doctor ROW...`: check this machine has everything the rows need, before a long build."""

from __future__ import annotations

import argparse

from buildrows.ui import UI


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("selectors", nargs="*", metavar="ROW",
                   help="row names or globs (default: this machine's row: its platform, this Python, "
                        "and the CUDA train of the nvcc found, else CPU)")
    p.add_argument("--project", metavar="DIR", help="the project to build (default: the policy's source-dir)")
    p.add_argument("--driver", choices=("cmake-presets", "scikit-build-core", "setup.py"),
                   help="check for this build driver instead of the policy's")
    p.add_argument("--isolation", action="store_true",
                   help="the wheel build will fetch its build requirements from the registry (PEP 517 isolation)")


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.build.prepare import BuildOptions, doctor

    doctor(BuildOptions.of(args), ui)
    return 0

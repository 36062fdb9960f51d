"""`buildrows init`: write a starting buildrows.toml for the project in the current directory."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from buildrows.errors import BadInput
from buildrows.ui import UI

if TYPE_CHECKING:
    from buildrows.archs import Train
    from buildrows.starter import CudaStart


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from-wheel", metavar="WHEEL",
                   help="take the CUDA architecture list from this wheel's device code (PyTorch's wheel for the "
                        "train, or one of your own), as `buildrows archs --from-wheel` reads it")
    p.add_argument("--cuda", metavar="TRAIN",
                   help="the CUDA train (13.0 or cu130); default: the wheel's +cuXYZ tag. Without --from-wheel, "
                        "the train gets buildrows' starting list, cut to what it compiles")
    p.add_argument("--cpu", action="store_true", help="publish CPU rows too (always, when no CUDA train is given)")
    p.add_argument("--python", metavar="VERSIONS",
                   help="Python versions, comma-separated (default: 3.10,3.11,3.12,3.13 and the running Python)")
    p.add_argument("--driver", choices=("cmake-presets", "scikit-build-core", "setup.py"),
                   help="the build driver (default: detected from the project's files)")


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.policy import CONFIG_NAMES

    project = Path.cwd()
    _refuse_existing(project)
    path = project / CONFIG_NAMES[0]
    text, summary = starter(project, args)
    # Created, never replaced: "x" fails if the file appeared since the check above.
    try:
        with open(path, "x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        raise BadInput(f"{path} already exists; buildrows init never overwrites a policy\n"
                       "    fix: edit that file, or move it away and run buildrows init again") from None
    for line in summary:
        ui.info(line)
    ui.print(str(path))
    ui.ok("next: `buildrows rows` lists the rows, `buildrows doctor` checks this machine, "
          "`buildrows build` builds and checks this machine's row")
    return 0


def _refuse_existing(project: Path) -> None:
    """A policy is the user's: init stops when buildrows.toml or [tool.buildrows] is already there."""
    from buildrows.policy import find_config

    try:
        found = find_config(project)
    except BadInput:
        return
    raise BadInput(f"{found} already holds this project's buildrows policy; buildrows init never overwrites a policy\n"
                   "    fix: edit that policy (`buildrows rows` shows what it publishes), or remove it and run "
                   "buildrows init again")


def starter(project: Path, args: argparse.Namespace) -> tuple[str, list[str]]:
    """The starting policy's text (validated as a policy) and what to tell the user about it."""
    from buildrows.archs import Train, suggested_archs
    from buildrows.host import host_platform, host_python
    from buildrows.starter import CudaStart, detect_project, starter_text

    facts = detect_project(project, args.driver)
    platform = host_platform(os.environ)
    summary = [f"project {facts.name}: driver {facts.driver} ({facts.why})"]
    if facts.cuda_option:
        summary.append(f"cuda-option {facts.cuda_option} ({facts.cuda_option_from})")
    train: Train | None = None
    if args.cuda:
        try:
            train = Train.parse(args.cuda)
        except ValueError as e:
            raise BadInput(f"--cuda: {e}") from e
    cuda: CudaStart | None = None
    if args.from_wheel:
        cuda, platform = _from_wheel(Path(args.from_wheel), train, platform)
        summary.append(f"CUDA {cuda.train.dotted}: archs {cuda.text} ({cuda.source})")
    elif train is not None:
        text = suggested_archs(train, platform)
        from buildrows.archs import parse_arch_list

        cuda = CudaStart(train, parse_arch_list(text), text, False,
                         f"buildrows' starting list for CUDA {train.dotted}; `buildrows archs --from-wheel TORCH_WHEEL "
                         f"--write '{platform}-{train.cu}-*'` replaces it with what a wheel ships")
        summary.append(f"CUDA {train.dotted}: archs {text} (buildrows' starting list; no --from-wheel)")
    pythons = _pythons(args.python, host_python())
    text = starter_text(facts, platform, pythons, cuda, cpu=args.cpu)
    _validate(text, project)
    summary.append(f"platform {platform}, Python {', '.join(pythons)}"
                   + (f", CUDA {cuda.train.dotted}" if cuda else "") + (", CPU" if args.cpu or cuda is None else ""))
    return text, summary


def _pythons(given: str | None, running: str) -> list[str]:
    import re

    from buildrows.starter import START_PYTHONS

    if given is None:
        versions = list(START_PYTHONS)
        if running not in versions:
            versions.append(running)
        return versions
    versions = [v.strip() for v in given.split(",") if v.strip()]
    bad = [v for v in versions if not re.fullmatch(r"3\.\d{1,2}t?", v)]
    if bad or not versions:
        raise BadInput(f"--python {given!r}: {', '.join(bad) or 'no version'} is not a Python version\n"
                       "    fix: write them like --python 3.11,3.12")
    return versions


def _from_wheel(wheel: Path, train: Train | None, platform: str) -> tuple[CudaStart, str]:
    """The train's list as the wheel ships it (the cubins common to its libraries, PTX where all carry it)."""
    from buildrows.check import platform_of_wheel, train_of_wheel
    from buildrows.commands.archs import read_device_code
    from buildrows.errors import Refused
    from buildrows.policy_edit import arch_text, archs_from_names
    from buildrows.starter import CudaStart

    code = read_device_code(wheel)
    tagged = train_of_wheel(code.info) if code.info is not None else None
    if train is not None and tagged is not None and train != tagged:
        raise BadInput(f"--cuda {train.dotted} contradicts {wheel.name}'s tag +{tagged.cu}\n"
                       "    fix: drop --cuda (the wheel names its train), or name the wheel of that train")
    train = train or tagged
    if train is None:
        raise BadInput(f"{wheel.name} carries no +cuXYZ tag, so its CUDA train is unknown\n"
                       "    fix: pass --cuda TRAIN (the train the wheel was built with, e.g. --cuda 13.0)")
    if not code.common_elf:
        raise Refused(f"{wheel.name}: no GPU architecture is common to its libraries with device code "
                      f"({len(code.with_code)} of {len(code.libraries)} carry any); nothing to start a list from\n"
                      "    fix: name a CUDA wheel of the train (PyTorch's, say), or pass --cuda TRAIN without "
                      "--from-wheel for buildrows' starting list")
    archs = archs_from_names(code.common_elf, code.common_ptx)
    text, ptx_none = arch_text(archs)
    n = len(code.with_code)
    source = (f"from {wheel.name}: the architectures common to its {n} librar{'y' if n == 1 else 'ies'} "
              "with device code")
    return CudaStart(train, archs, text, ptx_none, source), (platform_of_wheel(code.info) if code.info else None) or platform


def _validate(text: str, project: Path) -> None:
    """The starting policy must load: a list the train cannot compile is refused before anything is written."""
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    from buildrows.errors import BuildrowsError
    from buildrows.policy import policy_from_dict

    try:
        policy_from_dict(tomllib.loads(text), str(project / "buildrows.toml"))
    except BuildrowsError as e:
        raise type(e)(f"the starting policy would not load, so nothing was written:\n{e}") from None

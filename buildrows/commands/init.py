"""`buildrows init`: write a starting buildrows.toml for the project in the current directory."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from buildrows.errors import BadInput
from buildrows.ui import UI

if TYPE_CHECKING:
    pass


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from-wheel", metavar="WHEEL", nargs="+",
                   help="take the CUDA architecture list, and what `check` needs to pass, from this wheel's device "
                        "code (PyTorch's wheel for the train, or one of your own), as `buildrows archs --from-wheel` "
                        "reads it; several wheels of one project (one per CUDA train or per Python) give each "
                        "train its list")
    p.add_argument("--cuda", metavar="TRAIN",
                   help="the CUDA train (13.0 or cu130); default: the wheel's +cuXYZ tag. Without --from-wheel, "
                        "the train gets buildrows' starting list, cut to what it compiles")
    p.add_argument("--cpu", action="store_true", help="publish CPU rows too (always, when no CUDA train is given)")
    p.add_argument("--python", metavar="VERSIONS",
                   help="Python versions, comma-separated (default: 3.10,3.11,3.12,3.13 and the running Python)")
    p.add_argument("--driver", choices=("cmake-presets", "scikit-build-core", "setup.py"),
                   help="the build driver (default: detected from the project's files)")


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.adopt.starter import refuse_existing, starter
    from buildrows.policy.read import CONFIG_NAMES

    project = Path.cwd()
    refuse_existing(project)
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
    _wheel_metadata(project, path, ui)
    ui.ok("next: `buildrows rows` lists the rows, `buildrows doctor` checks this machine, "
          "`buildrows build` builds and checks this machine's row")
    return 0




def _wheel_metadata(project: Path, policy_path: Path, ui: UI) -> None:
    """What the project needs for its wheels to carry the row's version and runtime requirement
    (buildrows.build.provider): files written only where absent, the rest printed."""
    from buildrows.build import provider as adopt
    from buildrows.policy.load import load_policy

    pol = load_policy(policy_path)
    cuda = next((r for r in pol.rows if r.is_cuda), None)
    tag = cuda.local_tag if cuda is not None else ""
    files: tuple[tuple[Path, str], ...] = ()
    advice: list[str] = []
    if pol.project.driver == "scikit-build-core":
        found = adopt.scikit_build_core(project, tag)
        files, advice = found.files, list(found.advice)
    for target, text in files:
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(target, "x", encoding="utf-8") as f:  # never replaces what is there
                f.write(text)
        except FileExistsError:
            continue
        ui.print(str(target))
    if cuda is not None and cuda.runtime is not None and cuda.runtime.mode == "dynamic" and cuda.runtime.library_dir:
        advice += adopt.rpath_advice(project, pol.project.driver, cuda.runtime.library_dir)
    elif cuda is not None and cuda.runtime is not None and cuda.runtime.mode == "none" and cuda.runtime.requirements:
        advice += adopt.library_rpath_advice(project, pol.project.driver, cuda.runtime.requirements)
    for line in advice:
        ui.info(line)

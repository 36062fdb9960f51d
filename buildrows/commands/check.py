"""`buildrows check WHEEL`: hold a built wheel to its row, without a GPU and without installing it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from buildrows.errors import BadInput, CheckFailed, Refused
from buildrows.ui import UI

if TYPE_CHECKING:
    from buildrows.check import CheckResult, Expectation
    from buildrows.model import Policy
    from buildrows.wheelread import WheelInfo


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("wheel", metavar="WHEEL", help="the built .whl file")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--row", help="the row the wheel was built for (default: inferred from the wheel's name)")
    g.add_argument("--archs", metavar="LIST", help="check against this architecture list instead of the row's, e.g. '9.0'")
    p.add_argument("--cuda", metavar="TRAIN",
                   help="the wheel's CUDA train (13.0 or cu130) when its name carries no +cuXYZ tag")
    p.add_argument("--json", action="store_true", help="print a machine-readable report")


def _policy(args: argparse.Namespace) -> Policy | None:
    from buildrows.policy import find_config, load_policy

    if args.config or args.row:
        return load_policy(args.config)
    try:
        find_config(None)  # buildrows.toml or [tool.buildrows] in ./pyproject.toml
    except BadInput:
        return None  # no policy here: the seed defaults apply
    return load_policy(None)


def expectation(args: argparse.Namespace, info: WheelInfo, policy: Policy | None) -> Expectation:
    from buildrows.archs import ArchError, Train, parse_arch_list
    from buildrows.check import Expectation, platform_of_wheel, python_of_wheel, train_of_wheel
    from buildrows.policy import default_runtimes, row_name
    from buildrows.rows import select_one

    wheel = info.path.name
    if args.row:
        assert policy is not None
        row = select_one(policy, args.row)
        if args.cuda:
            try:
                given = Train.parse(args.cuda)
            except ValueError as e:
                raise BadInput(f"--cuda: {e}") from e
            if given != row.cuda:
                raise BadInput(f"--cuda {given.dotted} contradicts --row {row.name} "
                               f"({'CPU' if row.cuda is None else 'CUDA ' + row.cuda.dotted})\n"
                               "    fix: drop --cuda; the row names its train")
    else:
        platform = platform_of_wheel(info)
        python = python_of_wheel(info)
        train = train_of_wheel(info)
        if args.cuda:
            try:
                given = Train.parse(args.cuda)
            except ValueError as e:
                raise BadInput(f"--cuda: {e}") from e
            if train is not None and given != train:
                raise BadInput(f"--cuda {given.dotted} contradicts the wheel's tag +{train.cu}\n"
                               "    fix: drop --cuda, or check the wheel you meant")
            train = given
        elif train is None and args.archs:
            raise BadInput(f"{wheel}: --archs names GPU architectures, but the wheel's name carries no +cuXYZ tag, "
                           "so its CUDA train is unknown\n    fix: pass --cuda 13.0 (the train it was built with)")
        if platform is None or python is None:
            raise BadInput(f"{wheel}: cannot infer the row (platform tags {'.'.join(info.name.platform_tags)}, "
                           f"python tags {'.'.join(info.name.python_tags)})\n    fix: pass --row ROW --config POLICY")
        name = row_name(platform, train, python)
        found = policy.row(name) if policy is not None else None
        if found is None:
            if policy is not None and not args.archs:
                raise Refused(f"{wheel}: inferred row {name} is not in {policy.path}\n"
                              "    fix: pass --row, or add the row to the policy")
            runtimes = policy.runtimes if policy is not None else tuple(default_runtimes().items())
            rt = dict(runtimes).get(train.major) if train else None
            archs = None
            if train is not None:
                if not args.archs:
                    raise BadInput(f"{wheel}: a CUDA {train.dotted} wheel needs the row's architecture list\n"
                                   "    fix: pass --archs '8.0 9.0 ...' or --row ROW --config POLICY")
                try:
                    archs = parse_arch_list(args.archs, train=train)
                except ArchError as e:
                    raise BadInput(f"--archs: {e}" + (f"\n    fix: {e.hint}" if e.hint else "")) from e
            return Expectation(name, platform, train, archs, rt.requirements if rt else (), rt.library_dir if rt else None)
        row = found
    archs = row.require_archs("check") if row.cuda is not None else None
    if args.archs:
        try:
            archs = parse_arch_list(args.archs, train=row.cuda)
        except ArchError as e:
            raise BadInput(f"--archs: {e}" + (f"\n    fix: {e.hint}" if e.hint else "")) from e
    rt = row.runtime
    return Expectation(row.name, row.platform, row.cuda, archs,
                       rt.requirements if rt else (), rt.library_dir if rt else None)


def unreadable_fix(e: Exception) -> str:
    """What to do about a file buildrows cannot read as a wheel: the advice depends on why."""
    text = str(e)
    if "not a wheel file name" in text:
        return ("pass a built wheel (NAME-VERSION-PYTHON-ABI-PLATFORM.whl); `buildrows build` prints the path of "
                "each wheel it writes")
    if "cannot open as a zip archive" in text:
        return ("this file is not a zip archive, so not a wheel (a truncated download, or another file renamed): "
                "download or build it again")
    return "the wheel is malformed: build it again (`buildrows build`), or report it to the tool that wrote it"


def check_wheel(args: argparse.Namespace, wheel: Path, policy: Policy | None) -> tuple[Expectation, WheelInfo, list[CheckResult]]:
    from buildrows.binfmt import BinaryFormatError
    from buildrows.check import run_checks
    from buildrows.fatbin import FatbinError
    from buildrows.wheelread import WheelError, read_wheel

    if not wheel.is_file():
        raise BadInput(f"{wheel}: no such wheel\n    fix: pass the path of a built .whl")
    try:
        info = read_wheel(wheel)
    except (WheelError, BinaryFormatError, FatbinError) as e:
        raise BadInput(f"{e}\n    fix: {unreadable_fix(e)}") from e
    except OSError as e:
        raise BadInput(f"{wheel}: cannot read: {e}") from e
    exp = expectation(args, info, policy)
    return exp, info, run_checks(exp, info)


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.check import library_json

    wheel = Path(args.wheel)
    exp, info, results = check_wheel(args, wheel, _policy(args))
    ok = all(r.ok for r in results)
    if args.json:
        ui.print(json.dumps({
            "ok": ok,
            "wheel": str(wheel),
            "row": exp.row,
            "expected": {"elf": exp.archs.cubin_names if exp.archs else [], "ptx": exp.archs.ptx_names if exp.archs else []},
            "checks": [r.json() for r in results],
            "libraries": library_json(info.libraries),
        }, indent=2))
    else:
        ui.print(f"{wheel.name}: row {exp.row}")
        for r in results:
            ui.print(f"  [{'PASS' if r.ok else 'FAIL'}] {r.name}")
            for d in r.details:
                ui.print(f"         {d}")
        ui.print(f"verdict: {'PASS' if ok else 'FAIL'}")
    if not ok:
        failed = ", ".join(r.name for r in results if not r.ok)
        if args.json:
            return CheckFailed.exit_code
        raise CheckFailed(f"{wheel.name} fails {failed}")
    return 0

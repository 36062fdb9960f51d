"""What a wheel is held to: its row's expectation, from the policy, the wheel's tags and what the
command line says (`CheckRequest`), and `check_wheel`, which reads the artifact and judges it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from buildrows.errors import BadInput, Refused

if TYPE_CHECKING:
    from buildrows.binaries.looseread import LooseInfo
    from buildrows.binaries.wheelread import WheelInfo
    from buildrows.check.judges import Artifact, CheckResult, Expectation
    from buildrows.policy.archs import ArchList, Train
    from buildrows.policy.model import Policy, Row


@dataclass(frozen=True)
class CheckRequest:
    """What `check` is asked: the artifact, and what the command line says of its row."""

    wheel: str
    row: str | None = None
    archs: str | None = None
    cuda: str | None = None
    config: str | None = None
    json: bool = False


def policy_for(args: CheckRequest) -> Policy | None:
    """The policy the check reads: the one named (or needed by --row), else the current
    directory's when there is one, else None (the seed defaults apply)."""
    return _policy(args)


def _policy(args: CheckRequest) -> Policy | None:
    from buildrows.policy.load import find_config, load_policy

    if args.config or args.row:
        return load_policy(args.config)
    try:
        find_config(None)  # buildrows.toml or [tool.buildrows] in ./pyproject.toml
    except BadInput:
        return None  # no policy here: the seed defaults apply
    return load_policy(None)


def _given_train(args: CheckRequest) -> Train | None:
    from buildrows.policy.archs import Train

    if not args.cuda:
        return None
    try:
        return Train.parse(args.cuda)
    except ValueError as e:
        raise BadInput(f"--cuda: {e}") from e


def _archs(text: str, train: Train | None) -> ArchList:
    from buildrows.policy.archs import ArchError, parse_arch_list

    try:
        return parse_arch_list(text, train=train)
    except ArchError as e:
        raise BadInput(f"--archs: {e}" + (f"\n    fix: {e.hint}" if e.hint else "")) from e


def _for_row(args: CheckRequest, row: Row, policy: Policy, machine: str | None, loose: bool) -> Expectation:
    from buildrows.check.judges import Expectation

    archs = row.require_archs("check") if row.cuda is not None else None
    if args.archs:
        archs = _archs(args.archs, row.cuda)
    rt = row.runtime
    return Expectation(row.name, row.platform, row.cuda, archs,
                       rt.requirements if rt else (), rt.library_dir if rt else None,
                       mode=rt.mode if rt else "dynamic",
                       rpath_exceptions=policy.check.rpath_exceptions,
                       files=tuple(r for r in policy.check.files if r.applies_to(row.name)),
                       machine=machine, loose=loose, torch_extension=row.cuda is None and policy.torch_extension(row))


def _row_given(args: CheckRequest, policy: Policy | None) -> Row:
    from buildrows.policy.rows import select_one

    assert policy is not None and args.row is not None
    row = select_one(policy, args.row)
    given = _given_train(args)
    if given is not None and given != row.cuda:
        raise BadInput(f"--cuda {given.dotted} contradicts --row {row.name} "
                       f"({'CPU' if row.cuda is None else 'CUDA ' + row.cuda.dotted})\n"
                       "    fix: drop --cuda; the row names its train")
    return row


def expectation(args: CheckRequest, info: WheelInfo, policy: Policy | None) -> Expectation:
    from buildrows.check.judges import (
        Expectation,
        platform_of_wheel,
        python_of_wheel,
        train_of_wheel,
    )
    from buildrows.check.promises import machine_of_platform_tag
    from buildrows.policy.load import default_runtimes, row_name

    wheel = info.path.name
    machines = {m for m in map(machine_of_platform_tag, info.name.platform_tags) if m}
    machine = machines.pop() if len(machines) == 1 else None
    if args.row:
        return _for_row(args, _row_given(args, policy), cast("Policy", policy), machine, loose=False)
    platform = platform_of_wheel(info)
    python = python_of_wheel(info)
    train = train_of_wheel(info)
    given = _given_train(args)
    if given is not None:
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
    name = row_name(platform, train, python.version)
    found = policy.row(name) if policy is not None else None
    if found is None and python.abi3 and policy is not None:
        # One abi3 wheel serves every Python from its tag on: the oldest such row of the policy stands for them.
        serves = [r for r in policy.rows if r.platform == platform and r.cuda == train and r.empty_reason is None
                  and not r.python.endswith("t") and _py(r.python) >= _py(python.version)]
        found = min(serves, key=lambda r: _py(r.python)) if serves else None
    if found is not None and policy is not None:
        return _for_row(args, found, policy, machine, loose=False)
    if policy is not None and not args.archs:
        from buildrows.policy.rows import refuse_excluded_python

        refuse_excluded_python(policy, name)
        what = f"abi3 (Python {python.version} and newer)" if python.abi3 else f"Python {python.version}"
        raise Refused(f"{wheel}: inferred row {name} ({what}) is not in {policy.path}\n"
                      "    fix: pass --row, or add the row to the policy")
    runtimes = policy.runtimes if policy is not None else tuple(default_runtimes().items())
    rt = dict(runtimes).get(train.major) if train else None
    archs = None
    if train is not None:
        if not args.archs:
            raise BadInput(f"{wheel}: a CUDA {train.dotted} wheel needs the row's architecture list\n"
                           "    fix: pass --archs '8.0 9.0 ...' or --row ROW --config POLICY")
        archs = _archs(args.archs, train)
    return Expectation(name, platform, train, archs, rt.requirements if rt else (), rt.library_dir if rt else None,
                       mode=rt.mode if rt else "dynamic",
                       rpath_exceptions=policy.check.rpath_exceptions if policy else (),
                       files=tuple(r for r in policy.check.files if r.applies_to(name)) if policy else (),
                       machine=machine,
                       torch_extension=train is None and policy is not None and any(r.mode == "torch" for _, r in runtimes))


def _py(version: str) -> tuple[int, int]:
    major, minor = version.rstrip("t").split(".")
    return int(major), int(minor)


def loose_expectation(args: CheckRequest, info: LooseInfo, policy: Policy | None) -> Expectation:
    """A library or a tree has no name to infer from: --row, or --cuda with --archs (else a CPU check)."""
    from buildrows.check.judges import Expectation
    from buildrows.policy.load import default_runtimes

    first = info.libraries[0] if info.libraries else None
    if args.row:
        row = _row_given(args, policy)
        want = "x86_64" if row.machine == "amd64" else row.machine
        return _for_row(args, row, cast("Policy", policy), want if first else None, loose=True)
    train = _given_train(args)
    if args.archs and train is None:
        raise BadInput(f"{info.path}: --archs names GPU architectures, but loose files carry no CUDA train\n"
                       "    fix: pass --cuda 13.0 (the train they were built with), or --row ROW")
    if train is not None and not args.archs:
        raise BadInput(f"{info.path}: CUDA {train.dotted} files need the row's architecture list\n"
                       "    fix: pass --archs '8.0 9.0 ...', or --row ROW --config POLICY")
    # The platform is what the first binary is (the others are held to its machine).
    machine = first.machine if first else None
    os_ = "windows" if first is not None and first.format == "pe" else "linux"
    platform = f"{os_}-{'amd64' if os_ == 'windows' and machine == 'x86_64' else machine or 'x86_64'}"
    runtimes = policy.runtimes if policy is not None else tuple(default_runtimes().items())
    rt = dict(runtimes).get(train.major) if train else None
    return Expectation(f"{platform}-{train.cu if train else 'cpu'} (loose files)", platform, train,
                       _archs(args.archs, train) if train is not None and args.archs else None,
                       rt.requirements if rt else (), rt.library_dir if rt else None,
                       mode=rt.mode if rt else "dynamic",
                       rpath_exceptions=policy.check.rpath_exceptions if policy else (),
                       machine=machine, machine_from=f"{first.path if first else 'the first library'} is built for",
                       loose=True)


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


def check_wheel(args: CheckRequest, wheel: Path, policy: Policy | None) -> tuple[Expectation, Artifact, list[CheckResult]]:
    """Read WHEEL (a .whl, a shared library or a directory) and judge it."""
    from buildrows.binaries.binfmt import BinaryFormatError
    from buildrows.binaries.fatbin import FatbinError
    from buildrows.binaries.looseread import LooseError, read_loose
    from buildrows.binaries.wheelread import WheelError, read_wheel
    from buildrows.check.judges import run_checks

    if wheel.is_dir() or (wheel.is_file() and wheel.suffix != ".whl"):
        try:
            loose = read_loose(wheel)
        except LooseError as e:
            raise BadInput(f"{e}\n    fix: pass a built wheel (NAME-VERSION-PYTHON-ABI-PLATFORM.whl), a shared library "
                           "or an install directory; `buildrows build` prints the path of each wheel it writes") from e
        exp = loose_expectation(args, loose, policy)
        return exp, loose, run_checks(exp, loose)
    if not wheel.is_file():
        raise BadInput(f"{wheel}: no such wheel\n    fix: pass the path of a built .whl, a shared library or a directory")
    try:
        info = read_wheel(wheel)
    except (WheelError, BinaryFormatError, FatbinError) as e:
        raise BadInput(f"{e}\n    fix: {unreadable_fix(e)}") from e
    except OSError as e:
        raise BadInput(f"{wheel}: cannot read: {e}") from e
    exp = expectation(args, info, policy)
    return exp, info, run_checks(exp, info)

"""What a wheel is held to: its row's expectation, from the policy, the wheel's tags and what the
command line says (`CheckRequest`), and `check_wheel`, which reads the artifact and judges it."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from buildrows.errors import BadInput, Refused

if TYPE_CHECKING:
    from buildrows.binaries.looseread import LooseInfo
    from buildrows.binaries.wheelread import WheelName
    from buildrows.check.judging import Artifact, CheckResult, Expectation
    from buildrows.check.symbol_sources import LoadInputs, TorchLibraries
    from buildrows.policy.archs import ArchList, Train
    from buildrows.policy.model import Policy, Row, Runtime


@dataclass(frozen=True)
class CheckRequest:
    """What `check` is asked: the artifact, and what the command line says of its row."""

    wheel: str
    row: str | None = None
    archs: str | None = None
    cuda: str | None = None
    config: str | None = None
    json: bool = False
    ptx: str | None = None  # "none", "newest" or one architecture: overrides the list's PTX choice
    torch: str | None = None  # the torch the wheel was compiled against, for a wheel without a build record


def policy_for(args: CheckRequest) -> Policy | None:
    """The policy the check reads: the one named (or needed by --row), else the current
    directory's when there is one, else None (the seed defaults apply)."""
    return _policy(args)


def _policy(args: CheckRequest) -> Policy | None:
    from buildrows.policy.load import load_policy
    from buildrows.policy.read import find_config

    if args.config or args.row:
        return load_policy(args.config)
    try:
        find_config(None)  # buildrows.toml or [tool.buildrows] in ./pyproject.toml
    except BadInput:
        return None  # no policy here: the seed defaults apply
    return load_policy(None)


def _given_train(args: CheckRequest) -> Train | None:
    from buildrows.policy.trains import Train

    if not args.cuda:
        return None
    try:
        return Train.parse(args.cuda)
    except ValueError as e:
        raise BadInput(f"--cuda: {e}") from e


def _archs(text: str, train: Train | None, ptx: str | None = None) -> ArchList:
    from buildrows.policy.archs import ArchError, parse_arch_list

    try:
        return parse_arch_list(text, train=train, ptx=ptx or "newest")
    except ArchError as e:
        what = "--ptx" if ptx and (e.token == ptx or "ptx =" in str(e)) else "--archs"
        raise BadInput(f"{what}: {e}" + (f"\n    fix: {e.hint}" if e.hint else "")) from e


def _row_archs(args: CheckRequest, row: Row) -> ArchList | None:
    """The row's list, or --archs in the row's train; --ptx overrides the PTX choice of either."""
    if row.cuda is None:
        if args.archs or args.ptx:
            flag = "--archs" if args.archs else "--ptx"
            raise BadInput(f"{flag} names GPU code, but --row {row.name} is a CPU row\n"
                           "    fix: drop it, or name the CUDA row the wheel was built for")
        return None
    if args.archs:
        return _archs(args.archs, row.cuda, args.ptx)
    archs = row.require_archs("check")
    if args.ptx:
        # the row's cubins, and its PTX-only entries as written (a list marking PTX conflicts with --ptx)
        return _archs(" ".join([*archs.dotted, *(f"{a.dotted}-virtual" for a in archs.ptx_only)]), row.cuda, args.ptx)
    return archs


def _runtime_fields(rt: Runtime | None) -> dict[str, Any]:
    """What the row's runtime table adds to the expectation beyond requirements and library-dir."""
    if rt is None:
        return {"mode": "dynamic"}
    return {"mode": rt.mode, "mode_reason": rt.reason, "runtime_extra": rt.extra, "optional_sonames": rt.optional,
            "jit": rt.jit, "jit_reason": rt.reason if rt.jit else "", "jit_source": f"jit of {rt.source}" if rt.jit else ""}


def _train_archs(policy: Policy, platform: str) -> tuple[tuple[Train, ArchList], ...]:
    """Each train's architecture list on one platform (for per-train library rules)."""
    out: dict[Train, ArchList] = {}
    for r in policy.rows:
        if r.platform == platform and r.cuda is not None and r.archs is not None and r.cuda not in out:
            out[r.cuda] = r.archs
    return tuple(out.items())


def _for_row(args: CheckRequest, row: Row, policy: Policy, machine: str | None, loose: bool) -> Expectation:
    from buildrows.check.judging import Expectation

    archs = _row_archs(args, row)
    rt = row.runtime
    return Expectation(row.name, row.platform, row.cuda, archs,
                       rt.requirements if rt else (), rt.library_dir if rt else None,
                       **_runtime_fields(rt),
                       rpath_exceptions=policy.check.rpath_exceptions,
                       files=tuple(r for r in policy.check.files if r.applies_to(row.name)),
                       machine=machine, loose=loose,
                       library_rules=tuple(r for r in policy.check.libraries if r.applies_to(row.name)),
                       train_archs=_train_archs(policy, row.platform),
                       torch_extension=row.cuda is None and policy.torch_extension(row),
                       pure=row.cuda is None and policy.project.cpu_wheel == "pure")


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


def expectation(args: CheckRequest, wheel_path: Path, name: WheelName, policy: Policy | None) -> Expectation:
    """The row a wheel is held to, from its file name alone (buildrows.check.tags), so that a tag
    problem is reported before any library is inflated."""
    from buildrows.check.judging import Expectation
    from buildrows.check.promises import machine_of_platform_tag
    from buildrows.check.tags import (
        platform_of_name,
        platforms_of_name,
        python_of_name,
        train_of_name,
    )
    from buildrows.policy.build_rows import default_runtimes, row_name

    wheel = wheel_path.name
    machines = {m for m in map(machine_of_platform_tag, name.platform_tags) if m}
    machine = machines.pop() if len(machines) == 1 else None
    if args.row:
        return _for_row(args, _row_given(args, policy), cast("Policy", policy), machine, loose=False)
    platform = platform_of_name(name)
    python = python_of_name(name)
    train = train_of_name(name)
    given = _given_train(args)
    if given is not None:
        if train is not None and given != train:
            raise BadInput(f"--cuda {given.dotted} contradicts the wheel's tag +{train.cu}\n"
                           "    fix: drop --cuda, or check the wheel you meant")
        train = given
    elif train is None and (args.archs or args.ptx):
        raise BadInput(f"{wheel}: --{'archs' if args.archs else 'ptx'} names GPU code, but the wheel's name carries "
                       "no +cuXYZ tag, so its CUDA train is unknown\n"
                       "    fix: pass --cuda 13.0 (the train it was built with)")
    if platform is None and name.platform_tags == ("any",) and train is not None:
        platform = _pure_platform(policy, train)
    if platform is None or python is None:
        several = platforms_of_name(name)
        why = (f"its platform tags name several platforms ({', '.join(sorted(several))})" if len(several) > 1 else
               "no platform tag names a platform buildrows builds (linux x86_64/aarch64, win_amd64)"
               if platform is None else "no python tag names CPython 3 (cpXY, cpXY-abi3, pyX-none)")
        raise BadInput(f"{wheel}: cannot infer the row: {why} (platform tags {'.'.join(name.platform_tags)}, "
                       f"python tags {'.'.join(name.python_tags)}-{'.'.join(name.abi_tags)})\n"
                       "    fix: pass --row ROW --config POLICY")
    row = row_name(platform, train, python.version)
    found = policy.row(row) if policy is not None else None
    if found is None and python.abi3 and policy is not None:
        # A wheel for every Python from its tag on (abi3, pyX-none): the oldest such row of the policy stands for them.
        serves = [r for r in policy.rows if r.platform == platform and r.cuda == train and r.empty_reason is None
                  and python.serves(r.python)]
        found = min(serves, key=lambda r: (_py(r.python), r.python)) if serves else None
    if found is not None and policy is not None:
        return _for_row(args, found, policy, machine, loose=False)
    if policy is not None and not args.archs:
        from buildrows.policy.rows import refuse_excluded_python

        refuse_excluded_python(policy, row)
        fix = "pass --row, or add the row to the policy"
        if train is None:
            # No +cuXYZ tag (PyPI's wheels have none): the train comes from --cuda, as `init --from-wheel` takes it.
            trains = sorted({r.cuda for r in policy.rows if r.platform == platform and r.cuda is not None})
            example = trains[-1].dotted if trains else "12.8"
            known = (f"; the policy's trains on {platform}: {', '.join(t.dotted for t in trains)}" if trains else "")
            fix = (f"pass --cuda {example} (the train the wheel was built with: its name carries no +cuXYZ tag{known}), "
                   "or --row ROW, or add the row to the policy")
        raise Refused(f"{wheel}: inferred row {row} ({python.described}) is not in {policy.path}\n"
                      f"    fix: {fix}")
    runtimes = policy.runtimes if policy is not None else tuple(default_runtimes().items())
    rt = dict(runtimes).get(train.major) if train else None
    archs = None
    if train is not None:
        if not args.archs:
            raise BadInput(f"{wheel}: a CUDA {train.dotted} wheel needs the row's architecture list\n"
                           "    fix: pass --archs '8.0 9.0 ...' or --row ROW --config POLICY")
        archs = _archs(args.archs, train, args.ptx)
    return Expectation(row, platform, train, archs, rt.requirements if rt else (), rt.library_dir if rt else None,
                       **_runtime_fields(rt),
                       rpath_exceptions=policy.check.rpath_exceptions if policy else (),
                       files=tuple(r for r in policy.check.files if r.applies_to(row)) if policy else (),
                       machine=machine,
                       library_rules=tuple(r for r in policy.check.libraries if r.applies_to(row)) if policy else (),
                       train_archs=_train_archs(policy, platform) if policy else (),
                       torch_extension=(train is None and policy is not None and policy.project.cpu_wheel != "pure"
                                        and any(r.mode == "torch" for _, r in runtimes)),
                       pure=train is None and policy is not None and policy.project.cpu_wheel == "pure")


def _py(version: str) -> tuple[int, int]:
    major, _, minor = version.rstrip("t").partition(".")
    return int(major), int(minor or 0)


def loose_expectation(args: CheckRequest, info: LooseInfo, policy: Policy | None) -> Expectation:
    """A library or a tree has no name to infer from: --row, or --cuda with --archs (else a CPU check)."""
    from buildrows.check.judging import Expectation
    from buildrows.policy.build_rows import default_runtimes

    first = info.libraries[0] if info.libraries else None
    if args.row:
        row = _row_given(args, policy)
        want = "x86_64" if row.machine == "amd64" else row.machine
        return _for_row(args, row, cast("Policy", policy), want if first else None, loose=True)
    train = _given_train(args)
    if args.ptx and not args.archs:
        raise BadInput(f"{info.path}: --ptx changes the PTX of an architecture list, and none is given\n"
                       "    fix: pass --archs LIST beside it (with --cuda TRAIN), or --row ROW")
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
                       _archs(args.archs, train, args.ptx) if train is not None and args.archs else None,
                       rt.requirements if rt else (), rt.library_dir if rt else None,
                       **_runtime_fields(rt),
                       rpath_exceptions=policy.check.rpath_exceptions if policy else (),
                       machine=machine, machine_from=f"{first.path if first else 'the first library'} is built for",
                       loose=True)


def unreadable_fix(e: Exception) -> str:
    """What to do about a file buildrows cannot read as a wheel: the advice depends on why."""
    text = str(e)
    if "not a wheel file name" in text:
        return ("pass a built wheel (NAME-VERSION-PYTHON-ABI-PLATFORM.whl); `buildrows build` prints the path of "
                "each wheel it writes")
    if "not a valid wheel file name" in text:
        return ("give the wheel a name pip installs: a PEP 503 project name and a PEP 440 version in ASCII "
                "(1.0+cu130), as `buildrows build` writes it; rebuild it with the version fixed")
    if "cannot open as a zip archive" in text:
        return ("this file is not a zip archive, so not a wheel (a truncated download, or another file renamed): "
                "download or build it again")
    return "the wheel is malformed: build it again (`buildrows build`), or report it to the tool that wrote it"


def _with_torch(args: CheckRequest, exp: Expectation) -> Expectation:
    """--torch VERSION: validated here, judged by torch-matches-build (mode "torch" only)."""
    import dataclasses

    from packaging.version import InvalidVersion, Version

    if args.torch is None:
        return exp
    torch = _torch_libraries(args)
    if torch is not None:  # a torch to load against (buildrows.check.loading), in any mode; its version pins mode torch
        pinned = (exp.cuda is not None and exp.mode == "torch") or exp.torch_extension
        return dataclasses.replace(exp, torch_given=torch.version) if pinned else exp
    try:
        Version(args.torch)
    except InvalidVersion:
        raise BadInput(f"--torch: {args.torch!r} is not a version\n    fix: pass the torch version the wheel was "
                       "built against, e.g. --torch 2.8.0") from None
    if exp.mode != "torch":
        raise BadInput(f"--torch {args.torch}: the row {exp.row} is not a PyTorch extension's (its runtime mode is "
                       f"{exp.mode!r}), so no torch pin is judged\n    fix: drop --torch, or set mode = \"torch\" "
                       f"under [cuda.runtime.{exp.cuda.major if exp.cuda else 'N'}]")
    return dataclasses.replace(exp, torch_given=args.torch)


def _torch_is_path(text: str) -> bool:
    return "/" in text or text.endswith(".whl") or Path(text).exists()


_TORCH_READ: dict[str, TorchLibraries] = {}


def _torch_libraries(args: CheckRequest) -> TorchLibraries | None:
    """`--torch PATH`: the torch (a wheel, a torch package, or an environment holding one) whose
    libraries the load judges resolve against; refused, with the fix, when it is none."""
    from buildrows.check.symbol_sources import torch_libraries

    if args.torch is None or not _torch_is_path(args.torch):
        return None
    if args.torch not in _TORCH_READ:
        try:
            _TORCH_READ[args.torch] = torch_libraries(Path(args.torch))
        except (ValueError, OSError, zipfile.BadZipFile) as e:
            raise BadInput(f"--torch {args.torch}: {e}\n    fix: pass a torch wheel (torch-2.14.1-...whl), the torch "
                           "package directory (site-packages/torch) or the environment it is installed in, or a "
                           "version (2.8.0)") from None
    return _TORCH_READ[args.torch]


def check_wheel(args: CheckRequest, wheel: Path, policy: Policy | None) -> tuple[Expectation, Artifact, list[CheckResult]]:
    """Read WHEEL (a .whl, a shared library or a directory) and judge it."""
    from buildrows.binaries.libraries import collections_paused

    with collections_paused():  # the libraries stream on threads and are judged: no collection stalls them
        return _check_wheel(args, wheel, policy)


def _check_wheel(args: CheckRequest, wheel: Path, policy: Policy | None) -> tuple[Expectation, Artifact, list[CheckResult]]:
    from buildrows.binaries.binfmt import BinaryFormatError
    from buildrows.binaries.fatbin import FatbinError
    from buildrows.binaries.looseread import LooseError, read_loose
    from buildrows.binaries.wheelread import (
        WheelError,
        check_archive,
        parse_wheel_filename,
        read_wheel,
    )
    from buildrows.check.judges import needs_symbols, run_checks

    if wheel.is_dir() or (wheel.is_file() and wheel.suffix != ".whl"):
        try:
            loose = read_loose(wheel)
        except LooseError as e:
            raise BadInput(f"{e}\n    fix: pass a built wheel (NAME-VERSION-PYTHON-ABI-PLATFORM.whl), a shared library "
                           "or an install directory; `buildrows build` prints the path of each wheel it writes") from e
        exp = loose_expectation(args, loose, policy)
        return exp, loose, run_checks(exp, loose, loading=_load_inputs(wheel, loose, _torch_libraries(args), loose=True))
    if not wheel.is_file():
        raise BadInput(f"{wheel}: no such wheel\n    fix: pass the path of a built .whl, a shared library or a directory")
    try:
        name = parse_wheel_filename(wheel.name)
        check_archive(wheel)  # a zip at all, with safe names: its central directory, nothing inflated
    except WheelError as e:
        raise BadInput(f"{e}\n    fix: {unreadable_fix(e)}") from e
    except OSError as e:
        raise BadInput(f"{wheel}: cannot read: {e}") from e
    _refuse_what_pip_refuses(wheel, name, row_given=bool(args.row))
    # The row comes from the name alone: a tag problem is reported before any library is inflated.
    exp = _with_torch(args, expectation(args, wheel, name, policy))
    torch = _torch_libraries(args)
    try:
        info = read_wheel(wheel, keep_for_symbols=True)  # the load check reads symbols without a second inflate
    except (WheelError, BinaryFormatError, FatbinError) as e:
        raise BadInput(f"{e}\n    fix: {unreadable_fix(e)}") from e
    except OSError as e:
        raise BadInput(f"{wheel}: cannot read: {e}") from e
    symbols = None
    if needs_symbols(exp):
        from buildrows.binaries.wheelsymbols import wheel_imported_symbols

        try:
            symbols = wheel_imported_symbols(wheel, [lib.path for lib in info.libraries if lib.format == "elf"])
        except (BinaryFormatError, OSError, zipfile.BadZipFile, WheelError) as e:
            raise BadInput(f"{wheel}: cannot read the libraries' symbols: {e}\n    fix: {unreadable_fix(e)}") from e
    results = run_checks(exp, info, symbols, loading=_load_inputs(wheel, info, torch, loose=False))
    if args.row:
        results = tag_results(args, wheel.name, _row_given(args, policy), archive=wheel) + results
    return exp, info, results


def _refuse_what_pip_refuses(wheel: Path, name: WheelName, *, row_given: bool) -> None:
    """Fail (exit 5) a wheel pip would refuse or install as another project or version
    (buildrows.check.installable), before its row is judged by a name that does not hold."""
    from buildrows.binaries.wheelread import WheelError, member_names
    from buildrows.check.installable import pip_refusals
    from buildrows.errors import CheckFailed

    try:
        problems = pip_refusals(wheel, name, member_names(wheel), row_given=row_given)
    except WheelError as e:
        raise BadInput(f"{e}\n    fix: {unreadable_fix(e)}") from e
    if problems:
        raise CheckFailed(f"{wheel.name}: pip would refuse it, or install it otherwise than its name says:\n  "
                          + "\n  ".join(problems))


def _pure_platform(policy: Policy | None, train: Train) -> str:
    """The platform a pure-tagged (`py3-none-any`) CUDA wheel is held on: its kernel files and
    PTX run wherever the train does, so its tags cannot say. The policy's one platform that
    publishes the train; else (no policy, or several platforms) this machine's. `--row` names
    another (docs/wheel-check.md, "A pure wheel")."""
    import os

    from buildrows.plan.host import host_platform

    if policy is not None:
        platforms = {r.platform for r in policy.rows if r.cuda == train}
        if len(platforms) == 1:
            return platforms.pop()
    return host_platform(os.environ)


def _load_inputs(wheel: Path, info: Artifact, torch: TorchLibraries | None, *, loose: bool) -> LoadInputs:
    """What the load judges read (buildrows.check.symbol_sources): each ELF library's dynamic symbols."""
    from buildrows.binaries.binfmt import BinaryFormatError
    from buildrows.binaries.wheelread import WheelError
    from buildrows.check.symbol_sources import read_load_inputs

    try:
        return read_load_inputs(wheel, info, torch, loose=loose)
    except (WheelError, BinaryFormatError, OSError, zipfile.BadZipFile) as e:
        raise BadInput(f"{wheel}: cannot read the libraries' dynamic symbols: {e}\n    fix: {unreadable_fix(e)}") from e


def tag_results(args: CheckRequest, wheel: str, row: Row, *, archive: Path | None = None) -> list[CheckResult]:
    """With --row, the wheel's name must match the row: its local version tag (+cu130; none for a
    CPU row, or none when --cuda states the train of a wheel published without one), its Python
    and ABI tags, and its platform tags (a pure `any` wheel read in `archive` must carry no native library)."""
    from buildrows.check.judging import CheckResult
    from buildrows.check.tags import local_tag_problem, platform_tag_problem, python_tag_problem

    tag = local_tag_problem(row, wheel, train_given=args.cuda is not None)
    py = python_tag_problem(row, wheel)
    plat = platform_tag_problem(row, wheel, archive=archive)
    return [CheckResult("local-version-tag", tag is None, [tag or f"version tag matches {row.name}"]),
            CheckResult("python-tag", py is None, [py or f"Python tag matches {row.name}"]),
            CheckResult("platform-tag", plat is None, plat.split("\n") if plat else [f"platform tag matches {row.name}"])]

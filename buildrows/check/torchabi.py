"""Judges of a PyTorch extension's tie to torch (SPEC §8): the torch it pins against the torch it was
built with (torch-matches-build), and mode torch-runtime's libraries that must not compile against
torch. They read the libraries' imported symbols and the build record."""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.requirements import Requirement

from buildrows.check.judging import Artifact, CheckResult, Expectation
from buildrows.check.runtime import _torch_requirements
from buildrows.policy.trains import Train


def check_torch_pin(exp: Expectation, info: Artifact, symbols: dict[str, tuple[str, ...]] | None = None) -> CheckResult:
    """A PyTorch extension requires a torch it runs on. What it imports decides the rule: libtorch's
    C++ API ties it to the minor version it was built against (torch==X.Y.*); torch's stable C ABI
    only (aoti_torch_*, torch_*) does not, so torch>=X with no upper bound is right. The torch it was
    built against comes from the build record, or from `check --torch` for a wheel built elsewhere."""
    from buildrows.check.record import RECORD_NAME, BuildRecordError, parse_record
    from buildrows.check.torchpin import pin_problem

    name = "torch-matches-build"
    # A PyTorch extension's CPU row is held to its torch too (its CUDA rows are mode torch).
    where = f"[cuda.runtime.{exp.cuda.major}]" if exp.cuda is not None else "the CUDA rows' [cuda.runtime.N]"
    other_modes = (f"or, if the libraries are not compiled against torch, set mode = \"torch-runtime\" (torch brings "
                   f"the runtime) or \"dynamic\" under {where}")
    abi = _wheel_torch_abi(info, symbols or {})
    if not abi:
        return CheckResult(name, False, [
            "mode \"torch\", but no library links libtorch or imports torch's C++ or stable C ABI",
            f"fix: {other_modes.removeprefix('or, if the libraries are not compiled against torch, ')}"])
    # A library that links libtorch but imports none of its stable C ABI (no symbol table to tell,
    # or only C++ symbols) is held to the torch minor: only imports can prove the stable ABI.
    cxx = sorted((p for p, a in abi.items() if a.kind in ("c++", "none")), key=lambda p: (-len(abi[p].cxx), p))
    kind = "c++" if cxx else "stable"
    if cxx and abi[cxx[0]].cxx:
        abi_line = (f"{cxx[0]} imports libtorch's C++ API ({len(abi[cxx[0]].cxx)} symbols, e.g. {abi[cxx[0]].cxx[0]}): "
                    "tied to the torch minor it was built against")
    elif cxx:
        abi_line = (f"{cxx[0]} links libtorch and imports none of torch's stable C ABI: held to the torch minor it "
                    "was built against")
    else:
        abi_line = (f"{len(abi)} libraries import only torch's stable C ABI "
                    f"({sum(len(a.stable) for a in abi.values())} aoti_torch_*/torch_* symbols, no libtorch C++ symbol)")
    built: str | None = None
    built_cuda: str | None = None
    record_cuda: str | None = None
    details: list[str] = []
    if info.build_record is not None:
        try:
            record = parse_record(info.build_record, RECORD_NAME)
        except BuildRecordError as e:
            return CheckResult(name, False, [f"{e}", "fix: rebuild with `buildrows build` to rewrite the record"])
        if record.torch is None:
            return CheckResult(name, False, [f"the build record names no torch (row {record.row}): the build did not "
                                             f"compile against torch; {other_modes}"])
        built, built_cuda, record_cuda = record.torch, record.torch_cuda, record.cuda
        if exp.torch_given is not None and _minor(exp.torch_given) != _minor(built):
            details.append(f"--torch {exp.torch_given} contradicts the build record, which says torch {built}")
    elif exp.torch_given is not None:
        built = exp.torch_given
    torch_reqs = _torch_requirements(exp, info)
    # The stable ABI holds across minors: without the built version, a lower bound can still be judged.
    if built is None and kind == "c++":
        return CheckResult(name, False, [
            abi_line,
            f"the wheel has no build record (.dist-info/{RECORD_NAME}), so which torch it was compiled against "
            "is unknown",
            "fix: give it: `buildrows check WHEEL --torch 2.8.0` (the torch the wheel was built against), or "
            "build it with `buildrows build`, which records it"])
    if not torch_reqs:
        want = f"torch=={_minor(built)}.*" if kind == "c++" and built else f"torch>={_minor(built) if built else 'X.Y'}"
        built_with = f"the wheel was built against torch {built}: " if built else ""
        details.append(f"Requires-Dist has no torch requirement; {built_with}declare {want}")
    for req in torch_reqs:
        if kind == "c++":
            assert built is not None
            problem = pin_problem(req.specifier, built)
            if problem:
                details.append(f"Requires-Dist {str(req)!r}: {problem}; declare torch=={_minor(built)}.*")
            continue
        problem = _stable_problem(req, built)
        if problem:
            details.append(f"Requires-Dist {str(req)!r}: {problem}")
    if exp.cuda is not None and built is not None and info.build_record is not None:
        want = exp.cuda.dotted
        if built_cuda is None:
            details.append(f"the recorded torch {built} has no CUDA (a CPU torch), but the row is CUDA {want}")
        elif Train.parse(built_cuda) != exp.cuda:
            details.append(f"built against torch {built} for CUDA {built_cuda}, but the row is CUDA {want}: "
                           f"build against the torch of the row's train (its +{exp.cuda.cu} wheel)")
        if record_cuda is not None and Train.parse(record_cuda) != exp.cuda:
            details.append(f"compiled with CUDA {record_cuda}, but the row is CUDA {want}")
    if details:
        return CheckResult(name, False, [abi_line, *details])
    source = "recorded" if info.build_record is not None else "given with --torch"
    reqs = ", ".join(str(r) for r in torch_reqs)
    if kind == "c++":
        return CheckResult(name, True, [abi_line, f"requires {reqs}: admits torch {built}"
                                        + (f" (CUDA {built_cuda})" if built_cuda else "") + f", {source}," + " and no other minor version"])
    return CheckResult(name, True, [abi_line, f"requires {reqs}: a lower bound and no pin to one minor, as the stable "
                                    f"ABI allows" + (f"; admits torch {built}, {source}" if built else "")])


def _wheel_torch_abi(info: Artifact, symbols: dict[str, tuple[str, ...]]) -> dict[str, TorchAbi]:
    """library -> what it imports of torch, for the libraries that use torch at all."""
    out: dict[str, TorchAbi] = {}
    for lib in info.libraries:
        abi = torch_abi(symbols.get(lib.path, ()))
        if abi.kind != "none" or any(_LIBTORCH.match(n) for n in lib.needed):
            out[lib.path] = abi
    return out


def _stable_problem(req: Requirement, built: str | None) -> str | None:
    """A stable-ABI extension needs a torch lower bound (the ABI it calls appeared in some version)
    that admits the torch it was built against; an upper bound is allowed but not needed."""
    from packaging.version import InvalidVersion, Version

    if not any(s.operator in (">=", ">", "~=", "==", "===") for s in req.specifier):
        return "no lower bound: torch's stable ABI grows with each release, so declare torch>=" + (
            _minor(built) if built else "X.Y (the oldest torch whose stable ABI the wheel calls)")
    if built is not None:
        try:
            version = Version(built)
        except InvalidVersion:
            return f"{built!r} (--torch) is not a version"
        if not req.specifier.contains(version, prereleases=True):
            return f"{req.specifier} does not admit torch {built}, which the wheel was built against"
    return None


def _minor(version: str) -> str:
    return ".".join(version.split("+")[0].split(".")[:2])


def _next_minor(version: str) -> str:
    parts = _minor(version).split(".")
    return f"{parts[0]}.{int(parts[1]) + 1}" if len(parts) == 2 and parts[1].isdigit() else version


# libtorch's C++ API as a library imports it: mangled names in c10::, at::, torch:: or caffe2::.
_TORCH_CXX = re.compile(r"^_ZN[KVRO]*(?:3c10|2at|5torch|6caffe2)")


# torch's stable C ABI (torch/csrc/stable, torch/csrc/inductor/aoti_torch/c/shim.h).
_TORCH_STABLE = re.compile(r"^(?:aoti_torch_|torch_)\w+$")


_LIBTORCH = re.compile(r"^lib(?:torch\w*|c10\w*)\.so$")


@dataclass(frozen=True)
class TorchAbi:
    """What one library imports of torch: libtorch's C++ symbols, and the stable C ABI's."""

    cxx: tuple[str, ...]
    stable: tuple[str, ...]

    @property
    def kind(self) -> str:
        """"c++" (tied to the minor), "stable" (only the C ABI), or "none"."""
        return "c++" if self.cxx else "stable" if self.stable else "none"


def torch_abi(symbols: tuple[str, ...]) -> TorchAbi:
    return TorchAbi(tuple(s for s in symbols if _TORCH_CXX.match(s)), tuple(s for s in symbols if _TORCH_STABLE.match(s)))


def check_torch_runtime_only(exp: Expectation, info: Artifact, symbols: dict[str, tuple[str, ...]]) -> CheckResult:
    """torch-runtime mode: the libraries use torch's CUDA runtime but are not compiled against
    torch, so none may link libtorch or import its C++ API (that would tie it to one minor)."""
    name = "not-compiled-against-torch"
    bad: list[str] = []
    elf = [lib for lib in info.libraries if lib.format == "elf"]
    for lib in elf:
        abi = torch_abi(symbols.get(lib.path, ()))
        links = [n for n in lib.needed if _LIBTORCH.match(n)]
        if abi.cxx or links:
            what = (f"imports {len(abi.cxx)} libtorch C++ symbols (e.g. {abi.cxx[0]})" if abi.cxx
                    else f"links {', '.join(links)}")
            bad.append(f"{lib.path} {what}: it is compiled against torch, so mode \"torch\" fits it (the wheel pins "
                       f"the torch minor it was built against), not \"torch-runtime\"")
    if bad:
        return CheckResult(name, False, bad)
    return CheckResult(name, True, [f"{len(elf)} libraries link no libtorch and import none of its C++ symbols"])

"""A starting policy for an existing project (`buildrows init`): detect, choose the rows, write text.

What the project is comes from `project_facts`, the train, Pythons and lists from `rows_choice`,
the commented buildrows.toml from `policy_text`. Those are pure functions of what they are given;
the command validates the text as a policy before writing it, and never writes over an existing
policy.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol

from buildrows.adopt.policy_text import _validate, keeps_cpu, starter_text
from buildrows.adopt.rows_choice import (
    CudaStart,
    _from_wheels,
    _nvcc_train,
    _project_or_placeholder,
    _pythons,
)
from buildrows.errors import BadInput
from buildrows.policy.model import Driver


class InitRequest(Protocol):
    """What `init` is asked (its command-line options)."""

    from_wheel: list[str] | str | None
    cuda: str | None
    cpu: bool
    python: str | None
    driver: Driver | None


def refuse_existing(project: Path) -> None:
    """A policy is the user's: init stops when buildrows.toml or [tool.buildrows] is already there."""
    from buildrows.policy.read import find_config

    try:
        found = find_config(project)
    except BadInput:
        return
    raise BadInput(f"{found} already holds this project's buildrows policy; buildrows init never overwrites a policy\n"
                   "    fix: edit that policy (`buildrows rows` shows what it publishes), or remove it and run "
                   "buildrows init again")


def starter(project: Path, args: InitRequest) -> tuple[str, list[str]]:
    """The starting policy's text (validated as a policy) and what to tell the user about it."""
    import os

    from buildrows.plan.host import host_platform, host_python
    from buildrows.policy.archs import Train, suggested_archs

    wheels = [Path(w) for w in ([args.from_wheel] if isinstance(args.from_wheel, str) else args.from_wheel or [])]
    facts = _project_or_placeholder(project, args.driver, wheels)
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
    if wheels:
        cuda, platform = _from_wheels(wheels, train, platform)
        summary.append(f"CUDA {cuda.train.dotted}: archs {cuda.text} ({cuda.source})")
        if cuda.facts is not None:
            summary += cuda.facts.summary
            if cuda.facts.reason or cuda.facts.rpath_entries or cuda.facts.own_lists or cuda.facts.vendored:
                summary.append("review: the reasons init wrote say what it saw; replace them with why the project "
                               "does it")
    elif train is None:
        train = _nvcc_train(summary)
    if cuda is None and train is not None:
        text = suggested_archs(train, platform)
        from buildrows.policy.archs import parse_arch_list

        cuda = CudaStart(train, parse_arch_list(text), text, False,
                         f"buildrows' starting list for CUDA {train.dotted}; `buildrows archs --from-wheel TORCH_WHEEL "
                         f"--write '{platform}-{train.cu}-*'` replaces it with what a wheel ships")
        summary.append(f"CUDA {train.dotted}: archs {text} (buildrows' starting list; no --from-wheel)")
    pythons = _pythons(args.python, host_python())
    if args.python is None:  # a wheel's own CPython (cp314, cp313t) is one of the rows it came from
        for w in wheels:
            abi = w.name.removesuffix(".whl").split("-")[-2] if w.name.count("-") >= 4 else ""
            for m in re.finditer(r"(?:^|\.)cp3(\d{1,2})(t?)(?=\.|$)", abi):  # cp312, cp313t; not abi3 or none
                v = f"3.{m.group(1)}{m.group(2)}"
                if v not in pythons:
                    pythons.append(v)
    from buildrows.adopt.starter_sources import hard_coded_start

    cuda = hard_coded_start(facts.sources, cuda)
    text = starter_text(facts, platform, pythons, cuda, cpu=args.cpu)
    _validate(text, project)
    from buildrows.adopt.starter_sources import summary_lines

    summary += summary_lines(facts.sources, facts.switches, facts.cuda_option, facts.torch,
                             keeps_cpu(facts, cuda, args.cpu), bool(facts.finds_cuda or facts.checks_cuda))
    summary.append(f"platform {platform}, Python {', '.join(pythons)}"
                   + (f", CUDA {cuda.train.dotted}" if cuda else "") + (", CPU" if keeps_cpu(facts, cuda, args.cpu) else ""))
    return text, summary

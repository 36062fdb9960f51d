"""Doctor's findings on how a setup.py row links: the RPATH its link command writes, and the torch it builds against."""

from __future__ import annotations

import re
from collections.abc import Mapping

from buildrows.build.findings import Finding
from buildrows.policy.model import Policy, Row

_RPATH_FLAG = re.compile(r"-Wl,-(?:rpath|R)[,=](\S+)")


def link_rpath_findings(policy: Policy, python: str, env: Mapping[str, str]) -> list[Finding]:
    """What the link command a setup.py row's build uses writes as RPATH: the user's LDSHARED as
    it is, else the interpreter's, less its own lib directory, which the build drops
    (`buildrows.build.ldshared`: an ok finding says so)."""
    if "LDSHARED" in env:
        linked = check_link_rpath(policy, env["LDSHARED"])
        return [linked] if linked is not None else []
    from buildrows.build.ldshared import build_ldshared, interpreter_link, own_rpaths

    link = interpreter_link(python)
    ldshared = build_ldshared(link, env)
    out: list[Finding] = []
    if ldshared is not None:
        out.append(Finding("link rpath", "ok", f"the row's interpreter links extensions with -Wl,-rpath,"
                           f"{', '.join(own_rpaths(link.ldshared, link.libdir))} (its own lib directory, in its "
                           "LDSHARED): the build sets LDSHARED without it, so no extension carries that path"))
    linked = check_link_rpath(policy, ldshared if ldshared is not None else link.ldshared)
    return out + ([linked] if linked is not None else [])


def check_link_rpath(policy: Policy, ldshared: str) -> Finding | None:
    """A note when the link command setuptools takes from the row's interpreter (LDSHARED) writes
    an absolute RPATH into every extension (a pyenv Python built with --enable-shared adds
    `-Wl,-rpath,<its lib>`; seen on torch_spline_conv 1.2.2): the check's runtime-reached fails
    each library unless the policy lists the entry under [[check.rpath-exceptions]]."""
    import fnmatch

    kept = [e.entry for e in policy.check.rpath_exceptions if e.entry is not None]
    entries = list(dict.fromkeys(m for m in _RPATH_FLAG.findall(ldshared) if m.startswith("/")))
    uncovered = [e for e in entries if not any(fnmatch.fnmatchcase(e, k) for k in kept)]
    if not uncovered:
        return None
    return Finding("link rpath", "note", f"the row's interpreter links extensions with `{ldshared}` (its LDSHARED): "
                   f"each library gets the absolute RUNPATH {', '.join(uncovered)}, which the check's "
                   "runtime-reached judge fails",
                   "build with an interpreter whose LDSHARED writes no -rpath (manylinux's /opt/python, uv's), set "
                   "LDSHARED for the build, or list the entry under [[check.rpath-exceptions]] with its reason")


def check_torch_installed(policy: Policy, row: Row, python: str, version: str | None,
                          env: Mapping[str, str]) -> Finding | None:
    """A project that builds against torch needs the torch of the row's train in the row's Python:
    None when one is installed, else the finding whose fix names the environment, the torch and
    the index serving the train."""
    if version is not None:
        return None
    import shlex

    from buildrows.provision.torch import reachable_fix, torch_for_row

    t = torch_for_row(row, policy.project.torch, env)
    pip = shlex.join([python, "-m", "pip", "install", *t.pip_arguments()])
    return Finding("torch", "missing", f"not installed for {python}, and the project builds against torch "
                   "(torch.utils.cpp_extension, or torch among its build requirements)",
                   reachable_fix(row, t, f"buildrows build {row.name} --provision", pip))  # routes that work here

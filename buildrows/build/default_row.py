"""The refusal of a plain `buildrows build` whose policy lacks the train of this machine's nvcc.

It used to build the CPU row and exit 0 (issue 35): a user who meant the CUDA wheel got a CPU one
with no word. Now it is refused (exit 3) with the rows of this platform and Python it could
build, each as the command that builds it.
"""

from __future__ import annotations

import shlex

from buildrows.errors import Refused
from buildrows.policy.model import Policy


def refuse_other_train(pol: Policy, name: str, why: str, platform: str, python: str) -> None:
    """Refuse: this machine's row `name` (from its nvcc, `why`) is not in the policy. Names the
    rows of `platform` and `python` it has: the CPU row as is, a CUDA row with --provision (which
    assembles its train's toolkit)."""
    config = shlex.quote(str(pol.path))
    could = [r for r in pol.rows if r.platform == platform and r.python == python and r.empty_reason is None]
    lines = [f"buildrows --config {config} build {r.name}" + (" --provision" if r.is_cuda else "")
             + ("  (a CPU wheel)" if not r.is_cuda else f"  (assembles CUDA {r.cuda.dotted if r.cuda else ''})")
             for r in could]
    trains = ", ".join(t.dotted for t in pol.trains) or "none"
    text = (f"this machine's row would be {name} ({why}), and {pol.path} has no such row (its CUDA trains: {trains}); "
            "buildrows does not build another row in its place")
    if lines:
        text += "\n    fix: name the row to build:" + "".join(f"\n         {line}" for line in lines)
    text += (f"\n    fix: or add the train of this machine's nvcc to the policy's [cuda] trains and "
             f"[platforms.{platform}] trains")
    raise Refused(text)

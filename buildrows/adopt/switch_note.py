"""The line `init` says when a setup.py project's starting policy names no CUDA switch.

Issue 35: init on a setup.py that reads its own CUDA switch (one outside the names init knows)
wrote a CUDA-only policy with no word that it found none. Finding switches is init's
(`buildrows.adopt.starter`); this only says, in one line, when it found none.
"""

from __future__ import annotations

import re
from pathlib import Path

#: An environment variable a setup.py reads: os.environ.get("X"), os.getenv("X"), os.environ["X"].
_READ = re.compile(r"""(?:environ\.get|getenv|environ\[)\s*\(?\s*['"]([A-Za-z_][A-Za-z0-9_]*)['"]""")


def no_switch_line(project: Path, switches: tuple[str, ...], torch: bool) -> str | None:
    """One line when the project's setup.py has no switch in the policy (`switches`, init's
    env-switches) and is no torch extension: naming the variables it reads that look like one
    (CUDA or GPU in the name), or saying it reads none. None otherwise."""
    if switches or torch:
        return None
    try:
        text = (project / "setup.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    read = sorted({v for v in _READ.findall(text) if "CUDA" in v.upper() or "GPU" in v.upper()})
    seen = f"; it reads {', '.join(read)}" if read else ""
    return (f"init found no CUDA switch it knows in setup.py{seen}: every row builds whatever setup.py decides; "
            "if one of these turns CUDA on, name it under [project] as env-switches = [\"NAME\"] (1 on CUDA rows, "
            "0 on CPU rows)")


def said_of_policy(project: Path, policy_path: Path) -> list[str]:
    """`no_switch_line` for the policy init just wrote (a setup.py project with CUDA rows)."""
    from buildrows.policy.load import load_policy

    pol = load_policy(policy_path)
    if pol.project.driver != "setup.py" or not any(r.is_cuda for r in pol.rows):
        return []
    try:
        text = (project / "setup.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    torch = "torch.utils.cpp_extension" in text or "from torch.utils import cpp_extension" in text
    line = no_switch_line(project, pol.project.switches + tuple(k for k, _ in pol.project.cuda_env), torch)
    return [line] if line is not None else []

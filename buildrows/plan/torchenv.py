"""What a project that builds against torch gets from the torch of the build environment.

A torch.utils.cpp_extension build takes its CUDA root from torch (`cpp_extension.CUDA_HOME`,
computed when the module is imported, from CUDA_HOME/CUDA_PATH or else nvcc's location), and the
wheel it makes is tied to that torch's minor version and CUDA. One probe asks the row's Python for
all three, in the environment the build will have; doctor compares the root with the row's nvcc,
and the build record keeps the versions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_PROBE = (
    "import json, torch\n"
    "from torch.utils import cpp_extension as c\n"
    "print('BUILDROWS_TORCH=' + json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda, "
    "'cuda_home': c.CUDA_HOME}))"
)
_TORCH_REQ = re.compile(r"\s*torch\s*(?:[<>=!~;\[(@]|$)")


@dataclass(frozen=True)
class TorchInfo:
    """torch.__version__, torch.version.cuda (None for a CPU torch) and cpp_extension.CUDA_HOME."""

    version: str
    cuda: str | None
    cuda_home: str | None


def uses_torch(project: Path, requirements: Sequence[str]) -> bool:
    """Whether the project builds against torch: torch among its build requirements, or a setup.py
    that imports torch's extension helpers (such projects often leave torch out of [build-system],
    since it must be the torch already installed)."""
    if any(_TORCH_REQ.match(r) for r in requirements):
        return True
    setup_py = project / "setup.py"
    try:
        text = setup_py.read_text(encoding="utf-8", errors="replace") if setup_py.is_file() else ""
    except OSError:
        return False
    return "torch.utils.cpp_extension" in text or "from torch.utils import cpp_extension" in text


def ask_torch(python: str, env: Mapping[str, str]) -> tuple[TorchInfo | None, str | None]:
    """(what the row's Python's torch says in `env`, or why it could not be asked)."""
    from buildrows.process.runner import capture

    got = capture([python, "-c", _PROBE], env, timeout=300)
    if got.code != 0:
        tail = (got.error or got.output).strip().splitlines()[-1:] or ["(no output)"]
        return None, tail[0]
    # torch may warn on the same stream ("No CUDA runtime is found, using CUDA_HOME=..."): take our line.
    lines = [line for line in got.output.splitlines() if line.startswith("BUILDROWS_TORCH=")]
    try:
        data = json.loads(lines[-1].removeprefix("BUILDROWS_TORCH="))
        return TorchInfo(str(data["version"]), data.get("cuda"), data.get("cuda_home")), None
    except (ValueError, IndexError, KeyError, TypeError):
        return None, f"unexpected output {got.output.strip()[-200:]!r}"

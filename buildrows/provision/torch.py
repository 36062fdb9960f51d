"""The torch a row of a PyTorch extension builds against, and where `build --provision` gets it.

A torch.utils.cpp_extension project builds against the torch in its build environment, and the
wheel is tied to that torch's minor version and CUDA (stamping pins the minor). So the row
environment must hold the torch of the row's train: PyTorch publishes one index per train
(https://download.pytorch.org/whl/cu130, .../whl/cpu). The policy's ``[project] torch`` says which
torch ("2.14.*"); BUILDROWS_TORCH_INDEX says where: a URL template with ``{accel}`` (cu130, or cpu
for a CPU row), or ``pypi`` for pip's own configuration (PyPI's torch for Linux is a CUDA build).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from buildrows.policy.model import Row

#: Where PyTorch publishes each train's wheels; {accel} is cu130, cu126, ... or cpu.
DEFAULT_INDEX = "https://download.pytorch.org/whl/{accel}"
INDEX_VARIABLE = "BUILDROWS_TORCH_INDEX"


def torch_requirement(value: str) -> str:
    """The requirement a policy's `torch` value means: "2.14.1" -> torch==2.14.1, "2.14.*" ->
    torch==2.14.*, ">=2.13,<2.15" -> torch>=2.13,<2.15. ValueError when it is neither."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    text = value.strip()
    spec = f"=={text}" if text[:1].isdigit() else text
    try:
        parsed = SpecifierSet(spec)
    except InvalidSpecifier:
        raise ValueError(f"torch = {value!r} is neither a version nor a version specifier") from None
    if not str(parsed):
        raise ValueError("torch is empty")
    return f"torch{parsed}"


@dataclass(frozen=True)
class TorchInstall:
    """What a row environment gets for torch: the requirement, and the index serving the row's
    train (None: pip's own configuration)."""

    requirement: str
    index: str | None
    accel: str

    def pip_arguments(self) -> tuple[str, ...]:
        return ("--index-url", self.index, self.requirement) if self.index else (self.requirement,)

    def describe(self) -> str:
        where = self.index or "pip's configured index (PyPI)"
        return f"{self.requirement} for {self.accel} from {where}"


def torch_for_row(row: Row, requirement: str | None, env: Mapping[str, str]) -> TorchInstall:
    """The torch the row's environment gets: `requirement` (the policy's; else any torch) from the
    index of the row's train."""
    accel = row.cuda.cu if row.cuda is not None else "cpu"
    template = env.get(INDEX_VARIABLE, "").strip() or DEFAULT_INDEX
    index = None if template.lower() == "pypi" else template.replace("{accel}", accel)
    return TorchInstall(requirement or "torch", index, accel)

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
from buildrows.policy.requirements import torch_requirement as torch_requirement

#: Where PyTorch publishes each train's wheels; {accel} is cu130, cu126, ... or cpu.
DEFAULT_INDEX = "https://download.pytorch.org/whl/{accel}"
INDEX_VARIABLE = "BUILDROWS_TORCH_INDEX"


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


# --- the torch installed, verified -----------------------------------------------------------

#: Where pip's installation report of the torch step goes, in the row environment (`pip --report`):
#: it says which file, from which index, pip installed.
REPORT = "buildrows-torch-report.json"

_PROBE = (
    "import json, torch\n"
    "print('BUILDROWS_TORCH=' + json.dumps({'version': torch.__version__, "
    "'cuda': getattr(getattr(torch, 'version', None), 'cuda', None)}))"
)


@dataclass(frozen=True)
class InstalledTorch:
    """What the torch of an environment says when imported there."""

    version: str  # torch.__version__
    cuda: str | None  # torch.version.cuda; None for a CPU build

    def describe(self) -> str:
        return f"torch {self.version} ({'CUDA ' + self.cuda if self.cuda else 'a CPU build'})"


def ask_installed(python: str, env: Mapping[str, str]) -> tuple[InstalledTorch | None, str]:
    """(the torch `python` imports, or None and why it could not)."""
    import json

    from buildrows.process.runner import capture

    got = capture([python, "-c", _PROBE], env, timeout=300)
    lines = [ln for ln in got.output.splitlines() if ln.startswith("BUILDROWS_TORCH=")]
    if got.code != 0 or not lines:
        tail = [ln for ln in got.output.strip().splitlines() if ln.strip()][-1:] or ["(no output)"]
        return None, tail[0]
    try:
        data = json.loads(lines[-1].removeprefix("BUILDROWS_TORCH="))
        return InstalledTorch(str(data["version"]), data.get("cuda") or None), ""
    except (ValueError, KeyError, TypeError):
        return None, f"unexpected output {got.output.strip()[-200:]!r}"


def torch_problem(row: Row, install: TorchInstall, got: InstalledTorch) -> str | None:
    """Why the torch installed for the row is not the row's (another train's CUDA, a CPU build for
    a CUDA row or the reverse, a version outside the requirement), or None."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    from buildrows.policy.trains import Train

    if row.cuda is None and got.cuda is not None:
        return f"{got.describe()}, but {row.name} is a CPU row: its torch must be a CPU build (torch.version.cuda None)"
    if row.cuda is not None:
        if got.cuda is None:
            return f"{got.describe()}, but {row.name} is a CUDA {row.cuda.dotted} row: it needs torch.version.cuda {row.cuda.dotted}"
        try:
            train = Train.parse(got.cuda)
        except ValueError:
            train = None
        if train is None or (train.major, train.minor) != (row.cuda.major, row.cuda.minor):
            return f"{got.describe()}, but {row.name} is a CUDA {row.cuda.dotted} row: it needs torch.version.cuda {row.cuda.dotted}"
    spec = install.requirement.removeprefix("torch").strip()
    if spec:
        try:
            fits = SpecifierSet(spec).contains(Version(got.version), prereleases=True)
        except InvalidVersion:
            fits = False
        if not fits:
            return f"{got.describe()}, but the policy asks for {install.requirement}"
    return None


def answered_from(report: str) -> str | None:
    """The file pip installed torch from, read from its installation report (`pip --report`), or None."""
    import json

    try:
        with open(report, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    for item in data.get("install", []) if isinstance(data, dict) else []:
        meta = item.get("metadata", {}) if isinstance(item, dict) else {}
        if str(meta.get("name", "")).lower() == "torch":
            url = (item.get("download_info") or {}).get("url")
            return str(url) if url else None
    return None


# --- the row's index, asked once before pip is ------------------------------------------------

#: Seconds the probe waits for the row's torch index to answer: pip's own default (15 s a try,
#: 5 retries with back-off) spent about 2 minutes on an index it could not reach (issue 35).
PROBE_TIMEOUT = 5.0


def index_problem(index: str, timeout: float = PROBE_TIMEOUT) -> str | None:
    """Why the row's torch index cannot be used (it does not resolve, refuses, times out, or
    answers an error for its torch page), or None when it answers. One try, `timeout` seconds."""
    import urllib.error
    import urllib.parse
    import urllib.request

    page = index.rstrip("/") + "/torch/"
    parsed = urllib.parse.urlparse(page)
    if parsed.scheme == "file":
        path = urllib.request.url2pathname(parsed.path)
        import os

        return None if os.path.isdir(path) else f"{path} is no directory"
    if parsed.scheme not in ("http", "https"):
        return f"{index!r} is not an http(s) or file URL"
    try:
        with urllib.request.urlopen(urllib.request.Request(page, method="GET"), timeout=timeout) as got:
            got.read(1)
    except urllib.error.HTTPError as e:
        return f"{page} answered HTTP {e.code}"
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        return f"{page} does not answer ({reason})"
    return None


def unreachable_fix(row: Row, install: TorchInstall, command: str) -> str:
    """The fix for a row whose torch index does not answer, offering `BUILDROWS_TORCH_INDEX=pypi`
    only where pip's configured index can hold the row's torch: PyPI's Linux torch is a CUDA
    build (of the train PyTorch chose for that release, which verification holds to the row's),
    and elsewhere a CPU build."""
    fixes = []
    linux = row.os == "linux"
    if (row.cuda is not None) == linux:
        fixes.append(f"{INDEX_VARIABLE}=pypi {command} (pip's configured index, PyPI: its "
                     f"{'Linux torch is a CUDA build' if linux else 'torch is a CPU build there'}; the torch "
                     "installed is verified to be the row's before it is used)")
    fixes.append(f"point {INDEX_VARIABLE} at a reachable mirror of {DEFAULT_INDEX} (a URL with {{accel}})")
    return "\n".join(f"    fix: {f}" for f in fixes)


def reachable_fix(row: Row, install: TorchInstall, command: str, pip: str) -> str:
    """Doctor's fix for a missing torch, naming only routes that work here: `command` (build
    --provision) and `pip` (the pip line) when the row's index answers; else why not, and the
    routes `unreachable_fix` offers."""
    problem = index_problem(install.index) if install.index is not None else None
    if problem is None:
        return f"`{command}` installs {install.describe()} into a cached environment of this interpreter; or install it here: {pip}"
    routes = [line.strip().removeprefix("fix: ") for line in unreachable_fix(row, install, command).splitlines()]
    return f"the row's torch index does not answer here ({problem}); " + "; or ".join(routes)

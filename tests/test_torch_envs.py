"""Issue 35 points 3 and 4: a CPU row never reuses a CUDA row's environment (or the reverse), and
the fixes `build --provision` prints for a torch index work on this machine.

The torch is a tiny stand-in package, served by a file: package index the test writes (pip reads a
file: index's directories through their index.html): `torch 2.14.1+cpu` (torch.version.cuda None)
and `torch 2.14.1+cu130` (13.0), each with a `torch.utils.cpp_extension`, so a real torch's 3 GB
never moves. Everything else is real: the row environments are venvs made by pip (setuptools,
wheel and build from pip's configured index), the project is built and its wheel checked.

Default-suite cost: about 40 s here (the unreachable index, then one row environment made by pip). The two stories
that make three or four row environments (pip installs into fresh venvs, ~2 minutes each here)
are opt-in: BUILDROWS_TEST_TORCH_ENVS=1.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from buildrows.policy.model import Row
from buildrows.policy.trains import Train
from buildrows.provision import buildenv
from buildrows.provision.interpreters import Interpreter
from buildrows.provision.torch import TorchInstall, index_problem, unreachable_fix
from tests.test_provision_torch import CPU, CUDA, torch_project

BUILDROWS = str(Path(sys.executable).parent / "buildrows")


def _torch_wheel(where: Path, version: str, cuda: str | None) -> str:
    name = f"torch-{version}-py3-none-any.whl"
    with zipfile.ZipFile(where / name, "w") as z:
        z.writestr("torch/__init__.py", "from . import version, utils\n__version__ = version.__version__\n")
        z.writestr("torch/version.py", f"__version__ = {version!r}\ncuda = {cuda!r}\n")
        z.writestr("torch/utils/__init__.py", "from . import cpp_extension\n")
        z.writestr("torch/utils/cpp_extension.py", "import os\nCUDA_HOME = os.environ.get('CUDA_HOME')\n")
        info = f"torch-{version}.dist-info"
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return name


def torch_index(root: Path, per_train: bool) -> str:
    """A PyTorch-like index: per train (ROOT/cpu, ROOT/cu130; the URL has {accel}) or one index
    serving both builds (as BUILDROWS_TORCH_INDEX=pypi or a template without {accel} gives every row)."""
    builds = {"cpu": ("2.14.1+cpu", None), "cu130": ("2.14.1+cu130", "13.0")}
    for accel in (builds if per_train else ["all"]):
        where = root / accel / "torch"
        where.mkdir(parents=True)
        names = [_torch_wheel(where, *builds[a]) for a in ([accel] if per_train else builds)]
        (where / "index.html").write_text("".join(f'<a href="{n.replace("+", "%2B")}">{n}</a>\n' for n in names),
                                          encoding="utf-8")
    return root.as_uri() + ("/{accel}" if per_train else "/all")


def _build(pol: Path, row: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "GITHUB_ACTIONS"}
    full.update(BUILDROWS_CACHE=str(tmp_path / "cache"), **env)
    return subprocess.run([BUILDROWS, "--config", str(pol), "build", row, "--provision", "--no-compiler-cache",
                           "--wheel-dir", str(tmp_path / "dist")], env=full, capture_output=True, text=True,
                          check=False, cwd=pol.parent)


def _built_against(tmp_path: Path, row: str) -> str:
    (wheel,) = [w for w in (tmp_path / "dist").rglob("*.whl") if ("cu130" in w.name) == (row == CUDA)]
    with zipfile.ZipFile(wheel) as z:
        return z.read("tiny/_torch.py").decode()


def test_the_environment_key_holds_the_torchs_accelerator(tmp_path: Path) -> None:
    """One index for every row (pypi): the CPU and CUDA rows' torch differ only in accelerator."""
    base = Interpreter(sys.executable, "3.11", "3.11.7", "running")
    cpu, cuda = TorchInstall("torch==2.14.*", None, "cpu"), TorchInstall("torch==2.14.*", None, "cu130")
    assert buildenv.env_key(base, ["setuptools"], "p", cpu) != buildenv.env_key(base, ["setuptools"], "p", cuda)


@pytest.mark.integration
@pytest.mark.skipif(not os.environ.get("BUILDROWS_TEST_TORCH_ENVS"),
                    reason="four row environments (~2 minutes): opt-in, BUILDROWS_TEST_TORCH_ENVS=1")
@pytest.mark.parametrize("first", [CUDA, CPU])
def test_each_row_gets_its_own_torch_whichever_row_is_built_first(tmp_path: Path, first: str) -> None:
    """Issue 35 point 3, either order, through `build --provision` with a per-train index: the
    CPU row's environment holds the CPU torch and its wheel was built against it."""
    pol = torch_project(tmp_path, '"2.14.1"')
    index = torch_index(tmp_path / "index", per_train=True)
    for row in (first, CPU if first == CUDA else CUDA):
        r = _build(pol, row, tmp_path, BUILDROWS_TORCH_INDEX=index)
        accel = "cu130" if row == CUDA else "cpu"
        want = "torch 2.14.1+cu130 (CUDA 13.0)" if row == CUDA else "torch 2.14.1+cpu (a CPU build)"
        assert f"torch verified: the environment imports {want}, the torch of {row}" in r.stderr, r.stdout + r.stderr
        assert "reused" not in r.stderr
        assert _built_against(tmp_path, row) == f"VERSION = '2.14.1+{accel}'\n"
        assert r.returncode in (0, 5), r.stdout + r.stderr  # the CUDA row's pure-Python wheel may fail its check
    cpu_built = _build(pol, CPU, tmp_path, BUILDROWS_TORCH_INDEX=index)
    assert "(reused: same interpreter, requirements and project, torch==2.14.1 for cpu" in cpu_built.stderr


@pytest.mark.integration
@pytest.mark.skipif(not os.environ.get("BUILDROWS_TEST_TORCH_ENVS"),
                    reason="three row environments (~2 minutes): opt-in, BUILDROWS_TEST_TORCH_ENVS=1")
def test_one_index_for_every_row_never_hands_the_cuda_environment_to_the_cpu_row(tmp_path: Path) -> None:
    """The issue's replay: one index serving every row (here both builds; pip takes the newest,
    +cu130). The CPU row built after the CUDA row reused its environment and exited 0 with a CUDA
    torch; now it gets its own, which verification refuses, and the fix it prints (a pin of the
    row's build, which that index serves) is run and gives the CPU row its CPU torch."""
    pol = torch_project(tmp_path, '"2.14.1"')
    index = torch_index(tmp_path / "index", per_train=False)
    r = _build(pol, CUDA, tmp_path, BUILDROWS_TORCH_INDEX=index)
    assert "torch verified: the environment imports torch 2.14.1+cu130 (CUDA 13.0)" in r.stderr, r.stdout + r.stderr
    r = _build(pol, CPU, tmp_path, BUILDROWS_TORCH_INDEX=index)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "reused" not in r.stderr
    assert f"{CPU} is a CPU row: its torch must be a CPU build" in r.stderr
    fix = 'or pin the policy\'s torch to the row\'s build of it: torch = "2.14.1+cpu" under [project]'
    assert fix in r.stderr
    # Run the fix as printed.
    text = pol.read_text(encoding="utf-8").replace('torch = "2.14.1"', 'torch = "2.14.1+cpu"')
    pol.write_text(text, encoding="utf-8")
    r = _build(pol, CPU, tmp_path, BUILDROWS_TORCH_INDEX=index)
    assert "torch verified: the environment imports torch 2.14.1+cpu (a CPU build)" in r.stderr, r.stdout + r.stderr
    # Built: its pure-Python wheel then fails the check's torch-matches-build (no libtorch to link).
    assert r.returncode in (0, 5) and "torch-matches-build" in r.stdout + r.stderr, r.stdout + r.stderr
    assert _built_against(tmp_path, CPU) == "VERSION = '2.14.1+cpu'\n"


def test_pypi_is_offered_only_where_its_torch_can_be_the_rows(tmp_path: Path) -> None:
    """PyPI's Linux torch is a CUDA build: `pypi` for a CUDA row, never for a Linux CPU row."""
    cpu_install = TorchInstall("torch", "https://x/{accel}", "cpu")
    line = "BUILDROWS_TORCH_INDEX=pypi buildrows build R --provision"
    assert line in unreachable_fix(_row("linux-x86_64", True, tmp_path), cpu_install, "buildrows build R --provision")
    assert "=pypi" not in unreachable_fix(_row("linux-x86_64", False, tmp_path), cpu_install, "buildrows build R --provision")
    assert line in unreachable_fix(_row("windows-amd64", False, tmp_path), cpu_install, "buildrows build R --provision")


def _row(platform: str, cuda: bool, tmp: Path) -> Row:
    from buildrows.policy.load import load_policy

    text = (f'[project]\nname = "p"\n[python]\nversions = ["3.11"]\n[cuda]\ntrains = ["13.0"]\n'
            f'[platforms.{platform}]\ncpu = true\ntrains = ["13.0"]\n[[platforms.{platform}.cuda]]\n'
            'trains = ["13.0"]\narchs = "9.0"\n')
    (tmp / "buildrows.toml").write_text(text, encoding="utf-8")
    pol = load_policy(tmp / "buildrows.toml")
    return next(r for r in pol.rows if (r.cuda == Train.parse("13.0")) == cuda)


@pytest.mark.integration
def test_an_unreachable_index_fails_in_seconds_and_its_fix_runs(tmp_path: Path) -> None:
    """Issue 35 point 4: pip spent about 2 minutes retrying download.pytorch.org before exit 3. The
    index is asked once (a refused connection here), the refusal comes in seconds with
    `BUILDROWS_TORCH_INDEX=pypi` for the CUDA row, and that line, run as printed (pip's configured
    index: here PyPI with the stand-in torch beside it), builds the row with its torch."""
    assert index_problem("http://127.0.0.1:9/cu130") is not None
    pol = torch_project(tmp_path, '"2.14.1"')
    start = time.monotonic()
    r = _build(pol, CUDA, tmp_path, BUILDROWS_TORCH_INDEX="http://127.0.0.1:9/{accel}")
    took = time.monotonic() - start
    assert r.returncode == 3, r.stdout + r.stderr
    assert "the torch index of its train does not answer: http://127.0.0.1:9/cu130/torch/ does not answer" in r.stderr
    assert took < 60, took  # pip's retries took ~120 s; generous for a loaded machine
    fixes = [ln.split("fix: ", 1)[1] for ln in r.stderr.splitlines() if "fix: BUILDROWS_TORCH_INDEX=pypi" in ln]
    assert len(fixes) == 1, r.stderr
    command = fixes[0].split(" (pip's configured index", 1)[0]
    index = torch_index(tmp_path / "index", per_train=True).replace("{accel}", "cu130")
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "BUILDROWS_TORCH_INDEX")}
    env.update(BUILDROWS_CACHE=str(tmp_path / "cache"), PIP_FIND_LINKS=str(Path(index.removeprefix("file://")) / "torch"))
    argv = shlex.split(command)
    assert argv[0] == "BUILDROWS_TORCH_INDEX=pypi"
    env["BUILDROWS_TORCH_INDEX"] = "pypi"
    fixed = subprocess.run([BUILDROWS, *argv[2:], "--no-compiler-cache", "--wheel-dir", str(tmp_path / "dist")],
                           env=env, capture_output=True, text=True, check=False, cwd=pol.parent)
    assert "torch verified: the environment imports torch 2.14.1+cu130 (CUDA 13.0)" in fixed.stderr, \
        fixed.stdout + fixed.stderr
    assert fixed.returncode in (0, 5), fixed.stdout + fixed.stderr  # built (its pure-Python wheel may fail the check)
    assert _built_against(tmp_path, CUDA) == "VERSION = '2.14.1+cu130'\n"

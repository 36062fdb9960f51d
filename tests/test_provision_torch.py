"""Issue 21, point 6: `--provision` installs the torch of the row's train for a PyTorch extension,
and a row environment serves one project only.

diso 0.1.4 (a torch.utils.cpp_extension setup.py) could not be built for py312: doctor knew it
needs torch, but `--provision` never installed it, and the fix named neither the environment nor
the torch. PyTorch serves each train from its own index (https://download.pytorch.org/whl/cu130),
which this machine cannot reach: the commands are tested as computed, and a real install runs
from pip's configured index (BUILDROWS_TORCH_INDEX=pypi) with a torch it can serve, opt-in
(BUILDROWS_REAL_PROJECTS=1; ~2.5 minutes here, most of it pip unpacking torch)."""

from __future__ import annotations

import os
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.build import buildtree
from buildrows.build.doctor_link import check_torch_installed
from buildrows.build.doctor_python import FRONTEND
from buildrows.policy.load import load_policy
from buildrows.policy.model import Row
from buildrows.provision import buildenv
from buildrows.provision.interpreters import Interpreter
from buildrows.provision.torch import torch_for_row, torch_requirement
from tests.conftest import Result

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
PYT = PY.replace(".", "")
CPU = f"linux-x86_64-cpu-py{PYT}"
CUDA = f"linux-x86_64-cu130-py{PYT}"

SETUP_PY = '''
import torch
from setuptools import setup
from torch.utils import cpp_extension  # noqa: F401 (what makes it a PyTorch extension to buildrows)

with open("tiny/_torch.py", "w") as f:
    f.write(f"VERSION = {torch.__version__!r}\\n")
setup(name="tiny", version="0.1.0", packages=["tiny"])
'''


def torch_project(root: Path, torch: str | None = '"2.14.*"') -> Path:
    project = root / "tiny"
    (project / "tiny").mkdir(parents=True)
    (project / "tiny" / "__init__.py").write_text("", encoding="utf-8")
    (project / "setup.py").write_text(SETUP_PY, encoding="utf-8")
    (project / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools", "wheel"]\n'
                                            'build-backend = "setuptools.build_meta"\n', encoding="utf-8")
    pol = project / "buildrows.toml"
    pol.write_text('[project]\nname = "tiny"\ndriver = "setup.py"\nstamp = true\nenv-switches = ["FORCE_CUDA"]\n'
                   + (f"torch = {torch}\n" if torch else "")
                   + f'[python]\nversions = ["{PY}"]\n[cuda]\ntrains = ["13.0"]\n[cuda.runtime.13]\nmode = "torch"\n'
                   '[platforms.linux-x86_64]\ntrains = ["13.0"]\ncpu = true\n'
                   '[[platforms.linux-x86_64.cuda]]\ntrains = ["13.0"]\narchs = "9.0"\n', encoding="utf-8")
    return pol


@pytest.mark.parametrize(("value", "requirement"), [
    ("2.14.1", "torch==2.14.1"), ("2.14.*", "torch==2.14.*"), (">=2.13,<2.15", "torch<2.15,>=2.13"),
    ("2.13.0+cpu", "torch==2.13.0+cpu"),
])
def test_the_policys_torch_is_a_requirement(value: str, requirement: str) -> None:
    assert torch_requirement(value) == requirement


def test_a_torch_that_is_not_a_version_is_bad_input(cli: Callable[..., Result], tmp_path: Path) -> None:
    pol = torch_project(tmp_path, torch='"latest"')
    r = cli("--config", str(pol), "rows")
    assert r.code == 2
    assert "project.torch" in r.err and "torch = 'latest' is neither a version nor a version specifier" in r.err
    assert "fix:" in r.err


def test_each_row_gets_the_torch_of_its_train_from_its_index(tmp_path: Path) -> None:
    pol = load_policy(str(torch_project(tmp_path)))
    cuda, cpu = pol.row(CUDA), pol.row(CPU)
    assert cuda is not None and cpu is not None
    t = torch_for_row(cuda, pol.project.torch, {})
    assert t.pip_arguments() == ("--index-url", "https://download.pytorch.org/whl/cu130", "torch==2.14.*")
    assert torch_for_row(cpu, pol.project.torch, {}).index == "https://download.pytorch.org/whl/cpu"
    mirror = {"BUILDROWS_TORCH_INDEX": "https://mirror.example/torch/{accel}/simple"}
    assert torch_for_row(cuda, pol.project.torch, mirror).index == "https://mirror.example/torch/cu130/simple"
    assert torch_for_row(cuda, None, {"BUILDROWS_TORCH_INDEX": "pypi"}).pip_arguments() == ("torch",)


def test_the_row_environment_installs_torch_first_and_is_keyed_on_project_and_torch(tmp_path: Path) -> None:
    pol = load_policy(str(torch_project(tmp_path)))
    row = pol.row(CUDA)
    assert row is not None
    env = {"BUILDROWS_CACHE": str(tmp_path / "cache")}
    base = Interpreter(sys.executable, PY, "3.x.y", "test")
    project = tmp_path / "tiny"
    reqs = [FRONTEND, "setuptools", "wheel", "torch>=2.0"]
    be = buildenv.plan_row_env(pol, row, base, project, reqs, env)
    _create, torch, rest = be.commands()
    assert torch.argv[3:] == ("install", "--disable-pip-version-check", "-q",
                              "--report", str(be.root / "buildrows-torch-report.json"), "--index-url",
                              "https://download.pytorch.org/whl/cu130", "torch==2.14.*", "torch>=2.0")
    assert torch.step == "build environment (torch for cu130)"
    assert rest.argv[-4:] == tuple(reqs)
    # another project with the same requirements gets its own environment; so does another torch
    other = tmp_path / "other"
    other.mkdir()
    assert buildenv.plan_row_env(pol, row, base, other, reqs, env).root != be.root
    assert buildenv.plan_env(base, reqs, env, project=project).root != be.root  # no torch
    # a project that does not build against torch gets none
    (project / "setup.py").write_text("from setuptools import setup\nsetup()\n", encoding="utf-8")
    assert buildenv.plan_row_env(pol, row, base, project, reqs[:3], env).torch is None


def test_doctors_fix_names_the_environment_the_torch_and_the_train(tmp_path: Path) -> None:
    pol = load_policy(str(torch_project(tmp_path)))
    row = pol.row(CUDA)
    assert row is not None
    # An index that answers (a mirror, here a file: one): the fix names it (issue 35: only routes that work here).
    (tmp_path / "mirror" / "cu130" / "torch").mkdir(parents=True)
    mirror = (tmp_path / "mirror").as_uri()
    f = check_torch_installed(pol, row, "/envs/py3.12/bin/python", None, {"BUILDROWS_TORCH_INDEX": mirror + "/{accel}"})
    assert f is not None and f.failed
    assert f.seen.startswith("not installed for /envs/py3.12/bin/python, and the project builds against torch")
    assert f.fix == (f"`buildrows build {CUDA} --provision` installs torch==2.14.* for cu130 from "
                     f"{mirror}/cu130 into a cached environment of this interpreter; or install "
                     f"it here: /envs/py3.12/bin/python -m pip install --index-url {mirror}/cu130 "
                     "'torch==2.14.*'")
    # One that does not answer: never offered; the route that works is.
    f = check_torch_installed(pol, row, "/envs/py3.12/bin/python", None, {"BUILDROWS_TORCH_INDEX": "http://127.0.0.1:9/{accel}"})
    assert f is not None and "index-url" not in f.fix
    assert f.fix.startswith("the row's torch index does not answer here (http://127.0.0.1:9/cu130/torch/ does not answer")
    assert f"BUILDROWS_TORCH_INDEX=pypi buildrows build {CUDA} --provision" in f.fix
    assert check_torch_installed(pol, row, "/envs/py3.12/bin/python", "2.14.1", {}) is None


@pytest.mark.integration
@pytest.mark.skipif(os.environ.get("BUILDROWS_REAL_PROJECTS") != "1",
                    reason="installs torch into a row environment (~4 min here): set BUILDROWS_REAL_PROJECTS=1")
def test_provision_installs_the_policys_torch_for_the_row(cli: Callable[..., Result], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU row of a PyTorch extension, provisioned with the torch its policy names, from pip's
    configured index (BUILDROWS_TEST_TORCH: a torch it can serve; default 2.13.0+cpu)."""
    want = os.environ.get("BUILDROWS_TEST_TORCH", "2.13.0+cpu")
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("BUILDROWS_TORCH_INDEX", "pypi")
    pol = torch_project(tmp_path, torch=f'"{want}"')
    r = cli("--config", str(pol), "build", CPU, "--provision", "--no-check", "--wheel-dir", str(tmp_path / "dist"))
    assert r.code == 0, r.out + r.err
    assert "build environment (torch for cpu)" in r.err
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        assert z.read("tiny/_torch.py").decode() == f"VERSION = {want!r}\n"
        metadata = z.read("tiny-0.1.0.dist-info/METADATA").decode()
    minor = ".".join(want.split(".")[:2])
    assert f"Requires-Dist: torch=={minor}.*" in metadata  # point 12: the CPU wheel is pinned too


# --- point 12: a PyTorch extension's CPU wheel is pinned to its torch, and the check holds it there ---

def cpu_torch_wheel(where: Path, requires: str) -> Path:
    from buildrows.check.record import BuildRecord, record_bytes
    from tests.cuda_tools import make_elf

    wheel = where / f"tiny-0.1.0-cp{PYT}-cp{PYT}-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(f"tiny/_C.cpython-{PYT}-x86_64-linux-gnu.so", make_elf(needed=["libc10.so", "libtorch_cpu.so"]))
        z.writestr("tiny-0.1.0.dist-info/METADATA", f"Metadata-Version: 2.1\nName: tiny\nVersion: 0.1.0\n{requires}\n")
        z.writestr("tiny-0.1.0.dist-info/buildrows.json",
                   record_bytes(BuildRecord(row=CPU, torch="2.14.1", torch_cuda="13.0")))
    return wheel


@pytest.mark.parametrize(("requires", "verdict"), [
    ("", "Requires-Dist has no torch requirement; the wheel was built against torch 2.14.1: declare torch==2.14.*"),
    ("Requires-Dist: torch>=2.0", "admits torch other than 2.14"),
    ("Requires-Dist: torch==2.14.*", None),
])
def test_the_check_holds_a_torch_extensions_cpu_wheel_to_its_torch(cli: Callable[..., Result], tmp_path: Path,
                                                                    requires: str, verdict: str | None) -> None:
    pol = torch_project(tmp_path)
    wheel = cpu_torch_wheel(tmp_path, requires)
    r = cli("--config", str(pol), "check", str(wheel), "--row", CPU)
    text = r.out + r.err
    assert "torch-matches-build" in text
    if verdict is None:
        assert r.code == 0, text
        assert "admits torch 2.14.1" in text and "recorded, and no other minor version" in text
    else:
        assert r.code == 5 and verdict in text, text


def test_a_cpu_row_of_a_torch_extension_is_one_and_of_another_project_is_not(tmp_path: Path) -> None:
    pol = load_policy(str(torch_project(tmp_path)))
    cpu = pol.row(CPU)
    assert cpu is not None and pol.torch_extension(cpu)
    plain = tmp_path / "plain.toml"
    plain.write_text((tmp_path / "tiny" / "buildrows.toml").read_text().replace('mode = "torch"', 'mode = "static"'))
    other = load_policy(str(plain))
    row = other.row(CPU)
    assert row is not None and not other.torch_extension(row)


# --- issue 28, point 3: the torch --provision installed is verified -----------------------------

def _row(pol_path: Path, name: str) -> Row:
    row = load_policy(str(pol_path)).row(name)
    assert row is not None
    return row


def test_the_torch_an_environment_imports_is_held_to_the_row(tmp_path: Path) -> None:
    """The real torch of this environment, asked as --provision asks a row environment's, then held
    to a CPU row, the CUDA row of its train, and rows it does not fit."""
    import importlib.util
    from dataclasses import replace

    from buildrows.policy.trains import Train
    from buildrows.provision.torch import InstalledTorch, ask_installed, torch_problem

    pol = torch_project(tmp_path)
    cpu, cuda = _row(pol, CPU), _row(pol, CUDA)
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("needs torch")
    got, why = ask_installed(sys.executable, dict(os.environ))
    assert got is not None, why
    written = buildtree.torch_version_file(Path(next(iter(spec.submodule_search_locations))))  # read, not imported
    assert written is not None and got == InstalledTorch(*written)
    wants = torch_for_row(cuda, torch_requirement("2.14.*"), {})
    if got.cuda is not None:  # a CUDA torch (this machine's: 2.14.1+cu130)
        assert torch_problem(cpu, torch_for_row(cpu, None, {}), got) == (
            f"{got.describe()}, but {CPU} is a CPU row: its torch must be a CPU build (torch.version.cuda None)")
    cpu_torch = InstalledTorch("2.14.1+cpu", None)
    assert torch_problem(cuda, wants, cpu_torch) == (
        f"torch 2.14.1+cpu (a CPU build), but {CUDA} is a CUDA 13.0 row: it needs torch.version.cuda 13.0")
    assert torch_problem(cuda, wants, InstalledTorch("2.14.1+cu126", "12.6")) == (
        f"torch 2.14.1+cu126 (CUDA 12.6), but {CUDA} is a CUDA 13.0 row: it needs torch.version.cuda 13.0")
    assert torch_problem(cuda, wants, InstalledTorch("2.13.0+cu130", "13.0")) == (
        "torch 2.13.0+cu130 (CUDA 13.0), but the policy asks for torch==2.14.*")
    assert torch_problem(cuda, wants, InstalledTorch("2.14.1+cu130", "13.0")) is None
    assert torch_problem(cpu, torch_for_row(cpu, torch_requirement("2.14.*"), {}), cpu_torch) is None
    assert torch_problem(replace(cuda, cuda=Train.parse("13.2")), wants, InstalledTorch("2.14.1", "13.0")) is not None


def _cpu_torch_index(root: Path) -> str:
    """A package index (pip reads a file: index's directories through their index.html) that
    serves only a tiny wheel named torch 2.14.1+cpu, as a fallback index did for a cu130 row."""
    import zipfile

    wheel = "torch-2.14.1+cpu-py3-none-any.whl"
    for accel in ("cu130", "cpu"):
        where = root / accel / "torch"
        where.mkdir(parents=True)
        with zipfile.ZipFile(where / wheel, "w") as z:
            z.writestr("torch/__init__.py", "from . import version\n__version__ = version.__version__\n")
            z.writestr("torch/version.py", "__version__ = '2.14.1+cpu'\ncuda = None\n")
            info = "torch-2.14.1+cpu.dist-info"
            z.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: torch\nVersion: 2.14.1+cpu\n")
            z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
            z.writestr(f"{info}/RECORD", "")
        (where / "index.html").write_text(f'<a href="{wheel.replace("+", "%2B")}">{wheel}</a>\n', encoding="utf-8")
    return (root.as_uri() + "/{accel}")


@pytest.mark.integration
def test_provision_refuses_a_cpu_torch_for_a_cuda_row_and_caches_nothing(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The row's index answers with a CPU torch (here a local index that serves only one, as pip's
    fallback did): --provision refuses the cu130 row, naming the file pip installed and where from,
    and no environment is left in the cache under the row's key."""
    from buildrows.plan.toolchain import locate_cuda_compiler

    if locate_cuda_compiler(dict(os.environ)) is None:
        pytest.skip("needs nvcc (CUDA 13.0) for the cu130 row")
    cache = tmp_path / "cache"
    monkeypatch.setenv("BUILDROWS_CACHE", str(cache))
    index = _cpu_torch_index(tmp_path / "index")
    monkeypatch.setenv("BUILDROWS_TORCH_INDEX", index)
    pol = torch_project(tmp_path)
    r = cli("--config", str(pol), "build", CUDA, "--provision", "--wheel-dir", str(tmp_path / "dist"))
    assert r.code == 3, r.out + r.err
    served = index.replace("{accel}", "cu130")
    assert (f"row {CUDA}: --provision installed torch 2.14.1+cpu (a CPU build), but {CUDA} is a CUDA 13.0 row: "
            "it needs torch.version.cuda 13.0") in r.err
    assert f"pip installed it from: {served}/torch/torch-2.14.1%2Bcpu-py3-none-any.whl" in r.err
    assert f"the row's index: {served}; pip also takes candidates" in r.err
    assert "nothing was cached: the environment" in r.err and "fix: make the row's index reachable" in r.err
    envs = cache / "envs"
    assert not [p for p in envs.iterdir()] if envs.exists() else True
    assert not list(tmp_path.glob("dist/*.whl"))

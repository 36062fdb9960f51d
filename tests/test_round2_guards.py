"""Issue 21, points 7-13: the smaller guards, each with the input that tripped it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.build.doctor_python import FRONTEND, check_requirements
from tests.conftest import Result

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
PYT = PY.replace(".", "")


# --- point 10: --isolation alone was refused with a fix saying to use --isolation ----------------

def test_with_isolation_the_frontends_fix_does_not_offer_isolation() -> None:
    (f,) = check_requirements("/py/bin/python", [FRONTEND], {"build": None}, isolation=True)
    assert f.failed and "--isolation, which fetches" not in f.fix
    assert f.fix == (f"/py/bin/python -m pip install '{FRONTEND}' (the PEP 517 frontend runs in the row's Python, "
                     "with --isolation too)")
    # --isolation fetches the project's requirements, never the frontend: only they are offered it.
    (f,) = check_requirements("/py/bin/python", [FRONTEND], {"build": None})
    assert "or build with --isolation" not in f.fix
    (f,) = check_requirements("/py/bin/python", ["scikit-build-core>=0.10"], {"scikit-build-core": None})
    assert "or build with --isolation, which fetches it from the registry" in f.fix


def _skbuild_project(root: Path, cmake_dir: str | None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if cmake_dir is not None:
        (root / cmake_dir).mkdir(parents=True, exist_ok=True)
        (root / cmake_dir / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.24)\nproject(x)\n")
    pol = root / "buildrows.toml"
    pol.write_text(f'[project]\nname = "x"\ndriver = "scikit-build-core"\n[python]\nversions = ["{PY}"]\n'
                   '[cuda]\ntrains = ["13.0"]\n[platforms.linux-x86_64]\ntrains = ["13.0"]\ncpu = true\n'
                   '[[platforms.linux-x86_64.cuda]]\ntrains = ["13.0"]\narchs = "9.0"\n', encoding="utf-8")
    return pol


def test_render_prints_cmake_workflow_only_where_a_cmakelists_is(cli: Callable[..., Result], tmp_path: Path) -> None:
    row = f"linux-x86_64-cpu-py{PYT}"
    for name, where in (("subdir", "native"), ("none", None)):
        pol = _skbuild_project(tmp_path / name, where)
        r = cli("--config", str(pol), "render", row, "--no-toolchain-check")
        assert r.code == 0, r.err
        text = r.out + r.err
        assert "cmake --workflow --preset" not in text.replace("`cmake --workflow` cannot", "")
        assert f"{tmp_path / name} has no CMakeLists.txt, so `cmake --workflow` cannot build there; build the row " \
               f"with: buildrows --config {pol} build {row}" in text
    pol = _skbuild_project(tmp_path / "root", ".")
    r = cli("--config", str(pol), "render", row, "--no-toolchain-check")
    assert f"run: cmake --workflow --preset {row}" in r.out + r.err


# --- point 9: setup.py projects that run CMake and `make` themselves; CMake 4 and old projects ----

MAKE_SETUP_PY = '''
import subprocess
from setuptools import setup
from setuptools.command.build_ext import build_ext

class CMakeBuild(build_ext):
    def run(self):
        subprocess.check_call(["cmake", "..", "-DCMAKE_BUILD_TYPE=Release"], cwd=self.build_temp)
        subprocess.check_call(["make", "-j4"], cwd=self.build_temp)

setup(name="old", version="0.1", cmdclass={"build_ext": CMakeBuild})
'''


def test_a_setup_py_that_runs_make_gets_no_generator_unless_the_policy_fixes_one(tmp_path: Path) -> None:
    from buildrows.build import drivers
    from buildrows.build.doctor_project import check_project_cmake
    from buildrows.plan.row import plan_row
    from buildrows.policy.load import load_policy

    (tmp_path / "setup.py").write_text(MAKE_SETUP_PY, encoding="utf-8")
    pol_file = tmp_path / "buildrows.toml"
    pol_file.write_text(_skbuild_project(tmp_path / "p", None).read_text().replace("scikit-build-core", "setup.py"))
    pol = load_policy(str(pol_file))
    row = pol.row(f"linux-x86_64-cpu-py{PYT}")
    assert row is not None
    plan = plan_row(pol, row, {"PATH": ""}, host="linux", check_toolchain=False)
    (cmd,) = drivers.setup_py_plan(plan, "python3", tmp_path, tmp_path / "dist", {}).commands
    assert "CMAKE_GENERATOR" not in dict(cmd.env)
    assert "generator: left to CMake's default (setup.py runs `make` itself; the policy fixes none)" in cmd.notes
    (f,) = check_project_cmake(row, tmp_path, "setup.py", (None, None), {})
    assert f.status == "note" and "its setup.py runs `make` itself" in f.seen
    # a project that does not run make keeps the row's generator
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup()\n", encoding="utf-8")
    (cmd,) = drivers.setup_py_plan(plan, "python3", tmp_path, tmp_path / "dist", {}).commands
    assert dict(cmd.env)["CMAKE_GENERATOR"] == "Ninja"
    assert check_project_cmake(row, tmp_path, "setup.py", (None, None), {}) == []
    # the policy fixes one: kept
    pol_file.write_text(pol_file.read_text().replace('driver = "setup.py"', 'driver = "setup.py"\ngenerator = "Ninja"'))
    (tmp_path / "setup.py").write_text(MAKE_SETUP_PY, encoding="utf-8")
    fixed = load_policy(str(pol_file))
    frow = fixed.row(row.name)
    assert frow is not None
    plan = plan_row(fixed, frow, {"PATH": ""}, host="linux", check_toolchain=False)
    (cmd,) = drivers.setup_py_plan(plan, "python3", tmp_path, tmp_path / "dist", {}).commands
    assert dict(cmd.env)["CMAKE_GENERATOR"] == "Ninja"


def test_doctor_says_cmake_4_refuses_a_project_older_than_3_5(tmp_path: Path) -> None:
    from buildrows.build.doctor_project import check_project_cmake
    from buildrows.policy.load import load_policy

    pol = load_policy(str(_skbuild_project(tmp_path, None)))
    row = pol.row(f"linux-x86_64-cpu-py{PYT}")
    assert row is not None
    (tmp_path / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.2)\nproject(old)\n", encoding="utf-8")
    (f,) = check_project_cmake(row, tmp_path, "setup.py", ("/venv/bin/cmake", "cmake version 4.4.5"), {})
    assert f.failed and "requires CMake 3.2, and the cmake on PATH (/venv/bin/cmake) is 4.4.5" in f.seen
    assert f.fix.startswith("export CMAKE_POLICY_VERSION_MINIMUM=3.5")
    assert check_project_cmake(row, tmp_path, "setup.py", ("/usr/bin/cmake", "cmake version 3.28.3"), {}) == []
    assert check_project_cmake(row, tmp_path, "setup.py", ("/venv/bin/cmake", "cmake version 4.4.5"),
                               {"CMAKE_POLICY_VERSION_MINIMUM": "3.5"}) == []


# --- point 8: switches that are not a plain on/off; variables for one kind of row -----------------

def _switch_policy(root: Path, project_extra: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    pol = root / "buildrows.toml"
    pol.write_text(f'[project]\nname = "x"\ndriver = "setup.py"\n{project_extra}\n[python]\nversions = ["{PY}"]\n'
                   '[cuda]\ntrains = ["13.0"]\n[platforms.linux-x86_64]\ntrains = ["13.0"]\ncpu = true\n'
                   '[[platforms.linux-x86_64.cuda]]\ntrains = ["13.0"]\narchs = "8.0 9.0"\n', encoding="utf-8")
    return pol


def test_a_switch_that_means_cpu_and_variables_for_one_kind_of_row(tmp_path: Path) -> None:
    """torch-spline-conv reads FORCE_CUDA and FORCE_ONLY_CPU: the latter was set to 1 on the CUDA row."""
    from buildrows.plan.row import plan_row
    from buildrows.policy.load import load_policy
    from buildrows.render.envfile import environment_from_plan

    pol = load_policy(str(_switch_policy(tmp_path, '''env-switches = ["FORCE_CUDA", "!FORCE_ONLY_CPU"]
[project.cpu-cache]
MYPROJ_CPU_KERNELS = "ON"
[project.cuda-cache]
MYPROJ_CUDA_GRAPHS = "ON"
[project.cpu-env]
MYPROJ_BACKEND = "cpu"
[project.cuda-env]
CUDA_TOOLKIT_ROOT_DIR = "{cuda_home}"
MYPROJ_ARCHS = "{archs}"
''')))
    cpu, cuda = pol.row(f"linux-x86_64-cpu-py{PYT}"), pol.row(f"linux-x86_64-cu130-py{PYT}")
    assert cpu is not None and cuda is not None
    env = {"PATH": "/usr/local/bin:/usr/bin"}
    cpu_plan = plan_row(pol, cpu, env, host="linux", check_toolchain=False)
    cpu_env = environment_from_plan(cpu_plan, env)
    assert (cpu_env["FORCE_CUDA"], cpu_env["FORCE_ONLY_CPU"], cpu_env["MYPROJ_BACKEND"]) == ("0", "1", "cpu")
    assert "CUDA_TOOLKIT_ROOT_DIR" not in cpu_env and "-DMYPROJ_CPU_KERNELS=ON" in cpu_env["CMAKE_ARGS"]
    assert "MYPROJ_CUDA_GRAPHS" not in cpu_env["CMAKE_ARGS"]
    from buildrows.plan.toolchain import (
        CudaCompiler,  # noqa: F401 (the plan's compiler comes from nvcc)
        locate_cuda_compiler,
    )

    comp = locate_cuda_compiler({"PATH": "/usr/local/bin:/usr/bin"})
    cuda_plan = plan_row(pol, cuda, env, host="linux", check_toolchain=comp is not None)
    cuda_env = environment_from_plan(cuda_plan, env)
    assert (cuda_env["FORCE_CUDA"], cuda_env["FORCE_ONLY_CPU"]) == ("1", "0")
    assert cuda_env["MYPROJ_ARCHS"] == "80-real;90-real;90-virtual"
    assert cuda_env["CUDA_TOOLKIT_ROOT_DIR"] == (cuda_plan.cuda_home or "")
    assert comp is None or cuda_env["CUDA_TOOLKIT_ROOT_DIR"]  # the root of this machine's nvcc
    assert "MYPROJ_BACKEND" not in cuda_env and "-DMYPROJ_CUDA_GRAPHS=ON" in cuda_env["CMAKE_ARGS"]
    assert "MYPROJ_CPU_KERNELS" not in cuda_env["CMAKE_ARGS"]


def test_an_unknown_placeholder_or_a_doubled_switch_is_bad_input(cli: Callable[..., Result], tmp_path: Path) -> None:
    pol = _switch_policy(tmp_path / "a", '[project.cuda-env]\nCUDA_TOOLKIT_ROOT_DIR = "{cuda_root}"\n')
    r = cli("--config", str(pol), "rows")
    assert r.code == 2 and "project.cuda-env.CUDA_TOOLKIT_ROOT_DIR" in r.err
    assert "'{cuda_root}' names {cuda_root}, which is not a placeholder" in r.err and "fix:" in r.err
    pol = _switch_policy(tmp_path / "b", 'env-switches = ["FORCE_CUDA", "!FORCE_CUDA"]')
    r = cli("--config", str(pol), "rows")
    assert r.code == 2 and "'FORCE_CUDA' is listed twice" in r.err


# --- point 11: init on a torch extension's sdist -------------------------------------------------

DISO_SETUP_PY = '''
import os
import torch
from setuptools import setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

extension = CppExtension
if (torch.cuda.is_available() and (CUDA_HOME is not None)) or os.getenv(
    "FORCE_CUDA", "0"
) == "1":
    extension = CUDAExtension
if os.environ.get("FORCE_ONLY_CPU", "0") == "1":
    extension = CppExtension
setup(
    name="diso",
    ext_modules=[extension("diso._C", ["src/pybind.cpp"])],
    cmdclass={"build_ext": BuildExtension},
)
'''


def test_init_reads_a_torch_extensions_name_switches_and_mode(cli: Callable[..., Result], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """diso 0.1.4's sdist: init named it "diso-0.1.4" (the folder), wrote no stamp, no env-switches,
    no runtime mode torch, and a cuda-option from a CMakeLists.txt its setup.py never reads."""
    from buildrows.policy.load import load_policy

    project = tmp_path / "diso-0.1.4"
    project.mkdir()
    (project / "setup.py").write_text(DISO_SETUP_PY, encoding="utf-8")
    (project / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: diso\nVersion: 0.1.4\n", encoding="utf-8")
    (project / "CMakeLists.txt").write_text("option(DISO_BUILD_CUDA \"CUDA\" ON)\n", encoding="utf-8")
    monkeypatch.chdir(project)
    r = cli("init", "--cuda", "13.0", "--cpu")
    assert r.code == 0, r.err
    text = (project / "buildrows.toml").read_text()
    pol = load_policy(str(project / "buildrows.toml"))
    assert pol.project.name == "diso" and 'name = "diso"  # from PKG-INFO' in text
    assert pol.project.stamp and pol.project.cuda_option is None
    assert pol.project.switches == ("FORCE_CUDA", "!FORCE_ONLY_CPU")
    assert dict(pol.runtimes)[13].mode == "torch"
    (project / "PKG-INFO").unlink()
    (project / "buildrows.toml").unlink()
    assert cli("init", "--cuda", "13.0").code == 0
    assert load_policy(str(project / "buildrows.toml")).project.name == "diso"  # from setup(name=...)


# --- point 7: the toolkit a torch extension needs ----------------------------------------------

def test_doctor_names_the_toolkit_command_that_works_then_offers_the_cached_toolkit(tmp_path: Path) -> None:
    """diso on a machine whose /usr/local/bin/nvcc lacks cuBLAS headers: the fix said "`buildrows
    toolkit` assembles one" (not a command that works), and a toolkit already in the cache was not offered."""
    from buildrows.build.doctor_cuda import check_torch_cuda_home
    from buildrows.policy.load import policy_from_dict

    row = next(r for r in policy_from_dict({"python": {"versions": ["3.11"]}, "cuda": {"trains": ["13.0"]},
                                            "platforms": {"linux-x86_64": {"trains": ["13.0"], "cuda": [
                                                {"trains": ["13.0"], "archs": "9.0"}]}}}, "p.toml").rows)
    machine = tmp_path / "usr-local-cuda"
    (machine / "include").mkdir(parents=True)
    (machine / "lib64").mkdir()
    (machine / "include" / "cuda_runtime.h").write_text("")
    (machine / "lib64" / "libcudart.so").write_text("")
    uses = "src/cumc.cu includes ATen/cuda/CUDAContext.h"
    (f,) = check_torch_cuda_home(row, str(machine), "/usr/local/bin/nvcc", str(machine), None, uses)
    assert f.fix.startswith("`buildrows toolkit install 13.0 --libraries` assembles a CUDA 13.0 root")
    cached = tmp_path / "cache" / "toolkits" / "linux-x86_64" / "13.0"
    (cached / "include").mkdir(parents=True)
    for h in ("cuda_runtime.h", "cublas_v2.h", "cusparse.h", "cusolverDn.h"):
        (cached / "include" / h).write_text("")
    (f,) = check_torch_cuda_home(row, str(machine), "/usr/local/bin/nvcc", str(machine), None, uses, cached=str(cached))
    assert f.failed
    assert f.fix == (f"a CUDA 13.0 toolkit with them is in buildrows' cache, {cached}: build with it, "
                     f"`CUDACXX={cached}/bin/nvcc buildrows build {row.name}` (CUDA_HOME follows the nvcc)")


def test_doctor_on_a_setup_py_that_runs_make_does_not_also_say_ninja(cli: Callable[..., Result], tmp_path: Path) -> None:
    """Doctor said `[ok] generator: Ninja` for a project that CMAKE_GENERATOR=Ninja breaks."""
    (tmp_path / "setup.py").write_text(MAKE_SETUP_PY, encoding="utf-8")
    pol = tmp_path / "buildrows.toml"
    pol.write_text(_skbuild_project(tmp_path / "p", None).read_text().replace("scikit-build-core", "setup.py"))
    r = cli("--config", str(pol), "doctor", f"linux-x86_64-cpu-py{PYT}")
    text = r.out + r.err
    assert "generator: left unset for this project: its setup.py runs `make` itself" in text
    assert "] generator: Ninja" not in text

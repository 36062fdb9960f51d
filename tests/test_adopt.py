"""Issue 29: a project adopted the way the README and guide say passes in every place it builds.

The repository root is found from any subdirectory, as git finds it (`workflow`, the policy
lookup of every command); the end-to-end adoption of two fresh projects is further down.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO, Result

EXAMPLE = REPO / "examples" / "cuda-extension"


def _bundled_checkout(root: Path) -> Path:
    """buildrows' repository as far as the bundled example's policy needs it ([ci] install = "../.."),
    with a .git entry (a worktree's .git is a file: both count)."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, root / name)
    shutil.copytree(EXAMPLE, root / "examples" / "cuda-extension", ignore=shutil.ignore_patterns(
        "build", "dist", "__pycache__", "CMakeUserPresets.json", "buildrows-presets.json"))
    (root / ".git").write_text("gitdir: /nowhere/worktrees/x\n", encoding="utf-8")
    return root / "examples" / "cuda-extension"


def test_workflow_from_the_examples_own_directory_renders_at_the_repository_root(
        tmp_path: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    """It took the example's directory as the root and refused `[ci] install = '../..'`."""
    example = _bundled_checkout(tmp_path)
    monkeypatch.chdir(example)
    r = cli("workflow")
    assert r.code == 0, r.err
    assert f"repository root: {tmp_path.resolve()}" in r.err
    caller = (tmp_path / ".github" / "workflows" / "build-wheels-cuda-linux-x86_64.yml").read_text(encoding="utf-8")
    assert "examples/cuda-extension/buildrows.toml" in caller
    assert (tmp_path / ".github" / "scripts" / "buildrows-pre-build.sh").is_file()
    assert not (example / ".github").exists()
    # --check from another subdirectory finds the same root and the same files
    monkeypatch.chdir(example / "csrc")
    r = cli("workflow", "--check")
    assert r.code == 0, r.err


def test_outside_a_repository_workflow_says_it_takes_the_current_directory(
        tmp_path: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    example = _bundled_checkout(tmp_path)
    (tmp_path / ".git").unlink()
    monkeypatch.chdir(example)
    r = cli("workflow")
    assert r.code == 2
    assert f"no git repository holds {example}: taking it as the repository root (pass --root DIR" in r.err
    assert "leads outside the repository" in r.err


def test_a_command_in_a_subdirectory_finds_the_policy_up_to_the_repository_root(
        tmp_path: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    example = _bundled_checkout(tmp_path)
    monkeypatch.chdir(example / "csrc")
    r = cli("rows", "linux-x86_64-cu130-py312")
    assert r.code == 0, r.err
    assert "linux-x86_64-cu130-py312" in r.out
    # never above the repository's root: the search stops there, and says so
    (example / "buildrows.toml").unlink()
    r = cli("rows")
    assert r.code == 2
    assert (f"no buildrows policy in {example / 'csrc'} or the directories above it up to the repository root "
            f"{tmp_path.resolve()}") in r.err


def test_the_hook_in_a_subdirectory_finds_the_policy(tmp_path: Path, cli: Callable[..., Result],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    example = _bundled_checkout(tmp_path)
    monkeypatch.chdir(example / "src")
    env_file, gh_env = tmp_path / "build.env", tmp_path / "github.env"
    for k, v in {"CU_VERSION": "cpu", "BUILD_ENV_FILE": str(env_file), "GITHUB_ENV": str(gh_env)}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("DESIRED_CUDA", raising=False)
    r = cli("hook")
    assert r.code == 0, r.err
    assert f"BUILDROWS_ROW='linux-x86_64-cpu-py{PY.replace('.', '')}'" in env_file.read_text(encoding="utf-8")


# --- reproducible wheels ----------------------------------------------------------------------------


def _rezip(src: Path, dest: Path, date_time: tuple[int, int, int, int, int, int], *, change: str | None = None) -> Path:
    """SRC's members rewritten with other timestamps (and, with CHANGE, one byte of that member flipped)."""
    import zipfile

    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == change:
                data = data[:-1] + bytes([data[-1] ^ 1])
            out = zipfile.ZipInfo(info.filename, date_time=date_time)
            out.external_attr = info.external_attr
            zout.writestr(out, data)
    return dest


def tiny_wheel(dest: Path) -> Path:
    """A small real wheel (WheelFile writes its RECORD), in a fraction of a second: a module, METADATA
    with an own dependency, WHEEL; timestamps of 2020 as a build with SOURCE_DATE_EPOCH writes them."""
    from wheel.wheelfile import WheelFile

    dest.mkdir(parents=True, exist_ok=True)
    path = dest / "tiny_ext-1.2.3-py3-none-any.whl"
    when = (2020, 1, 2, 3, 4, 6)
    with WheelFile(path, "w") as whl:
        for name, text in (("tiny/__init__.py", "ANSWER = 42\n"),
                           ("tiny_ext-1.2.3.dist-info/METADATA",
                            "Metadata-Version: 2.1\nName: tiny-ext\nVersion: 1.2.3\nRequires-Dist: packaging>=20\n\n"),
                           ("tiny_ext-1.2.3.dist-info/WHEEL",
                            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")):
            info = zipfile.ZipInfo(name, date_time=when)
            info.external_attr = 0o644 << 16
            whl.writestr(info, text)
    return path


def test_stamping_the_same_wheel_twice_gives_the_same_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The build record and RECORD took the clock's time: every stamp was other bytes."""
    import time

    from buildrows.build.stamp import stamp_wheel
    from buildrows.check.record import BuildRecord

    wheel = tiny_wheel(tmp_path / "built")
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    rec = BuildRecord(row="linux-x86_64-cu130-py311", cuda="13.0", torch=None, torch_cuda=None, buildrows="0")
    first = stamp_wheel(shutil.copy2(wheel, a), local_tag="+cu130", requirements=["nvidia-cuda-runtime>=13,<14"],
                        record=rec, metadata=True).wheel
    later = time.time() + 3600  # an hour later (zip timestamps have two-second steps)
    monkeypatch.setattr(time, "time", lambda: later)
    second = stamp_wheel(shutil.copy2(wheel, b), local_tag="+cu130", requirements=["nvidia-cuda-runtime>=13,<14"],
                         record=rec, metadata=True).wheel
    assert first.read_bytes() == second.read_bytes()


def test_the_rebuild_compare_ignores_zip_timestamps_but_not_content(tmp_path: Path) -> None:
    from buildrows.build.stamp import same_wheel

    wheel = tiny_wheel(tmp_path / "built")
    later = _rezip(wheel, tmp_path / "later.whl", (2030, 1, 2, 3, 4, 6))
    assert later.read_bytes() != wheel.read_bytes()
    assert same_wheel(wheel, later)
    changed = _rezip(wheel, tmp_path / "changed.whl", (2030, 1, 2, 3, 4, 6), change="tiny/__init__.py")
    assert not same_wheel(wheel, changed)


def test_a_source_date_epoch_that_is_not_a_number_is_refused(tmp_path: Path) -> None:
    from buildrows.build.stamp import ZIP_EPOCH, source_date_epoch
    from buildrows.errors import BadInput

    assert source_date_epoch(tmp_path, {"SOURCE_DATE_EPOCH": "1700000000"}) == (
        "1700000000", "SOURCE_DATE_EPOCH from the environment")
    assert source_date_epoch(tmp_path, {}) == (str(ZIP_EPOCH), "1980-01-01 (no git history and no SOURCE_DATE_EPOCH)")
    with pytest.raises(BadInput, match=r"SOURCE_DATE_EPOCH='yesterday' is not a whole number of seconds"):
        source_date_epoch(tmp_path, {"SOURCE_DATE_EPOCH": "yesterday"})


# --- two fresh projects, adopted as the README and the guide say ------------------------------------
#
# Each project has one tiny .cu file; the policy init writes is narrowed to one architecture (the
# guide's "grow it" step, the other way), so each build compiles one kernel for one GPU.

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
ROW = f"linux-x86_64-cu130-py{PY.replace('.', '')}"
RUNTIME_NAME = "nvidia-cuda-runtime"
ALL_PLACES = os.environ.get("BUILDROWS_TEST_ADOPT_ALL") == "1"

MODULE_C = r"""#define PY_SSIZE_T_CLEAN
#include <Python.h>
int tiny_devices(void);
static PyObject *devices(PyObject *self, PyObject *args) { return PyLong_FromLong(tiny_devices()); }
static PyMethodDef methods[] = {{"devices", devices, METH_NOARGS, "CUDA devices (-1: no driver)"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_core", NULL, -1, methods};
PyMODINIT_FUNC PyInit__core(void) { return PyModule_Create(&module); }
"""
CPU_C = "int tiny_devices(void) { return -1; }\n"
KERNEL_CU = r"""#include <cuda_runtime.h>
__global__ void tiny_kernel(int *out) { *out = 1; }
extern "C" int tiny_devices(void) {
  int n = -1;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return -1;
  return n;
}
"""

SK_PYPROJECT = """\
[build-system]
requires = ["scikit-build-core>=0.10"]
build-backend = "scikit_build_core.build"

[project]
name = "tiny-sk"
version = "0.2.0"
requires-python = ">=3.10"
dependencies = ["packaging>=20"]

[tool.scikit-build]
wheel.packages = ["src/tiny_sk"]
cmake.build-type = "Release"
"""
SK_CMAKELISTS = """\
cmake_minimum_required(VERSION 3.25)
project(tiny_sk LANGUAGES C)
option(TINY_SK_CUDA "Build the CUDA kernel" OFF)
find_package(Python REQUIRED COMPONENTS Interpreter Development.Module)
if(TINY_SK_CUDA)
  enable_language(CUDA)
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  set(_sources csrc/module.c csrc/kernel.cu)
else()
  set(_sources csrc/module.c csrc/cpu.c)
endif()
Python_add_library(_core MODULE WITH_SOABI ${_sources})
install(TARGETS _core LIBRARY DESTINATION tiny_sk)
"""
PY_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61", "wheel"]
build-backend = "setuptools.build_meta"
"""
# A setup.py that compiles its .cu with the row's nvcc (CUDA_HOME) for the row's list
# (TORCH_CUDA_ARCH_LIST), as many projects without torch do.
PY_SETUP = r'''import os
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

WITH_CUDA = os.environ.get("WITH_CUDA", "0") == "1"


def gencode(arch_list):
    flags = []
    for entry in arch_list.replace(";", " ").split():
        num = entry.replace("+PTX", "").replace(".", "")
        flags += ["-gencode", f"arch=compute_{num},code=sm_{num}"]
        if entry.endswith("+PTX"):
            flags += ["-gencode", f"arch=compute_{num},code=compute_{num}"]
    return flags


class BuildExt(build_ext):
    # No LDSHARED workaround here (issue 35): `build`, and the hook in CI, give setuptools the
    # interpreter's link command without its own -rpath (buildrows.build.rowenv).
    def build_extension(self, ext):
        if WITH_CUDA:
            home = os.environ["CUDA_HOME"]
            os.makedirs(self.build_temp, exist_ok=True)
            obj = os.path.join(self.build_temp, "kernel.o")
            subprocess.check_call([os.path.join(home, "bin", "nvcc"), "-c", "csrc/kernel.cu", "-o", obj,
                                   "-Xcompiler", "-fPIC", *gencode(os.environ["TORCH_CUDA_ARCH_LIST"])])
            ext.extra_objects.append(obj)
            ext.libraries.append("cudart")
            ext.library_dirs += [os.path.join(home, "lib64"), os.path.join(home, "lib")]
        super().build_extension(ext)


sources = ["csrc/module.c"] + ([] if WITH_CUDA else ["csrc/cpu.c"])
setup(
    name="tiny-py",
    version="0.3.0",
    packages=["tiny_py"],
    install_requires=["packaging>=20"],
    ext_modules=[Extension("tiny_py._core", sources)],
    cmdclass={"build_ext": BuildExt},
)
'''


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def _cli(*argv: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "buildrows"
    return subprocess.run([str(exe), *argv], cwd=cwd, capture_output=True, text=True, check=False,
                          env={**os.environ, **(env or {})})


def _indented(lines: list[str], start: int) -> list[str]:
    """The advice's block lines (indented 9) from `start` on, dedented, up to the next step."""
    out = []
    for line in lines[start:]:
        if line.startswith("         ") or (line == "" and out):
            out.append(line[9:])
        else:
            break
    while out and out[-1] == "":
        out.pop()
    return out


def apply_pyproject_advice(text: str, advice: str) -> str:
    """pyproject.toml after the edits init printed, made as a user makes them: the [project] lines
    replaced, dependencies deleted, keys added to [tool.scikit-build], tables appended."""
    lines = advice.splitlines()
    i = next(n for n, line in enumerate(lines) if "in [project], replace these lines" in line)
    old = _indented(lines, i + 1)
    j = i + 1 + len(old)
    assert lines[j].strip() == "with", lines[j]
    new = _indented(lines, j + 1)
    text = text.replace(old[0] + "\n", "\n".join(new) + "\n", 1)
    for extra in old[1:]:
        text = text.replace(extra + "\n", "", 1)
    if any("and delete its dependencies" in line for line in lines):
        text = re.sub(r"^dependencies = \[.*\]\n", "", text, count=1, flags=re.M)
    k = next((n for n, line in enumerate(lines) if "in [tool.scikit-build], add" in line), None)
    if k is not None:
        keys = _indented(lines, k + 1)
        text = text.replace("[tool.scikit-build]\n", "[tool.scikit-build]\n" + "\n".join(keys) + "\n", 1)
    m = next(n for n, line in enumerate(lines) if "add at the end of the file" in line)
    return text + "\n" + "\n".join(_indented(lines, m + 1)) + "\n"


def _needs_cuda_toolchain() -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc on PATH: the adoption tests build a CUDA row")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    if not (Path(sys.executable).parent / "buildrows").exists():
        pytest.skip(f"no buildrows executable beside {sys.executable}")
    if PY not in ("3.10", "3.11", "3.12", "3.13"):
        pytest.skip(f"init's starting policy and the CI fixture have no Python {PY} rows")


def adopt_scikit_build_core(root: Path) -> tuple[Path, str]:
    """A fresh scikit-build-core project, adopted: init, then what init printed (pyproject lines,
    the RPATH line), then the list narrowed to one architecture. Returns it and init's output."""
    project = root / "tiny-sk"
    _write(project, {"pyproject.toml": SK_PYPROJECT, "CMakeLists.txt": SK_CMAKELISTS, "csrc/module.c": MODULE_C,
                     "csrc/cpu.c": CPU_C, "csrc/kernel.cu": KERNEL_CU, "src/tiny_sk/__init__.py": "from ._core import devices\n"})
    r = _cli("init", cwd=project)
    assert r.returncode == 0, r.stderr
    assert (project / "build_support" / "buildrows_version.py").is_file()
    assert "CUDA 13.0: the train of this machine's nvcc" in r.stderr
    (project / "pyproject.toml").write_text(apply_pyproject_advice(SK_PYPROJECT, r.stderr), encoding="utf-8")
    m = re.search(r'add set_target_properties\(TARGET PROPERTIES INSTALL_RPATH "([^"]+)"\)', r.stderr)
    assert m, r.stderr
    with open(project / "CMakeLists.txt", "a", encoding="utf-8") as f:
        f.write(f'set_target_properties(_core PROPERTIES INSTALL_RPATH "{m.group(1)}")\n')
    _narrow(project)
    return project, r.stderr


def adopt_setup_py(root: Path) -> tuple[Path, str]:
    project = root / "tiny-py"
    _write(project, {"pyproject.toml": PY_PYPROJECT, "setup.py": PY_SETUP, "csrc/module.c": MODULE_C,
                     "csrc/cpu.c": CPU_C, "csrc/kernel.cu": KERNEL_CU, "tiny_py/__init__.py": "from ._core import devices\n"})
    r = _cli("init", cwd=project)
    assert r.returncode == 0, r.stderr
    policy = (project / "buildrows.toml").read_text(encoding="utf-8")
    assert "stamp = true" in policy and 'env-switches = ["WITH_CUDA"]' in policy
    m = re.search(r'pass Extension\(\.\.\., runtime_library_dirs=\["([^"]+)"\]\)', r.stderr)
    assert m, r.stderr
    setup_py = (project / "setup.py").read_text(encoding="utf-8")
    (project / "setup.py").write_text(setup_py.replace(
        'Extension("tiny_py._core", sources)', f'Extension("tiny_py._core", sources, runtime_library_dirs=["{m.group(1)}"])'),
        encoding="utf-8")
    _narrow(project)
    return project, r.stderr


def _narrow(project: Path) -> None:
    policy = project / "buildrows.toml"
    text = policy.read_text(encoding="utf-8")
    text, n = re.subn(r'^archs = "[^"]*"$', 'archs = "8.0"', text, flags=re.M)
    assert n == 1
    policy.write_text(text, encoding="utf-8")
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)


def assert_row_wheel(wheel: Path, project: Path) -> None:
    """+cu130, the runtime requirement (and the project's own), and the check's PASS."""
    assert "+cu130" in wheel.name, wheel.name
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        requires = [line.split(":", 1)[1].strip() for line in z.read(meta).decode().splitlines()
                    if line.startswith("Requires-Dist:")]
    assert any(r.startswith(RUNTIME_NAME) for r in requires), requires
    assert any(r.replace(" ", "").startswith("packaging") for r in requires), requires
    r = _cli("check", "--row", ROW, str(wheel), cwd=project)
    assert r.returncode == 0 and "verdict: PASS" in r.stdout + r.stderr, r.stdout + r.stderr


ADOPT = {"scikit-build-core": adopt_scikit_build_core, "setup.py": adopt_setup_py}


@pytest.fixture(scope="module")
def adopted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    _needs_cuda_toolchain()
    root = tmp_path_factory.mktemp("adopt")
    return {driver: make(root) for driver, make in ADOPT.items()}


def _copy(project: Path, dest: Path) -> Path:
    shutil.copytree(project, dest, ignore=shutil.ignore_patterns("build", "dist"))
    return dest


def _build(project: Path, *extra: str) -> Path:
    r = _cli("build", *extra, cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    wheels = sorted((project / "dist").glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


OPT_IN = pytest.mark.skipif(not ALL_PLACES, reason="the whole adoption matrix is opt-in: BUILDROWS_TEST_ADOPT_ALL=1")


@pytest.mark.integration
@pytest.mark.parametrize("driver", [pytest.param("scikit-build-core", marks=OPT_IN), "setup.py"])
def test_the_adopted_projects_row_builds_in_buildrows_own_environment(adopted: dict[str, tuple[Path, str]],
                                                                      driver: str) -> None:
    """The first build passes (runtime-reached included); a rebuild is the same bytes and moves
    nothing aside."""
    project, _out = adopted[driver]
    wheel = _build(project)
    assert_row_wheel(wheel, project)
    first = wheel.read_bytes()
    again = _build(project)
    assert again == wheel and again.read_bytes() == first
    assert not list((project / "dist").glob(".buildrows/earlier-*")), list((project / "dist").iterdir())


@pytest.mark.integration
@pytest.mark.parametrize(("driver", "place"), [
    pytest.param("scikit-build-core", "--isolation"),
    pytest.param("scikit-build-core", "--provision", marks=OPT_IN),
    pytest.param("setup.py", "--isolation", marks=OPT_IN),
    pytest.param("setup.py", "--provision", marks=OPT_IN),
])
def test_the_adopted_projects_row_builds_where_buildrows_is_not_importable(
        adopted: dict[str, tuple[Path, str]], driver: str, place: str, tmp_path: Path) -> None:
    """Places where the build cannot import buildrows: an isolated frontend, a provisioned environment."""
    project = _copy(adopted[driver][0], tmp_path / driver)
    assert_row_wheel(_build(project, place), project)


@pytest.fixture(scope="module")
def buildrows_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests import ci_harness

    try:
        return ci_harness.buildrows_wheel(REPO, tmp_path_factory.mktemp("buildrows-wheel"))
    except ci_harness.HarnessError as e:
        pytest.skip(f"needs hatchling from PyPI: {e}")


@pytest.mark.integration
@OPT_IN
@pytest.mark.parametrize("driver", list(ADOPT))
def test_the_adopted_projects_row_builds_in_test_infras_isolated_build_step(
        adopted: dict[str, tuple[Path, str]], driver: str, tmp_path: Path, buildrows_wheel: Path) -> None:
    """README step 5: `buildrows workflow`, whose refusal says what [ci] install to write; then
    test-infra's build job runs as rendered (tests/ci_harness.py): pkg-helpers, the pre-script's
    hook, the build where buildrows is not installed, the post-script's stamp and check, the upload."""
    from tests.ci_harness import LinuxRun

    repo = _copy(adopted[driver][0], tmp_path / "repo")
    r = _cli("workflow", cwd=repo)
    assert r.returncode == 2 and "[ci] install is not set" in r.stderr, r.stderr
    (repo / "tools").mkdir()
    shutil.copy2(buildrows_wheel, repo / "tools" / buildrows_wheel.name)
    with open(repo / "buildrows.toml", "a", encoding="utf-8") as f:
        f.write(f'\n[ci]\ninstall = "./tools/{buildrows_wheel.name}"\n')
    r = _cli("workflow", cwd=repo)
    assert r.returncode == 0, r.stderr
    for args in (["add", "-A"], ["commit", "-q", "-m", "adopt buildrows"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args], cwd=repo, check=True,
                       capture_output=True)
    lines: list[str] = []
    run = LinuxRun(caller=repo / ".github" / "workflows" / "build-wheels-cuda-linux-x86_64.yml", repository=repo,
                   work=tmp_path / "work", python=PY, accel="cu130",
                   generator=REPO / "tests" / "data" / "generator" / "linux-release-prfalse.json", echo=lines.append)
    job = run.run()
    out = "\n".join(lines)
    assert "verdict: PASS" in out, out[-3000:]
    wheels = sorted(job.workspace.rglob("dist/*.whl"))
    assert len(wheels) == 1, wheels
    assert_row_wheel(wheels[0], repo)


def test_init_with_nvcc_writes_its_trains_row_and_says_how_to_choose(
        tmp_path: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    """It wrote a CPU-only policy on a machine with nvcc, with no word of --cuda."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc on PATH")
    _write(tmp_path, {"pyproject.toml": SK_PYPROJECT, "CMakeLists.txt": SK_CMAKELISTS})
    monkeypatch.chdir(tmp_path)
    r = cli("init")
    assert r.code == 0, r.err
    from buildrows.policy.load import load_policy

    pol = load_policy(tmp_path / "buildrows.toml")
    trains = {row.cuda.dotted for row in pol.rows if row.cuda is not None}
    assert len(trains) == 1
    assert f"CUDA {trains.pop()}: the train of this machine's nvcc, " in r.err
    assert "`--cuda TRAIN` names another, `--cpu` adds CPU rows" in r.err
    text = (tmp_path / "buildrows.toml").read_text(encoding="utf-8")
    assert "README" not in text and "docs/reference/policy.md" in text


def test_init_never_replaces_a_provider_file_and_says_so(
        tmp_path: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path, {"pyproject.toml": SK_PYPROJECT, "CMakeLists.txt": SK_CMAKELISTS,
                      "build_support/buildrows_version.py": "# the user's own\n"})
    monkeypatch.chdir(tmp_path)
    r = cli("init", "--cuda", "13.0")
    assert r.code == 0, r.err
    assert (tmp_path / "build_support" / "buildrows_version.py").read_text(encoding="utf-8") == "# the user's own\n"
    assert "build_support/buildrows_version.py is there already and differs from buildrows' provider: kept" in r.err
    assert (tmp_path / "pyproject.toml").read_text(encoding="utf-8") == SK_PYPROJECT  # never edited


# --- the rendered presets stop a configuration whose Python is not the row's ------------------------

OTHER = "3.12" if PY != "3.12" else "3.11"  # a row whose Python is not the running one
PRESETS_POLICY = """\
[project]
name = "p"
driver = "cmake-presets"
generator = "{generator}"

[python]
versions = ["{py}", "{other}"]

[platforms.linux-x86_64]
cpu = true
"""


@pytest.mark.integration
@pytest.mark.parametrize(("generator", "pinned"), [("Ninja", False), ("Unix Makefiles", True)],
                         ids=["ninja-no-interpreter-of-the-row", "makefiles-another-interpreter-given"])
def test_a_preset_configured_with_another_python_is_stopped(tmp_path: Path, generator: str, pinned: bool) -> None:
    """`cmake --workflow` exited 0 and built a cpython-311 module for the py312 row."""
    from buildrows.provision.interpreters import find_interpreter

    if shutil.which("cmake") is None or (generator == "Ninja" and shutil.which("ninja") is None) or (
            generator == "Unix Makefiles" and shutil.which("make") is None):
        pytest.skip(f"needs cmake and the {generator} generator's tool")
    row = f"linux-x86_64-cpu-py{OTHER.replace('.', '')}"
    _write(tmp_path, {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.25)\nproject(p LANGUAGES C)\n"
                                        "find_package(Python 3.10 REQUIRED COMPONENTS Interpreter)\n",
                      "buildrows.toml": PRESETS_POLICY.format(generator=generator, py=PY, other=OTHER)})
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / f"python{PY}").symlink_to(sys.executable)
    for tool in ("cmake", "ninja", "make", "cc", "gcc", "ld", "as"):
        found = shutil.which(tool)
        if found:
            (bindir / tool).symlink_to(found)
    env = {"HOME": str(tmp_path), "PATH": f"{bindir}:/usr/bin:/bin", "LANG": "C.UTF-8"}
    configure = ["cmake", "--workflow", "--preset", row]
    if pinned:
        other = find_interpreter(OTHER, os.environ).found
        if other is None:
            pytest.skip(f"no Python {OTHER} here to pin in the preset")
        render_env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}
        configure = ["cmake", "--preset", row, f"-DPython_EXECUTABLE={sys.executable}"]
    else:  # a machine without the row's Python: render warns, and the preset pins none
        render_env = {**env, "PYENV_ROOT": str(tmp_path / "no-pyenv"), "PATH": f"{bindir}:{Path(sys.executable).parent}:/usr/bin:/bin"}
    r = subprocess.run([str(Path(sys.executable).parent / "buildrows"), "render", row], cwd=tmp_path, env=render_env,
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    res = subprocess.run(configure, cwd=tmp_path, env={**env, "PATH": f"{bindir}:/usr/bin:/bin"}, capture_output=True,
                         text=True, check=False)
    out = re.sub(r"\s+", " ", res.stdout + res.stderr)
    assert res.returncode != 0, out
    assert f"buildrows: row {row}: the project found Python {PY} " in out, out
    assert f"but the row is Python {OTHER}; its module would carry the wrong tag." in out
    if pinned:
        assert "Fix: keep the preset's Python_EXECUTABLE" in out
    else:
        assert f"Fix: get Python {OTHER} (`buildrows doctor ROW` prints the command), then `buildrows render ROW` again" in out


@pytest.mark.parametrize("tool_table", [True, False], ids=["with-tool-scikit-build", "without"])
def test_the_pyproject_lines_init_prints_give_a_working_metadata_setup(tmp_path: Path, tool_table: bool) -> None:
    """The printed edits, made as printed, give pyproject.toml what scikit-build-core needs to load
    the in-tree provider (experimental, provider-path) without the 1.x deprecation warning."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    from buildrows.build.provider import scikit_build_core

    text = SK_PYPROJECT if tool_table else SK_PYPROJECT.split("[tool.scikit-build]")[0].rstrip() + "\n"
    (tmp_path / "pyproject.toml").write_text(text, encoding="utf-8")
    found = scikit_build_core(tmp_path, "+cu130")
    assert [p.relative_to(tmp_path).as_posix() for p, _ in found.files] == ["build_support/buildrows_version.py"]
    doc = tomllib.loads(apply_pyproject_advice(text, "\n".join(found.advice)))
    assert "version" not in doc["project"] and "dependencies" not in doc["project"]
    assert doc["project"]["dynamic"] == ["version", "dependencies"]
    skb = doc["tool"]["scikit-build"]
    assert skb["experimental"] is True and skb["minimum-version"] == "0.10"
    assert skb["metadata"]["version"] == {"provider": "buildrows_version", "provider-path": "build_support",
                                          "base": "0.2.0"}
    assert skb["metadata"]["dependencies"]["requires"] == ["packaging>=20"]
    # and once it is there, init has nothing more to say about it
    (tmp_path / "pyproject.toml").write_text(apply_pyproject_advice(text, "\n".join(found.advice)), encoding="utf-8")
    again = scikit_build_core(tmp_path, "+cu130")
    assert again.advice == ("pyproject.toml already names buildrows_version for the version and dependencies: "
                            "nothing to add",)

"""Issue 28, point 1: a row's build tree is tied to what built it.

Seen on real projects: `build/setuptools-ROW` was reused after the row's torch changed (2.13 ->
2.14); setuptools skipped the extension as up to date and the wheel, stamped for 2.14, failed to
import with 2.13's symbols. In a CMake tree a new CUDACXX was ignored because CMAKE_CUDA_COMPILER
stays cached. Each tree now records what built it (buildrows.build.buildtree); a change starts it
afresh, and `build` says what changed. Real builds: a small setup.py extension shaped like a
PyTorch extension, and a small scikit-build-core CUDA project built by the system nvcc, then by
NVIDIA's PyPI nvcc (CUDACXX)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from buildrows.build import buildtree
from buildrows.plan.toolchain import locate_cuda_compiler
from tests.conftest import Result, run_cli
from tests.cuda_root import assemble, nvidia_tree

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
PYT = PY.replace(".", "")
CPU = f"linux-x86_64-cpu-py{PYT}"
CUDA = f"linux-x86_64-cu130-py{PYT}"

MODULE = ('#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_C", 0, -1, 0};\n'
          "PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&m); }\n")
POLICY = f'''[project]
name = "tiny"
driver = "DRIVER"
stamp = true
[python]
versions = ["{PY}"]
[cuda]
trains = ["13.0"]
[platforms.linux-x86_64]
trains = ["13.0"]
cpu = true
[[platforms.linux-x86_64.cuda]]
trains = ["13.0"]
archs = "7.5"
'''


def torch_shaped(root: Path) -> Path:
    """A setup.py whose text names torch.utils.cpp_extension (so buildrows treats it as a PyTorch
    extension and records the torch it builds against), with one plain C module: cheap to compile."""
    project = root / "tiny"
    (project / "tiny").mkdir(parents=True)
    (project / "tiny" / "__init__.py").write_text("", encoding="utf-8")
    (project / "c.c").write_text(MODULE, encoding="utf-8")
    (project / "setup.py").write_text(
        "import shutil\nfrom setuptools import Extension, setup\n"
        "# upstream: from torch.utils.cpp_extension import CppExtension (plain C here, to stay cheap)\n"
        "print('BUILD_FINDS_CCACHE=' + str(shutil.which('ccache')))  # where torch's _wrap_compiler looks\n"
        'setup(name="tiny", version="0.1.0", packages=["tiny"], ext_modules=[Extension("tiny._C", ["c.c"])])\n',
        encoding="utf-8")
    (project / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools", "wheel"]\n'
                                            'build-backend = "setuptools.build_meta"\n', encoding="utf-8")
    pol = project / "buildrows.toml"
    pol.write_text(POLICY.replace("DRIVER", "setup.py"), encoding="utf-8")
    return pol


def _this_torch() -> tuple[str, str | None]:
    """(version, CUDA) of the torch this interpreter has, read from its version.py (not imported: slow)."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("needs torch")
    got = buildtree.torch_version_file(Path(next(iter(spec.submodule_search_locations))))
    assert got is not None
    return got


@dataclass(frozen=True)
class FirstBuild:
    """The first build of the torch-shaped project, shared by the tests of its tree and of its
    wheel (a build costs seconds of the suite's budget): checked, and failing its check."""

    root: Path
    policy: Path
    result: Result
    users_wheel: bytes


@pytest.fixture(scope="module")
def first_build(tmp_path_factory: pytest.TempPathFactory) -> FirstBuild:
    pytest.importorskip("setuptools")
    _this_torch()  # skips without torch: doctor requires it for a project built against torch
    root = tmp_path_factory.mktemp("torch-shaped")
    pol = torch_shaped(root)
    # runtime mode "torch", but the module links no torch: torch-matches-build fails the wheel
    pol.write_text(pol.read_text(encoding="utf-8") + '[cuda.runtime.13]\nmode = "torch"\n', encoding="utf-8")
    dist = root / "one"
    dist.mkdir()
    users = b"the user's good wheel"
    (dist / f"tiny-0.1.0-cp{PYT}-cp{PYT}-linux_x86_64.whl").write_bytes(users)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("GITHUB_ACTIONS", raising=False)
        r = run_cli("--config", str(pol), "build", CPU, "--wheel-dir", str(dist))
    return FirstBuild(root, pol, r, users)


def test_a_setup_py_tree_is_reused_while_its_torch_is_the_same_and_started_afresh_when_it_changed(
        cli: Callable[..., Result], first_build: FirstBuild) -> None:
    pol, root = first_build.policy, first_build.root
    tree = pol.parent / "build" / f"setuptools-{CPU}"

    def build(out: str) -> str:
        r = cli("--config", str(pol), "build", CPU, "--no-check", "--wheel-dir", str(root / out))
        assert r.code == 0, r.out + r.err
        return r.err

    err = first_build.result.err
    assert f"build tree build/setuptools-{CPU}: new" in err
    # issue 28 point 10: torch.utils.cpp_extension (2.13, 2.14) wraps nvcc and C++ in the `ccache` on
    # PATH: the build finds the compiler cache's own there
    from buildrows.build.compiler_cache import cache_dir, find_ccache

    ccache = find_ccache(dict(os.environ))
    if ccache is not None:
        assert f"BUILD_FINDS_CCACHE={cache_dir(dict(os.environ)) / 'bin' / 'ccache'}" in err
        assert os.path.realpath(cache_dir(dict(os.environ)) / "bin" / "ccache") == os.path.realpath(ccache)
    recorded = json.loads((tree / buildtree.RECORD).read_text(encoding="utf-8"))["facts"]
    version, cuda = _this_torch()
    assert recorded["torch"] == f"{version} ({'CUDA ' + cuda if cuda else 'CPU'})"
    assert recorded["python"].endswith(" " + ".".join(map(str, sys.version_info[:3])))
    (objects,) = tree.glob("temp.*/c.o")
    mark = objects.stat().st_mtime_ns

    err = build("two")  # nothing changed: the objects stay, setuptools skips the compile
    assert f"build tree build/setuptools-{CPU}: reused (built with the same Python, torch, C compiler" in err
    assert "building 'tiny._C' extension" not in err and objects.stat().st_mtime_ns == mark

    # The tree says it was built against torch 2.13.1: the row's torch changed under it.
    data = json.loads((tree / buildtree.RECORD).read_text(encoding="utf-8"))
    data["facts"]["torch"] = "2.13.1 (CPU)"
    (tree / buildtree.RECORD).write_text(json.dumps(data), encoding="utf-8")
    err = build("three")
    assert f"torch 2.13.1 (CPU) -> {recorded['torch']}: build tree build/setuptools-{CPU} started afresh" in err
    assert "building 'tiny._C' extension" in err  # compiled again, not taken from the old tree
    assert json.loads((tree / buildtree.RECORD).read_text(encoding="utf-8"))["facts"] == recorded


def test_a_wheel_that_failed_its_check_goes_under_rejected_and_nothing_there_is_replaced(
        first_build: FirstBuild) -> None:
    """Issue 28, point 8: the failed wheel goes to WHEEL_DIR/.buildrows/rejected/, the user's wheel of the
    same name in WHEEL_DIR stays, and `WHEEL_DIR/*.whl` holds nothing that failed."""
    r, dist = first_build.result, first_build.root / "one"
    assert r.code == 5, r.out + r.err
    assert "[FAIL] torch-matches-build" in r.err
    name = f"tiny-0.1.0-cp{PYT}-cp{PYT}-linux_x86_64.whl"
    rejected = dist / ".buildrows" / "rejected" / name
    assert rejected.is_file() and (dist / name).read_bytes() == first_build.users_wheel
    assert sorted(p.name for p in dist.glob("*.whl")) == [name]  # only the user's: nothing that failed
    assert f"it is kept out of {dist}, at {rejected}" in r.err
    assert f"check {rejected} --row {CPU}" in r.err
    assert f"{rejected}  (" in r.out and f"[{CPU}: check FAIL]" in r.out  # the summary names the path
    assert f".buildrows/rejected/{name}" in r.out


def test_what_changed_is_named(tmp_path: Path) -> None:
    """The line names each fact that changed; the compiler launcher is none of them."""
    tree = tmp_path / "build" / "skbuild-row"
    old = {"python": "/v/bin/python 3.12.3", "nvcc": "/usr/local/cuda-13.0/bin/nvcc 13.0.88",
           "cmake": "/usr/bin/cmake cmake version 3.31.6", "generator": "Ninja"}
    assert buildtree.settle(tree, old).state == "new"
    (tree / "CMakeCache.txt").write_text("CMAKE_CUDA_COMPILER:FILEPATH=/usr/local/cuda-13.0/bin/nvcc\n")
    assert buildtree.settle(tree, old).state == "reused" and (tree / "CMakeCache.txt").exists()
    new = {**old, "nvcc": "/opt/cuda/bin/nvcc 13.0.88", "generator": "Unix Makefiles"}
    got = buildtree.settle(tree, new)
    assert got.describe(tmp_path) == ("nvcc /usr/local/cuda-13.0/bin/nvcc 13.0.88 -> /opt/cuda/bin/nvcc 13.0.88, "
                                      "generator Ninja -> Unix Makefiles: build tree build/skbuild-row started afresh")
    assert not (tree / "CMakeCache.txt").exists() and buildtree.read_record(tree) == new
    variables = {"variables": json.dumps({"TORCH_CUDA_ARCH_LIST": "8.0", "FORCE_CUDA": "1"})}
    buildtree.settle(tree, variables)
    moved = {"variables": json.dumps({"TORCH_CUDA_ARCH_LIST": "9.0", "FORCE_CUDA": "1"})}
    assert buildtree.settle(tree, moved).changes == ("build variables TORCH_CUDA_ARCH_LIST 8.0 -> 9.0",)
    assert "launcher" not in " ".join(buildtree.LABELS)
    # A tree with no record (made before buildrows kept one, or by hand) is not trusted either.
    (tree / buildtree.RECORD).unlink()
    (tree / "stale.o").write_bytes(b"")
    assert buildtree.settle(tree, old).describe(tmp_path) == (
        "no record of what built it (made before buildrows kept one, or by another build): build tree "
        "build/skbuild-row started afresh")
    assert not (tree / "stale.o").exists()


@pytest.mark.integration
def test_a_new_cudacxx_configures_a_cmake_tree_afresh(cli: Callable[..., Result], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A scikit-build-core CUDA project built with the system nvcc, then with CUDACXX naming
    NVIDIA's PyPI nvcc: the second build configures a fresh tree whose CMAKE_CUDA_COMPILER is the
    new nvcc (before, CMake kept the cached one whatever CUDACXX said)."""
    pytest.importorskip("scikit_build_core")
    for tool in ("cmake", "ninja"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool}")
    system = locate_cuda_compiler(dict(os.environ))
    pypi = nvidia_tree()
    if system is None or pypi is None:
        pytest.skip("needs a system nvcc and NVIDIA's PyPI nvcc (nvidia-cuda-nvcc)")
    root = assemble(pypi, tmp_path / "cuda-13.0")
    project = tmp_path / "tinycu"
    (project / "src" / "tinycu").mkdir(parents=True)
    (project / "src" / "tinycu" / "__init__.py").write_text("", encoding="utf-8")
    (project / "k.cu").write_text("__global__ void k(float* x) { x[threadIdx.x] += 1.0f; }\n"
                                  'extern "C" void launch(float* x) { k<<<1, 1>>>(x); }\n', encoding="utf-8")
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.25)\nproject(tinycu LANGUAGES CXX CUDA)\n"
        "add_library(kern SHARED k.cu)\ninstall(TARGETS kern LIBRARY DESTINATION tinycu)\n", encoding="utf-8")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["scikit-build-core"]\nbuild-backend = "scikit_build_core.build"\n'
        '[project]\nname = "tinycu"\nversion = "0.1.0"\n', encoding="utf-8")
    pol = project / "buildrows.toml"
    pol.write_text(POLICY.replace("DRIVER", "scikit-build-core").replace('name = "tiny"', 'name = "tinycu"'),
                   encoding="utf-8")
    tree = project / "build" / f"skbuild-{CUDA}"
    first = os.path.realpath("/usr/local/cuda-13.0/bin/nvcc") if Path("/usr/local/cuda-13.0/bin/nvcc").is_file() \
        else os.path.realpath(system.path)

    def build(nvcc: str, out: str) -> str:
        monkeypatch.setenv("CUDACXX", nvcc)
        r = cli("--config", str(pol), "build", CUDA, "--no-check", "--no-compiler-cache",
                "--wheel-dir", str(tmp_path / out))
        assert r.code == 0, r.out + r.err
        cached = [ln for ln in (tree / "CMakeCache.txt").read_text().splitlines()
                  if ln.startswith("CMAKE_CUDA_COMPILER:")]
        assert cached == [f"CMAKE_CUDA_COMPILER:FILEPATH={nvcc}"], cached
        return r.err

    assert f"build tree build/skbuild-{CUDA}: new" in build(first, "one")
    err = build(str(root / "bin" / "nvcc"), "two")
    assert f"nvcc {first} " in err and f" -> {root / 'bin' / 'nvcc'} " in err
    assert f"build tree build/skbuild-{CUDA} started afresh" in err


TORCH_213 = Path("/opt/wheels")  # where this machine keeps torch 2.13.0+cpu (pip's find-links); BUILDROWS_TEST_TORCH_213 overrides
CPP = """#include <torch/extension.h>
torch::Tensor add_one(const torch::Tensor& x) { return x + 1; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add_one", &add_one); }
"""


@pytest.mark.integration
@pytest.mark.skipif(os.environ.get("BUILDROWS_REAL_PROJECTS") != "1",
                    reason="installs torch 2.13 and compiles a real PyTorch extension twice (~5 min): "
                           "set BUILDROWS_REAL_PROJECTS=1")
def test_the_torch_changes_under_a_real_extensions_tree_and_the_wheel_imports(tmp_path: Path) -> None:
    """The story of issue 28: a torch.utils.cpp_extension project (setup.py, no ninja) built for a
    CPU row against torch 2.13.0+cpu, then the row's environment gets torch 2.14.1: the second
    build starts its tree afresh, and its wheel imports and runs with 2.14.1."""
    import glob
    import subprocess

    wheels = sorted(glob.glob(os.path.join(os.environ.get("BUILDROWS_TEST_TORCH_213", str(TORCH_213)),
                                           f"torch-2.13.0+cpu-cp{PYT}-*.whl")))
    if not wheels:
        pytest.skip("needs a torch 2.13.0+cpu wheel for this Python (BUILDROWS_TEST_TORCH_213: its directory)")
    project = tmp_path / "tiny"
    (project / "tiny").mkdir(parents=True)
    (project / "tiny" / "__init__.py").write_text("", encoding="utf-8")
    (project / "tiny.cpp").write_text(CPP, encoding="utf-8")
    (project / "setup.py").write_text(
        "from setuptools import setup\nfrom torch.utils.cpp_extension import BuildExtension, CppExtension\n"
        'setup(name="tiny", version="0.1.0", packages=["tiny"], ext_modules=[CppExtension("tiny._C", ["tiny.cpp"])],\n'
        '      cmdclass={"build_ext": BuildExtension.with_options(use_ninja=False)})\n', encoding="utf-8")
    (project / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools", "wheel"]\n'
                                            'build-backend = "setuptools.build_meta"\n', encoding="utf-8")
    pol = project / "buildrows.toml"
    pol.write_text(POLICY.replace("DRIVER", "setup.py"), encoding="utf-8")
    # The row's environment: its own torch 2.13.0+cpu first, then what this test runs with
    # (buildrows, its dependencies, and torch 2.14.1 once 2.13 is uninstalled).
    venv = tmp_path / "row-env"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    (site,) = glob.glob(str(venv / "lib" / "python3.*" / "site-packages"))
    here = [str(Path(__file__).resolve().parent.parent)] + [p for p in sys.path if p.endswith("site-packages")]
    Path(site, "zz-buildrows-test.pth").write_text("\n".join(here) + "\n", encoding="utf-8")
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", wheels[-1]], check=True)

    def build(out: str) -> tuple[str, Path]:
        r = subprocess.run([py, "-m", "buildrows", "--config", str(pol), "build", CPU, "--no-check",
                            "--wheel-dir", str(tmp_path / out)], capture_output=True, text=True, cwd=tmp_path,
                           env={**os.environ, "MAX_JOBS": "2"})
        assert r.returncode == 0, r.stdout + r.stderr
        (wheel,) = (tmp_path / out).glob("*.whl")
        return r.stderr + r.stdout, wheel

    def runs(wheel: Path) -> str:
        subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", "--target",
                        str(tmp_path / f"site-{wheel.parent.name}"), str(wheel)], check=True)
        got = subprocess.run([py, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import torch, tiny._C as c; "
                              "print(torch.__version__, c.add_one(torch.zeros(2)).tolist())",
                              str(tmp_path / f"site-{wheel.parent.name}")], capture_output=True, text=True, cwd=tmp_path)
        return got.stdout.strip() if got.returncode == 0 else "FAILED: " + got.stderr.strip().splitlines()[-1]

    err, first = build("one")
    assert f"build tree build/setuptools-{CPU}: new" in err
    assert runs(first) == "2.13.0+cpu [1.0, 1.0]"
    subprocess.run([py, "-m", "pip", "uninstall", "-q", "-y", "torch"], check=True)
    version, cuda = _this_torch()
    err, second = build("two")
    assert (f"torch 2.13.0+cpu (CPU) -> {version} ({'CUDA ' + cuda if cuda else 'CPU'})"
            f": build tree build/setuptools-{CPU} started afresh") in err, err
    assert runs(second) == f"{version} [1.0, 1.0]"
    # Point 10: the C++ compile went through the compiler cache (torch's cpp_extension wraps it in
    # the `ccache` buildrows puts first on PATH, without ninja too): a tree started afresh with
    # the same torch takes it from the cache.
    from buildrows.build.compiler_cache import find_ccache

    if find_ccache(dict(os.environ)) is not None:
        assert "C/C++ 0/1 hits" in err, err
        (project / "build" / f"setuptools-{CPU}" / buildtree.RECORD).unlink()
        err, third = build("three")
        assert "C/C++ 1/1 hits" in err, err
        assert runs(third) == f"{version} [1.0, 1.0]"

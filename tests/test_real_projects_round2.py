"""Issue 21: unseen real projects, round 2, built from their unmodified PyPI source distributions.

- cuvec 6.0.1: scikit-build-core, its CMake in a subdirectory (`cmake.source-dir = "cuvec"`), SWIG
  (a build requirement that installs the `swig` program; CMake's `find_package(SWIG)` is optional,
  so a build without it silently ships no SWIG modules) and pybind11 modules, static cudart. Two
  CUDA rows of two Pythons and a CPU row in one `build --provision --strict`: every wheel complete
  (SWIG modules in each: the row environment's bin is on PATH), the py3.11 rows built though their
  environment's python resolves to buildrows' own (doctor reads the environment's packages), the
  second CUDA row's CMake detection reused under `cmake.source-dir`, and no member difference
  (--strict would fail it). Its CPU row needs `[project.cpu-cache]
  CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit = "ON"`: cuvec enables CUDA whenever it finds the toolkit.
- diso 0.1.4: a torch.utils.cpp_extension setup.py (CUDAExtension when FORCE_CUDA=1, else a
  CppExtension). Its CPU and CUDA rows of one Python in one invocation into one directory, with
  `stamp = true`: both wheels present (the CUDA wheel, before stamping, has the CPU wheel's name),
  each pinned to the torch it was built against. Upstream's CPU row includes `cuda_runtime.h`
  unconditionally, so the builder's CPATH carries the CUDA headers (as the project needs).

Each is fetched once (`pip download --no-binary NAME`) into $BUILDROWS_TEST_SDISTS (else a
session directory) and checked against its pinned sha256; offline, the tests skip and say so.
Both take minutes on 2 cores (cuvec ~4, diso ~5): opt-in with BUILDROWS_REAL_PROJECTS=1.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.binaries.wheelread import read_wheel
from tests.conftest import Result
from tests.cuda_root import assemble, nvidia_tree
from tests.tar_tools import extract_sdist

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
PYT = PY.replace(".", "")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.environ.get("BUILDROWS_REAL_PROJECTS") != "1",
                       reason="real PyPI projects take minutes each: set BUILDROWS_REAL_PROJECTS=1"),
]

SDISTS = {
    ("cuvec", "6.0.1"): "bd6c1e4f3704372e9e60fa9234e9c420620bef1376e774903ded004959ae0e29",
    ("diso", "0.1.4"): "2ada1c21b84f72fdcec6abc3c4e09200824a7cc9d5de9623a28052e8b1f22c95",
}
#: How pip fetches each sdist: it builds the metadata, cuvec's in an isolated environment (its
#: setuptools_scm is not here), diso's in this one (its setup.py imports torch).
DOWNLOAD_OPTIONS = {"cuvec": (), "diso": ("--no-build-isolation",)}


@pytest.fixture(scope="session")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], Path]:
    """sdist(name, version): the project's unpacked source distribution, as PyPI serves it."""
    cache = Path(os.environ.get("BUILDROWS_TEST_SDISTS") or tmp_path_factory.mktemp("sdists"))

    def get(name: str, version: str) -> Path:
        archive = cache / f"{name}-{version}.tar.gz"
        if not archive.is_file():
            # --no-binary NAME: the project's sdist, its build requirements as wheels (":all:" would
            # build swig from source just to read cuvec's metadata)
            got = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", name,
                                  *DOWNLOAD_OPTIONS[name], f"{name}=={version}", "-d", str(cache)],
                                 capture_output=True, text=True, check=False)
            if got.returncode != 0 or not archive.is_file():
                pytest.skip(f"could not download {name}=={version} from the package index (offline, or pip could not "
                            f"read its metadata): {(got.stderr or got.stdout).strip()[-300:]}")
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        assert digest == SDISTS[(name, version)], f"{archive} is not the pinned {name} {version} ({digest})"
        dest = tmp_path_factory.mktemp(name)
        with tarfile.open(archive) as tar:
            extract_sdist(tar, dest)
        (src,) = dest.iterdir()
        return src

    return get


def _members(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


def test_cuvec_two_python_rows_with_cmake_source_dir_and_swig(
        cli: Callable[..., Result], sdist: Callable[[str, str], Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from buildrows.build.compiler_cache import find_ccache
    from buildrows.plan.toolchain import locate_cuda_compiler
    from buildrows.provision.interpreters import find_interpreter

    if locate_cuda_compiler(dict(os.environ)) is None:
        pytest.skip("needs nvcc (CUDA 13.0)")
    if find_ccache(dict(os.environ)) is None or shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("needs cmake, ninja and ccache")
    other = next((f"3.{m}" for m in (12, 13, 11) if f"3.{m}" != PY
                  and find_interpreter(f"3.{m}", dict(os.environ)).found is not None), None)
    if other is None:
        pytest.skip("needs a second CPython 3.11-3.13 (pyenv)")
    src = sdist("cuvec", "6.0.1")
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MAX_JOBS", "2")
    pol = src / "buildrows.toml"
    pol.write_text(f"""[project]
name = "cuvec"
driver = "scikit-build-core"
stamp = true  # its version comes from setuptools_scm, not buildrows.metadata
[python]
versions = ["{PY}", "{other}"]
[cuda]
trains = ["13.0"]
[cuda.runtime.13]
mode = "static"  # CUDA::cudart_static in every module
[platforms.linux-x86_64]
trains = ["13.0"]
cpu = true
[[platforms.linux-x86_64.cuda]]
trains = ["13.0"]
archs = "9.0"
ptx = "none"

[project.cpu-cache]
CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit = "ON"  # cuvec turns CUDA on whenever it finds the toolkit
""", encoding="utf-8")
    first, second = f"linux-x86_64-cu130-py{PYT}", f"linux-x86_64-cu130-py{other.replace('.', '')}"
    cpu = f"linux-x86_64-cpu-py{PYT}"
    out = tmp_path / "dist"
    r = cli("--config", str(pol), "build", first, second, cpu, "--provision", "--strict", "--keep-going",
            "--wheel-dir", str(out))
    assert r.code == 0, r.out + r.err
    assert f"CMake compiler detection: taken from {first}'s tree" in r.err
    (line,) = [ln for ln in r.out.splitlines() if ln.startswith(second + " ")]
    assert "PASS" in line and "detection reused" in line
    assert "members differ" not in r.out
    wheels = sorted(out.glob("*.whl"))
    assert len(wheels) == 3
    for wheel in wheels:
        names = _members(wheel)
        assert "cuvec/cuvec_swig.py" in names and any(n.startswith("cuvec/_cuvec_swig.") for n in names), wheel
        assert any(n.startswith("cuvec/cuvec_pybind11.") for n in names), wheel
    (cpu_wheel,) = [w for w in wheels if "+cu130" not in w.name]
    assert not [lib for lib in read_wheel(cpu_wheel).libraries if lib.has_device_code]


TREE = nvidia_tree()


def test_diso_cpu_and_cuda_rows_in_one_invocation_into_one_directory(
        cli: Callable[..., Result], sdist: Callable[[str, str], Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        import torch
    except ImportError:
        pytest.skip("needs torch for CUDA 13.0 in the Python running the tests")
    if TREE is None or not (torch.version.cuda or "").startswith("13.0") or shutil.which("ninja") is None:
        pytest.skip("needs torch 2.14 for CUDA 13.0 with nvidia-cuda-nvcc 13.0 (see .ci/run) and ninja")
    root = assemble(TREE, tmp_path / "cuda-13.0")
    src = sdist("diso", "0.1.4")
    for var in ("CUDACXX", "CUDA_HOME", "CUDA_PATH", "CMAKE_ARGS", "TORCH_CUDA_ARCH_LIST", "CUDAARCHS",
                "CU_VERSION", "DESIRED_CUDA", "CMAKE_GENERATOR", "PYTHONPATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", os.pathsep.join([str(root / "bin"), str(Path(sys.executable).parent), "/usr/bin", "/bin"]))
    monkeypatch.setenv("MAX_JOBS", "2")
    monkeypatch.setenv("CPATH", str(root / "include"))  # upstream's CPU row includes cuda_runtime.h
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    pol = src / "buildrows.toml"
    pol.write_text(f"""[project]
name = "diso"
driver = "setup.py"
stamp = true
env-switches = ["FORCE_CUDA"]  # CUDAExtension when FORCE_CUDA=1
[python]
versions = ["{PY}"]
[cuda]
trains = ["13.0"]
[cuda.runtime.13]
mode = "torch"
[platforms.linux-x86_64]
trains = ["13.0"]
cpu = true
[[platforms.linux-x86_64.cuda]]
trains = ["13.0"]
archs = "9.0"
ptx = "none"
""", encoding="utf-8")
    out = tmp_path / "dist"
    r = cli("--config", str(pol), "build", f"linux-x86_64-*-py{PYT}", "--keep-going", "--wheel-dir", str(out))
    assert r.code == 0, r.out + r.err
    cpu = out / f"diso-0.1.4-cp{PYT}-cp{PYT}-linux_x86_64.whl"
    cuda = out / f"diso-0.1.4+cu130-cp{PYT}-cp{PYT}-linux_x86_64.whl"
    assert sorted(out.glob("*.whl")) == sorted([cpu, cuda])
    minor = ".".join(torch.__version__.split(".")[:2])
    for wheel in (cpu, cuda):
        info = read_wheel(wheel)
        assert f"torch=={minor}.*" in [r.replace(" ", "") for r in info.requires_dist], (wheel, info.requires_dist)
    assert [lib.path for lib in read_wheel(cuda).libraries if lib.has_device_code] == ["diso/_C.so"]
    assert not [lib for lib in read_wheel(cpu).libraries if lib.has_device_code]

"""Issue 28: unseen real projects, round 3, from their unmodified PyPI source distributions.

- torch_spline_conv 1.2.2: a torch.utils.cpp_extension setup.py built without ninja
  (`BuildExtension.with_options(use_ninja=False)`), three modules per kind (`_basis`,
  `_weighting`, `_version`, each `_cpu` and, with FORCE_CUDA=1, `_cuda`), beside a CMakeLists.txt
  of `cmake_minimum_required(VERSION 3.0)` that its setup.py never reads. `init --cuda 13.0`
  writes FORCE_CUDA and !FORCE_ONLY_CPU (never FORCE_ONLY_CUDA) and keeps the CPU rows; doctor
  gives no CMake finding; the CPU and CUDA rows build into one directory, `--strict`: the CUDA
  wheel ships the CPU modules too (as upstream's FORCE_CUDA=1 wheel does), both pass their check
  and import, and the spline basis runs on the CPU from either wheel.
- cufinufft 2.5.1: scikit-build-core, CUDA only (its pyproject fixes FINUFFT_USE_CUDA=ON and
  FINUFFT_USE_CPU=OFF), linking CUDA::cufft. Doctor refuses the row on a toolkit without cuFFT
  (the machine's nvcc-only 13.0) and names `buildrows toolkit install 13.0 --libraries`; on the
  root with the libraries it passes, with a note that its CMake downloads CPM.cmake and CCCL from
  GitHub while it configures (why it is not built here: this builder reaches PyPI only).

Opt-in (BUILDROWS_REAL_PROJECTS=1): each builds for many minutes on 2 cores. The sdists are fetched
once into $BUILDROWS_TEST_SDISTS (else a session directory) and checked against their sha256.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Result
from tests.cuda_root import assemble, nvidia_tree

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
PYT = PY.replace(".", "")
CPU, CUDA = f"linux-x86_64-cpu-py{PYT}", f"linux-x86_64-cu130-py{PYT}"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.environ.get("BUILDROWS_REAL_PROJECTS") != "1",
                       reason="real PyPI projects take many minutes each: set BUILDROWS_REAL_PROJECTS=1"),
]

SDISTS = {
    ("torch_spline_conv", "1.2.2"): "ed45a81da29f774665dbdd4709d7e534cdf16d2e7006dbd06957f35bd09661b2",
    ("cufinufft", "2.5.1"): "f12849b91674d049543cb963c94c0ee60e8e34e1bbad5e32fefe12961b0621b4",
}
#: torch_spline_conv's setup.py imports torch to give its metadata: read in this environment.
DOWNLOAD_OPTIONS: dict[str, tuple[str, ...]] = {"torch_spline_conv": ("--no-build-isolation",), "cufinufft": ()}


@pytest.fixture(scope="session")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], Path]:
    cache = Path(os.environ.get("BUILDROWS_TEST_SDISTS") or tmp_path_factory.mktemp("sdists"))

    def get(name: str, version: str) -> Path:
        archive = cache / f"{name}-{version}.tar.gz"
        if not archive.is_file():
            got = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", name,
                                  *DOWNLOAD_OPTIONS[name], f"{name}=={version}", "-d", str(cache)],
                                 capture_output=True, text=True, check=False)
            if got.returncode != 0 or not archive.is_file():
                pytest.skip(f"could not download {name}=={version}: {(got.stderr or got.stdout).strip()[-300:]}")
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        assert digest == SDISTS[(name, version)], f"{archive} is not the pinned {name} {version} ({digest})"
        dest = tmp_path_factory.mktemp(name)
        with tarfile.open(archive) as tar:
            tar.extractall(dest)
        (src,) = dest.iterdir()
        return src

    return get


@pytest.fixture(scope="module")
def libraries_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CUDA 13.0 root with the libraries (cuBLAS, cuSPARSE, cuSOLVER, cuFFT, ...), from the PyPI tree."""
    tree = nvidia_tree()
    if tree is None or shutil.which("nvcc") is None:
        pytest.skip("needs NVIDIA's PyPI CUDA 13 tree with the libraries, and nvcc")
    root = assemble(tree, tmp_path_factory.mktemp("cuda") / "root")
    for so in sorted((root / "lib64").glob("lib*.so.*")):  # the development names FindCUDAToolkit looks for
        dev = root / "lib64" / (so.name.split(".so.", 1)[0] + ".so")
        if not dev.exists() and not dev.is_symlink():
            dev.symlink_to(so.name)
    return root


def _members(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return sorted(n.rsplit("/", 1)[-1].split(".")[0] for n in z.namelist() if n.endswith(".so"))


def test_torch_spline_conv_cpu_and_cuda_rows_into_one_directory(
        cli: Callable[..., Result], sdist: Callable[[str, str], Path], libraries_root: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    src = sdist("torch_spline_conv", "1.2.2")
    monkeypatch.chdir(src)
    monkeypatch.setenv("MAX_JOBS", "2")
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    r = cli("init", "--cuda", "13.0", "--python", PY)
    assert r.code == 0, r.out + r.err
    text = (src / "buildrows.toml").read_text()
    assert 'env-switches = ["FORCE_CUDA", "!FORCE_ONLY_CPU"]' in text and "FORCE_ONLY_CUDA" not in text
    assert "cpu = true" in text and "cuda-option" not in text.replace("# cuda-option", "")
    # What the shared 2-core builder affords: one architecture.
    text = text.replace('archs = "7.5 8.0 8.6 8.9 9.0 10.0 12.0"', 'archs = "9.0"')
    # No [[check.rpath-exceptions]] for a pyenv interpreter's own -rpath: the build drops it.
    (src / "buildrows.toml").write_text(text)
    monkeypatch.setenv("CUDACXX", str(libraries_root / "bin" / "nvcc"))
    r = cli("doctor", CUDA, CPU)
    assert r.code == 0, r.out + r.err
    assert "cmake policy" not in r.out and "setup.py never runs CMake" in r.out
    assert "FORCE_CUDA=0, FORCE_ONLY_CPU=1" in r.out
    out = tmp_path / "dist"
    r = cli("build", CPU, CUDA, "--strict", "--wheel-dir", str(out))
    assert r.code == 0, r.out + r.err
    assert "members differ" not in r.out
    (cpu,) = [w for w in out.glob("*.whl") if "+cu130" not in w.name]
    (cuda,) = out.glob("*+cu130*.whl")
    assert _members(cpu) == ["_basis_cpu", "_version_cpu", "_weighting_cpu"]
    assert _members(cuda) == ["_basis_cpu", "_basis_cuda", "_version_cpu", "_version_cuda", "_weighting_cpu",
                              "_weighting_cuda"]
    code = ("import torch, torch_spline_conv as t; p = torch.tensor([[0.25]]); k = torch.tensor([5]); "
            "d = torch.tensor([1], dtype=torch.uint8); b, w = t.spline_basis(p, k, d, 1); print(b.tolist(), w.tolist())")
    for wheel in (cpu, cuda):
        target = tmp_path / wheel.name
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                        str(target), str(wheel)], check=True)
        ran = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(target)},
                             capture_output=True, text=True, check=False, cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.strip() == "[[1.0, 0.0]] [[1, 2]]", (wheel.name, ran.stdout)


def test_cufinufft_links_cufft_and_doctor_names_it(cli: Callable[..., Result], sdist: Callable[[str, str], Path],
                                                libraries_root: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    src = sdist("cufinufft", "2.5.1")
    monkeypatch.chdir(src)
    monkeypatch.setenv("MAX_JOBS", "2")
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    r = cli("init", "--cuda", "13.0", "--python", PY)
    assert r.code == 0, r.out + r.err
    text = (src / "buildrows.toml").read_text().replace('archs = "7.5 8.0 8.6 8.9 9.0 10.0 12.0"', 'archs = "9.0"')
    assert 'cuda-option = "FINUFFT_USE_CUDA"' in text
    (src / "buildrows.toml").write_text(text)
    # A root with nvcc and the runtime, no cuFFT (the system's /usr/local/cuda here).
    bare = Path(os.path.realpath(shutil.which("nvcc") or "")).parent.parent
    if (bare / "include" / "cufft.h").is_file():
        pytest.skip(f"{bare} has cuFFT: the refusal is not seen on this machine")
    monkeypatch.setenv("CUDACXX", str(bare / "bin" / "nvcc"))
    r = cli("doctor", CUDA)
    assert r.code == 3
    assert "[MISSING] CUDA::cufft: the project links CUDA::cufft (src/cuda/CMakeLists.txt:27)" in r.out
    assert "buildrows toolkit install 13.0 --libraries" in r.out
    # On the root with the libraries doctor passes (--isolation: the project pins cmake < 4 for its
    # own build environment), and notes that its CMake downloads CPM.cmake and CCCL while it
    # configures: this builder (PyPI only) cannot build it, so the build itself is not run here.
    monkeypatch.setenv("CUDACXX", str(libraries_root / "bin" / "nvcc"))
    r = cli("doctor", CUDA, "--isolation")
    assert r.code == 0, r.out + r.err
    assert "[ok     ] CUDA components: CUDA::cudart, CUDA::cufft in " in r.out
    assert "[note   ] network: the project's CMake fetches from the network while it configures " \
           "(cmake/setupCPM.cmake:12 file(DOWNLOAD)" in r.out

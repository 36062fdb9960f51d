"""Real third-party projects, built from their unmodified source distributions with `buildrows build`.

Their code is not ours: each is fetched from PyPI at a pinned version (`pip download --no-binary`)
and built as it is, for a CUDA row and a CPU row, into wheels the check passes (the CUDA rows
opt-in: BUILDROWS_REAL_PROJECTS=1; torchsort's CPU row runs by default):

- torchsort 0.1.10: a torch.utils.cpp_extension setup.py project (a CppExtension and, where nvcc
  is on PATH, a CUDAExtension). Its version has no local label and it declares ``torch>=1.7.1``:
  stamping gives ``+cu130``, pins torch to the minor it was built against, and records the build.
  Its CUDA extension links -lcudart from CUDA_HOME: without the root of the row's nvcc (a wrapper
  on PATH, CUDA_HOME unset) torch guesses the wrapper's grandparent and the link fails.
- graphgp-cuda 0.0.4: a scikit-build-core CMake CUDA project (one .cu, CUDA language, cudart linked
  statically as CMake does by default). It fixes its own architectures in CMakeLists.txt (80;89;90,
  bare numbers: code and PTX for each), so its policy states exactly those; it declares
  ``jax[cuda13]``, which stamping keeps while adding ``+cu130``.

The CUDA root is NVIDIA's PyPI packages (what torch's CUDA wheel installs, plus nvcc), assembled
by tests/cuda_root.py. .ci/run installs torch, those packages and jax; without them this skips.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from buildrows.binaries.wheelread import read_wheel
from buildrows.check.record import parse_record
from tests.cuda_root import assemble, nvidia_tree
from tests.tar_tools import extract_sdist

pytestmark = pytest.mark.integration
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
PYT = PY.replace(".", "")
ROW = f"linux-x86_64-cu130-py{PYT}"
CPU_ROW = f"linux-x86_64-cpu-py{PYT}"


def _torch_cuda() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.version.cuda


TREE = nvidia_tree()
needs_torch_cuda13 = pytest.mark.skipif(
    TREE is None or not (_torch_cuda() or "").startswith("13.0") or shutil.which("ninja") is None,
    reason="needs torch 2.14 for CUDA 13.0 with nvidia-cuda-nvcc 13.0 (see .ci/run) and ninja")
# The CUDA rows compile for minutes on CI's 2 cores (graphgp-cuda 7.5, torchsort 4.5 minutes: a third of
# the default suite): opt-in, like the other real projects. The CPU row stays in the default run.
long_cuda_row = pytest.mark.skipif(
    os.environ.get("BUILDROWS_REAL_PROJECTS") != "1",
    reason="a real project's CUDA row compiles for minutes on 2 cores: set BUILDROWS_REAL_PROJECTS=1")


@pytest.fixture(scope="session")
def cuda_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert TREE is not None
    return assemble(TREE, tmp_path_factory.mktemp("cuda") / "cuda-13.0")


@pytest.fixture(scope="session")
def sdists(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], Path]:
    """sdist(name, version): the project's unpacked source distribution from PyPI (downloaded once)."""
    cache = Path(os.environ.get("BUILDROWS_TEST_SDISTS") or tmp_path_factory.mktemp("sdists"))

    def get(name: str, version: str) -> Path:
        found = sorted(cache.glob(f"{name.replace('-', '_')}-{version}.tar.gz")) + sorted(
            cache.glob(f"{name}-{version}.tar.gz"))
        if not found:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                            "--no-build-isolation", f"{name}=={version}", "-d", str(cache)], check=True)
            found = sorted(cache.glob(f"{name.replace('-', '_')}-{version}.tar.gz")) + sorted(
                cache.glob(f"{name}-{version}.tar.gz"))
        dest = tmp_path_factory.mktemp(name)
        with tarfile.open(found[0]) as tar:
            extract_sdist(tar, dest)
        (src,) = dest.iterdir()
        return src

    return get


def builder_env(monkeypatch: pytest.MonkeyPatch, bindirs: list[Path]) -> None:
    """A builder: the given tools first on PATH, no CUDA variables of its own but the image's
    FORCE_CUDA, as CUDA CI images set it."""
    for var in ("CUDACXX", "CUDA_HOME", "CUDA_PATH", "CMAKE_ARGS", "TORCH_CUDA_ARCH_LIST", "CUDAARCHS",
                "CU_VERSION", "DESIRED_CUDA", "BUILDROWS_HOST_OS", "CMAKE_GENERATOR", "PYTHONPATH"):
        monkeypatch.delenv(var, raising=False)
    base = [Path(sys.executable).parent, Path("/usr/bin"), Path("/bin")]
    monkeypatch.setenv("PATH", os.pathsep.join(str(p) for p in [*bindirs, *base]))
    monkeypatch.setenv("MAX_JOBS", "2")


def policy(tmp_path: Path, *, name: str, driver: str, archs: str, ptx: str, mode: str,
           extra_project: str = "") -> Path:
    p = tmp_path / "buildrows.toml"
    p.write_text(f"""
[project]
name = "{name}"
driver = "{driver}"
stamp = true
{extra_project}
[python]
versions = ["{PY}"]
[cuda]
trains = ["13.0"]
[cuda.runtime.13]
mode = "{mode}"
[platforms.linux-x86_64]
trains = ["13.0"]
cpu = true
[[platforms.linux-x86_64.cuda]]
trains = ["13.0"]
archs = "{archs}"
ptx = "{ptx}"
""")
    return p


def build(cli: Callable[..., object], pol: Path, row: str, project: Path, out: Path) -> Path:
    r = cli("--config", str(pol), "build", row, "--project", str(project), "--wheel-dir", str(out))
    assert r.code == 0, r.out + r.err  # type: ignore[attr-defined]
    assert "check PASS" in r.out  # type: ignore[attr-defined]
    (wheel,) = out.glob("*.whl")
    return wheel


def record_of(wheel: Path) -> dict[str, object]:
    with zipfile.ZipFile(wheel) as z:
        (member,) = [n for n in z.namelist() if n.endswith(".dist-info/buildrows.json")]
        rec = parse_record(z.read(member), member)
    return {"row": rec.row, "cuda": rec.cuda, "torch": rec.torch, "torch_cuda": rec.torch_cuda}


@needs_torch_cuda13
@long_cuda_row
def test_torchsort_cuda_row(cli: Callable[..., object], sdists: Callable[[str, str], Path], cuda_root: Path,
                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    src = sdists("torchsort", "0.1.10")
    builder_env(monkeypatch, [cuda_root / "bin"])
    pol = policy(tmp_path, name="torchsort", driver="setup.py", archs="9.0", ptx="newest", mode="torch")
    wheel = build(cli, pol, ROW, src, tmp_path / "cuda")
    assert wheel.name.startswith(f"torchsort-0.1.10+cu130-cp{PYT}-cp{PYT}-linux_x86_64")
    info = read_wheel(wheel)
    cuda_libs = [lib for lib in info.libraries if lib.has_device_code]
    assert [Path(lib.path).name.split(".")[0] for lib in cuda_libs] == ["isotonic_cuda"]
    assert sorted(set(cuda_libs[0].cubins)) == ["sm_90"] and sorted(set(cuda_libs[0].ptx)) == ["sm_90"]
    (req,) = [Requirement(r) for r in info.requires_dist]
    # the project's own torch>=1.7.1, joined with the minor it was built against
    assert req.name == "torch" and req.specifier.contains(torch.__version__.split("+")[0])
    assert not req.specifier.contains("2.99.0") and req.specifier.contains("2.14.99")
    assert record_of(wheel) == {"row": ROW, "cuda": "13.0", "torch": torch.__version__, "torch_cuda": "13.0"}
    # The wheel installs and its CPU op runs against this torch (no GPU here; the GPU proof runs the CUDA op).
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                    str(target), str(wheel)], check=True)
    code = ("import torch, torchsort; x = torch.tensor([[3.0, 1.0, 2.0]]); "
            "print(torchsort.soft_rank(x, regularization_strength=1e-3).tolist())")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(target)},
                         capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    assert json.loads(out) == [[3.0, 1.0, 2.0]]


@needs_torch_cuda13
def test_torchsort_cpu_row(cli: Callable[..., object], sdists: Callable[[str, str], Path], tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    """torchsort decides CUDA by nvcc on PATH (no switch a policy could set): its CPU row is built on
    a builder whose PATH has no nvcc. The wheel carries no device code and no local tag."""
    src = sdists("torchsort", "0.1.10")
    builder_env(monkeypatch, [])
    if shutil.which("nvcc"):
        monkeypatch.setenv("PATH", os.pathsep.join(
            p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "nvcc").exists()))
    pol = policy(tmp_path, name="torchsort", driver="setup.py", archs="9.0", ptx="newest", mode="torch")
    wheel = build(cli, pol, CPU_ROW, src, tmp_path / "cpu")
    assert wheel.name.startswith(f"torchsort-0.1.10-cp{PYT}")
    info = read_wheel(wheel)
    assert not [lib for lib in info.libraries if lib.has_device_code]
    # the project's own, with the minor it was built against (a torch extension's CPU wheel is pinned too)
    import torch

    minor = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    assert [str(Requirement(r)) for r in info.requires_dist] == [f"torch=={minor}.*,>=1.7.1"]
    assert record_of(wheel)["row"] == CPU_ROW and record_of(wheel)["cuda"] is None


@needs_torch_cuda13
@long_cuda_row
def test_graphgp_cuda_scikit_build_core_row(cli: Callable[..., object], sdists: Callable[[str, str], Path],
                                            cuda_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("jax.ffi", reason="graphgp-cuda includes XLA's FFI headers from jaxlib")
    pytest.importorskip("scikit_build_core")
    src = sdists("graphgp-cuda", "0.0.4")
    builder_env(monkeypatch, [cuda_root / "bin"])
    # Its CMakeLists.txt sets CMAKE_CUDA_ARCHITECTURES 80;89;90 itself: bare numbers, so real code
    # and PTX for each. The policy states exactly that list (a row of "8.0 8.9 9.0" fails the check:
    # "PTX for sm_80, sm_89, sm_90, which the row does not list as PTX").
    pol = policy(tmp_path, name="graphgp-cuda", driver="scikit-build-core", archs="8.0+PTX 8.9+PTX 9.0+PTX",
                 ptx="newest", mode="static")
    wheel = build(cli, pol, ROW, src, tmp_path / "cuda")
    assert wheel.name.startswith(f"graphgp_cuda-0.0.4+cu130-cp{PYT}-cp{PYT}-linux_x86_64")
    info = read_wheel(wheel)
    (lib,) = [lib for lib in info.libraries if lib.has_device_code]
    assert sorted(set(lib.cubins)) == sorted(set(lib.ptx)) == ["sm_80", "sm_89", "sm_90"]
    runtime = [Requirement(r) for r in info.requires_dist]
    # its own (jax[cuda13], and its dev extra), kept; a statically linked cudart needs no requirement
    assert [r.name for r in runtime if "extra" not in str(r.marker)] == ["jax"]
    assert len(runtime) == 4
    assert record_of(wheel) == {"row": ROW, "cuda": "13.0", "torch": None, "torch_cuda": None}

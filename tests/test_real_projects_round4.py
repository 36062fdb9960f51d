"""Issue 40: unseen real projects, round 4, from their unmodified PyPI source distributions, with
the policy `buildrows init` writes and no edit but the architecture list.

- torch-harmonics 0.8.0: a setup.py torch extension with a CppExtension (disco_helpers) and two
  CUDAExtensions it builds when FORCE_CUDA_EXTENSION=1 *or* whenever torch.cuda.is_available().
  init writes env-switches ["FORCE_CUDA_EXTENSION"] and [project.cpu-env] CUDA_VISIBLE_DEVICES = "";
  doctor refuses the CUDA row on the nvcc-only toolkit (attention_bwd_cuda.cu includes
  ATen/cuda/CUDAUtils.h, which includes cusparse.h through CUDAContext.h) and passes the CPU row;
  the CPU row builds (one .cpp, ~4.5 minutes on 2 shared cores), passes its check, imports, and a
  DISCO convolution runs on the CPU. Its CUDA row ran on the H200 (scripts/gpu_round4.sh).
- gsplat 1.5.3: CUDAExtension only, BUILD_NO_CUDA=1 gives a pure-Python wheel whose package
  compiles its kernels at run time. init writes env-switches ["!BUILD_NO_CUDA"] and cpu-wheel =
  "pure"; the CPU row builds (no compile, ~45 s), passes pure-cpu-wheel (it failed
  torch-matches-build before), imports, and its torch reference covariance runs. Its CUDA row
  (archs set to 9.0) built on the H200 in 121 s, passed its check, and its compiled extension ran
  (scripts/gpu_round5.sh).
- causal-conv1d 1.7.0: CUDAExtension only, a bdist_wheel that downloads a prebuilt wheel from
  GitHub unless CAUSAL_CONV1D_FORCE_BUILD=TRUE, a CPU switch compared with "TRUE", a hard-coded
  -gencode list. init writes no CPU rows, the switch as "!CAUSAL_CONV1D_SKIP_CUDA_BUILD=TRUE",
  [project.cuda-env] CAUSAL_CONV1D_FORCE_BUILD = "TRUE" and the hard-coded list as archs; doctor
  passes the row, and refuses it once the cuda-env line is gone (download) or the list asks for
  more (gencode). On the H200 (scripts/gpu_round5.sh) doctor passed the row and the build ran past
  the 10-minute call, its backward kernel compiled four architectures at a time by the project's own
  nvcc --threads 4. Round 6 built the row here to the end from init's unedited policy (about 46
  minutes of compiling on 2 cores; BUILDROWS_REAL_PROJECTS_LONG=1): 207 MB wheel, the nine
  architectures and no PTX, check PASS, the extension imports.
- llama-cpp-python 0.3.36: scikit-build-core, option(GGML_CUDA ... OFF) in vendor/llama.cpp/ggml.
  init writes cuda-option = "GGML_CUDA"; doctor gives the CPU row no network note (BoringSSL and
  LibreSSL sit under variables nothing sets, CCCL in ggml-cuda, which the CPU row never adds) and
  no cuBLAS demand; the CUDA row names cuBLAS in ggml-cuda. init also writes [repair] auditwheel
  (ggml's -fopenmp) with exclude = ["libggml*.so*", "libllama*.so*", "libmtmd*.so*"]: llama.cpp
  installs libllama a second time without RPATH. The CPU row built (29m38s on 2 shared cores,
  BUILDROWS_REAL_PROJECTS_LONG=1), auditwheel excluded the project's own libraries and bundled
  libgomp, the check passed, and llama_cpp imports and reports OPENMP = 1.

Opt-in (BUILDROWS_REAL_PROJECTS=1). The sdists are fetched once into $BUILDROWS_TEST_SDISTS (else a
session directory) and checked against their sha256.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Result

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
PYT = PY.replace(".", "")
CPU, CUDA = f"linux-x86_64-cpu-py{PYT}", f"linux-x86_64-cu130-py{PYT}"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.environ.get("BUILDROWS_REAL_PROJECTS") != "1",
                       reason="real PyPI projects take many minutes each: set BUILDROWS_REAL_PROJECTS=1"),
]

SDISTS = {
    ("torch_harmonics", "0.8.0"): "b44340184416283a3636640a9050c2187515d6bd9858fa0421b048b66465f773",
    ("gsplat", "1.5.3"): "343f080c470e891ba3c697c03bdf0952cb982d1d535fdc24adb23c2cb4fba906",
    ("causal_conv1d", "1.7.0"): "3202758494eaa7b597ce1c282dfa188889506bfcb92cad3c407d26736bfcd32b",
    ("llama_cpp_python", "0.3.36"): "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",
}


@pytest.fixture(scope="session")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], Path]:
    cache = Path(os.environ.get("BUILDROWS_TEST_SDISTS") or tmp_path_factory.mktemp("sdists"))

    def get(name: str, version: str) -> Path:
        archive = cache / f"{name}-{version}.tar.gz"
        if not archive.is_file():
            got = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                                  "--no-build-isolation", f"{name.replace('_', '-')}=={version}", "-d", str(cache)],
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


def _init(cli: Callable[..., Result], src: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    monkeypatch.chdir(src)
    monkeypatch.setenv("MAX_JOBS", "2")
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    r = cli("init", "--cuda", "13.0", "--python", PY)
    assert r.code == 0, r.out + r.err
    return r.err


def _install_and_run(wheel: Path, code: str, tmp_path: Path) -> str:
    target = tmp_path / wheel.name
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target),
                    str(wheel)], check=True)
    ran = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(target)},
                         capture_output=True, text=True, check=False, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    return ran.stdout.strip()


def test_torch_harmonics_switch_gpu_hidden_and_transitive_headers(
        cli: Callable[..., Result], sdist: Callable[[str, str], Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("setuptools_scm")  # its build requirement, judged in this environment
    src = sdist("torch_harmonics", "0.8.0")
    said = _init(cli, src, monkeypatch, tmp_path)
    assert "switch FORCE_CUDA_EXTENSION (setup.py:39, on when '1'): on for CUDA rows" in said
    text = (src / "buildrows.toml").read_text()
    assert 'env-switches = ["FORCE_CUDA_EXTENSION"]' in text and 'CUDA_VISIBLE_DEVICES = ""' in text
    r = cli("doctor", CUDA)
    if "CUDA_HOME: torch takes" in r.out and "lacks cublas_v2.h" in r.out:  # an nvcc-only toolkit
        assert "(torch_harmonics/csrc/attention/attention_bwd_cuda.cu includes ATen/cuda/CUDAUtils.h)" in r.out
    r = cli("doctor", CPU)
    assert r.code == 0, r.out + r.err
    assert "FORCE_CUDA_EXTENSION=0" in r.out and 'CUDA_VISIBLE_DEVICES="" hides it from this CPU row' in r.out
    out = tmp_path / "dist"
    r = cli("build", CPU, "--wheel-dir", str(out))
    assert r.code == 0, r.out + r.err
    (wheel,) = out.glob("*.whl")
    got = _install_and_run(wheel, "import torch, torch_harmonics as th; from torch_harmonics import convolution as c; "
                           "torch.manual_seed(0); conv = th.DiscreteContinuousConvS2(4, 8, in_shape=(32, 64), "
                           "out_shape=(32, 64), kernel_shape=(3,), theta_cutoff=0.2); "
                           "print(c._cuda_extension_available, tuple(conv(torch.randn(2, 4, 32, 64)).shape))", tmp_path)
    assert got == "False (2, 8, 32, 64)"


def test_gsplat_pure_cpu_wheel(cli: Callable[..., Result], sdist: Callable[[str, str], Path], tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    src = sdist("gsplat", "1.5.3")
    _init(cli, src, monkeypatch, tmp_path)
    text = (src / "buildrows.toml").read_text()
    assert 'env-switches = ["!BUILD_NO_CUDA"]' in text and 'cpu-wheel = "pure"' in text
    out = tmp_path / "dist"
    r = cli("build", CPU, "--wheel-dir", str(out))
    assert r.code == 0, r.out + r.err
    said = r.out + r.err  # the check's report goes to stderr, the table to stdout
    assert "[PASS] pure-cpu-wheel" in said and "torch-matches-build" not in said
    assert "no C/C++ compiles" in said
    (wheel,) = out.glob("*.whl")
    assert wheel.name == "gsplat-1.5.3-py3-none-any.whl"
    got = _install_and_run(wheel, "import torch; from gsplat.cuda._torch_impl import _quat_scale_to_covar_preci as f; "
                           "c, _ = f(torch.tensor([[1.0, 0, 0, 0]]), torch.tensor([[1.0, 2.0, 3.0]])); "
                           "print(torch.diagonal(c[0]).tolist())", tmp_path)
    assert got == "[1.0, 4.0, 9.0]"


def test_causal_conv1d_download_switch_and_gencode(cli: Callable[..., Result], sdist: Callable[[str, str], Path],
                                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = sdist("causal_conv1d", "1.7.0")
    said = _init(cli, src, monkeypatch, tmp_path)
    assert "no CPU rows: setup.py builds only CUDAExtensions" in said
    text = (src / "buildrows.toml").read_text()
    assert 'env-switches = ["!CAUSAL_CONV1D_SKIP_CUDA_BUILD=TRUE"]' in text
    assert 'CAUSAL_CONV1D_FORCE_BUILD = "TRUE"' in text and "cpu = true" not in text
    assert 'archs = "7.5 8.0 8.7 9.0 10.0 10.3 11.0 12.0 12.1"' in text
    r = cli("doctor", CUDA)
    assert "[ok     ] download:" in r.out and "[ok     ] gencode:" in r.out, r.out
    # round 5: its --threads 4 for nine architectures (the H200 build ran past 10 minutes) is noted
    assert "[note   ] nvcc-threads: setup.py passes nvcc --threads 4 (setup.py:130) for 9 architectures" in r.out
    assert r.code == 0
    (src / "buildrows.toml").write_text(text.replace('CAUSAL_CONV1D_FORCE_BUILD = "TRUE"', "")
                                        .replace('archs = "7.5 8.0 8.7', 'archs = "7.5 8.0 8.6 8.7'))
    r = cli("doctor", CUDA)
    assert r.code == 3
    assert "unless CAUSAL_CONV1D_FORCE_BUILD=TRUE (setup.py:43)" in r.out
    assert "the row's list also asks for 8.6, which the wheel would lack" in r.out


def test_llama_cpp_python_option_in_a_subdirectory(cli: Callable[..., Result], sdist: Callable[[str, str], Path],
                                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = sdist("llama_cpp_python", "0.3.36")
    said = _init(cli, src, monkeypatch, tmp_path)
    assert "cuda-option GGML_CUDA (option(GGML_CUDA ...) in vendor/llama.cpp/ggml/CMakeLists.txt:199)" in said
    r = cli("doctor", CPU)
    assert "GGML_CUDA=OFF" in r.out and "network" not in r.out and "CUDA::" not in r.out, r.out
    r = cli("doctor", CUDA)
    assert "vendor/llama.cpp/ggml/src/ggml-cuda/CMakeLists.txt" in r.out


@pytest.mark.skipif(os.environ.get("BUILDROWS_REAL_PROJECTS_LONG") != "1",
                    reason="llama-cpp-python's CPU row builds for ~30 minutes on 2 cores: set BUILDROWS_REAL_PROJECTS_LONG=1")
def test_llama_cpp_python_cpu_row_repaired_with_init_s_exclude(
        cli: Callable[..., Result], sdist: Callable[[str, str], Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """init's [repair] auditwheel with its exclude: llama.cpp's second, RPATH-less install of libllama
    (lib/libllama.so.0 NEEDS libggml.so.0) no longer stops auditwheel; libgomp is bundled."""
    pytest.importorskip("auditwheel")
    src = sdist("llama_cpp_python", "0.3.36")
    _init(cli, src, monkeypatch, tmp_path)
    text = (src / "buildrows.toml").read_text()
    assert 'exclude = ["libggml*.so*", "libllama*.so*", "libmtmd*.so*"]' in text
    out = tmp_path / "dist"
    r = cli("build", CPU, "--wheel-dir", str(out))
    assert r.code == 0, r.out + r.err
    said = r.out + r.err
    assert "repaired by auditwheel" in said and "libgomp" in said
    (wheel,) = out.glob("*.whl")
    pytest.importorskip("diskcache")
    got = _install_and_run(wheel, "import llama_cpp; print(llama_cpp.llama_supports_gpu_offload(), "
                           "'OPENMP = 1' in llama_cpp.llama_print_system_info().decode())", tmp_path)
    assert got == "False True"


@pytest.mark.skipif(os.environ.get("BUILDROWS_REAL_PROJECTS_LONG") != "1",
                    reason="causal-conv1d's CUDA row compiles 9 architectures for ~50 minutes on 2 cores: "
                           "set BUILDROWS_REAL_PROJECTS_LONG=1")
def test_causal_conv1d_cuda_row_built_from_init_s_policy(
        cli: Callable[..., Result], sdist: Callable[[str, str], Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 6: the CUDA row built to the end, here, with the policy exactly as init wrote it and doctor's
    nvcc-threads fix in the environment: built from source (no download), the nine hard-coded
    architectures and no PTX, check PASS, and the extension imports (a call needs CUDA tensors)."""
    import shutil

    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc (CUDA 13.0)")
    src = sdist("causal_conv1d", "1.7.0")
    _init(cli, src, monkeypatch, tmp_path)
    written = (src / "buildrows.toml").read_bytes()
    r = cli("doctor", CUDA)
    assert r.code == 0 and "everything the row needs is here" in r.out, r.out
    monkeypatch.setenv("NVCC_APPEND_FLAGS", "--threads 0")
    out = tmp_path / "dist"
    r = cli("build", CUDA, "--wheel-dir", str(out), "--no-compiler-cache")
    assert r.code == 0, r.out + r.err
    assert (src / "buildrows.toml").read_bytes() == written  # no edit, by the user or by buildrows
    assert "CAUSAL_CONV1D_FORCE_BUILD=TRUE" in (src / "build" / "logs" / CUDA / "row.log").read_text()
    (wheel,) = out.glob("causal_conv1d-1.7.0+cu130-*.whl")
    r = cli("check", str(wheel), "--row", CUDA)
    assert r.code == 0, r.out + r.err
    assert "1 library carries exactly sm_75 sm_80 sm_87 sm_90 sm_100 sm_103 sm_110 sm_120 sm_121" in r.out
    got = _install_and_run(wheel, "import causal_conv1d, causal_conv1d_cuda; "
                           "print(sorted(n for n in dir(causal_conv1d_cuda) if not n.startswith('_')))", tmp_path)
    assert got == "['causal_conv1d_bwd', 'causal_conv1d_fwd', 'causal_conv1d_update']"

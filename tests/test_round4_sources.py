"""Issue 40 (round 4): init reads a project's own CUDA switches wherever they are, and doctor judges
what the build will do from the sources, before any compile. Small projects written here, each of
one shape the real ones had (tests/test_real_projects_round4.py replays those):

- a torch extension with its own switch and GPU detection (torch-harmonics 0.8.0's
  FORCE_CUDA_EXTENSION or torch.cuda.is_available());
- a CUDAExtension-only setup.py that downloads a prebuilt wheel unless <P>_FORCE_BUILD=TRUE, with a
  CPU switch compared with "TRUE" and a hard-coded -gencode list (causal-conv1d 1.7.0);
- a CUDAExtension-only setup.py whose package compiles at run time: a pure-Python CPU wheel
  (gsplat 1.5.3's BUILD_NO_CUDA), checked as what it is;
- a scikit-build-core project whose CUDA option is in a vendored subdirectory (llama-cpp-python's
  option(GGML_CUDA ... OFF) in vendor/llama.cpp/ggml).

No compile: about 3 s in the default suite.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.build.doctor_cuda import library_header_use
from buildrows.build.doctor_sources import source_findings
from buildrows.policy.load import load_policy
from buildrows.policy.switches import read_setup_py
from tests.conftest import Result

HARMONICS = '''
import os
from setuptools import setup
FORCE_CUDA_EXTENSION = os.getenv("FORCE_CUDA_EXTENSION", "0") == "1"
import torch
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDA_HOME, CUDAExtension
BUILD_CUDA = FORCE_CUDA_EXTENSION or (torch.cuda.is_available() and (CUDA_HOME is not None))
debug = os.environ.get("MYPROJ_DEBUG", "0") == "1"
ext = [CppExtension("helpers", ["helpers.cpp"])]
if BUILD_CUDA:
    ext.append(CUDAExtension("kern", ["kern.cu"]))
setup(name="harm", ext_modules=ext, cmdclass={"build_ext": BuildExtension})
'''

CAUSAL = '''
import os, urllib.request
from setuptools import setup
from wheel.bdist_wheel import bdist_wheel as _bdist_wheel
from torch.utils.cpp_extension import BuildExtension, CUDAExtension
FORCE_BUILD = os.getenv("CAUSAL_FORCE_BUILD", "FALSE") == "TRUE"
SKIP_CUDA_BUILD = os.getenv("CAUSAL_SKIP_CUDA_BUILD", "FALSE") == "TRUE"
cc_flag = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90"]
ext = [] if SKIP_CUDA_BUILD else [CUDAExtension("causal_cuda", ["k.cu"], extra_compile_args={"nvcc": cc_flag})]
class Cached(_bdist_wheel):
    def run(self):
        if FORCE_BUILD:
            return super().run()
        urllib.request.urlretrieve("https://example.invalid/x.whl", "x.whl")
setup(name="causal", ext_modules=ext, cmdclass={"bdist_wheel": Cached, "build_ext": BuildExtension})
'''

GSPLATLIKE = '''
import os
from setuptools import setup
BUILD_NO_CUDA = os.getenv("BUILD_NO_CUDA", "0") == "1"
def ext():
    from torch.utils.cpp_extension import CUDAExtension
    return [CUDAExtension("splat._C", ["splat/k.cu"])]
setup(name="splat", packages=["splat"], ext_modules=ext() if not BUILD_NO_CUDA else [])
'''
GSPLAT_BACKEND = '''
from torch.utils.cpp_extension import (
    _jit_compile,
)
def load():
    return _jit_compile("splat_C", ["k.cu"], [], [], [], None, False, False)
'''


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize(("text", "entries"), [
    (HARMONICS, ["FORCE_CUDA_EXTENSION"]),
    (CAUSAL, ["!CAUSAL_SKIP_CUDA_BUILD=TRUE"]),
    (GSPLATLIKE, ["!BUILD_NO_CUDA"]),
    # read as a truth value: "0" would turn it on, so the off value is empty
    ("import os\nif os.getenv('MYPROJ_USE_GPU'):\n    pass\n", ["MYPROJ_USE_GPU=1"]),
    ("import os\nX = os.environ.get('WITH_CUDA', 'off').upper() in ('ON', '1')\n", ["WITH_CUDA=ON"]),
    ("import os\nX = int(os.environ.get('MYPROJ_CUDA', '0'))\n", ["MYPROJ_CUDA"]),
    ("import os\nX = 'MYPROJ_DISABLE_CUDA' in os.environ\n", ["!MYPROJ_DISABLE_CUDA=1"]),
    # "CUDA only" drops the CPU modules upstream's CUDA wheel ships: never listed (issue 28)
    ("import os\nif os.getenv('FORCE_ONLY_CUDA', '0') == '1':\n    pass\n", []),
    # not switches: where CUDA is, which architectures, the GPUs a run sees, a value it sets
    ("import os\nos.getenv('CUDA_HOME')\nos.getenv('TORCH_CUDA_ARCH_LIST')\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\n", []),
])
def test_setup_py_switches_are_read_with_their_on_value(tmp_path: Path, text: str, entries: list[str]) -> None:
    _write(tmp_path, {"setup.py": text})
    assert [s.entry for s in read_setup_py(tmp_path).switches] == entries


def test_setup_py_downloads_gencode_gpu_and_jit(tmp_path: Path) -> None:
    causal = read_setup_py(_write(tmp_path / "c", {"setup.py": CAUSAL}))
    assert causal.force_build is not None and (causal.force_build.name, causal.force_build.on) == ("CAUSAL_FORCE_BUILD", "TRUE")
    assert causal.downloads == "setup.py:14 urllib.request.urlretrieve"
    assert causal.gencode == ("sm_80", "sm_90") and causal.cuda_extension and not causal.cpp_extension
    harm = read_setup_py(_write(tmp_path / "h", {"setup.py": HARMONICS}))
    assert harm.detects_gpu == "setup.py:7 torch.cuda.is_available()" and harm.downloads is None
    splat = read_setup_py(_write(tmp_path / "s", {"setup.py": GSPLATLIKE, "splat/_backend.py": GSPLAT_BACKEND}))
    assert splat.jit == "splat/_backend.py:5"
    assert read_setup_py(_write(tmp_path / "bad", {"setup.py": "def (:\n"})).switches == ()
    sort = read_setup_py(_write(tmp_path / "t", {"setup.py": "from subprocess import call\ndef f():\n"
                                                               "    call(['nvcc'], stdout=None)\n"}))
    assert sort.detects_nvcc == "setup.py:3 call(['nvcc'])"


def _init(cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch, project: Path, *args: str) -> Result:
    monkeypatch.chdir(project)
    r = cli("init", "--cuda", "13.0", "--python", "3.12", *args)
    assert r.code == 0, r.err
    return r


def test_init_writes_the_switch_and_hides_the_gpu_from_cpu_rows(tmp_path: Path, cli: Callable[..., Result],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    r = _init(cli, monkeypatch, _write(tmp_path, {"setup.py": HARMONICS}))
    assert "switch FORCE_CUDA_EXTENSION (setup.py:4, on when '1'): on for CUDA rows" in r.err
    assert "builds CUDA whenever torch sees a GPU (setup.py:7 torch.cuda.is_available()): CPU rows get" in r.err
    pol = load_policy(tmp_path / "buildrows.toml")
    assert pol.project.switches == ("FORCE_CUDA_EXTENSION",)
    assert pol.project.cpu_env == (("CUDA_VISIBLE_DEVICES", ""),)
    cpu, cuda = pol.row("linux-x86_64-cpu-py312"), pol.row("linux-x86_64-cu130-py312")
    assert cpu is not None and cuda is not None
    assert cpu.switches == (("FORCE_CUDA_EXTENSION", "0"), ("CUDA_VISIBLE_DEVICES", ""))
    assert cuda.switches == (("FORCE_CUDA_EXTENSION", "1"),)


def test_init_for_a_cuda_only_extension_that_downloads(tmp_path: Path, cli: Callable[..., Result],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    r = _init(cli, monkeypatch, _write(tmp_path, {"setup.py": CAUSAL}))
    assert "no CPU rows: setup.py builds only CUDAExtensions" in r.err
    pol = load_policy(tmp_path / "buildrows.toml")
    assert [row.name for row in pol.rows] == ["linux-x86_64-cu130-py312"]
    row = pol.rows[0]
    # the on-value TRUE, and the variable that stops the download, on the CUDA row
    assert row.switches == (("CAUSAL_SKIP_CUDA_BUILD", ""), ("CAUSAL_FORCE_BUILD", "TRUE"))
    assert row.archs is not None and row.archs.text == "8.0 9.0"  # the list setup.py hard-codes, no PTX
    # --cpu asks for them anyway: written, with a note saying what they give
    (tmp_path / "buildrows.toml").unlink()
    r = _init(cli, monkeypatch, tmp_path, "--cpu")
    assert "note: CPU rows, as --cpu asks, though setup.py builds only CUDAExtensions" in r.err
    cpu = load_policy(tmp_path / "buildrows.toml").row("linux-x86_64-cpu-py312")
    assert cpu is not None and cpu.switches == (("CAUSAL_SKIP_CUDA_BUILD", "TRUE"), ("CAUSAL_FORCE_BUILD", "TRUE"))


def test_init_pure_cpu_wheel_and_subdirectory_option(tmp_path: Path, cli: Callable[..., Result],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    splat = _write(tmp_path / "splat", {"setup.py": GSPLATLIKE, "splat/_backend.py": GSPLAT_BACKEND,
                                        "splat/__init__.py": ""})
    _init(cli, monkeypatch, splat)
    pol = load_policy(splat / "buildrows.toml")
    cpu = pol.row("linux-x86_64-cpu-py312")
    assert pol.project.cpu_wheel == "pure" and cpu is not None and not pol.torch_extension(cpu)
    assert cpu.switches == (("BUILD_NO_CUDA", "1"),)
    llama = _write(tmp_path / "llama", {
        "pyproject.toml": '[build-system]\nrequires = ["scikit-build-core"]\nbuild-backend = "scikit_build_core.build"\n'
                          '[project]\nname = "llamalike"\nversion = "1.0"\n',
        "CMakeLists.txt": "cmake_minimum_required(VERSION 3.21)\nproject(x)\nadd_subdirectory(vendor/lib)\n",
        "vendor/lib/CMakeLists.txt": "add_subdirectory(ggml)\n",
        "vendor/lib/ggml/CMakeLists.txt": 'option(GGML_CUDA_FORCE_MMQ "x" OFF)\noption(GGML_CUDA "ggml: use CUDA" OFF)\n'})
    r = _init(cli, monkeypatch, llama)
    assert "cuda-option GGML_CUDA (option(GGML_CUDA ...) in vendor/lib/ggml/CMakeLists.txt:2)" in r.err
    assert load_policy(llama / "buildrows.toml").project.cuda_option == "GGML_CUDA"


def test_init_says_plainly_it_found_no_switch(tmp_path: Path, cli: Callable[..., Result],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    r = _init(cli, monkeypatch, _write(tmp_path, {"setup.py": "from setuptools import setup\nsetup(name='p')\n"}), "--cpu")
    assert ("no CUDA switch found (no environment variable about CUDA that setup.py reads, no CMake CUDA option): "
            "CUDA rows build with the row's nvcc and CUDA_HOME; CPU rows have nothing that turns CUDA off") in r.err


@pytest.mark.parametrize(("entry", "message"), [
    ("FORCE_X=", "'FORCE_X=' gives FORCE_X no on-value"),
    ("1BAD=TRUE", "'1BAD' is not an environment variable name"),
])
def test_env_switch_with_a_value_is_checked(tmp_path: Path, cli: Callable[..., Result], entry: str, message: str) -> None:
    (tmp_path / "buildrows.toml").write_text(f'[project]\ndriver = "setup.py"\nenv-switches = ["{entry}"]\n'
                                             '[python]\nversions = ["3.12"]\n[platforms.linux-x86_64]\ncpu = true\n')
    r = cli("--config", str(tmp_path / "buildrows.toml"), "rows")
    assert r.code == 2 and message in r.err and "env-switches" in r.err


def _policy(tmp_path: Path, extra: str = "", archs: str = "8.0 9.0") -> Path:
    path = tmp_path / "buildrows.toml"
    path.write_text('[project]\nname = "p"\ndriver = "setup.py"\n' + extra
                    + '[python]\nversions = ["3.12"]\n[cuda]\ntrains = ["13.0"]\n[cuda.runtime.13]\nmode = "torch"\n'
                    '[platforms.linux-x86_64]\ntrains = ["13.0"]\ncpu = true\n'
                    f'[[platforms.linux-x86_64.cuda]]\ntrains = ["13.0"]\narchs = "{archs}"\nptx = "none"\n')
    return path


def test_doctor_refuses_a_download_a_gencode_list_and_a_visible_gpu(tmp_path: Path) -> None:
    project = _write(tmp_path / "c", {"setup.py": CAUSAL})
    pol = load_policy(_policy(tmp_path, archs="8.0 9.0 10.0"))
    cuda = pol.row("linux-x86_64-cu130-py312")
    assert cuda is not None
    found = {f.check: f for f in source_findings(pol, cuda, project, {})}
    assert found["download"].status == "refused"
    assert "downloads a prebuilt wheel (setup.py:14 urllib.request.urlretrieve) unless CAUSAL_FORCE_BUILD=TRUE" in found["download"].seen
    assert found["download"].fix.startswith('set it for the row: [project.cuda-env] CAUSAL_FORCE_BUILD = "TRUE"')
    assert found["gencode"].status == "refused" and "also asks for 10.0, which the wheel would lack" in found["gencode"].seen
    assert 'archs = "8.0 9.0", ptx = "none"' in found["gencode"].fix
    pol = load_policy(_policy(tmp_path, '[project.cuda-env]\nCAUSAL_FORCE_BUILD = "TRUE"\n'))
    cuda = pol.row("linux-x86_64-cu130-py312")
    assert cuda is not None
    assert [(f.check, f.status) for f in source_findings(pol, cuda, project, {})] == [("download", "ok"), ("gencode", "ok")]
    harm = _write(tmp_path / "h", {"setup.py": HARMONICS})
    cpu = pol.row("linux-x86_64-cpu-py312")
    assert cpu is not None
    [gpu] = source_findings(pol, cpu, harm, {}, gpu="/dev/nvidia0")
    assert gpu.status == "refused" and "this machine has one (/dev/nvidia0)" in gpu.seen
    assert gpu.fix.startswith('[project.cpu-env] CUDA_VISIBLE_DEVICES = ""')
    [gpu] = source_findings(pol, cpu, harm, {}, gpu=None)
    assert gpu.status == "note"
    hidden = load_policy(_policy(tmp_path, '[project.cpu-env]\nCUDA_VISIBLE_DEVICES = ""\n'))
    cpu = hidden.row("linux-x86_64-cpu-py312")
    assert cpu is not None
    [gpu] = source_findings(hidden, cpu, harm, {}, gpu="/dev/nvidia0")
    assert gpu.status == "ok"


def test_torch_headers_that_include_the_libraries_count(tmp_path: Path) -> None:
    _write(tmp_path, {"csrc/a.cu": "#include <ATen/cuda/detail/KernelUtils.h>\n"})
    assert library_header_use(tmp_path) is None  # includes none of the libraries' headers
    _write(tmp_path, {"csrc/b.cu": "#include <ATen/cuda/CUDAUtils.h>\n"})
    assert library_header_use(tmp_path) == "csrc/b.cu includes ATen/cuda/CUDAUtils.h"


def _wheel(path: Path, members: dict[str, bytes]) -> Path:
    """A wheel pip would install: its .dist-info and METADATA say the file name's version."""
    version = path.name.split("-")[1]
    info = f"splat-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: splat\nVersion: {version}\nRequires-Dist: torch\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")
    return path


def test_a_pure_cpu_wheel_is_judged_as_what_it_is(tmp_path: Path, cli: Callable[..., Result]) -> None:
    import shutil
    import subprocess

    wheel = _wheel(tmp_path / "splat-1.0-py3-none-any.whl", {"splat/__init__.py": b"", "splat/_backend.py": b""})
    row = "linux-x86_64-cpu-py312"
    # Without the key: a torch extension's CPU row, held to libtorch (the failure).
    r = cli("--config", str(_policy(tmp_path)), "check", str(wheel), "--row", row)
    assert r.code == 5 and "mode \"torch\", but no library links libtorch" in r.out + r.err
    pure = _policy(tmp_path, 'cpu-wheel = "pure"\n')
    r = cli("--config", str(pure), "check", str(wheel), "--row", row)
    assert r.code == 0, r.out + r.err
    assert "pure-cpu-wheel" in r.out and "torch-matches-build" not in r.out
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "x.c").write_text("int f(void) { return 1; }\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(tmp_path / "x.so"), str(tmp_path / "x.c")], check=True)
    compiled = _wheel(tmp_path / "splat-1.0-cp312-cp312-linux_x86_64.whl",
                      {"splat/__init__.py": b"", "splat/_C.so": (tmp_path / "x.so").read_bytes()})
    r = cli("--config", str(pure), "check", str(compiled), "--row", row)
    assert r.code == 5 and "[project] cpu-wheel = \"pure\", but the linux-x86_64-cpu-py312 wheel carries compiled " \
                           "libraries: splat/_C.so" in r.out + r.err


def test_a_cuda_wheel_with_no_cuda_names_the_switch_first(tmp_path: Path, cli: Callable[..., Result]) -> None:
    import shutil
    import subprocess

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "x.c").write_text("int f(void) { return 1; }\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(tmp_path / "x.so"), str(tmp_path / "x.c")], check=True)
    wheel = _wheel(tmp_path / "splat-1.0+cu130-cp312-cp312-linux_x86_64.whl",
                   {"splat/__init__.py": b"", "splat/_C.so": (tmp_path / "x.so").read_bytes()})
    r = cli("--config", str(_policy(tmp_path)), "check", str(wheel), "--row", "linux-x86_64-cu130-py312")
    text = r.out + r.err
    assert r.code == 5
    assert "none links a CUDA library (cudart, the driver, torch's CUDA libraries) dynamically" in text
    assert text.index("if the build compiled no CUDA (the row's CUDA switch unset), turn it on") < text.index(
        "host-only = true")


def test_the_cache_column_of_a_build_that_compiled_nothing(tmp_path: Path) -> None:
    from buildrows.build.row_steps import _setup_py_cache_text
    from buildrows.build.summary import cxx_compiles_in_logs

    (tmp_path / "01-build.log").write_text("running build_ext\nninja: no work to do.\n")
    assert cxx_compiles_in_logs(tmp_path) == 0
    assert _setup_py_cache_text(None, False, cxx_runs=0) == ("no nvcc compiles; no C/C++ compiles (the build's log "
                                                             "shows none: nothing to compile)")
    (tmp_path / "01-build.log").write_text("[1/1] ccache c++ -MMD -MF a.o.d -O3 -c /p/a.cpp -o a.o\n")
    assert cxx_compiles_in_logs(tmp_path) == 1
    assert _setup_py_cache_text(None, False, cxx_runs=1).endswith(
        "C/C++ not cached (the build's log shows 1 C/C++ compile the cache did not see: a compiler named by its "
        "full path in CC/CXX runs without it)")


def test_doctor_reads_only_what_the_row_reaches(tmp_path: Path) -> None:
    """llama.cpp's shapes: ggml adds backend directories by a variable, ggml-cuda only under GGML_CUDA
    (OFF); cpp-httplib fetches BoringSSL/LibreSSL under variables nothing in the project ever sets."""
    from buildrows.build.doctor_project import check_network_fetches, cmake_files, cuda_components

    _write(tmp_path, {
        "CMakeLists.txt": "project(x)\noption(LL_BUILD_COMMON \"c\" ON)\nadd_subdirectory(ggml)\nadd_subdirectory(httplib)\n",
        "ggml/CMakeLists.txt": 'option(GGML_CUDA "cuda" OFF)\nset(backend_target ggml-cuda)\nadd_subdirectory(${backend_target})\n'
                               "add_subdirectory(${other})\n",
        "ggml/ggml-cuda/CMakeLists.txt": "target_link_libraries(g PRIVATE CUDA::cublas)\n",
        "ggml/ggml-cpu/CMakeLists.txt": "target_link_libraries(c PRIVATE CUDA::nvtx3)\n",
        "httplib/CMakeLists.txt": "if (LL_BUILD_BORINGSSL)\n  FetchContent_Declare(boringssl URL x)\n"
                                  "elseif (LL_BUILD_LIBRESSL)\n  FetchContent_Declare(libressl URL y)\nelse()\n"
                                  "  find_package(OpenSSL)\nendif()\n"})
    assert set(cuda_components(tmp_path, live=set())) == {"nvtx3"}  # ggml-cuda is not reached on a CPU row
    assert set(cuda_components(tmp_path, live={"GGML_CUDA"})) == {"nvtx3", "cublas"}
    assert check_network_fetches(tmp_path, live=set()) is None
    fetch = check_network_fetches(tmp_path, live={"LL_BUILD_LIBRESSL"})
    assert fetch is not None and "httplib/CMakeLists.txt:4 FetchContent_Declare" in fetch.seen
    assert len(list(cmake_files(tmp_path))) == 5  # read without a row: every file, as before


def test_init_excludes_libraries_a_project_installs_twice(tmp_path: Path, cli: Callable[..., Result],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """llama-cpp-python 0.3.x: its own install function gives each library RPATH $ORIGIN; llama.cpp's
    install(TARGETS llama LIBRARY) installs another copy without it, whose libggml.so.0 auditwheel
    cannot locate: init's [repair] excludes the project's own libraries."""
    project = _write(tmp_path, {
        "pyproject.toml": '[build-system]\nrequires = ["scikit-build-core"]\nbuild-backend = "scikit_build_core.build"\n'
                          '[project]\nname = "llamalike"\nversion = "1.0"\n',
        "CMakeLists.txt": "project(x)\nfunction(my_install target)\n  install(TARGETS ${target} LIBRARY DESTINATION x)\n"
                          '  set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN")\nendfunction()\n'
                          "add_subdirectory(vendor/lib)\nmy_install(llama)\nmy_install(ggml-base)\n",
        "vendor/lib/CMakeLists.txt": 'option(GGML_CUDA "c" OFF)\nfind_package(OpenMP)\nadd_library(llama a.c)\n'
                                     "install(TARGETS llama LIBRARY)\n"})
    _init(cli, monkeypatch, project)
    pol = load_policy(project / "buildrows.toml")
    assert pol.repair.auditwheel and pol.repair.exclude == ("libggml*.so*", "libllama*.so*")
    assert "vendor/lib/CMakeLists.txt:4 installs llama again, without the RPATH" in (project / "buildrows.toml").read_text()
    # installed once: nothing to exclude
    (project / "vendor/lib/CMakeLists.txt").write_text('find_package(OpenMP)\nadd_library(llama a.c)\n')
    (project / "buildrows.toml").unlink()
    _init(cli, monkeypatch, project)
    assert load_policy(project / "buildrows.toml").repair.exclude == ()

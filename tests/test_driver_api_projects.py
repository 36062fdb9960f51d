"""Issue 28: the kind of project pycuda 2026.1 is (a driver API wrapper: a setup.py with its own
configure step, linking libcuda and cuRAND, no CUDA runtime, including cudaProfiler.h), each
defect it exposed tripped by a small input, with the message asserted.

- doctor reads aksetup's `Libraries("CURAND", ["curand"])` (only where setup.py reads its
  CURAND_LIBNAME), a siteconf.py value for it and setup.cfg's [build_ext] libraries, and notes a
  setup.py that takes its CUDA root from the first nvcc on PATH; `build` puts the row's root first;
- `toolkit install --libraries` brings cudaProfiler.h, also into a toolkit assembled before it;
- the driver stub exports what every driver API header declares (cuProfilerStart is in
  cudaProfiler.h, not cuda.h), and a stub written from fewer headers is written again;
- runtime mode "none" (no CUDA runtime at all): init writes it, the check holds a wheel to it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.binaries.symbols import library_symbols
from buildrows.binaries.wheelread import LibraryInfo, WheelInfo, parse_wheel_filename
from buildrows.build.doctor_cuda import check_toolkit_components
from buildrows.build.doctor_project import setup_py_cuda_libraries, setup_py_nvcc_from_path
from buildrows.check.hostcode import check_host_code
from buildrows.check.judging import Expectation
from buildrows.check.runtime import check_rpath
from buildrows.check.symbol_sources import LoadInputs
from buildrows.policy.archs import Train, parse_arch_list
from buildrows.policy.load import load_policy
from buildrows.provision import sources, toolkit
from buildrows.provision.archives import Artifact
from tests.conftest import Result
from tests.test_provision import MINIMAL, _publish, mirror  # noqa: F401 (a fixture)

T13 = Train.parse("13.0")
HAS_CC = shutil.which("cc") is not None and shutil.which("nm") is not None

#: pycuda 2026.1's setup.py, reduced to what is read: its configure schema (aksetup) declares three
#: libraries, and main() reads two of them; CUDA_ROOT is the parent of the first nvcc on PATH.
AKSETUP_PY = '''from os.path import dirname, join, normpath

def search_on_path(filenames):
    from os import environ, pathsep
    from os.path import abspath, exists
    for path in environ["PATH"].split(pathsep):
        for filename in filenames:
            if exists(join(path, filename)):
                return abspath(join(path, filename))

def get_config_schema():
    from aksetup_helper import ConfigSchema, Libraries, LibraryDir, Option
    nvcc_path = search_on_path(["nvcc", "nvcc.exe"])
    cuda_root_default = normpath(join(dirname(nvcc_path), "..")) if nvcc_path else None
    return ConfigSchema([
        Option("CUDA_ROOT", default=cuda_root_default),
        Libraries("CUDADRV", ["cuda"]),
        Libraries("CUDART", ["cudart"]),
        Libraries("CURAND", ["curand"]),
    ])

def main():
    from aksetup_helper import ExtensionUsingNumpy, get_config, setup
    conf = get_config(get_config_schema())
    LIBRARIES = conf["CUDADRV_LIBNAME"]
    LIBRARIES.extend(conf["CURAND_LIBNAME"])
    setup(name="drvwrap", version="1.0", ext_modules=[ExtensionUsingNumpy("_driver", ["src/cuda.cpp"],
          libraries=LIBRARIES)])

if __name__ == "__main__":
    main()
'''


def _project(tmp_path: Path) -> Path:
    src = tmp_path / "drvwrap-1.0"
    (src / "src").mkdir(parents=True)
    (src / "setup.py").write_text(AKSETUP_PY)
    (src / "src" / "cuda.cpp").write_text("#include <cuda.h>\n#include <cudaProfiler.h>\n")
    return src


def test_doctor_reads_what_an_aksetup_schema_links(tmp_path: Path) -> None:
    src = _project(tmp_path)
    used = setup_py_cuda_libraries(src)
    # CUDART is declared and never read (pycuda links no runtime): not judged.
    assert used == {"cuda_driver": 'setup.py:17 Libraries("CUDADRV", ["cuda"]) (CUDADRV_LIBNAME)',
                    "curand": 'setup.py:19 Libraries("CURAND", ["curand"]) (CURAND_LIBNAME)'}
    assert setup_py_nvcc_from_path(src) == 'setup.py:13 search_on_path(["nvcc", "nvcc.exe"])'
    # A siteconf.py (aksetup's configure output) replaces the default; setup.cfg names libraries too.
    (src / "siteconf.py").write_text("CURAND_LIBNAME = []\nCUDADRV_LIBNAME = ['cuda']\n")
    (src / "setup.cfg").write_text("[build_ext]\nlibraries = nvrtc, m\n")
    assert setup_py_cuda_libraries(src) == {"cuda_driver": "siteconf.py CUDADRV_LIBNAME = ['cuda']",
                                            "nvrtc": "setup.cfg [build_ext] libraries = nvrtc, m"}
    (src / "siteconf.py").unlink()
    (src / "setup.cfg").unlink()
    # Judged against a root with nvcc's runtime only (the machine's nvcc-only toolkit): both missing.
    pol = load_policy(_policy(tmp_path))
    row = pol.row("linux-x86_64-cu130-py311")
    assert row is not None
    bare = tmp_path / "bare"
    (bare / "include").mkdir(parents=True)
    (bare / "include" / "cuda.h").write_text("//")
    found = {f.check: f for f in check_toolkit_components(row, str(bare), used,
                                                          stops="the compiler or the linker would stop at it")}
    assert found["CUDA::curand"].seen == (
        f'the project links CUDA::curand (setup.py:19 Libraries("CURAND", ["curand"]) (CURAND_LIBNAME)), and the '
        f"toolkit the build uses ({bare}) lacks include/curand.h, lib64/libcurand.so: the compiler or the linker "
        "would stop at it")
    assert found["CUDA::curand"].fix.startswith("`buildrows toolkit install 13.0 --libraries` assembles")
    if not any(Path(d, "libcuda.so").exists() for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")):
        assert "lacks lib64/stubs/libcuda.so" in found["CUDA::cuda_driver"].seen


def _policy(tmp_path: Path) -> Path:
    path = tmp_path / "buildrows.toml"
    path.write_text('[project]\nname = "drvwrap"\ndriver = "setup.py"\n\n[python]\nversions = ["3.11"]\n\n'
                    '[cuda]\ntrains = ["13.0"]\n\n[platforms.linux-x86_64]\ntrains = ["13.0"]\n\n'
                    '[[platforms.linux-x86_64.cuda]]\ntrains = ["13.0"]\narchs = "9.0"\n')
    return path


def test_init_writes_mode_none_for_a_project_that_links_no_runtime(tmp_path: Path, cli: Callable[..., Result],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    src = _project(tmp_path)
    monkeypatch.chdir(src)
    r = cli("init", "--cuda", "13.0", "--python", "3.11")
    assert r.code == 0, r.out + r.err
    text = (src / "buildrows.toml").read_text()
    assert ('mode = "none"  # it links the driver API (setup.py:17 Libraries("CUDADRV", ["cuda"]) (CUDADRV_LIBNAME)); '
            'cuRAND (setup.py:19 Libraries("CURAND", ["curand"]) (CURAND_LIBNAME)), and no CUDA runtime (compiles no '
            "CUDA with nvcc)") in text
    assert 'requirements = ["nvidia-curand>=10,<11; platform_system == \'Linux\'"]' in text
    said = r.out + r.err
    assert "libcudart" not in said
    assert ("setup.py sets no RPATH: a CUDA row's extension must find libcurand.so.10 in site-packages/nvidia/cu13/lib, "
            "where nvidia-curand installs it") in said
    assert '[project.cuda-env] LDFLAGS = "-Wl,-rpath,$ORIGIN/../nvidia/cu13/lib"' in said
    rt = load_policy(src / "buildrows.toml").row("linux-x86_64-cu130-py311").runtime  # type: ignore[union-attr]
    assert rt is not None and rt.mode == "none"
    # A .cu source compiled by nvcc links cudart statically by default: not "none".
    (src / "setup.py").write_text(AKSETUP_PY.replace('["src/cuda.cpp"]', '["src/kernel.cu"]'))
    (src / "buildrows.toml").unlink()
    r = cli("init", "--cuda", "13.0", "--python", "3.11")
    assert r.code == 0 and 'mode = "none"' not in (src / "buildrows.toml").read_text()


def test_a_setup_py_cuda_build_has_the_rows_root_first_on_path(tmp_path: Path) -> None:
    """The root a setup.py like pycuda's takes (its search_on_path) is the row's, whatever nvcc the
    user's PATH has first."""
    from buildrows.build import drivers
    from buildrows.plan.row import plan_row

    pol = load_policy(_policy(tmp_path))
    row = pol.row("linux-x86_64-cu130-py311")
    assert row is not None
    root = tmp_path / "tk"
    for where in (root / "bin", tmp_path / "elsewhere" / "bin"):
        where.mkdir(parents=True)
        (where / "nvcc").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
        (where / "nvcc").chmod(0o755)
    env = {"PATH": str(tmp_path / "elsewhere" / "bin")}
    plan = plan_row(pol, row, env, host="linux", toolkit=str(root))
    bp = drivers.setup_py_plan(plan, "/py/bin/python3.11", _project(tmp_path), tmp_path / "dist", env)
    first = [cmd.environment(env)["PATH"].split(os.pathsep)[0] for cmd in bp.commands]
    assert first != [str(root / "bin")] * len(first)  # the guard below is what changes it
    bp = drivers.with_cuda_bin_on_path(bp, plan, env)
    for cmd in bp.commands:
        path = cmd.environment(env)["PATH"].split(os.pathsep)
        assert path[0] == str(root / "bin") and str(tmp_path / "elsewhere" / "bin") in path
        found = next(os.path.join(d, "nvcc") for d in path if os.path.exists(os.path.join(d, "nvcc")))
        assert os.path.normpath(os.path.join(os.path.dirname(found), "..")) == str(root)  # pycuda's CUDA_ROOT


DRIVER_H = b"""typedef int CUresult;
#define CUDAAPI
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#define cuMemcpy cuMemcpy_ptds
#endif
#define cuCtxCreate cuCtxCreate_v4
CUresult CUDAAPI cuInit(unsigned int f);
CUresult CUDAAPI cuCtxCreate(void **c);
CUresult CUDAAPI cuMemcpy(void *d, const void *s, unsigned long n);
"""
PROFILER_H = b"""#include <cuda.h>
CUresult CUDAAPI cuProfilerInitialize(const char *c, const char *o, int m);
CUresult CUDAAPI cuProfilerStart(void);
CUresult CUDAAPI cuProfilerStop(void);
"""
#: cudaGL.h includes the system's OpenGL header, which a builder may lack: a stand-in lets it through.
GL_H = b"""#include <cuda.h>
#include <GL/gl.h>
#define cuGLGetDevices cuGLGetDevices_v2
CUresult CUDAAPI cuGLGetDevices(unsigned int *n, int *d, unsigned int c, int l);
"""


def _exported(stub: Path) -> set[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", str(stub)], capture_output=True, text=True, check=True).stdout
    return {ln.split()[-1] for ln in out.splitlines()}


@pytest.mark.skipif(not HAS_CC, reason="needs cc and nm")
def test_toolkit_libraries_bring_the_profiler_header_and_a_stub_of_every_driver_header(
        tmp_path: Path, mirror: tuple[str, Path]) -> None:  # noqa: F811 (the fixture)
    url, root = mirror
    comps: dict[str, list[tuple[str, bytes | None, str | None, bytes]]] = {k: list(v) for k, v in MINIMAL.items()}
    comps["cuda_cudart"] += [("include/cuda.h", DRIVER_H, None, b"file"), ("include/cudaGL.h", GL_H, None, b"file")]
    for lib in ("libcublas", "libcusparse", "libcusolver", "libcurand", "libcufft"):
        comps[lib] = [(f"include/{lib.removeprefix('lib')}.h", b"//", None, b"file")]
    comps["cuda_profiler_api"] = [("include/cudaProfiler.h", PROFILER_H, None, b"file")]
    _publish(root, "12.6.3", comps)
    env = {"BUILDROWS_CACHE": str(tmp_path / "cache"), "PATH": os.environ.get("PATH", "")}
    tk = toolkit.install(T12, "linux-x86_64", env, mirror=url, libraries=True)
    assert (tk.root / "include" / "cudaProfiler.h").is_file()  # defect 2, from the redistributable archives
    stub = tk.root / "lib64" / "stubs" / "libcuda.so"
    assert _exported(stub) >= {"cuInit", "cuCtxCreate_v4", "cuMemcpy_ptds", "cuProfilerStart", "cuProfilerStop",
                               "cuProfilerInitialize", "cuGLGetDevices", "cuGLGetDevices_v2"}
    # cudaGL.h including a header neither the system nor buildrows' stand-ins have: its declarations as
    # written and the names its #defines map them to, never a refused install.
    (tk.root / "include" / "cudaGL.h").write_bytes(GL_H.replace(b"GL/gl.h", b"GL/buildrows-absent.h"))
    toolkit.write_driver_stub(tk.root, env)
    assert _exported(stub) >= {"cuInit", "cuProfilerStart", "cuGLGetDevices", "cuGLGetDevices_v2"}
    # A stub written from cuda.h alone (buildrows before this): written again on the next install.
    subprocess.run(["cc", "-shared", "-o", str(stub), "-x", "c", "-"], input="int cuInit(void) { return 34; }\n",
                   text=True, check=True)
    (stub.parent / "buildrows-stub-headers.txt").unlink()
    assert "cuProfilerStart" not in _exported(stub)
    toolkit.install(T12, "linux-x86_64", env, mirror=url, libraries=True)
    assert "cuProfilerStart" in _exported(stub)


T12 = Train.parse("12.6")


@pytest.mark.skipif(not HAS_CC, reason="needs cc and nm")
def test_a_toolkit_assembled_before_the_profiler_api_was_pinned_gets_it(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = tmp_path / "house" / "nvidia_cuda_profiler_api-13.0.85-py3-none-any.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("nvidia/cu13/include/cudaProfiler.h", PROFILER_H)
    pinned = sources.pypi_release(T13, "linux-x86_64", True)
    art = Artifact(wheel.as_uri(), wheel.name, hashlib.sha256(wheel.read_bytes()).hexdigest(), wheel.stat().st_size,
                   strip="nvidia/cu13", component="nvidia-cuda-profiler-api")
    release = sources.Release("pypi", T13, "linux-x86_64", pinned.release, pinned.origin,
                              tuple(a for a in pinned.artifacts if a.component != art.component) + (art,), "flat")
    monkeypatch.setattr(sources, "pypi_release", lambda *a, **k: release)
    env = {"BUILDROWS_CACHE": str(tmp_path / "cache"), "PATH": os.environ.get("PATH", "")}
    root = toolkit.toolkit_root(T13, "linux-x86_64", env)
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "nvcc").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    (root / "include").mkdir()
    (root / "include" / "cuda.h").write_bytes(DRIVER_H)
    before = [{"component": a.component, "filename": a.filename, "sha256": a.sha256} for a in release.artifacts[:-1]]
    (root / toolkit.RECEIPT).write_text(json.dumps({"train": "13.0", "platform": "linux-x86_64", "source": "pypi",
                                                    "release": pinned.release, "nvcc_version": "13.0.88",
                                                    "libraries": True, "artifacts": before}))
    tk = toolkit.install(T13, "linux-x86_64", env, libraries=True)
    assert (tk.root / "include" / "cudaProfiler.h").read_bytes() == PROFILER_H
    got = json.loads((root / toolkit.RECEIPT).read_text())["artifacts"]
    assert got[-1] == {"component": "nvidia-cuda-profiler-api", "filename": wheel.name, "sha256": art.sha256}
    assert "cuProfilerStart" in _exported(root / "lib64" / "stubs" / "libcuda.so")


# --- runtime mode "none" -----------------------------------------------------------------------------------


def _exp() -> Expectation:
    return Expectation("row", "linux-x86_64", T13, parse_arch_list("9.0", train=T13), (), None, mode="none",
                       machine="x86_64")


def _wheel(libs: list[LibraryInfo]) -> WheelInfo:
    name = "drvwrap-1.0+cu130-cp311-cp311-linux_x86_64.whl"
    return WheelInfo(Path(name), parse_wheel_filename(name), ("nvidia-curand>=10,<11; platform_system == 'Linux'",),
                     tuple(libs), tuple(lib.path for lib in libs))


def _lib(path: str, needed: tuple[str, ...], rpath: tuple[str, ...] = ("$ORIGIN/../nvidia/cu13/lib",)) -> LibraryInfo:
    return LibraryInfo(path=path, format="elf", size=1, machine="x86_64", needed=needed, runpath=rpath)


def test_mode_none_fails_a_library_that_links_the_runtime() -> None:
    ok = check_rpath(_exp(), _wheel([_lib("drvwrap/_driver.so", ("libcuda.so.1", "libcurand.so.10"))]))
    assert ok.ok, ok.details
    assert ok.details[0] == ("runtime mode none: none of the 1 libraries links libcudart (the static runtime is "
                             "judged by cuda-host-code)")
    assert "RPATH entries reach the directories of the declared nvidia-curand" in ok.details
    bad = check_rpath(_exp(), _wheel([_lib("drvwrap/_driver.so", ("libcuda.so.1",)),
                                      _lib("drvwrap/_kernels.so", ("libcudart.so.13",))]))
    assert not bad.ok
    assert bad.details == [
        'drvwrap/_kernels.so: links libcudart.so.13, but [cuda.runtime.13] mode is "none" (the wheel links no CUDA '
        "runtime): nothing declares the runtime for it to load; fix: set mode = \"dynamic\" (the runtime package is "
        "then declared and reached), or build it without cudart (setup.py: drop 'cudart' from libraries; nvcc: "
        "-cudart none)"]


@pytest.mark.skipif(not HAS_CC, reason="needs cc")
def test_mode_none_fails_a_library_that_carries_the_static_runtime(tmp_path: Path) -> None:
    """Real libraries, read as the check reads them: one calling the driver API only, one that
    carries the runtime's entry points (what linking cudart statically leaves)."""
    driver_only = tmp_path / "_driver.so"
    static = tmp_path / "_kernels.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(driver_only), "-x", "c", "-"],
                   input="int cuInit(unsigned int);\nint start(void) { return cuInit(0); }\n", text=True, check=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(static), "-x", "c", "-"],
                   input="int cudaGetDeviceCount(int *n) { *n = 0; return 0; }\n", text=True, check=True)
    libs = [_lib("drvwrap/_driver.so", ()), _lib("drvwrap/_kernels.so", ())]
    read = {"drvwrap/_driver.so": library_symbols(driver_only, scan=True),
            "drvwrap/_kernels.so": library_symbols(static, scan=True)}
    inputs = LoadInputs({k: v for k, v in read.items() if v is not None})
    got = check_host_code(_exp(), _wheel(libs), inputs)
    assert got is not None and not got.ok
    assert got.details == [
        "drvwrap/_kernels.so carries the CUDA runtime's entry points (cudaGetDeviceCount): cudart is linked in "
        'statically, but [cuda.runtime.13] mode is "none" (the wheel links no CUDA runtime); fix: set mode = '
        '"static", or build it without the runtime (nvcc -cudart none, CMake CUDA_RUNTIME_LIBRARY None)']
    got = check_host_code(_exp(), _wheel(libs[:1]), LoadInputs({"drvwrap/_driver.so": read["drvwrap/_driver.so"]}))  # type: ignore[dict-item]
    assert got is not None and got.ok
    assert got.details[0] == ("runtime mode none: none of the 1 libraries read carries the CUDA runtime's entry "
                              "points (no cudart linked in)")

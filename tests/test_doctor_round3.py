"""Issue 28 (points 4-7): doctor judges what the row's driver runs, the CUDA components a CMake
project links, its own output; init's "only" switches and CPU rows.

- A setup.py torch extension beside an unused CMakeLists.txt (torch_spline_conv's shape: 3.0, which
  CMake 4 refuses) gets no CMake findings; the same setup.py that names CMake gets them.
- CUDA::X targets are read from CMakeLists.txt, the directories it adds and the files it includes,
  and judged against the real root: the real cmake's FindCUDAToolkit fails where doctor says
  missing, and configures and links where doctor says ok (the driver stub written by the toolkit
  install included).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from buildrows.build.doctor import diagnose
from buildrows.build.doctor_cuda import check_toolkit_components
from buildrows.build.doctor_project import check_network_fetches, cuda_components
from buildrows.errors import Refused
from buildrows.policy.load import load_policy
from buildrows.provision.toolkit import driver_functions, write_driver_stub
from tests.conftest import Result
from tests.cuda_root import assemble, nvidia_tree
from tests.test_provision import mirror  # noqa: F401 (a fixture)

SETUP_PY = '''import os
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

suffices = ["cpu"]
if os.getenv("FORCE_CUDA", "0") == "1":
    suffices = ["cuda", "cpu"]
if os.getenv("FORCE_ONLY_CUDA", "0") == "1":
    suffices = ["cuda"]
if os.getenv("FORCE_ONLY_CPU", "0") == "1":
    suffices = ["cpu"]
setup(name="spliny", ext_modules=[], cmdclass={"build_ext": BuildExtension.with_options(use_ninja=False)})
'''
POLICY = '''[project]
name = "spliny"
driver = "setup.py"
env-switches = ["FORCE_CUDA", "!FORCE_ONLY_CPU"]

[python]
versions = ["3.11"]

[cuda]
trains = ["13.0"]

[platforms.linux-x86_64]
cpu = true
trains = ["13.0"]

[[platforms.linux-x86_64.cuda]]
trains = ["13.0"]
archs = "9.0"
'''


class Probe:
    """cmake 4 on PATH (which refuses a CMakeLists.txt older than 3.5), ninja, nothing installed."""

    def tool(self, name: str, env: Mapping[str, str]) -> tuple[str | None, str | None]:
        return f"/fake/{name}", {"cmake": "cmake version 4.1.2", "ninja": "1.12.1"}.get(name)

    def distributions(self, python: str, names: Sequence[str]) -> dict[str, str | None]:
        return dict.fromkeys(names)

    def interpreter(self, python: str) -> tuple[str | None, str | None]:
        return None, None


def _project(tmp_path: Path, setup_py: str = SETUP_PY) -> Path:
    (tmp_path / "setup.py").write_text(setup_py)
    (tmp_path / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.0)\nproject(spliny)\n")
    (tmp_path / "buildrows.toml").write_text(POLICY)
    return tmp_path


def _cpu_findings(project: Path) -> dict[str, list[str]]:
    pol = load_policy(project / "buildrows.toml")
    row = pol.row("linux-x86_64-cpu-py311")
    assert row is not None
    out: dict[str, list[str]] = {}
    for f in diagnose(pol, row, {"PATH": ""}, project, driver="setup.py", host="linux", probe=Probe()):
        out.setdefault(f.check, []).append(f"{f.status}: {f.seen}")
    return out


def test_setup_py_that_never_runs_cmake_gets_no_cmake_rules(tmp_path: Path) -> None:
    found = _cpu_findings(_project(tmp_path))
    assert "cmake policy" not in found and "generator" not in found and "ninja" not in found
    (cmake,) = found["cmake"]
    assert cmake.startswith("note: not judged: the project's setup.py never runs CMake")
    assert "CMakeLists.txt is for another build" in cmake


def test_setup_py_that_runs_cmake_keeps_the_cmake_rules(tmp_path: Path) -> None:
    found = _cpu_findings(_project(tmp_path, SETUP_PY + 'import subprocess\nsubprocess.check_call(["cmake", "."])\n'))
    (policy,) = found["cmake policy"]
    assert policy.startswith("missing: ") and "requires CMake 3.0" in policy and "CMake 4" not in policy
    assert found["cmake"] == ["ok: 4.1.2 at /fake/cmake"]


def test_an_inverted_switch_shows_the_value_the_build_gets(tmp_path: Path) -> None:
    (cuda,) = _cpu_findings(_project(tmp_path))["cuda"]
    assert cuda.startswith("ok: CPU row: FORCE_CUDA=0, FORCE_ONLY_CPU=1"), cuda


def test_doctor_reports_every_row_and_exits_with_the_worst(tmp_path: Path, cli: Callable[..., Result],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    project = _project(tmp_path)
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvcc: the CUDA row (named first) is refused
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDACXX", raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    r = cli("--config", str(project / "buildrows.toml"), "doctor", "linux-x86_64-cu130-py311", "linux-x86_64-cpu-py311")
    assert r.code == 3, r.out + r.err
    assert "doctor linux-x86_64-cu130-py311" in r.err + r.out and "doctor linux-x86_64-cpu-py311" in r.err + r.out
    assert "[MISSING] nvcc" in r.out and "FORCE_ONLY_CPU=1" in r.out
    assert "linux-x86_64-cpu-py311: everything the row needs is here" in r.out  # reported after the refused one
    assert "1 of 2 rows cannot be built on this machine: linux-x86_64-cu130-py311 (" in r.err


CMAKE = '''cmake_minimum_required(VERSION 3.25)
project(linker LANGUAGES CXX)
find_package(CUDAToolkit REQUIRED)
include(Deps)
add_subdirectory(src)
'''
DEPS = "add_executable(uses_cublas blas.cpp)\ntarget_link_libraries(uses_cublas PRIVATE CUDA::cublas CUDA::cudart)\n"
SRC = "add_executable(uses_driver ../main.cpp)\ntarget_link_libraries(uses_driver PRIVATE CUDA::cuda_driver)\n"
MAIN = '#include <cuda.h>\nint main() { return cuInit(0) == CUDA_SUCCESS ? 0 : 1; }\n'


def _cmake_project(tmp_path: Path) -> Path:
    src = tmp_path / "proj"
    (src / "cmake").mkdir(parents=True)
    (src / "src").mkdir()
    (src / "CMakeLists.txt").write_text(CMAKE.replace("include(Deps)",
                                                      "list(APPEND CMAKE_MODULE_PATH ${CMAKE_CURRENT_SOURCE_DIR}/cmake)\n"
                                                      "include(Deps)"))
    (src / "cmake" / "Deps.cmake").write_text(DEPS)
    (src / "src" / "CMakeLists.txt").write_text(SRC)
    (src / "main.cpp").write_text(MAIN)
    (src / "blas.cpp").write_text("#include <cublas_v2.h>\nint main() { cublasHandle_t h; return cublasCreate(&h) == "
                                  "CUBLAS_STATUS_SUCCESS ? 0 : 1; }\n")
    # Not read by the build: a module nobody includes names a component the toolkit lacks.
    (src / "cmake" / "Unused.cmake").write_text("target_link_libraries(x CUDA::nvml)\n")
    return src


def test_the_components_a_project_links_are_read_where_cmake_reads_them(tmp_path: Path) -> None:
    used = cuda_components(_cmake_project(tmp_path))
    assert used == {"cublas": "cmake/Deps.cmake:2", "cudart": "cmake/Deps.cmake:2",
                    "cuda_driver": "src/CMakeLists.txt:2"}


def _configure(src: Path, root: Path, build: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["nice", "cmake", "-S", str(src), "-B", str(build), "-G", "Ninja",
                           f"-DCUDAToolkit_ROOT={root}"], capture_output=True, text=True, check=False,
                          env={**os.environ, "CUDA_PATH": "", "CUDACXX": ""})


@pytest.mark.skipif(nvidia_tree() is None or shutil.which("cc") is None,
                    reason="needs NVIDIA's PyPI CUDA 13 tree (cuBLAS included) and a C compiler")
def test_doctor_says_missing_where_cmake_fails_and_ok_where_it_links(tmp_path: Path) -> None:
    tree = nvidia_tree()
    assert tree is not None
    (tmp_path / "p").mkdir()
    pol = load_policy(_project(tmp_path / "p") / "buildrows.toml")
    row = pol.row("linux-x86_64-cu130-py311")
    assert row is not None
    src = _cmake_project(tmp_path)
    used = cuda_components(src)

    # A root with nvcc and the runtime only (the machine's toolkit in the issue): cuBLAS is missing.
    bare = tmp_path / "bare"
    (bare / "include").mkdir(parents=True)
    (bare / "lib64").mkdir()
    for h in ("cuda.h", "cuda_runtime.h"):
        (bare / "include" / h).symlink_to(tree / "include" / h)
    (bare / "lib64" / "libcudart.so").symlink_to(sorted(tree.glob("lib/libcudart.so.*"))[0])
    found = {f.check: f for f in check_toolkit_components(row, str(bare), used)}
    assert found["CUDA::cublas"].status == "missing"
    assert "lacks include/cublas_v2.h, lib64/libcublas.so" in found["CUDA::cublas"].seen
    assert "(cmake/Deps.cmake:2)" in found["CUDA::cublas"].seen
    assert "`buildrows toolkit install 13.0 --libraries`" in found["CUDA::cublas"].fix
    assert "lib64/stubs/libcuda.so" in found["CUDA::cuda_driver"].seen
    assert "driver API's link stub" in found["CUDA::cuda_driver"].fix
    assert found["CUDA components"].seen.startswith("CUDA::cudart in ")
    if not any(Path(d, "libcuda.so").exists() for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")):
        # The libraries there, no stub yet (what `toolkit install --libraries` assembled before):
        # doctor says the driver is missing, and CMake stops at it.
        full = assemble(tree, tmp_path / "full")
        for so in sorted((full / "lib64").glob("lib*.so.*")):  # the development names, as the toolkit install links
            dev = full / "lib64" / (so.name.split(".so.", 1)[0] + ".so")
            if not dev.exists() and not dev.is_symlink():
                dev.symlink_to(so.name)
        found = {f.check: f for f in check_toolkit_components(row, str(full), used)}
        assert [c for c, f in found.items() if f.failed] == ["CUDA::cuda_driver"]
        failed = _configure(src, full, tmp_path / "b1")
        assert failed.returncode != 0 and "CUDA::cuda_driver" in failed.stdout + failed.stderr
        # With the stub written, doctor says ok, and CMake configures and links both programs.
        stub = write_driver_stub(full, os.environ)
        assert stub == full / "lib64" / "stubs" / "libcuda.so"
        found = {f.check: f for f in check_toolkit_components(row, str(full), used)}
        assert not [f for f in found.values() if f.failed]
        assert found["CUDA components"].seen.startswith("CUDA::cublas, CUDA::cuda_driver, CUDA::cudart in ")
        ok = _configure(src, full, tmp_path / "b2")
        assert ok.returncode == 0, ok.stdout + ok.stderr
        built = subprocess.run(["nice", "cmake", "--build", str(tmp_path / "b2")], capture_output=True, text=True,
                               check=False)
        assert built.returncode == 0, built.stdout + built.stderr
        needed = subprocess.run(["readelf", "-d", str(tmp_path / "b2" / "src" / "uses_driver")], capture_output=True,
                                text=True, check=True).stdout
        assert "[libcuda.so.1]" in needed  # the stub's soname: the driver's library at run time


def test_driver_stub_names_every_function_cuda_h_declares(tmp_path: Path) -> None:
    header = "typedef int CUresult;\n#define CUDAAPI\n#define cuCtxCreate cuCtxCreate_v4\n" \
             "CUresult CUDAAPI cuInit(unsigned int f);\nCUresult CUDAAPI cuCtxCreate(void **c);\n"
    assert driver_functions(header, ["CUresult cuInit(unsigned int f);\nCUresult cuCtxCreate_v4(void **c);\n"]) == \
        ["cuCtxCreate", "cuCtxCreate_v4", "cuInit"]
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "cuda.h").write_text("int not_the_driver(void);\n")
    with pytest.raises(Refused, match=r"declares no cuInit: not the driver API's header, no stub written"):
        write_driver_stub(tmp_path, os.environ)
    (tmp_path / "include" / "cuda.h").unlink()
    with pytest.raises(Refused, match=r"has no include/cuda.h, so no driver stub"):
        write_driver_stub(tmp_path, os.environ)


def test_init_never_lists_an_only_cuda_switch_and_keeps_the_cpu_rows(tmp_path: Path, cli: Callable[..., Result],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "setup.py").write_text(SETUP_PY)
    monkeypatch.chdir(tmp_path)
    r = cli("init", "--cuda", "13.0", "--python", "3.11")
    assert r.code == 0, r.out + r.err
    text = (tmp_path / "buildrows.toml").read_text()
    assert 'env-switches = ["FORCE_CUDA", "!FORCE_ONLY_CPU"]' in text and "FORCE_ONLY_CUDA" not in text
    pol = load_policy(tmp_path / "buildrows.toml")
    assert [row.name for row in pol.rows] == ["linux-x86_64-cpu-py311", "linux-x86_64-cu130-py311"]
    assert dict(pol.row("linux-x86_64-cu130-py311").switches) == {"FORCE_CUDA": "1", "FORCE_ONLY_CPU": "0"}  # type: ignore[union-attr]
    assert "CUDA 13.0, CPU" in r.err + r.out


def test_init_cuda_for_a_project_with_no_way_to_turn_cuda_off_has_no_cpu_rows(
        tmp_path: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.25)\nproject(k LANGUAGES CUDA)\n")
    monkeypatch.chdir(tmp_path)
    r = cli("init", "--cuda", "13.0", "--python", "3.11")
    assert r.code == 0, r.out + r.err
    assert [row.name for row in load_policy(tmp_path / "buildrows.toml").rows] == ["linux-x86_64-cu130-py311"]


def test_a_cmake_that_fetches_from_the_network_gets_a_note(tmp_path: Path) -> None:
    src = _cmake_project(tmp_path)
    assert check_network_fetches(src) is None  # Unused.cmake is not read by the build
    (src / "cmake" / "Unused.cmake").write_text("file(DOWNLOAD https://example.invalid/CPM.cmake x)\n")
    assert check_network_fetches(src) is None
    (src / "cmake" / "Deps.cmake").write_text(DEPS + "include(Unused)\nCPMAddPackage(NAME CCCL)\n")
    note = check_network_fetches(src)
    assert note is not None and note.status == "note"
    assert note.seen == ("the project's CMake fetches from the network while it configures (cmake/Deps.cmake:4 "
                         "CPMAddPackage; cmake/Unused.cmake:1 file(DOWNLOAD)): a builder without network access fails there")


def _with_libraries(cudart_extra: list[tuple[str, bytes | None, str | None, bytes]]) -> dict[str, list[
        tuple[str, bytes | None, str | None, bytes]]]:
    from tests.test_provision import MINIMAL

    comps = {k: list(v) for k, v in MINIMAL.items()}
    comps["cuda_cudart"] += [("include/cuda.h", b"typedef int CUresult;\n#define cuCtxCreate cuCtxCreate_v4\n"
                              b"CUresult cuInit(unsigned int f);\nCUresult cuCtxCreate(void **c);\n", None, b"file"),
                             *cudart_extra]
    for lib in ("libcublas", "libcusparse", "libcusolver", "libcurand", "libcufft"):
        comps[lib] = [(f"include/{lib.removeprefix('lib')}.h", b"//", None, b"file")]
    return comps


@pytest.mark.skipif(shutil.which("cc") is None or shutil.which("nm") is None, reason="needs cc and nm")
def test_toolkit_install_with_libraries_writes_the_driver_stub_unless_one_came(
        tmp_path: Path, mirror: tuple[str, Path]) -> None:  # noqa: F811 (the fixture)
    from buildrows.policy.trains import Train
    from buildrows.provision import toolkit
    from tests.test_provision import _publish

    url, root = mirror
    _publish(root, "12.6.3", _with_libraries([]))
    env = {"BUILDROWS_CACHE": str(tmp_path / "cache"), "PATH": os.environ.get("PATH", "")}
    tk = toolkit.install(Train(12, 6), "linux-x86_64", env, mirror=url, libraries=True)
    stub = tk.root / "lib64" / "stubs" / "libcuda.so"
    names = subprocess.run(["nm", "-D", "--defined-only", str(stub)], capture_output=True, text=True, check=True).stdout
    assert {ln.split()[-1] for ln in names.splitlines()} >= {"cuInit", "cuCtxCreate", "cuCtxCreate_v4"}
    assert "libcuda.so.1" in subprocess.run(["readelf", "-d", str(stub)], capture_output=True, text=True,
                                            check=True).stdout
    # NVIDIA's archive ships its own stub: it is kept, not replaced.
    _publish(root, "12.6.3", _with_libraries([("lib/stubs/libcuda.so", b"nvidia's stub", None, b"file")]))
    tk = toolkit.install(Train(12, 6), "linux-x86_64", env, mirror=url, libraries=True, force=True)
    assert (tk.root / "lib64" / "stubs" / "libcuda.so").read_bytes() == b"nvidia's stub"
    # Without --libraries, none is written.
    _publish(root, "12.6.3", _with_libraries([]))
    tk = toolkit.install(Train(12, 6), "linux-x86_64", env, mirror=url, force=True)
    assert not tk.libraries and not (tk.root / "lib64" / "stubs" / "libcuda.so").exists()


def test_a_variable_subdirectory_and_a_static_or_shared_choice(tmp_path: Path) -> None:
    """ggml's shape: backends added by a function (`add_subdirectory(${backend_dir})`), and
    CUDA::cublas or CUDA::cublas_static chosen by GGML_STATIC."""
    src = tmp_path / "ggml"
    (src / "src" / "ggml-cuda").mkdir(parents=True)
    (src / "CMakeLists.txt").write_text("add_subdirectory(src)\n")
    (src / "src" / "CMakeLists.txt").write_text("function(add_backend name)\n  set(backend_dir ggml-${name})\n"
                                                "  add_subdirectory(${backend_dir})\nendfunction()\nadd_backend(cuda)\n")
    (src / "src" / "ggml-cuda" / "CMakeLists.txt").write_text(
        "if (GGML_STATIC)\n  target_link_libraries(g PRIVATE CUDA::cublas_static)\nelse()\n"
        "  target_link_libraries(g PRIVATE CUDA::cublas)\nendif()\n")
    used = cuda_components(src)
    assert used == {"cublas_static": "src/ggml-cuda/CMakeLists.txt:2", "cublas": "src/ggml-cuda/CMakeLists.txt:4"}
    pol = load_policy(_project(tmp_path) / "buildrows.toml")
    row = pol.row("linux-x86_64-cu130-py311")
    assert row is not None
    root = tmp_path / "root"
    (root / "include").mkdir(parents=True)
    (root / "lib64").mkdir()
    (root / "include" / "cublas_v2.h").write_text("//")
    found = {f.check: f for f in check_toolkit_components(row, str(root), used)}
    assert sorted(c for c, f in found.items() if f.failed) == ["CUDA::cublas", "CUDA::cublas_static"]
    (root / "lib64" / "libcublas.so").write_text("")  # the shared one (PyPI ships no static cuBLAS)
    (found,) = check_toolkit_components(row, str(root), used)
    assert found.status == "ok" and found.seen.startswith("CUDA::cublas, CUDA::cublas_static (or CUDA::cublas) in ")


def test_an_interpreter_that_links_an_absolute_rpath_gets_a_note(tmp_path: Path) -> None:
    from buildrows.build.doctor_link import check_link_rpath

    pol = load_policy(_project(tmp_path) / "buildrows.toml")
    pyenv = "gcc -shared -L/root/.pyenv/versions/3.11.7/lib -Wl,-rpath,/root/.pyenv/versions/3.11.7/lib"
    note = check_link_rpath(pol, pyenv)
    assert note is not None and note.status == "note"
    assert "absolute RUNPATH /root/.pyenv/versions/3.11.7/lib, which the check's runtime-reached judge fails" in note.seen
    assert check_link_rpath(pol, "gcc -shared -Wl,-rpath,$ORIGIN") is None and check_link_rpath(pol, "gcc -shared") is None
    (tmp_path / "buildrows.toml").write_text(POLICY + '\n[[check.rpath-exceptions]]\nentry = "/root/.pyenv/*/lib"\n'
                                             'reason = "the builder interpreter"\n')
    assert check_link_rpath(load_policy(tmp_path / "buildrows.toml"), pyenv) is None

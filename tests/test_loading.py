"""Would each library load (issue 28 point 2), a CUDA library without device code (issue 27 point 4),
libraries loaded only by dlopen (issue 27 point 7): real shared libraries built with gcc in the test
(one each, a fraction of a second), put in wheels and checked through the CLI.

The real torch-mismatch replay (an extension built against torch 2.14.1, loaded against 2.13.0's
libraries) is opt-in: BUILDROWS_REAL_WHEELS=1 (test_torch_mismatch_names_the_symbol)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.binaries.symbols import FileSource, library_symbols, read_dynamic_symbols
from tests.conftest import Result

pytestmark = pytest.mark.skipif(sys.platform != "linux" or shutil.which("gcc") is None, reason="needs gcc on Linux")

# PyPI's nvidia-cuda-runtime (13) ships the static runtime; this venv may import it from a base venv (.pth).
CUDART_STATIC = next((p for d in sys.path if d for p in Path(d).glob("nvidia/cu13/lib/libcudart_static.a")), None)

SOURCES = {
    "dep.c": "int dep_present(int x) { return x + 1; }\n",
    "use.c": "int dep_present(int); int dep_missing(int);\nint use_both(int x) { return dep_present(x) + dep_missing(x); }\n",
    "good.c": "int dep_present(int);\nint use_one(int x) { return dep_present(x); }\n",
    "far.c": "int far_away(int);\nint use_far(int x) { return far_away(x); }\n",
    "fardef.c": "int far_away(int x) { return x; }\n",
    "vdep.c": "int dep_v(int x) { return x; }\nint dep_v2(int x) { return x; }\n",
    "vdep2.c": "int dep_v(int x) { return x; }\nint dep_v2(int x) { return -x; }\n",
    "vuse.c": "int dep_v2(int);\nint use_v2(int x) { return dep_v2(x); }\n",
    "dl.c": ('#include <dlfcn.h>\nvoid *open_blas(void) { return dlopen("libcublas.so.12", RTLD_LAZY); }\n'),
    # gcc -O3 -ffast-math vectorizes exp into glibc's libmvec (_ZGVbN2v_exp@GLIBC_2.22), as a pyenv Python's -O3
    # did for torchsort's CPU extension: part of glibc, present wherever glibc is
    "vexp.c": "#include <math.h>\nvoid vexp(double *restrict a, int n) { for (int i = 0; i < n; ++i) a[i] = exp(a[i]); }\n",
    "host.c": ("#include <cuda_runtime_api.h>\n"
               "int count_gpus(void) { int n = 0; return cudaGetDeviceCount(&n) == cudaSuccess ? n : -1; }\n"),
}


def _gcc(d: Path, *args: str) -> None:
    subprocess.run(["gcc", "-shared", "-fPIC", *args], cwd=d, check=True, capture_output=True)


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("libs")
    for name, text in SOURCES.items():
        (d / name).write_text(text, encoding="utf-8")
    _gcc(d, "-o", "libdep.so", "-Wl,-soname,libdep.so", "dep.c")
    _gcc(d, "-o", "libuse.so", "use.c", "-L.", "-ldep", "-Wl,-rpath,$ORIGIN")  # dep_missing: defined nowhere
    _gcc(d, "-o", "libgood.so", "good.c", "-L.", "-ldep", "-Wl,-rpath,$ORIGIN")
    _gcc(d, "-o", "libnorpath.so", "good.c", "-L.", "-ldep")  # NEEDS libdep.so, no RPATH reaches it
    _gcc(d, "-o", "libfar.so.3", "-Wl,-soname,libfar.so.3", "fardef.c")  # linked against, never shipped
    _gcc(d, "-o", "libneedsfar.so", "far.c", "-L.", "-l:libfar.so.3", "-Wl,-rpath,$ORIGIN")
    # Symbol versions: built against a libvdep that defines dep_v2@VDEP_2, shipped with one that has only VDEP_1.
    # (the old one has dep_v2 too, under VDEP_1: a versioned reference binds to its own version only)
    (d / "v1.map").write_text("VDEP_1 { global: dep_v; dep_v2; local: *; };\n", encoding="utf-8")
    (d / "v2.map").write_text("VDEP_1 { global: dep_v; local: *; };\nVDEP_2 { global: dep_v2; } VDEP_1;\n",
                              encoding="utf-8")
    (d / "new").mkdir()
    _gcc(d, "-o", "new/libvdep.so", "-Wl,-soname,libvdep.so", "-Wl,--version-script=v2.map", "vdep2.c")
    _gcc(d, "-o", "libvdep.so", "-Wl,-soname,libvdep.so", "-Wl,--version-script=v1.map", "vdep.c")
    _gcc(d, "-o", "libvuse.so", "vuse.c", "-Lnew", "-lvdep", "-Wl,-rpath,$ORIGIN")
    _gcc(d, "-o", "libdl.so", "dl.c", "-ldl")
    _gcc(d, "-O3", "-ffast-math", "-o", "libvexp.so", "vexp.c", "-lm")
    _gcc(d, "-nostdlib", "-o", "libnodl.so", "dl.c")  # dlopen unversioned, no NEEDED at all (as cuFile's)
    if CUDART_STATIC is not None:
        include = CUDART_STATIC.parent.parent / "include"
        _gcc(d, "-s", "-o", "libhost.so", f"-I{include}", "host.c", str(CUDART_STATIC), "-ldl", "-lpthread", "-lrt")
    return d


def _wheel(d: Path, out: Path, name: str, members: dict[str, str], requires: tuple[str, ...] = ()) -> Path:
    path = out / name
    dist = "-".join(name.split("-")[:2])
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, lib in members.items():
            zf.write(d / lib, member)
        project, version = name.split("-")[:2]  # METADATA names the file's project and version, as pip requires
        zf.writestr(f"{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n"
                    + "".join(f"Requires-Dist: {r}\n" for r in requires))
    return path


CPU = "pkg-1.0-cp312-cp312-linux_x86_64.whl"
CU130 = "pkg-1.0+cu130-cp312-cp312-linux_x86_64.whl"


def _check(cli: Callable[..., Result], wheel: Path, *args: str) -> tuple[int, str]:
    r = cli("check", str(wheel), *args)
    return r.code, r.out + r.err


@pytest.mark.parametrize(("members", "ok", "message"), [
    # a library whose NEEDED library lacks a symbol it uses: import fails with "undefined symbol"
    ({"pkg/libdep.so": "libdep.so", "pkg/libuse.so": "libuse.so"}, False,
     "pkg/libuse.so: undefined symbol dep_missing: not defined by the libraries it NEEDS (pkg/libdep.so), so `import` "
     "fails with 'undefined symbol: dep_missing'"),
    # the good pair loads
    ({"pkg/libdep.so": "libdep.so", "pkg/libgood.so": "libgood.so"}, True,
     "2 libraries load: every NEEDED library resolves (in the wheel: 1) and every undefined symbol (1) is defined"),
    # shipped in another directory, and no RPATH entry reaches it
    ({"pkg/libs/libdep.so": "libdep.so", "pkg/libnorpath.so": "libnorpath.so"}, False,
     "pkg/libnorpath.so: NEEDS libdep.so, which the wheel ships as pkg/libs/libdep.so, but no RPATH/RUNPATH entry of "
     "it reaches pkg/libs/ (has: none)"),
    # a sibling in its own directory, reached by no RPATH: it loads once the package has loaded it by path
    # (torchaudio's libtorchaudio.so): named, not failed
    ({"pkg/libdep.so": "libdep.so", "pkg/libnorpath.so": "libnorpath.so"}, True,
     "note: pkg/libnorpath.so NEEDS libdep.so, which the wheel ships as pkg/libdep.so in the same directory but no "
     "RPATH/RUNPATH entry reaches: it loads only once the package has loaded libdep.so by path"),
    # glibc's vector math library: the system provides it
    ({"pkg/libvexp.so": "libvexp.so"}, True,
     "1 library loads: every NEEDED library resolves"),
    # a library nobody provides
    ({"pkg/libneedsfar.so": "libneedsfar.so"}, False,
     "pkg/libneedsfar.so: NEEDS libfar.so.3, which neither the wheel, the torch it declares, the NVIDIA packages it "
     "declares nor the system's base libraries (the manylinux allowlist) provide"),
    # a versioned symbol the shipped library lacks (built against a newer one)
    ({"pkg/libvdep.so": "libvdep.so", "pkg/libvuse.so": "libvuse.so"}, False,
     "pkg/libvuse.so: undefined symbol dep_v2@VDEP_2: not defined by pkg/libvdep.so"),
])
def test_libraries_load(libs: Path, tmp_path: Path, cli: Callable[..., Result], members: dict[str, str], ok: bool,
                        message: str) -> None:
    code, text = _check(cli, _wheel(libs, tmp_path, CPU, members))
    assert ("[PASS] libraries-load" if ok else "[FAIL] libraries-load") in text, text
    assert message in text, text
    assert code == (0 if ok else 5), text


def test_a_torch_library_without_a_torch_requirement_fails(libs: Path, tmp_path: Path, cli: Callable[..., Result]) -> None:
    """A library NEEDING libc10.so in a wheel that does not require torch."""
    d = tmp_path / "t"
    d.mkdir()
    (d / "c.c").write_text("int c10_thing(int); int omp_get_max_threads(void);\n"
                           "int f(int x) { return c10_thing(x) + omp_get_max_threads(); }\n", encoding="utf-8")
    (d / "s.c").write_text("int c10_thing(int x) { return x; }\n", encoding="utf-8")
    _gcc(d, "-o", "libc10.so", "-Wl,-soname,libc10.so", "s.c")
    _gcc(d, "-o", "ext.so", "c.c", "-L.", "-lc10", "-fopenmp")  # libgomp.so.1: torch's wheels bring it
    code, text = _check(cli, _wheel(d, tmp_path, CPU, {"pkg/ext.so": "ext.so"}))
    assert "pkg/ext.so: NEEDS libc10.so, a library of torch, but the wheel does not require torch" in text, text
    assert code == 5
    code, text = _check(cli, _wheel(d, tmp_path, "pkg2-1.0-cp312-cp312-linux_x86_64.whl", {"pkg/ext.so": "ext.so"},
                                    ("torch==2.14.*",)))
    assert "[PASS] libraries-load" in text, text
    assert "not verified: 2 symbols that torch's libraries (libc10.so, libgomp.so.1) would define were not looked " \
           "up, since no torch was read; give the torch with --torch PATH" in text, text
    # --torch PATH: a torch whose libc10.so lacks the symbol
    fake = tmp_path / "site" / "torch"
    (fake / "lib").mkdir(parents=True)
    (fake / "version.py").write_text("__version__ = '2.13.0+cpu'\n", encoding="utf-8")
    (d / "s2.c").write_text("int other_thing(int x) { return x; }\n", encoding="utf-8")
    _gcc(d, "-o", str(fake / "lib" / "libc10.so"), "-Wl,-soname,libc10.so", "s2.c")
    gomp = subprocess.run(["gcc", "-print-file-name=libgomp.so.1"], capture_output=True, text=True, check=True)
    shutil.copy(gomp.stdout.strip(), fake / "lib" / "libgomp.so.1")  # as torch's wheels bundle it
    code, text = _check(cli, tmp_path / "pkg2-1.0-cp312-cp312-linux_x86_64.whl", "--torch", str(tmp_path / "site"))
    assert "pkg/ext.so: undefined symbol c10_thing: not defined by torch 2.13.0+cpu" in text, text
    assert "the library was built against another torch; fix: rebuild it against torch 2.13.0" in text, text
    assert code == 5
    code, text = _check(cli, tmp_path / "pkg2-1.0-cp312-cp312-linux_x86_64.whl", "--torch", str(tmp_path / "nowhere"))
    assert code == 2 and "--torch " in text and "no torch here" in text, text


POLICY = """
[project]
name = "pkg"
driver = "setup.py"
[python]
versions = ["3.12"]
[cuda]
trains = ["13.0"]
[cuda.runtime.13]
mode = "static"
[platforms.linux-x86_64]
trains = ["13.0"]
cpu = true
[[platforms.linux-x86_64.cuda]]
trains = ["13.0"]
archs = "8.0"
"""


def test_a_library_the_system_provides_is_stated(libs: Path, tmp_path: Path, cli: Callable[..., Result]) -> None:
    """A NEEDED library no wheel provides (torchaudio's libsox.so, an optional feature): a rule's
    `system` names it, with its reason, and the check names it instead of failing; the rule's globs
    and files must match; a path in `system` is refused at load."""
    wheel = _wheel(libs, tmp_path, CPU, {"pkg/libneedsfar.so": "libneedsfar.so"})
    policy = tmp_path / "buildrows.toml"
    policy.write_text(POLICY + '[[check.libraries]]\nfiles = ["pkg/libneedsfar.so"]\nsystem = ["libfar.so.*"]\n'
                      'reason = "the far codec, loaded only where it is installed"\n', encoding="utf-8")
    code, text = _check(cli, wheel, "--config", str(policy))
    assert code == 0, text
    assert ("note: pkg/libneedsfar.so NEEDS libfar.so.3: the system's, as stated [check.libraries[0] (buildrows.toml:"
            in text and "]: the far codec, loaded only where it is installed" in text), text
    policy.write_text(POLICY + '[[check.libraries]]\nfiles = ["pkg/other.so"]\nsystem = ["libfar.so.*"]\n'
                      'reason = "x"\n', encoding="utf-8")
    code, text = _check(cli, wheel, "--config", str(policy))
    assert code == 5 and "pkg/libneedsfar.so: NEEDS libfar.so.3, which neither the wheel" in text, text
    policy.write_text(POLICY + '[[check.libraries]]\nfiles = ["pkg/*.so"]\nsystem = ["/usr/lib/libfar.so.3"]\n'
                      'reason = "x"\n', encoding="utf-8")
    code, text = _check(cli, wheel, "--config", str(policy))
    assert code == 2 and "[check.libraries[0].system]: system lists library file names (globs)" in text, text


def test_libdl_and_libpthread_functions_come_from_libc(libs: Path, tmp_path: Path, cli: Callable[..., Result]) -> None:
    """dlopen and friends without NEEDED libdl.so.2 (cuFile, CuPy's nvtx module): glibc 2.34 holds them in
    libc.so.6, which every Python process has loaded."""
    code, text = _check(cli, _wheel(libs, tmp_path, CPU, {"pkg/libnodl.so": "libnodl.so"}))
    assert code == 0 and "[PASS] libraries-load" in text and "every undefined symbol (1)" in text, text


@pytest.mark.skipif(CUDART_STATIC is None, reason="needs libcudart_static.a (PyPI's nvidia-cuda-runtime)")
def test_a_cuda_library_without_device_code(libs: Path, tmp_path: Path, cli: Callable[..., Result]) -> None:
    """cudart linked in statically, no kernels: a CPU row fails; a CUDA row states it per library."""
    code, text = _check(cli, _wheel(libs, tmp_path, CPU, {"pkg/libhost.so": "libhost.so"}))
    assert ("pkg/libhost.so: a CUDA library without device code (carries the CUDA runtime's entry points "
            "(__cudaRegisterFatBinary, cudaGetDeviceCount, cudaLaunchKernel): cudart linked in statically) in a CPU row: "
            "a CPU row must not ship code that needs a GPU runtime") in text, text
    assert code == 5
    policy = tmp_path / "buildrows.toml"
    policy.write_text(POLICY, encoding="utf-8")
    wheel = _wheel(libs, tmp_path, CU130, {"pkg/libhost.so": "libhost.so"})
    code, text = _check(cli, wheel, "--config", str(policy))
    assert "none of the 1 shared libraries carries device code: pkg/libhost.so" in text, text
    assert "state it: [[check.libraries]] files = [...], host-only = true, reason" in text, text
    assert code == 5
    policy.write_text(POLICY + '[[check.libraries]]\nfiles = ["pkg/libhost.so"]\nhost-only = true\n'
                      'reason = "queries the GPUs; its kernels are in another package"\n', encoding="utf-8")
    code, text = _check(cli, wheel, "--config", str(policy))
    assert "host-only, as stated: pkg/libhost.so: queries the GPUs; its kernels are in another package" in text, text
    assert "[PASS] cuda-host-code" in text and code == 0, text
    # the promise is held: a library stated host-only that is no CUDA code fails
    policy.write_text(POLICY + '[[check.libraries]]\nfiles = ["pkg/*.so"]\nhost-only = true\nreason = "x"\n',
                      encoding="utf-8")
    wheel = _wheel(libs, tmp_path, "pkg-2.0+cu130-cp312-cp312-linux_x86_64.whl",
                   {"pkg/libhost.so": "libhost.so", "pkg/libdep.so": "libdep.so"})
    code, text = _check(cli, wheel, "--config", str(policy))
    assert ("pkg/libdep.so: stated host-only [check.libraries[0] (" in text and "], but it neither links the CUDA "
            "runtime nor carries its entry points: it is not CUDA code" in text), text
    assert code == 5


def test_a_library_loaded_by_dlopen(libs: Path, tmp_path: Path, cli: Callable[..., Result]) -> None:
    """libdl.so dlopens libcublas.so.12 by name: unstated, a warning; stated, held to the train and the packages."""
    policy = tmp_path / "buildrows.toml"
    base = POLICY
    host = '[[check.libraries]]\nfiles = ["pkg/libhost.so"]\nhost-only = true\nreason = "the runtime, no kernels"\n'
    members = {"pkg/libdl.so": "libdl.so"}
    if CUDART_STATIC is not None:
        members["pkg/libhost.so"] = "libhost.so"
    policy.write_text(base + host, encoding="utf-8")
    wheel = _wheel(libs, tmp_path, CU130, members)
    code, text = _check(cli, wheel, "--config", str(policy))
    assert ("warning: pkg/libdl.so names libcublas.so.12 but neither NEEDS nor states them: if it dlopens them, state "
            "it ([[check.libraries]] files = [\"pkg/libdl.so\"], dlopens = [...], reason)") in text, text
    stated = '[[check.libraries]]\nfiles = ["pkg/libdl.so"]\ndlopens = ["libcublas.so.12"]\nreason = "cuBLAS on demand"\n'
    policy.write_text(base + host + stated, encoding="utf-8")
    code, text = _check(cli, wheel, "--config", str(policy))
    assert ("pkg/libdl.so: dlopens libcublas.so.12 [check.libraries[1] (" in text and ")] (cuBLAS of CUDA 12), but the "
            "row is CUDA 13.0, which ships libcublas.so.13" in text), text
    assert ("pkg/libdl.so dlopens libcublas.so.12 [check.libraries[1] (" in text and ")], which no NVIDIA package the "
            "wheel declares carries: the dlopen fails where it is not installed by hand; fix: only nvidia-cublas-cu12 "
            "carries it, a package of another CUDA major than the row's: load the soname of CUDA 13" in text), text
    assert code == 5
    # the CUDA 13 soname, its package declared: held
    (tmp_path / "dl13").mkdir()
    (tmp_path / "dl13" / "dl.c").write_text(SOURCES["dl.c"].replace(".so.12", ".so.13"), encoding="utf-8")
    _gcc(tmp_path / "dl13", "-o", "libdl.so", "dl.c", "-ldl")
    members["pkg/libdl.so"] = str(tmp_path / "dl13" / "libdl.so")
    wheel = _wheel(libs, tmp_path, "pkg-3.0+cu130-cp312-cp312-linux_x86_64.whl", members, ("nvidia-cublas==13.*",))
    policy.write_text(base.replace('mode = "static"', 'mode = "preload"\nreason = "loads cuBLAS itself"')
                      + host + stated.replace(".so.12", ".so.13"), encoding="utf-8")
    code, text = _check(cli, wheel, "--config", str(policy))
    assert "held: pkg/libdl.so dlopens libcublas.so.13 (carried by nvidia-cublas): cuBLAS on demand" in text, text
    assert "[PASS] dlopen-libraries" in text, text


def test_symbol_reader_reads_only_the_dynamic_sections(libs: Path) -> None:
    """What the loader needs, read through a source: soname, NEEDED, versioned imports, exports."""
    got = library_symbols(libs / "libvuse.so")
    assert got is not None and "libvdep.so" in got.needed
    assert [(i.name, i.version, i.file) for i in got.imports if i.name == "dep_v2"] == [("dep_v2", "VDEP_2", "libvdep.so")]
    new = read_dynamic_symbols(FileSource(libs / "new" / "libvdep.so"))
    assert new is not None and new.soname == "libvdep.so"
    assert new.defines("dep_v2", "VDEP_2") and new.defines("dep_v", None) and not new.defines("nope", None)
    old = library_symbols(libs / "libvdep.so")
    assert old is not None and old.defines("dep_v2", "VDEP_1") and not old.defines("dep_v2", "VDEP_2")
    assert read_dynamic_symbols(FileSource(libs / "dep.c")) is None  # not ELF


REAL = os.environ.get("BUILDROWS_REAL_WHEELS") == "1" or os.environ.get("BUILDROWS_REAL_PROJECTS") == "1"


@pytest.mark.skipif(not REAL, reason="opt-in: BUILDROWS_REAL_WHEELS=1 (builds a torch extension, reads torch 2.13.0's wheel)")
def test_torch_mismatch_names_the_symbol(tmp_path: Path, cli: Callable[..., Result]) -> None:
    """A real extension built against torch 2.14.1 (this venv's), using an op 2.13 lacks (at::linalg_polar):
    against its own torch it loads; against torch 2.13.0's wheel the check fails naming the symbol."""
    import torch

    assert torch.__version__.split("+")[0] == "2.14.1", torch.__version__
    wheel_213 = _torch_213(tmp_path)
    src = tmp_path / "ext"
    (src / "tinyext").mkdir(parents=True)
    (src / "tinyext" / "__init__.py").write_text("", encoding="utf-8")
    (src / "tinyext" / "op.cpp").write_text(
        "#include <torch/extension.h>\n#include <tuple>\n"
        "torch::Tensor polar_unitary(const torch::Tensor& a) { return std::get<0>(at::linalg_polar(a)); }\n"
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"polar_unitary\", &polar_unitary); }\n", encoding="utf-8")
    (src / "setup.py").write_text(
        "from setuptools import setup\nfrom torch.utils.cpp_extension import BuildExtension, CppExtension\n"
        "setup(name='tinyext', version='0.1.0', packages=['tinyext'], install_requires=['torch==2.14.*'],\n"
        "      ext_modules=[CppExtension('tinyext._C', ['tinyext/op.cpp'])],\n"
        "      cmdclass={'build_ext': BuildExtension.with_options(use_ninja=False)})\n", encoding="utf-8")
    subprocess.run([sys.executable, "setup.py", "-q", "bdist_wheel"], cwd=src, check=True, capture_output=True)
    wheel = next((src / "dist").glob("tinyext-*.whl"))
    code, text = _check(cli, wheel, "--torch", str(Path(torch.__file__).parent))
    # (the verdict also holds what setuptools wrote, e.g. an absolute RPATH to the interpreter's lib/ for a
    # Python built with a shared libpython: that is runtime-reached's to judge, not this test's)
    assert "[PASS] libraries-load" in text, text
    code, text = _check(cli, wheel, "--torch", str(wheel_213))
    assert "[FAIL] libraries-load" in text and code == 5, text
    assert "undefined symbol _ZN2at4_ops12linalg_polar4callERKNS_6TensorE (at::_ops::linalg_polar::call(at::Tensor const&))" \
        in text or "undefined symbol _ZN2at4_ops12linalg_polar4callERKNS_6TensorE" in text, text
    assert "the library was built against another torch; fix: rebuild it against torch 2.13.0" in text, text


def _torch_213(tmp_path: Path) -> Path:
    """torch 2.13.0's CPU wheel for this Python, from pip's cache or index (pinned)."""
    subprocess.run([sys.executable, "-m", "pip", "download", "torch==2.13.0", "--no-deps", "-d", str(tmp_path / "w")],
                   check=True, capture_output=True)
    return next((tmp_path / "w").glob("torch-2.13.0*.whl"))


def test_a_library_stated_host_only_that_carries_device_code_fails() -> None:
    from buildrows.binaries.wheelread import LibraryInfo, WheelInfo, parse_wheel_filename
    from buildrows.check.device import check_device_code
    from buildrows.check.judging import Expectation
    from buildrows.policy.archs import Train, parse_arch_list
    from buildrows.policy.model import LibraryRule

    t = Train.parse("13.0")
    rule = LibraryRule(("pkg/*.so",), "no kernels", "check.libraries[0]", host_only=True)
    lib = LibraryInfo(path="pkg/_k.so", format="elf", size=1, machine="x86_64", cubins=("sm_80",))
    name = "pkg-1.0+cu130-cp312-cp312-linux_x86_64.whl"
    wheel = WheelInfo(Path(name), parse_wheel_filename(name), (), (lib,), (lib.path,))
    exp = Expectation("row", "linux-x86_64", t, parse_arch_list("8.0", train=t), machine="x86_64", library_rules=(rule,))
    r = check_device_code(exp, wheel)
    assert not r.ok
    assert ("pkg/_k.so: stated host-only (no device code) [check.libraries[0]], but it carries elf sm_80; ptx -; fix: "
            "drop host-only, or give the rule its archs") in r.details, r.details


def test_build_finds_the_build_environment_torch_without_importing_it(tmp_path: Path) -> None:
    """`build` checks a PyTorch extension against the torch of the Python that built it."""
    import importlib.util

    from buildrows.build.wheel_finish import _torch_dir

    spec = importlib.util.find_spec("torch")
    found = _torch_dir(sys.executable)
    if spec is None or not spec.submodule_search_locations:
        assert found is None
    else:
        assert found is not None and Path(found) == Path(spec.submodule_search_locations[0])
    bare = tmp_path / "python"  # this Python without site-packages: no torch
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -S -I \"$@\"\n", encoding="utf-8")
    bare.chmod(0o755)
    assert _torch_dir(str(bare)) is None


def test_show_lists_host_only_and_dlopens(tmp_path: Path, cli: Callable[..., Result]) -> None:
    policy = tmp_path / "buildrows.toml"
    policy.write_text(POLICY + '[[check.libraries]]\nfiles = ["pkg/libhost.so"]\nhost-only = true\nreason = "no kernels"\n'
                      '[[check.libraries]]\nfiles = ["pkg/libdl.so"]\ndlopens = ["libcublas.so.13"]\nreason = "on demand"\n',
                      encoding="utf-8")
    r = cli("--config", str(policy), "show", "linux-x86_64-cu130-py312")
    assert r.code == 0, r.err
    assert "pkg/libhost.so: host-only (no device code): no kernels" in r.out, r.out
    assert "pkg/libdl.so: the row's list; dlopens libcublas.so.13: on demand" in r.out, r.out


def test_nvidia_libraries_beside_the_torch_are_read(tmp_path: Path, cli: Callable[..., Result]) -> None:
    """--torch DIR: the NVIDIA packages installed beside it (site-packages/nvidia/*/lib) are read, so a
    symbol the CUDA runtime there lacks is named, and one it has passes."""
    d = tmp_path / "src"
    d.mkdir()
    (d / "rt.c").write_text("int cudaGetDeviceCount(int *n) { *n = 0; return 0; }\n"
                            "int cudaNoSuchThing(void) { return 1; }\n", encoding="utf-8")
    (d / "rt_old.c").write_text("int cudaGetDeviceCount(int *n) { *n = 0; return 0; }\n", encoding="utf-8")
    (d / "use.c").write_text("int cudaGetDeviceCount(int *); int cudaNoSuchThing(void);\n"
                             "int f(void) { int n; cudaGetDeviceCount(&n); return n + cudaNoSuchThing(); }\n",
                             encoding="utf-8")
    _gcc(d, "-o", "libcudart.so.13", "-Wl,-soname,libcudart.so.13", "rt.c")
    _gcc(d, "-o", "libuse.so", "use.c", "-L.", "-l:libcudart.so.13")
    site = tmp_path / "site"
    (site / "torch" / "lib").mkdir(parents=True)
    (site / "torch" / "version.py").write_text("__version__ = '2.14.1'\n", encoding="utf-8")
    (site / "nvidia" / "cu13" / "lib").mkdir(parents=True)
    _gcc(d, "-o", str(site / "nvidia" / "cu13" / "lib" / "libcudart.so.13"), "-Wl,-soname,libcudart.so.13", "rt_old.c")
    wheel = _wheel(d, tmp_path, CPU, {"pkg/libuse.so": "libuse.so"}, ("nvidia-cuda-runtime==13.*",))
    code, text = _check(cli, wheel, "--torch", str(site))
    assert code == 5, text
    assert ("pkg/libuse.so: undefined symbol cudaNoSuchThing: not defined by the libraries it NEEDS (libcudart.so.13 "
            f"(nvidia-cuda-runtime, read from {site / 'nvidia' / 'cu13' / 'lib'}))") in text, text
    _gcc(d, "-o", str(site / "nvidia" / "cu13" / "lib" / "libcudart.so.13"), "-Wl,-soname,libcudart.so.13", "rt.c")
    _, text = _check(cli, wheel, "--torch", str(site))  # (a CPU row declaring NVIDIA fails runtime-declared)
    assert "[PASS] libraries-load" in text and "NVIDIA packages: 1" in text, text


def test_an_nvidia_library_of_a_declared_package_must_be_reached(tmp_path: Path, cli: Callable[..., Result]) -> None:
    """pyvkfft 2025.1.1's CUDA extension NEEDS libnvrtc.so.13 and has no RPATH: declaring
    nvidia-cuda-nvrtc made libraries-load pass, yet the library failed to load with the package
    installed (the loader never looks in site-packages/nvidia/cu13/lib). Reached, it passes."""
    d = tmp_path / "src"
    d.mkdir()
    (d / "rtc.c").write_text("int nvrtcVersion(int *a, int *b) { *a = 13; *b = 0; return 0; }\n", encoding="utf-8")
    (d / "use.c").write_text("int nvrtcVersion(int *, int *);\nint f(void) { int a, b; return nvrtcVersion(&a, &b); }\n",
                             encoding="utf-8")
    _gcc(d, "-o", "libnvrtc.so.13", "-Wl,-soname,libnvrtc.so.13", "rtc.c")
    _gcc(d, "-o", "libbare.so", "use.c", "-L.", "-l:libnvrtc.so.13")
    _gcc(d, "-o", "libreach.so", "use.c", "-L.", "-l:libnvrtc.so.13", "-Wl,-rpath,$ORIGIN/../nvidia/cu13/lib")
    requires = ("nvidia-cuda-nvrtc==13.*",)
    code, text = _check(cli, _wheel(d, tmp_path, CPU, {"pkg/_ext.so": "libbare.so"}, requires))
    assert code == 5 and "[FAIL] libraries-load" in text, text
    assert ("pkg/_ext.so: NEEDS libnvrtc.so.13, which nvidia-cuda-nvrtc installs in site-packages/nvidia/cu13/lib, but "
            "no RPATH/RUNPATH entry of it reaches there (has: none): `import` fails with 'libnvrtc.so.13: cannot open "
            "shared object file' even where the package is installed, unless something loaded it first; fix: add the "
            "RPATH entry $ORIGIN/../nvidia/cu13/lib") in text, text
    (tmp_path / "reach").mkdir()
    _, text = _check(cli, _wheel(d, tmp_path / "reach", CPU, {"pkg/_ext.so": "libreach.so"}, requires))
    assert "[PASS] libraries-load" in text and "NVIDIA packages: 1" in text, text
    # A CUDA row whose runtime is linked in (mode static): the entry to the declared package's directory is
    # accepted by runtime-reached too (it said "neither the wheel nor the CUDA runtime provides" it).
    policy = tmp_path / "buildrows.toml"
    policy.write_text('[project]\nname = "pkg"\ndriver = "setup.py"\n\n[python]\nversions = ["3.12"]\n\n'
                      '[cuda]\ntrains = ["13.0"]\n\n[cuda.runtime.13]\nmode = "static"\nrequirements = '
                      '["nvidia-cuda-nvrtc==13.*"]\n\n[platforms.linux-x86_64]\ntrains = ["13.0"]\n\n'
                      '[[platforms.linux-x86_64.cuda]]\ntrains = ["13.0"]\narchs = "9.0"\n', encoding="utf-8")
    (tmp_path / "cu").mkdir()
    wheel = _wheel(d, tmp_path / "cu", CU130, {"pkg/_ext.so": "libreach.so"}, requires)
    _, text = _check(cli, wheel, "--config", str(policy), "--row", "linux-x86_64-cu130-py312")
    assert "[PASS] runtime-reached" in text and "RPATH entries reach the directories of the declared nvidia-cuda-nvrtc" in text, text
    assert "[PASS] libraries-load" in text, text

"""The check's runtime modes for shapes real CUDA wheels take (issue 20): a project that loads
NVIDIA's library wheels itself (preload), a plugin whose RPATH serves two install layouts
(climbs-out exceptions), and a ctypes kernel library that uses torch's runtime (torch-runtime).
Tables of (wheel as the reader returns it, expected message); no toolchain needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from buildrows.binaries.symbols import imported_symbols
from buildrows.binaries.wheelread import LibraryInfo, WheelInfo, parse_wheel_filename
from buildrows.check.judges import run_checks
from buildrows.check.judging import Expectation
from buildrows.check.nvidia import carriers, declared_nvidia
from buildrows.check.runtime import check_rpath, check_runtime_declared
from buildrows.check.torchabi import check_torch_runtime_only, torch_abi
from buildrows.policy.archs import Train, parse_arch_list
from buildrows.policy.model import RpathException, RuntimeMode

T12, T13 = Train.parse("12.9"), Train.parse("13.0")


def _lib(path: str, **kw: object) -> LibraryInfo:
    return LibraryInfo(path=path, format="elf", size=1, machine="x86_64", **kw)  # type: ignore[arg-type]


def _wheel(libs: list[LibraryInfo], requires: list[str], name: str = "pkg-1.0-cp312-cp312-manylinux_2_28_x86_64.whl") -> WheelInfo:
    return WheelInfo(Path(name), parse_wheel_filename(name), tuple(requires), tuple(libs), tuple(lib.path for lib in libs))


def _exp(mode: RuntimeMode, train: Train = T13, *, extra: str | None = None, optional: tuple[str, ...] = (),
         exceptions: tuple[RpathException, ...] = ()) -> Expectation:
    return Expectation("row", "linux-x86_64", train, parse_arch_list("8.0", train=train), (), None, mode=mode,
                       rpath_exceptions=exceptions, machine="x86_64", mode_reason="the project loads them itself",
                       runtime_extra=extra, optional_sonames=optional)


CTK = "cuda-toolkit[cublas,cudart,nvrtc]==13.*; extra == \"ctk\""


@pytest.mark.parametrize(("needed", "requires", "extra", "optional", "ok", "message"), [
    # faiss: NEEDS cudart and cuBLAS, declares their wheels unconditionally
    (("libcudart.so.13", "libcublasLt.so.13"), ["nvidia-cuda-runtime>=13", "nvidia-cublas>=13"], None, (), True,
     "declares nvidia-cublas, nvidia-cuda-runtime among its unconditional requirements; they carry every NVIDIA "
     "soname the libraries NEED (2)"),
    (("libcudart.so.13", "libcublas.so.13"), ["nvidia-cuda-runtime>=13"], None, (), False,
     "missing: pkg/_core.so NEEDS libcublas.so.13, which none of the NVIDIA packages the wheel declares among its "
     "unconditional requirements carries; fix: declare nvidia-cublas among its unconditional requirements"),
    # cupy: the NVIDIA packages come with an extra, through NVIDIA's cuda-toolkit meta-package
    (("libcublas.so.13", "libnvrtc.so.13"), [CTK], "ctk", (), True, "declares nvidia-cublas"),
    (("libcublas.so.13", "libcufft.so.12"), [CTK], "ctk", (), False,
     "NEEDS libcufft.so.12, which none of the NVIDIA packages the wheel declares under extra 'ctk' carries; fix: "
     "declare nvidia-cufft"),
    (("libcublas.so.13",), [CTK], None, (), False,
     "NEEDS libcublas.so.13, which none of the NVIDIA packages the wheel declares among its unconditional requirements"),
    # a library loaded only when present
    (("libnccl.so.2",), [], None, ("libnccl.so.*",), True, "libnccl.so.2 (NEEDED by pkg/_core.so): loaded only when present"),
    # nothing declared: said in plain words (it once read "declares unconditionally no NVIDIA package")
    (("libnccl.so.2",), [], None, ("libnccl.so.*",), True,
     "mode preload (the project loads them itself): no NVIDIA package is declared among its unconditional "
     "requirements, and every NVIDIA soname the libraries NEED (1) is optional"),
    (("libcutensor.so.2",), [], None, (), False,
     "fix: no NVIDIA wheel buildrows knows carries it; if the project loads it only when present, list it under optional"),
    # a package of the other major
    (("libcudart.so.13",), ["nvidia-cuda-runtime>=13", "nvidia-cublas-cu12"], None, (), False,
     "unexpected: 'nvidia-cublas-cu12' is a CUDA 12 package, but the row is CUDA 13.0"),
    # CUDA 12's cuSOLVER is .so.11: the table, not the name, says which package carries it
    (("libcusolver.so.11",), ["nvidia-cusolver-cu12"], None, (), None, ""),
])
def test_preload_declared_packages_carry_what_the_libraries_need(
        needed: tuple[str, ...], requires: list[str], extra: str | None, optional: tuple[str, ...], ok: bool | None,
        message: str) -> None:
    train = T12 if ok is None else T13
    r = check_runtime_declared(_exp("preload", train, extra=extra, optional=optional),
                               _wheel([_lib("pkg/_core.so", needed=needed)], requires))
    assert r.ok is (True if ok is None else ok), r.details
    assert any(message in d for d in r.details), r.details


def test_preload_needs_no_rpath_and_accepts_entries_into_declared_packages() -> None:
    """cupy links nothing of CUDA; faiss links cudart with no RPATH; jax's $ORIGIN/../nvidia/X/lib
    lands in a declared package's directory."""
    libs = [_lib("pkg/_core.so", needed=("libcudart.so.12",)),
            _lib("pkg/_dl.so", rpath=("$ORIGIN/../nvidia/cublas/lib",))]
    r = check_rpath(_exp("preload", T12), _wheel(libs, ["nvidia-cublas-cu12>=12"]))
    assert r.ok, r.details
    assert "RPATH entries reach the directories of the declared nvidia-cublas-cu12" in r.details
    r = check_rpath(_exp("preload", T12), _wheel(libs, []))
    assert not r.ok
    assert r.details[0] == ("pkg/_dl.so: '$ORIGIN/../nvidia/cublas/lib' resolves to site-packages/nvidia/cublas/lib, "
                            "which none of the NVIDIA packages the wheel declares among its unconditional requirements "
                            "installs; fix: declare nvidia-cublas-cu12 among its unconditional requirements, or drop "
                            "the entry")
    other = [_lib("pkg/_dl.so", rpath=("$ORIGIN/../vendor/lib",))]
    r = check_rpath(_exp("preload", T12), _wheel(other, []))
    assert "which neither the wheel nor the CUDA runtime provides" in r.details[0]


@pytest.mark.parametrize(("entries", "globs"), [
    (["$ORIGIN/../../nvidia/cublas/lib", "$ORIGIN/../../nvidia/cudnn/lib"], ["$ORIGIN/../../nvidia/*/lib"]),
    (["/usr/local/cuda-11.8/targets/x86_64-linux/lib", "/usr/local/cuda-13.0/targets/x86_64-linux/lib"],
     ["/usr/local/*/targets/x86_64-linux/lib"]),
    (["/a/b/c", "/x/y/z"], ["/a/b/c", "/x/y/z"]),  # differ in more than one component: kept as written
    (["/opt/lib"], ["/opt/lib"]),
])
def test_init_generalises_entries_that_differ_in_one_component(entries: list[str], globs: list[str]) -> None:
    from buildrows.adopt.wheel_runtime import _generalise

    assert _generalise(entries) == globs


CLIMB = RpathException("the plugin's other layout", "policy:1", entry="$ORIGIN/../../nvidia/*/lib", climbs_out=True)
PLAIN = RpathException("a plain exception", "policy:2", entry="$ORIGIN/../../nvidia/*/lib")


@pytest.mark.parametrize(("exceptions", "ok", "message"), [
    ((CLIMB,), True, "accepted 2 entries: '$ORIGIN/../../nvidia/*/lib' (climbing out of site-packages): "
                     "the plugin's other layout [policy:1]"),
    # an exception without climbs-out never accepts an entry that leaves site-packages
    ((PLAIN,), False, "'$ORIGIN/../../nvidia/cu13/lib' climbs out of site-packages to '../nvidia/cu13/lib'; if another "
                      "install layout needs it on purpose, list it under [[check.rpath-exceptions]] with entry, "
                      "climbs-out = true and its reason"),
    ((), False, "climbs out of site-packages"),
])
def test_climbing_entries_need_an_explicit_exception(exceptions: tuple[RpathException, ...], ok: bool, message: str) -> None:
    libs = [_lib("plugin/_a.so", rpath=("$ORIGIN/../../nvidia/cu13/lib", "$ORIGIN/../nvidia/cu13/lib")),
            _lib("plugin/_b.so", rpath=("$ORIGIN/../../nvidia/cudnn/lib",))]
    r = check_rpath(_exp("preload", exceptions=exceptions, extra="with-cuda"),
                    _wheel(libs, ["nvidia-cuda-runtime>=13; extra == \"with-cuda\""]))
    assert r.ok is ok, r.details
    assert any(message in d for d in r.details), r.details


@pytest.mark.parametrize(("requires", "symbols", "needed", "failed", "message"), [
    (["torch<3,>=2.3"], ("cudaMalloc", "cublasCreate_v2"), ("libcudart.so.12",), (),
     "requires torch<3,>=2.3, which brings the CUDA runtime: the project loads them itself"),
    (["numpy"], (), ("libcudart.so.12",), ("runtime-declared",),
     "missing: mode \"torch-runtime\" uses the CUDA runtime that torch brings, so the wheel must require torch"),
    (["torch>=2.3"], ("_ZN3c1019UndefinedTensorImpl10_singletonE",), (), ("not-compiled-against-torch",),
     "pkg/_core.so imports 1 libtorch C++ symbols (e.g. _ZN3c1019UndefinedTensorImpl10_singletonE): it is compiled "
     "against torch, so mode \"torch\" fits it"),
    (["torch>=2.3"], (), ("libc10.so",), ("not-compiled-against-torch",), "pkg/_core.so links libc10.so: it is compiled"),
    (["torch>=2.3", "nvidia-cuda-runtime-cu12"], (), (), ("runtime-declared",),
     "unexpected: 'nvidia-cuda-runtime-cu12' is not in the set for CUDA 12.9"),
])
def test_torch_runtime_mode(requires: list[str], symbols: tuple[str, ...], needed: tuple[str, ...],
                            failed: tuple[str, ...], message: str) -> None:
    lib = _lib("pkg/_core.so", needed=needed, cubins=("sm_80",), ptx=("sm_80",))
    results = run_checks(_exp("torch-runtime", T12), _wheel([lib], requires), {"pkg/_core.so": symbols})
    assert tuple(r.name for r in results if not r.ok) == failed, [r.details for r in results]
    assert any(message in d for r in results for d in r.details), [r.details for r in results]
    assert "not-compiled-against-torch" in [r.name for r in results]


def test_torch_abi_tells_stable_from_cxx() -> None:
    assert torch_abi(("aoti_torch_get_device_type", "torch_call_dispatcher", "cudaMalloc")).kind == "stable"
    assert torch_abi(("aoti_torch_empty_strided", "_ZNK2at10TensorBase4sizeEl")).kind == "c++"
    assert torch_abi(("_ZN5torch8autograd12VariableInfoC1Ev",)).kind == "c++"
    assert torch_abi(("_ZNSt6vectorIiSaIiEE9push_backEOi", "cudaFree")).kind == "none"
    r = check_torch_runtime_only(_exp("torch-runtime"), _wheel([_lib("a.so")], []), {})
    assert r.ok and r.details == ["1 libraries link no libtorch and import none of its C++ symbols"]


def test_nvidia_table() -> None:
    assert carriers("libcublasLt.so.12") == ["nvidia-cublas-cu12"]
    assert carriers("libcurand.so.10") == ["nvidia-curand-cu12", "nvidia-curand", "nvidia-curand-cu11"]
    assert carriers("libcudart.so.11.0") == ["nvidia-cuda-runtime-cu11"]
    assert carriers("libnotnvidia.so.1") == []
    declared = declared_nvidia([CTK, "nvidia-nccl-cu13; extra == \"ctk\"", "numpy"], "linux-x86_64", "ctk", 13)
    assert sorted(declared) == ["nvidia-cublas", "nvidia-cuda-nvrtc", "nvidia-cuda-runtime", "nvidia-nccl-cu13"]
    # a Windows-only entry is out of scope on Linux
    assert declared_nvidia(["nvidia-cublas; platform_system == 'Windows'"], "linux-x86_64", None, 13) == {}


def test_imported_symbols_of_a_real_library() -> None:
    """The compiler's own runtime: undefined symbols only (malloc is imported, not defined)."""
    import sysconfig

    libdir = Path(sysconfig.get_config_var("LIBDIR") or "/usr/lib")
    cands = sorted(libdir.glob("libpython3*.so*")) or sorted(Path("/usr/lib/x86_64-linux-gnu").glob("libz.so.1*"))
    if not cands:
        pytest.skip("no shared library to read")
    syms = imported_symbols(cands[0].read_bytes())
    assert "malloc" in syms or "free" in syms
    assert imported_symbols(b"MZ not an ELF") == ()

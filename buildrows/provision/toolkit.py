"""A train's CUDA toolkit, assembled without root or an installer into the buildrows cache
(`toolkits/PLATFORM/TRAIN`), as a root that CMake (CMAKE_CUDA_COMPILER, FindCUDAToolkit) and
torch.utils.cpp_extension (CUDA_HOME) accept: bin/nvcc, nvvm, include (runtime, crt, CCCL, NVTX,
and with `libraries` the cuBLAS/cuSPARSE/cuSOLVER/cuRAND/cuFFT headers), lib64 with libcudart.

With `libraries` it also gets the driver API's profiler header (cudaProfiler.h: nvidia-cuda-profiler-api,
or the cuda_profiler_api archive) and, on Linux, lib64/stubs/libcuda.so, the driver API's link stub that
FindCUDAToolkit's CUDA::cuda_driver needs. NVIDIA's redistributable cuda_cudart archive ships one;
none of PyPI's CUDA 13 wheels does (nvidia-cuda-runtime 13.0.88, 13.0.96 and 13.5.37 carry
libcudart, libcudart_static and libcudadevrt only; nvidia-nvml-dev carries nvml.h only), so
buildrows writes it: every function the toolkit's driver API headers declare (`DRIVER_HEADERS`:
cuda.h, and cudaProfiler.h, cudaGL.h, cudaEGL.h, cudaVDPAU.h where the toolkit has them; plain and
per-thread-stream names, as the preprocessor gives them), each returning CUDA_ERROR_STUB_LIBRARY,
linked with the soname libcuda.so.1, as the driver's libcuda exports them all. It is for linking
only, as NVIDIA's is: at run time the driver's libcuda.so.1 is loaded.

A toolkit assembled from PyPI's pins before a package joined the `--libraries` set (the profiler
header) gets the missing pinned wheels added when `--libraries` is asked again, not a stale reuse.

It is assembled in a staging directory, checked (its nvcc must run and report the train), given a
receipt, and only then renamed into place: a toolkit with a receipt is complete, so reusing one is
reading a small JSON file (well under a second), with no rehashing.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from buildrows.errors import Refused

# What the cache holds is read by the plan too (a row's toolkit); the stage that writes it offers the
# same names to its callers.
from buildrows.plan.provisioned import RECEIPT as RECEIPT
from buildrows.plan.provisioned import Toolkit as Toolkit
from buildrows.plan.provisioned import downloads_dir
from buildrows.plan.provisioned import installed as installed
from buildrows.plan.provisioned import list_installed as list_installed
from buildrows.plan.provisioned import nvcc_name as nvcc_name
from buildrows.plan.provisioned import toolkit_root as toolkit_root
from buildrows.plan.provisioned import toolkits_dir as toolkits_dir
from buildrows.policy.trains import Train
from buildrows.provision import sources
from buildrows.provision.archives import Artifact, fetch, unpack

#: The CUDA target directory of each platform in an installer-style layout (targets/<triple>).
TARGETS = {"linux-x86_64": "x86_64-linux", "linux-aarch64": "sbsa-linux"}


#: Platforms assembled from NVIDIA's Windows archives (zips, the installer's flat layout).
WINDOWS = ("windows-amd64",)


def choose_release(train: Train, platform: str, env: Mapping[str, str], *, source: sources.Source | None,
                   libraries: bool, mirror: str | None, release: str | None) -> sources.Release:
    """PyPI's pinned wheels when the train has them (and no other source was asked for), else the
    mirror's redistributable archives."""
    if platform not in (*TARGETS, *WINDOWS):
        raise Refused(f"buildrows provisions toolkits for {', '.join((*TARGETS, *WINDOWS))}; {platform} is not one of them\n"
                      "    fix: install the CUDA toolkit with NVIDIA's installer and set CUDA_PATH to it")
    if platform in WINDOWS and source == "pypi":
        raise Refused(f"CUDA {train.dotted} for {platform}: NVIDIA's PyPI wheels pinned here are Linux's; Windows "
                      "toolkits come from the redistributable archives\n"
                      "    fix: use source \"redist\" (or \"auto\") for Windows rows")
    if source is None:
        pinned = train in sources.pypi_trains(platform) and release is None and mirror is None
        source = "pypi" if pinned else "redist"
    if source == "pypi":
        return sources.pypi_release(train, platform, libraries, env.get(sources.WHEELS_VARIABLE, "").strip() or None)
    return sources.redist_release(train, platform, libraries, sources.mirror_url(env, mirror), release)


def install(train: Train, platform: str, env: Mapping[str, str], *, source: sources.Source | None = None,
            libraries: bool = False, mirror: str | None = None, release: str | None = None, force: bool = False,
            progress: Callable[[str], None] | None = None) -> Toolkit:
    """The train's toolkit in the cache: the one there (when complete and it has what was asked
    for), else fetched, verified, unpacked and checked."""
    have = installed(train, platform, env)
    if have is not None and not force and (have.libraries or not libraries):
        if libraries and have.libraries and platform in TARGETS:
            with _locked(have.root.parent / f".{train.dotted}.lock"):
                _add_missing_pins(have, env, progress)  # assembled before a package joined --libraries
                if _stub_missing(have.root) or _stub_stale(have.root):  # before buildrows wrote (all of) the stub
                    write_driver_stub(have.root, env)
        return have
    chosen = choose_release(train, platform, env, source=source, libraries=libraries, mirror=mirror, release=release)
    root = toolkit_root(train, platform, env)
    root.parent.mkdir(parents=True, exist_ok=True)
    with _locked(root.parent / f".{train.dotted}.lock"):
        have = installed(train, platform, env)  # another process may have finished it meanwhile
        if have is not None and not force and (have.libraries or not libraries):
            return have
        staging = root.parent / f".staging-{train.dotted}-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        try:
            # NVIDIA's Windows archives are laid out as its Windows installer is (bin, include,
            # lib/x64), with no targets/ directory: kept flat.
            triple = TARGETS.get(platform)
            layout = chosen.layout if triple is not None else "flat"
            fetched: list[Path] = []
            for art in chosen.artifacts:
                if layout == "targets" and triple is not None:
                    art = _into_targets(art, triple)
                path = fetch(art, downloads_dir(env), progress)
                fetched.append(path)
                if progress:
                    progress(f"unpack {art.filename} ({art.component})")
                unpack(path, art, staging)
            _finish_layout(staging, layout, triple or "", windows=platform.startswith("windows"))
            if libraries and triple is not None and _stub_missing(staging):
                write_driver_stub(staging, env)
            version = _check_nvcc(staging, train, env, chosen, nvcc_name(platform))
            receipt = {"train": train.dotted, "platform": platform, "source": chosen.source,
                       "release": chosen.release, "origin": chosen.origin, "nvcc_version": version,
                       "libraries": libraries,
                       "artifacts": [{"component": a.component, "filename": a.filename, "sha256": a.sha256}
                                     for a in chosen.artifacts]}
            (staging / RECEIPT).write_text(json.dumps(receipt, indent=2) + "\n", encoding="utf-8")
            if root.exists() or root.is_symlink():
                old = root.parent / f".old-{train.dotted}-{os.getpid()}"
                os.replace(root, old)
                shutil.rmtree(old, ignore_errors=True)
            os.replace(staging, root)
            # Unpacked and checked: the archives are not needed again (issue 31: 110 MB of them
            # stayed in one newcomer's cache); BUILDROWS_KEEP_DOWNLOADS=1 keeps them (offline reinstalls).
            if env.get("BUILDROWS_KEEP_DOWNLOADS", "").strip() not in ("1", "true", "yes"):
                for path in fetched:
                    path.unlink(missing_ok=True)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    done = installed(train, platform, env)
    assert done is not None
    return done


def _add_missing_pins(have: Toolkit, env: Mapping[str, str], progress: Callable[[str], None] | None) -> None:
    """A --libraries toolkit from PyPI's pins whose receipt lacks a pinned libraries package (one
    assembled before nvidia-cuda-profiler-api joined the set): fetch, check and unpack the missing
    wheels into it, and record them in the receipt. Nothing for another release or source."""
    if have.source != "pypi":
        return
    receipt_path = have.root / RECEIPT
    try:
        receipt = json.loads(receipt_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    try:
        pinned = sources.pypi_release(have.train, have.platform, True,
                                      env.get(sources.WHEELS_VARIABLE, "").strip() or None)
    except Refused:
        return  # the train is no longer pinned: the toolkit is what it was
    if pinned.release != have.release:
        return
    got = {str(a.get("component")) for a in receipt.get("artifacts", []) if isinstance(a, dict)}
    missing = [a for a in pinned.artifacts if a.component not in got]
    if not missing:
        return
    for art in missing:
        path = fetch(art, downloads_dir(env), progress)
        if progress:
            progress(f"unpack {art.filename} ({art.component}): pinned for --libraries since this toolkit was assembled")
        unpack(path, art, have.root)
        receipt.setdefault("artifacts", []).append({"component": art.component, "filename": art.filename,
                                                    "sha256": art.sha256})
        if env.get("BUILDROWS_KEEP_DOWNLOADS", "").strip() not in ("1", "true", "yes"):
            path.unlink(missing_ok=True)
    tmp = receipt_path.with_name(receipt_path.name + f".{os.getpid()}")
    tmp.write_text(json.dumps(receipt, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, receipt_path)


def _into_targets(art: Artifact, triple: str) -> Artifact:
    """Installer layout for the redistributable archives: headers and libraries under
    targets/<triple>/ (where their nvcc.profile looks: $(TOP)/$(_TARGET_DIR_)/include)."""
    remap = (("include", f"targets/{triple}/include"), ("lib", f"targets/{triple}/lib"))
    return Artifact(art.url, art.filename, art.sha256, art.size, art.strip, art.into, art.component, remap)


def _link(path: Path, target: str) -> None:
    if not path.exists() and not path.is_symlink():
        os.symlink(target, path)


def _finish_layout(root: Path, layout: str, triple: str, windows: bool = False) -> None:
    """The links CMake and torch.utils.cpp_extension look for: include/, lib64/ and libcudart.so.
    Windows needs none (its import libraries are in lib/x64, where CMake looks); it is only checked."""
    if windows:
        if not (root / "lib" / "x64").is_dir():
            raise Refused(f"the toolkit assembled in {root} has no lib/x64 (no CUDA runtime was unpacked)\n"
                          "    fix: check that the source provides cuda_cudart for this platform")
        return
    if layout == "targets":
        _link(root / "include", f"targets/{triple}/include")
        _link(root / "lib64", f"targets/{triple}/lib")
        _link(root / "lib", f"targets/{triple}/lib")  # nvcc.profile of some releases adds $(TOP)/lib
        lib = root / "targets" / triple / "lib"
    else:
        _link(root / "lib64", "lib")
        lib = root / "lib"
    if not lib.is_dir():
        raise Refused(f"the toolkit assembled in {root} has no library directory (no CUDA runtime was unpacked)\n"
                      "    fix: check that the source provides cuda_cudart / nvidia-cuda-runtime for this platform")
    # The wheels ship only the runtime names (libcudart.so.13, libcublas.so.13); a linker (-lcublas,
    # torch.utils.cpp_extension's -lcudart) and FindCUDAToolkit look for the development names.
    for so in sorted(lib.glob("lib*.so.*")):
        dev = lib / (so.name.split(".so.", 1)[0] + ".so")
        if not dev.exists() and not dev.is_symlink():
            _link(dev, so.name)


#: CUDA_ERROR_STUB_LIBRARY: what every function of NVIDIA's own stub returns when run.
STUB_RESULT = 34
_DRIVER_FUNCTION = re.compile(r"\bCUresult\s+(?:CUDAAPI\s+)?(cu[A-Za-z0-9_]+)\s*\(")
_RENAME = re.compile(r"^\s*#\s*define\s+(cu[A-Za-z0-9_]+)\s+(cu[A-Za-z0-9_]+)\s*$", re.MULTILINE)
#: The toolkit's headers that declare driver API entry points (libcuda.so.1 exports them all): cuda.h
#: (required), then the profiler API (cuProfilerStart, cuProfilerStop, cuProfilerInitialize) and the
#: graphics interop APIs, each read where the toolkit has it.
DRIVER_HEADERS = ("cuda.h", "cudaProfiler.h", "cudaGL.h", "cudaEGL.h", "cudaVDPAU.h")
#: What the interop headers include from the system (OpenGL, EGL): only names are read, never
#: types, so where the system lacks them an empty stand-in lets the preprocessor through.
_SYSTEM_INCLUDES = ("GL/gl.h", "EGL/egl.h", "EGL/eglext.h", "vdpau/vdpau.h")
#: Beside the stub: the headers it was written from, so a stub written from fewer (an older
#: buildrows read cuda.h only) is written again.
_STUB_SOURCES = "buildrows-stub-headers.txt"


def _stub_missing(root: Path) -> bool:
    return not (root / "lib64" / "stubs" / "libcuda.so").exists()


def _stub_stale(root: Path) -> bool:
    """A stub buildrows wrote from fewer driver headers than the toolkit has now: its record beside
    it names fewer, or (written before the record was) it lacks cuProfilerStart where the toolkit
    has cudaProfiler.h. NVIDIA's own stub (from its archive) exports the profiler API: kept."""
    stubs = root / "lib64" / "stubs"
    have = [h for h in DRIVER_HEADERS if (root / "include" / h).is_file()]
    try:
        return (stubs / _STUB_SOURCES).read_text(encoding="utf-8").split() != have
    except OSError:
        pass
    if "cudaProfiler.h" not in have:
        return False
    try:
        return b"cuProfilerStart" not in (stubs / "libcuda.so").read_bytes()
    except OSError:
        return False


def driver_functions(cuda_h: str, preprocessed: Sequence[str] = ()) -> list[str]:
    """The driver API's function names: those a driver header declares, and those its declarations
    become after the preprocessor (cuCtxCreate -> cuCtxCreate_v4, cuMemcpy -> cuMemcpy_ptds), sorted."""
    names = set(_DRIVER_FUNCTION.findall(cuda_h))
    for text in preprocessed:
        names.update(_DRIVER_FUNCTION.findall(text))
    return sorted(names)


def write_driver_stub(root: Path, env: Mapping[str, str]) -> Path:
    """Write root/lib64/stubs/libcuda.so (see the module's docstring) with the host C compiler, from
    every header of `DRIVER_HEADERS` the toolkit has (cuda.h must be one)."""
    import subprocess
    import tempfile

    include = root / "include"
    header = include / "cuda.h"
    cc = shutil.which(env.get("CC") or "cc", path=env.get("PATH")) or shutil.which("gcc", path=env.get("PATH"))
    if not header.is_file():
        raise Refused(f"the toolkit in {root} has no include/cuda.h, so no driver stub (lib64/stubs/libcuda.so) can "
                      "be written\n    fix: check that the source provides the CUDA runtime's headers")
    if cc is None:
        raise Refused("no C compiler (cc, or $CC) to write the driver stub lib64/stubs/libcuda.so with\n"
                      "    fix: install a C compiler (nvcc needs one as its host compiler too), then run "
                      "`buildrows toolkit install TRAIN --libraries` again")
    headers = [h for h in DRIVER_HEADERS if (include / h).is_file()]
    names: set[str] = set()
    stubs = root / "lib64" / "stubs"
    stubs.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=stubs) as tmp:
        stand_ins = Path(tmp) / "system"  # searched after the system's own directories (-idirafter)
        for rel in _SYSTEM_INCLUDES:
            (stand_ins / rel).parent.mkdir(parents=True, exist_ok=True)
            (stand_ins / rel).write_text("/* buildrows: stand-in for the driver stub's preprocessing */\n")
        for name in headers:
            path = include / name
            raw = path.read_text(encoding="utf-8", errors="replace")
            texts = []
            for defines in ((), ("-DCUDA_API_PER_THREAD_DEFAULT_STREAM=1",)):
                got = subprocess.run([cc, "-E", "-P", *defines, "-I", str(include), "-idirafter", str(stand_ins),
                                      "-x", "c", str(path)], capture_output=True, text=True, check=False)
                if got.returncode != 0 and name == "cuda.h":
                    raise Refused(f"{cc} could not preprocess {path} for the driver stub: {got.stderr.strip()[:300]}\n"
                                  "    fix: check the C compiler (or set CC to one that works)")
                if got.returncode != 0:
                    # An interop header that includes what neither the system nor a stand-in has: its
                    # declarations as written, and the versioned names its #defines map them to.
                    texts = [" ".join(f"CUresult {b}(" for a, b in _RENAME.findall(raw)
                                      if re.search(rf"\b{a}\s*\(", raw))]
                    break
                texts.append(got.stdout)
            found = driver_functions(raw, texts)
            if name == "cuda.h" and "cuInit" not in found:
                raise Refused(f"{header} declares no cuInit: not the driver API's header, no stub written\n"
                              "    fix: check the toolkit's include/cuda.h")
            names.update(found)
        source = Path(tmp) / "libcuda_stub.c"
        source.write_text("/* buildrows: link stub of the CUDA driver API (not loaded at run time), from "
                          + ", ".join(headers) + " */\n"
                          + "".join(f"int {n}(void) {{ return {STUB_RESULT}; }}\n" for n in sorted(names)),
                          encoding="utf-8")
        out = Path(tmp) / "libcuda.so"
        got = subprocess.run([cc, "-shared", "-fPIC", "-O0", "-Wl,-soname,libcuda.so.1", "-o", str(out), str(source)],
                             capture_output=True, text=True, check=False)
        if got.returncode != 0:
            raise Refused(f"{cc} could not link the driver stub: {got.stderr.strip()[:300]}\n"
                          "    fix: check the C compiler (or set CC to one that works)")
        os.replace(out, stubs / "libcuda.so")
    (stubs / _STUB_SOURCES).write_text(" ".join(headers) + "\n", encoding="utf-8")
    return stubs / "libcuda.so"


def _check_nvcc(root: Path, train: Train, env: Mapping[str, str], chosen: sources.Release, exe: str = "nvcc") -> str:
    from buildrows.plan.toolchain import CudaCompiler, read_train

    nvcc = root / "bin" / exe
    if not nvcc.is_file():
        raise Refused(f"{chosen.origin}: CUDA {chosen.release} assembled no bin/{exe}\n"
                      "    fix: check that the source provides cuda_nvcc / nvidia-cuda-nvcc for this platform")
    comp = read_train(CudaCompiler(str(nvcc), (str(nvcc),), "provisioned toolkit"), env)
    if comp.train != train:
        raise Refused(f"{chosen.origin}: the nvcc of release {chosen.release} reports CUDA {comp.version}, "
                      f"not {train.dotted}; the toolkit was not installed\n"
                      "    fix: re-sync the mirror (or re-pin the train with scripts/pin_toolkits.py)")
    return comp.version


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One process assembles a train at a time (two builds of one train may start together)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - Windows: not provisioned (see TARGETS)
            pass
        yield
    finally:
        os.close(fd)

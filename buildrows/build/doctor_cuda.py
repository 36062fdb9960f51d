"""Doctor's findings on CUDA: the row's nvcc, the generator, the toolkit's components and headers, torch's CUDA_HOME."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from buildrows.build.doctor_project import (
    cmake_source_dir,
    cuda_components,
    driver_runs_cmake,
    row_live,
    setup_py_cuda_libraries,
    setup_py_nvcc_from_path,
)
from buildrows.build.findings import Finding, Status
from buildrows.errors import BadInput, Refused
from buildrows.plan.toolchain import HostOs
from buildrows.policy.model import Driver, Policy, Row


def nvcc_install_hint(row: Row) -> str:
    """The buildrows command that gives this machine the row's CUDA compiler, no installer needed."""
    assert row.cuda is not None
    train = row.cuda
    from buildrows.provision.sources import pypi_trains

    if train in pypi_trains(row.platform):
        where = f"from NVIDIA's PyPI wheels (pinned in buildrows), into {_cache_hint()}"
    else:
        where = ("from NVIDIA's redistributable archives (set BUILDROWS_CUDA_MIRROR to use a mirror), "
                 f"into {_cache_hint()}")
    return (f"`buildrows build {row.name} --provision` (or `buildrows toolkit install {train.dotted}` first) "
            f"assembles CUDA {train.dotted} {where}; or install the toolkit yourself and set CUDA_HOME to it")


def _cache_hint() -> str:
    return "the buildrows cache ($BUILDROWS_CACHE, default ~/.cache/buildrows)"


def cmake_false(value: str) -> bool:
    """Whether CMake's if() reads the value as false (NOTFOUND, OFF, "", FOO-NOTFOUND, ...)."""
    v = value.strip().upper()
    return v in ("", "0", "OFF", "NO", "FALSE", "N", "IGNORE", "NOTFOUND") or v.endswith("-NOTFOUND")


def check_cuda(row: Row, policy: Policy, env: Mapping[str, str], host: HostOs, toolkit: str | None = None) -> Finding:
    """A CUDA row's nvcc exists, runs and is the row's train; a CPU row says how CUDA stays off.
    With a provisioned `toolkit`, its nvcc is the row's (whatever CUDACXX or PATH say)."""
    from buildrows.plan.nvcc_archs import check_cuda_compiler
    from buildrows.plan.toolchain import NO_CUDA_COMPILER, locate_cuda_compiler

    if row.cuda is None:
        option = policy.project.cuda_option
        try:
            found = locate_cuda_compiler(env, host)
        except BadInput:
            found = None
        hidden = [f"{k}={v}" for k, v in policy.project.cpu_cache
                  if (k.startswith("CMAKE_DISABLE_FIND_PACKAGE_CUDA") and v.upper() in ("ON", "TRUE", "1", "YES"))
                  or (k == "CMAKE_CUDA_COMPILER" and cmake_false(v))]
        if option is None and not policy.project.switches and hidden:
            present = f"; this builder has nvcc ({found.path}), which CMake is told not to look for" if found else ""
            return Finding("cuda", "ok", f"CPU row: {', '.join(hidden)} ([project.cpu-cache]){present}")
        if option is None and not policy.project.switches and policy.project.cpu_env:
            # The policy gives CPU rows their own environment (pyvkfft 2025.1.1: VKFFT_BACKEND=none):
            # that is how this project is told; the check still refuses device code in the wheel.
            told = ", ".join(f"{k}={v}" for k, v in policy.project.cpu_env)
            present = f"; this builder has nvcc ({found.path})" if found else ""
            return Finding("cuda", "ok", f"CPU row: {told} ([project.cpu-env]){present}; the check refuses any "
                           "device code the wheel would still carry")
        if option is None and not policy.project.switches:
            # Nothing tells the project to leave CUDA off: a project that builds CUDA whenever it
            # finds nvcc (torchsort's setup.py does) puts device code into this CPU wheel, and the
            # check refuses it. Seen on a GPU builder whose Python environment's bin holds nvcc.
            present = (f"; this builder has nvcc ({found.path}): a project that builds CUDA whenever it finds "
                       "nvcc will put device code into this CPU wheel, which `buildrows check` refuses") if found else ""
            return Finding("cuda", "note", "CPU row, but the policy names no cuda-option or env-switches, so nothing "
                           "tells the project to leave CUDA off" + present,
                           "set [project] cuda-option to the project's CMake CUDA switch (e.g. MYPROJ_BUILD_CUDA) "
                           "or env-switches to its environment switches (e.g. FORCE_CUDA); a CMake project that "
                           "builds CUDA whenever find_package(CUDAToolkit) finds it: [project.cpu-cache] "
                           "CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit = \"ON\"; one that enables CUDA whenever "
                           "check_language(CUDA) finds nvcc: [project.cpu-cache] CMAKE_CUDA_COMPILER = \"NOTFOUND\"")
        present = f"; this builder has nvcc ({found.path}), which the switches tell the project to leave unused" if found else ""
        # The values the build really gets (a "!NAME" switch means CPU: 1 on this row), as `env` gives them.
        names = {s.removeprefix("!").partition("=")[0] for s in policy.project.switches}
        told = f"{option}=OFF" if option else ", ".join(f"{k}={v}" for k, v in row.switches if k in names)
        return Finding("cuda", "ok", f"CPU row: {told}{present}")
    from buildrows.plan.row import cached_toolkit, toolkit_compiler

    try:
        if toolkit is None:
            try:
                comp = check_cuda_compiler(row, env, host)  # the same verdict the hook and render give
                return Finding("nvcc", "ok", comp.describe())
            except (BadInput, Refused):
                toolkit = cached_toolkit(row, env)  # what `buildrows toolkit install` provided
                if toolkit is None:
                    raise
        comp = toolkit_compiler(row, toolkit, env)
    except (BadInput, Refused) as e:
        what, _, fix = str(e).partition("\n    fix: ")
        none_found = any(p.message == NO_CUDA_COMPILER for p in e.problems)
        status: Status = "missing" if none_found or isinstance(e, BadInput) else "refused"
        fixes = [] if none_found else [fix]  # when none was found, the install hint is the whole fix
        return Finding("nvcc", status, what, "; ".join(f for f in (*fixes, nvcc_install_hint(row)) if f))
    return Finding("nvcc", "ok", comp.describe())


def check_generator(row: Row, env: Mapping[str, str], host: HostOs) -> list[Finding]:
    """The generator the row will use and why (toolchain.choose_generator decides; this reports)."""
    from buildrows.plan.toolchain import choose_generator

    g = choose_generator(row, env, host)
    if host != "windows" or g.is_ninja:
        return [Finding("generator", "ok", f"{g.generator}: {g.reason}")]
    if g.developer_environment:
        fix = ("pip install ninja, and add the LLVM (clang-cl) component of Visual Studio, to build with "
               f"Ninja Multi-Config (not on PATH: {', '.join(g.missing_tools)})")
    else:
        fix = ("run from an 'x64 Native Tools Command Prompt' (vcvars64.bat) with ninja and clang-cl on "
               "PATH to build with Ninja Multi-Config")
    return [Finding("generator", "note", f"{g.generator}: {g.reason}", fix)]


#: Headers torch's CUDA extension headers include (ATen/cuda/CUDAContext.h and friends): a root
#: with nvcc and the runtime alone fails on these (`cusparse.h: No such file or directory`).
TORCH_CUDA_HEADERS = ("cuda_runtime.h", "cublas_v2.h", "cusparse.h", "cusolverDn.h")


_SOURCE_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".h", ".hpp")


def library_header_use(project: Path, limit: int = 4000) -> str | None:
    """Where the project's sources include a CUDA library's headers ("file: header"), or None: the
    headers themselves, or a torch header that includes them (`doctor_sources.TORCH_LIBRARY_HEADERS`)."""
    from buildrows.build.doctor_sources import LIBRARY_INCLUDE

    seen = 0
    for path in sorted(project.rglob("*")):
        if seen >= limit or any(part in ("build", "dist", ".git") or part.startswith(".") for part in
                                path.relative_to(project).parts[:-1]):
            continue
        if path.suffix not in _SOURCE_SUFFIXES or not path.is_file():
            continue
        seen += 1
        try:
            m = LIBRARY_INCLUDE.search(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
        if m:
            return f"{path.relative_to(project)} includes {m.group(1)}"
    return None


def check_torch_cuda_home(row: Row, root: str | None, nvcc: str, torch_says: str | None, error: str | None,
                          uses_libraries: str | None = None, cached: str | None = None) -> list[Finding]:
    """torch.utils.cpp_extension must take the row's CUDA root (the one its nvcc compiles with), and
    that root must hold the runtime torch links (-lcudart) and, when the project's sources include
    them (`uses_libraries` says where), the CUDA libraries' headers."""
    name = "torch CUDA_HOME"
    if error is not None:
        return [Finding(name, "missing", f"could not ask torch for its CUDA_HOME: {error}",
                        "install torch for the row's Python (the project builds against it)")]
    if root is None:
        return [Finding(name, "refused", f"the row's nvcc ({nvcc}) does not say which CUDA root it compiles with, so "
                        f"buildrows sets no CUDA_HOME and torch uses {torch_says or 'none'}",
                        "point CUDACXX or CUDA_HOME at the nvcc of a complete toolkit (bin/nvcc, include, lib64)")]
    if torch_says is None or os.path.realpath(torch_says) != os.path.realpath(root):
        return [Finding(name, "refused", f"torch would build with CUDA root {torch_says or '(none)'}, but the row's nvcc "
                        f"({nvcc}) compiles with {root}; the extension would mix two toolkits or miss headers",
                        f"set CUDA_HOME={root} for the build (buildrows build and buildrows env do), or point the "
                        "row at the toolkit torch finds")]
    wanted = TORCH_CUDA_HEADERS if uses_libraries else TORCH_CUDA_HEADERS[:1]
    missing = [h for h in wanted if not os.path.isfile(os.path.join(root, "include", h))]
    libs = [os.path.join(root, d, "libcudart.so") for d in ("lib64", "lib")]
    if row.os == "linux" and not any(os.path.exists(p) for p in libs):
        missing.append("lib64/libcudart.so (torch links -lcudart)")
    if missing:
        why = f" ({uses_libraries})" if uses_libraries and set(missing) - {TORCH_CUDA_HEADERS[0]} else ""
        train = row.cuda.dotted if row.cuda is not None else "TRAIN"
        has_all = cached is not None and all(os.path.isfile(os.path.join(cached, "include", h)) for h in wanted)
        if has_all and cached is not None and os.path.realpath(cached) != os.path.realpath(root):
            fix = (f"a CUDA {train} toolkit with them is in buildrows' cache, {cached}: build with it, "
                   f"`CUDACXX={os.path.join(cached, 'bin', 'nvcc')} buildrows build {row.name}` (CUDA_HOME follows the nvcc)")
        else:
            fix = (f"`buildrows toolkit install {train} --libraries` assembles a CUDA {train} root with the libraries' "
                   f"headers and the runtime from NVIDIA's packages; then doctor offers it for {row.name}")
        return [Finding(name, "missing", f"torch takes {root} (the row's nvcc's root), which lacks "
                        + ", ".join(missing) + why, fix)]
    what = "the CUDA libraries' headers the project includes and " if uses_libraries else ""
    return [Finding(name, "ok", f"{root}: the root of the row's nvcc, with {what}the runtime torch links")]


#: What each FindCUDAToolkit target needs in the toolkit root: (headers under include/, libraries
#: under the library directory, a subdirectory of it searched too). A target not listed here
#: (CUDA::toolkit, an interface of include directories) is not judged.
CUDA_COMPONENTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "cudart": (("cuda_runtime.h",), ("libcudart.so",)),
    "cudart_static": (("cuda_runtime.h",), ("libcudart_static.a",)),
    "cuda_driver": (("cuda.h",), ("libcuda.so",)),
    "cublas": (("cublas_v2.h",), ("libcublas.so",)),
    "cublasLt": (("cublasLt.h",), ("libcublasLt.so",)),
    "cufft": (("cufft.h",), ("libcufft.so",)),
    "cufftw": (("cufftw.h",), ("libcufftw.so",)),
    "curand": (("curand.h",), ("libcurand.so",)),
    "cusolver": (("cusolverDn.h",), ("libcusolver.so",)),
    "cusparse": (("cusparse.h",), ("libcusparse.so",)),
    "nvrtc": (("nvrtc.h",), ("libnvrtc.so",)),
    "nvJitLink": (("nvJitLink.h",), ("libnvJitLink.so",)),
    "nvml": (("nvml.h",), ("libnvidia-ml.so",)),
    "cupti": (("cupti.h",), ("libcupti.so",)),
    "nvtx3": (("nvtx3/nvToolsExt.h",), ()),
}
#: Driver libraries: FindCUDAToolkit looks in the library directory's stubs/ too, and a machine
#: with the driver installed has them in the system's library directories.
_DRIVER_LIBRARIES = ("libcuda.so", "libnvidia-ml.so")
_SYSTEM_LIBRARY_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")
#: The components `buildrows toolkit install TRAIN --libraries` assembles (its pinned wheels, and the
#: driver stub it writes), and the PyPI packages of the others.
_BY_TOOLKIT_LIBRARIES = ("cublas", "cublasLt", "cufft", "cufftw", "curand", "cusolver", "cusparse", "cuda_driver")
_PYPI_PACKAGE = {"nvrtc": "nvidia-cuda-nvrtc", "nvJitLink": "nvidia-nvjitlink", "nvml": "nvidia-nvml-dev",
                 "cupti": "nvidia-cuda-cupti", "nvtx3": "nvidia-nvtx"}


def _has_library(root: str, name: str) -> str | None:
    """Where FindCUDAToolkit would find library `name` for a toolkit `root`, or None."""
    dirs = [os.path.join(root, d) for d in ("lib64", "lib", os.path.join("lib", "x64"))]
    dirs += [str(p) for p in sorted(Path(root).glob("targets/*/lib"))]
    if name in _DRIVER_LIBRARIES:
        dirs += [os.path.join(d, "stubs") for d in dirs] + list(_SYSTEM_LIBRARY_DIRS)
    for d in dirs:
        path = os.path.join(d, name)
        if os.path.exists(path):
            return path
    return None


def _has_header(root: str, name: str) -> bool:
    return any(os.path.isfile(os.path.join(d, name)) for d in
               [os.path.join(root, "include"), *map(str, sorted(Path(root).glob("targets/*/include")))])


def check_toolkit_components(row: Row, root: str, used: Mapping[str, str], cached: str | None = None,
                             stops: str = "CMake would stop at it") -> list[Finding]:
    """Each CUDA::X target the project links (`used`: target -> where it is named) has its headers
    and libraries in the toolkit `root` the build compiles with: one finding per missing target,
    with the fix; one ok finding naming those found."""
    train = row.cuda.dotted if row.cuda is not None else "TRAIN"
    ok: list[str] = []
    out: list[Finding] = []
    needs: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    lacks: dict[str, list[str]] = {}
    for target in used:
        base = target.removesuffix("_static")
        headers, libraries = CUDA_COMPONENTS.get(target) or CUDA_COMPONENTS.get(base) or ((), ())
        if target not in CUDA_COMPONENTS and base in CUDA_COMPONENTS:  # CUDA::cublas_static: libcublas_static.a
            libraries = tuple(lib.replace(".so", "_static.a") for lib in libraries)
        if headers or libraries:
            needs[target] = headers, libraries
            lacks[target] = [f"include/{h}" for h in headers if not _has_header(root, h)] + [
                ("lib64/stubs/" if lib in _DRIVER_LIBRARIES else "lib64/") + lib for lib in libraries
                if _has_library(root, lib) is None]
    for target, where in sorted(used.items()):
        if target not in needs:
            continue
        headers, libraries = needs[target]
        base = target.removesuffix("_static")
        missing = lacks[target]
        # A project that names both CUDA::X and CUDA::X_static chooses one in a condition doctor
        # does not evaluate (ggml: GGML_STATIC): either one found is enough.
        twin = base if target != base else f"{base}_static"
        if not missing or (twin in lacks and not lacks[twin]):
            ok.append(f"CUDA::{target}" + (f" (or CUDA::{twin})" if missing else ""))
            continue
        has_it = cached is not None and os.path.realpath(cached) != os.path.realpath(root) and all(
            _has_header(cached, h) for h in headers) and all(_has_library(cached, lib) for lib in libraries)
        if has_it and cached is not None:
            fix = (f"a CUDA {train} toolkit with it is in buildrows' cache, {cached}: build with it, "
                   f"`CUDACXX={os.path.join(cached, 'bin', 'nvcc')} buildrows build {row.name}`")
        elif base in _BY_TOOLKIT_LIBRARIES and row.os == "linux":
            what = ("the driver API's link stub (lib64/stubs/libcuda.so; the real libcuda.so.1 comes with the "
                    "driver at run time)" if base == "cuda_driver" else "the CUDA libraries' headers and libraries")
            fix = (f"`buildrows toolkit install {train} --libraries` assembles a CUDA {train} root with {what}; "
                   f"build with it: `CUDACXX=<that root>/bin/nvcc buildrows build {row.name}` (or `--provision`)")
        elif base in _PYPI_PACKAGE:
            fix = (f"buildrows does not assemble it: install NVIDIA's CUDA {train} toolkit with it (or add the "
                   f"include/ and lib/ of PyPI's {_PYPI_PACKAGE[base]} for {train} to {root})")
        else:
            fix = f"install NVIDIA's CUDA {train} toolkit with it (the full installer has every component)"
        out.append(Finding(f"CUDA::{target}", "missing", f"the project links CUDA::{target} ({where}), and the "
                           f"toolkit the build uses ({root}) lacks {', '.join(missing)}: {stops}", fix))
    if ok:
        out.insert(0, Finding("CUDA components", "ok", f"{', '.join(ok)} in {root}"))
    return out


def check_cuda_components(row: Row, project: Path, policy: Policy, env: Mapping[str, str], host: HostOs,
                          driver: Driver, toolkit: str | None = None) -> list[Finding]:
    """The CUDA components the project's CMake links (a setup.py that never runs CMake: the CUDA
    libraries its extensions name), judged against the root of the row's nvcc."""
    cmake = driver_runs_cmake(project, driver)
    if cmake:
        used = cuda_components(cmake_source_dir(project, driver), row_live(row, project, driver, env))
    else:
        used = setup_py_cuda_libraries(project)
    on_path = None if cmake else setup_py_nvcc_from_path(project)
    if not used and on_path is None:
        return []
    from buildrows.plan.row import cached_toolkit, plan_row

    try:
        plan = plan_row(policy, row, env, host=host, step="doctor", toolkit=toolkit)
    except (BadInput, Refused):
        return []  # the nvcc finding already says why
    root = plan.cuda_home
    if root is None:
        return []
    out: list[Finding] = []
    if on_path is not None:
        out.append(Finding("nvcc on PATH", "note", f"setup.py takes its CUDA root from the first nvcc on PATH "
                           f"({on_path}), not from CUDA_HOME or CUDACXX: `buildrows build` puts {root}/bin first on "
                           "the build's PATH, so it builds with the toolkit judged here",
                           f"building it another way (pip with `buildrows env`), put {os.path.join(root, 'bin')} "
                           "first on PATH yourself"))
    if used:
        out += check_toolkit_components(row, root, used, cached=cached_toolkit(row, env),
                                        stops="CMake would stop at it" if cmake else
                                        "the compiler or the linker would stop at it")
    return out


def _torch_cuda_home(policy: Policy, row: Row, env: Mapping[str, str], host: HostOs, python: str,
                     project: Path) -> list[Finding]:
    """Ask the row's torch, in the environment the build will have, which CUDA root it takes."""
    from buildrows.plan.row import plan_row
    from buildrows.render.envfile import environment_from_plan

    try:
        plan = plan_row(policy, row, env, host=host, step="doctor")
    except (BadInput, Refused):
        return []  # the nvcc finding above already says why
    assert plan.compiler is not None
    build_env = {**env, **environment_from_plan(plan, env)}
    from buildrows.plan.torchenv import ask_torch

    info, error = ask_torch(python, build_env)
    from buildrows.plan.row import cached_toolkit

    return check_torch_cuda_home(row, plan.cuda_home, plan.compiler.path, info.cuda_home if info else None, error,
                                 library_header_use(project), cached=cached_toolkit(row, env))

"""What a row needs on this machine before a long build, as findings: what was seen, and the fix.

`diagnose` runs each check and returns every finding (it does not stop at the first); the
command prints them and refuses when any failed. The checks themselves are plain functions of
what was observed (a version string, a path, installed distributions), so tests feed them
observations; `Probe` is the one place that looks at the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from buildrows.build.findings import Finding as Finding
from buildrows.build.findings import Status as Status
from buildrows.build.findings import parse_version as parse_version
from buildrows.errors import BadInput, Refused
from buildrows.plan.toolchain import HostOs
from buildrows.policy.model import Driver, Policy, Row
from buildrows.provision.interpreters import Interpreter, Rejected

MIN_CMAKE = (3, 25)  # workflow presets (schema 6)
MIN_NINJA = (1, 10)  # Ninja Multi-Config
#: What a setup.py project without [build-system] builds with (PEP 517's fallback).
SETUPTOOLS_FALLBACK = ("setuptools>=40.8.0",)
FRONTEND = "build>=1.0"


def _dotted(v: tuple[int, ...]) -> str:
    return ".".join(str(x) for x in v)


def check_tool(name: str, path: str | None, output: str | None, minimum: tuple[int, ...], fix: str) -> Finding:
    """A tool on PATH that reports at least `minimum` from `NAME --version`."""
    if path is None:
        return Finding(name, "missing", f"no {name} on PATH", fix)
    version = parse_version(output or "")
    if version is None:
        return Finding(name, "missing", f"{path} did not report a version ({(output or '').strip()[:80]!r})", fix)
    if version < minimum:
        return Finding(name, "missing", f"{path} is {_dotted(version)}, older than the {_dotted(minimum)} buildrows needs", fix)
    return Finding(name, "ok", f"{_dotted(version)} at {path}")


def cmake_fix() -> str:
    return f"pip install 'cmake>={_dotted(MIN_CMAKE)}' (PyPI's cmake puts a current cmake on PATH)"


def ninja_fix() -> str:
    return f"pip install 'ninja>={_dotted(MIN_NINJA)}'"


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


def check_project_cmake(row: Row, project: Path, driver: Driver, cmake: tuple[str | None, str | None],
                        env: Mapping[str, str]) -> list[Finding]:
    """What the project's own sources need of CMake (buildrows.build.project_cmake): a setup.py that
    runs `make` itself gets no generator; a CMakeLists.txt older than CMake 4 accepts needs
    CMAKE_POLICY_VERSION_MINIMUM (say so rather than let the configure fail)."""
    from buildrows.build.project_cmake import cmake_minimum, setup_py_runs_make

    out: list[Finding] = []
    if driver == "setup.py" and row.generator is None and setup_py_runs_make(project):
        out.append(Finding("generator", "note", "left unset for this project: its setup.py runs `make` itself, which "
                           "CMAKE_GENERATOR=Ninja would break (`make: *** No targets specified`)",
                           "to choose one anyway, fix it in the policy ([project] generator)"))
    path, output = cmake
    version = parse_version(output or "") if path else None
    need = cmake_minimum(project)
    if version is not None and version >= (4, 0) and need is not None and need < (3, 5) \
            and not env.get("CMAKE_POLICY_VERSION_MINIMUM"):
        out.append(Finding("cmake policy", "missing",
                           f"{project / 'CMakeLists.txt'} requires CMake {need[0]}.{need[1]}, and the cmake on PATH "
                           f"({path}) is {_dotted(version)}, which refuses projects older than 3.5",
                           "export CMAKE_POLICY_VERSION_MINIMUM=3.5 (CMake 4 then configures it), or put a CMake 3.x "
                           "first on PATH"))
    return out


def driver_runs_cmake(project: Path, driver: Driver) -> bool:
    """Whether the row's driver runs CMake on this project: cmake-presets and scikit-build-core
    always do; a setup.py build only when its setup.py does (the knowledge init uses to skip a
    CMakeLists.txt's cuda-option; buildrows.build.project_cmake)."""
    from buildrows.build.project_cmake import setup_py_runs_cmake

    return driver != "setup.py" or setup_py_runs_cmake(project)


def not_run_by_driver(project: Path) -> Finding:
    """The note that replaces the CMake findings for a setup.py that never runs CMake."""
    beside = (f"; its {project / 'CMakeLists.txt'} is for another build (the setup.py does not read it)"
              if (project / "CMakeLists.txt").is_file() else "")
    return Finding("cmake", "note", "not judged: the project's setup.py never runs CMake (cmake, the generator and "
                   f"CMake's rules play no part in this build){beside}")


def check_python(row: Row, python: str | None, ran: tuple[str | None, str | None] = (None, None), *,
                 rejected: Sequence[Rejected] = (), env: Mapping[str, str] | None = None,
                 places: Sequence[str] = ()) -> Finding:
    """The row's interpreter exists, runs, and is the row's version; `ran` is (version it reported,
    why it did not run); `rejected` the candidates a search turned down (a failing shim is not one)."""
    from buildrows.provision.interpreters import install_hint

    fix = install_hint(row.python, env if env is not None else {})
    if python is None:
        if rejected:
            turned = "; ".join(f"{r.path} {r.why}" for r in rejected[:4])
            return Finding("python", "missing", f"no Python {row.python} that runs: {turned}", fix)
        where = f" (looked in {', '.join(places)})" if places else ""
        return Finding("python", "missing", f"no Python {row.python}{where}", fix)
    version, problem = ran
    if problem is not None:
        return Finding("python", "missing", f"{python} does not run: {problem}", fix)
    if version is not None and version != row.python:
        return Finding("python", "missing", f"{python} is Python {version}, not {row.python}", fix)
    return Finding("python", "ok", f"{row.python} at {python}")


def check_project(project: Path, driver: Driver) -> Finding | None:
    """The project directory holds what the driver builds from: setup.py or pyproject.toml for a wheel
    build, CMakeLists.txt for cmake-presets. None when it does."""
    wanted = ("CMakeLists.txt",) if driver == "cmake-presets" else ("setup.py", "pyproject.toml")
    if any((project / name).is_file() for name in wanted):
        return None
    return Finding("project", "missing", f"{project} has no {' and no '.join(wanted)}: it is not a project the "
                   f"{driver} driver can build",
                   "run buildrows in the project's directory, pass --project DIR, or set [project] source-dir in the "
                   "policy (relative to the policy file)")


def check_environment_bin(added: str | None) -> Finding | None:
    """A note when the active environment's bin directory was not on PATH and buildrows added it."""
    if added is None:
        return None
    return Finding("PATH", "note", f"the active environment's {added} is not on PATH; buildrows adds it (at the end) "
                   "for this run, so its cmake and ninja are found and used by the build",
                   f'put it on PATH yourself to run its tools by hand: export PATH="{added}:$PATH"')


def build_requirements(project: Path, driver: Driver) -> tuple[list[str], str | None]:
    """The project's [build-system] requires (PEP 518), or why they cannot be read; for a project
    setuptools builds, with the setup_requires its backend adds (`setup_requires`)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    path = project / "pyproject.toml"
    if not path.is_file():
        if driver == "setup.py":
            return [*SETUPTOOLS_FALLBACK, *setup_requires(project)], None
        return [], f"{path} does not exist"
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        return [], f"{path}: {e}"
    system = doc.get("build-system", {})
    reqs = system.get("requires")
    if reqs is None:
        return [*SETUPTOOLS_FALLBACK, *(setup_requires(project) if driver == "setup.py" else [])], None
    if not isinstance(reqs, list) or not all(isinstance(r, str) for r in reqs):
        return [], f"{path}: [build-system] requires is not a list of strings"
    backend = system.get("build-backend")
    if driver == "setup.py" and (backend is None or str(backend).startswith("setuptools.build_meta")):
        return [*reqs, *setup_requires(project)], None
    return list(reqs), None


def setup_requires(project: Path) -> list[str]:
    """What setuptools' PEP 517 backend adds to a wheel build's requirements (its
    get_requires_for_build_wheel), which `build --no-isolation` refuses to go without:
    setup.py's `setup(setup_requires=[...])`, a literal list or a module-level name bound to one
    (qsimcirq 0.22.0: cmake~=3.31.0 and pybind11[global]), and setup.cfg's [options]
    setup_requires. Read, never run; a list setup.py computes is left to `build --provision`,
    which asks the backend itself."""
    import ast
    import configparser

    out: list[str] = []
    cfg = project / "setup.cfg"
    if cfg.is_file():
        parser = configparser.ConfigParser(interpolation=None)
        with contextlib.suppress(configparser.Error, OSError, UnicodeDecodeError):
            parser.read(cfg, encoding="utf-8")
            if parser.has_option("options", "setup_requires"):
                text = parser.get("options", "setup_requires").strip()  # one a line, or "a; b" on one
                items = text.splitlines() if "\n" in text else text.split(";")
                out += [r.strip() for r in items if r.strip() and not r.strip().startswith("#")]
    try:
        tree = ast.parse((project / "setup.py").read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return out
    bound = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if name != "setup":
            continue
        for kw in node.keywords:
            if kw.arg != "setup_requires":
                continue
            value = bound.get(kw.value.id, kw.value) if isinstance(kw.value, ast.Name) else kw.value
            if isinstance(value, (ast.List, ast.Tuple)):
                out += [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return [r for r in out if r.strip()]


def check_requirements(python: str, requirements: Sequence[str], installed: Mapping[str, str | None], *,
                       isolation: bool = False) -> list[Finding]:
    """Each requirement satisfied by a distribution installed for `python`. With `isolation` only
    the frontend is asked for (it runs in the row's Python even then), and the fix does not offer
    the --isolation the build already has."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    out: list[Finding] = []
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement as e:
            out.append(Finding(text, "missing", f"not a valid requirement: {e}", "fix the project's [build-system] requires"))
            continue
        if req.marker is not None and not req.marker.evaluate():
            continue
        have = installed.get(canonicalize_name(req.name))
        # --isolation fetches the project's requirements, never the frontend itself (it runs in the row's Python).
        frontend = canonicalize_name(req.name) == "build"
        fix = (f"{python} -m pip install '{text}' (the PEP 517 frontend runs in the row's Python, with --isolation too)"
               if isolation or frontend else
               f"{python} -m pip install '{text}' (or build with --isolation, which fetches it from the registry)")
        if have is None:
            out.append(Finding(req.name, "missing", f"not installed for {python}", fix))
        elif req.specifier and not req.specifier.contains(have, prereleases=True):
            out.append(Finding(req.name, "missing", f"{have} installed, the project needs {req.specifier}", fix))
        else:
            out.append(Finding(req.name, "ok", f"{have}"))
    return out


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
_CUDA_TARGET = re.compile(r"\bCUDA::([A-Za-z0-9_]+)")
_SUBDIR = re.compile(r"^\s*add_subdirectory\s*\(\s*\"?([^\s\")]+)", re.MULTILINE | re.IGNORECASE)
_INCLUDE = re.compile(r"^\s*include\s*\(\s*\"?([^\s\")]+)", re.MULTILINE | re.IGNORECASE)
_DIR_VARIABLES = ("${CMAKE_CURRENT_SOURCE_DIR}", "${CMAKE_CURRENT_LIST_DIR}")
_TOP_VARIABLES = ("${PROJECT_SOURCE_DIR}", "${CMAKE_SOURCE_DIR}")


def row_live(row: Row, project: Path, driver: Driver, env: Mapping[str, str]) -> set[str]:
    """The CMake variables the row's configure turns on (`cmake_conditions.turned_on`): its cache,
    pyproject's [tool.scikit-build.cmake.define] for a scikit-build-core project, and CMAKE_ARGS."""
    from buildrows.build.cmake_conditions import turned_on

    defines: dict[str, object] = {}
    if driver == "scikit-build-core":
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover
            import tomli as tomllib
        try:
            doc = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
            got = doc.get("tool", {}).get("scikit-build", {}).get("cmake", {}).get("define", {})
            defines = got if isinstance(got, dict) else {}
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
            defines = {}
    return turned_on(row.cache, env, defines)


def cmake_source_dir(project: Path, driver: Driver) -> Path:
    """Where the project's CMakeLists.txt is: scikit-build-core's `cmake.source-dir`, else the project."""
    if driver != "scikit-build-core":
        return project
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        doc = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return project
    cmake = doc.get("tool", {}).get("scikit-build", {}).get("cmake", {})
    source = cmake.get("source-dir") if isinstance(cmake, dict) else None
    return project / source if isinstance(source, str) else project


def cmake_files(source: Path, limit: int = 400, live: Collection[str] | None = None) -> Iterator[tuple[Path, str]]:
    """The CMake files a configure of `source` reads, with their text: CMakeLists.txt, the
    directories it adds (add_subdirectory) and the files it includes (include, a path or a
    module of the project's own), followed recursively. Conditions are not evaluated, except
    with `live` (the variables the row's configure turns on): then a branch under an option that
    is off by default and not turned on is blanked, and what it adds or includes not followed
    (`buildrows.build.cmake_conditions`)."""
    from buildrows.build.cmake_conditions import Reach, never_set

    reach = None
    if live is not None:  # names no CMake file of the project sets are off too (issue 40: BoringSSL in llama.cpp)
        every = [p for p in sorted(source.rglob("*")) if p.name == "CMakeLists.txt" or p.suffix == ".cmake"][:2000]
        reach = Reach(live, never_set((p.read_text(encoding="utf-8", errors="replace") for p in every), live))
    seen: set[Path] = set()
    todo = [source / "CMakeLists.txt"]
    modules: dict[str, Path] | None = None
    while todo and len(seen) < limit:
        path = todo.pop(0)
        try:
            key = path.resolve()
            if key in seen or not path.is_file():
                continue
            seen.add(key)
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if reach is not None:
            text = reach.live(text)
        yield path, text
        here = path.parent

        def resolve(arg: str, here: Path = here) -> Path:
            for v in _DIR_VARIABLES:
                arg = arg.replace(v, str(here))
            for v in _TOP_VARIABLES:
                arg = arg.replace(v, str(source))
            return Path(arg) if os.path.isabs(arg) else here / arg

        for m in _SUBDIR.finditer(text):
            if "${" in resolve(m.group(1)).as_posix():
                # A directory named by a variable (ggml's `add_subdirectory(${backend_dir})` in its
                # backend function): any subdirectory of this one with a CMakeLists.txt may be it.
                # A directory named like an option that is off (ggml-cuda beside GGML_CUDA OFF: ggml
                # adds it only when the option is on) is not one (issue 40).
                todo += [p for p in sorted(here.glob("*/CMakeLists.txt")) if reach is None
                         or p.parent.name.upper().replace("-", "_") not in reach.off]
            else:
                todo.append(resolve(m.group(1)) / "CMakeLists.txt")
        for m in _INCLUDE.finditer(text):
            arg = m.group(1)
            if arg.endswith(".cmake") or "/" in arg:
                todo.append(resolve(arg))
                continue
            if modules is None:  # the project's own modules (include(Foo) finds cmake/Foo.cmake)
                modules = {}
                for p in sorted(source.rglob("*.cmake"))[:2000]:
                    modules.setdefault(p.stem, p)
            if arg in modules:
                todo.append(modules[arg])


def _where(path: Path, source: Path, text: str, at: int) -> str:
    line = text.count("\n", 0, at) + 1
    # normpath: a file a subdirectory includes as ../x.cmake is named once, as x.cmake (qsimcirq 0.22.0)
    return f"{os.path.normpath(path.relative_to(source) if path.is_relative_to(source) else path)}:{line}"


def cuda_components(source: Path, live: Collection[str] | None = None) -> dict[str, str]:
    """The CUDA::X targets the project's CMake names (`cmake_files`), each with where it is first
    named ("file:line"). A CUDA row turns the project's CUDA on, and the CUDA parts name them."""
    found: dict[str, str] = {}
    for path, text in cmake_files(source, live=live):
        for m in _CUDA_TARGET.finditer(text):
            found.setdefault(m.group(1), _where(path, source, text, m.start()))
    return found


#: What fetches from the network while CMake configures: file(DOWNLOAD), FetchContent, CPM.
_FETCH = re.compile(r"^\s*(file\s*\(\s*DOWNLOAD\b|FetchContent_Declare\s*\(|CPMAddPackage\s*\(|"
                    r"ExternalProject_Add\s*\()", re.MULTILINE | re.IGNORECASE)


def check_network_fetches(source: Path, live: Collection[str] | None = None,
                          given: Mapping[str, str] | None = None) -> Finding | None:
    """A note when the project's CMake fetches from the network while it configures (cufinufft
    2.5.1 downloads CPM.cmake and CCCL from GitHub): a builder without network access fails
    there, whatever doctor found. A note, not a refusal: most builders have the network. A
    FetchContent_Declare(NAME) the row's cache (`given`) serves with FETCHCONTENT_SOURCE_DIR_NAME,
    or every one under FETCHCONTENT_FULLY_DISCONNECTED, fetches nothing (qsimcirq 0.22.0's
    pybind11, from PyPI's pybind11 source distribution): named as served, not as a fetch."""
    given = given or {}
    disconnected = given.get("FETCHCONTENT_FULLY_DISCONNECTED", "").upper() in ("ON", "TRUE", "1", "YES")
    sites: list[str] = []
    served: list[str] = []
    declared: list[str] = []
    for path, text in cmake_files(source, live=live):
        for m in _FETCH.finditer(text):
            name = m.group(1).split("(")[0].strip()
            where = f"{_where(path, source, text, m.start())} {'file(DOWNLOAD)' if name.lower() == 'file' else name}"
            content = re.match(r"\s*([A-Za-z0-9_.+-]+)", text[m.end():]) if name.lower() == "fetchcontent_declare" else None
            if content is not None:
                var = f"FETCHCONTENT_SOURCE_DIR_{content.group(1).upper()}"
                if given.get(var, "").strip() or disconnected:
                    served.append(f"{content.group(1)} ({var if not disconnected else 'FETCHCONTENT_FULLY_DISCONNECTED'})")
                    continue
                declared.append(var)
            sites.append(where)
    if not sites:
        if served:
            return Finding("network", "ok", "the project's CMake declares FetchContent content the row's cache "
                           f"serves from a directory: {', '.join(served)}")
        return None
    more = f", and {len(sites) - 3} more" if len(sites) > 3 else ""
    holding = ("in [project.cache]: " + ", ".join(f"{v} = a directory holding its source" for v in dict.fromkeys(declared))
               if declared else "a CPM_SOURCE_CACHE or FETCHCONTENT_SOURCE_DIR_<NAME> holding them")
    return Finding("network", "note", f"the project's CMake fetches from the network while it configures "
                   f"({'; '.join(sites[:3])}{more}): a builder without network access fails there",
                   "build where the network is reachable, or give the project its dependencies the way its docs "
                   f"say ({holding})")


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


_NVCC_ON_PATH = re.compile(r"""\b(?:search_on_path|which|find_executable)\s*\(\s*\[?\s*["']nvcc[^)\n]*\)""")


def setup_py_nvcc_from_path(project: Path) -> str | None:
    """Where a setup.py looks nvcc up on PATH to find its CUDA root ("setup.py:LINE ..."): pycuda's
    `search_on_path(["nvcc", "nvcc.exe"])`, `shutil.which("nvcc")`; None when it does not."""
    try:
        text = (project / "setup.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    m = _NVCC_ON_PATH.search(text)
    if m is None:
        return None
    return f"setup.py:{text.count(chr(10), 0, m.start()) + 1} {m.group(0)}"


#: The CUDA libraries a setup.py's extensions link by name (`libraries=[...]`, `-lNAME`), as the
#: CUDA component each is (CUDA_COMPONENTS' keys).
_SETUP_PY_LIBRARIES = {"cuda": "cuda_driver", "cudart": "cudart", "cudart_static": "cudart_static", "nvrtc": "nvrtc",
                       "cublas": "cublas", "cublasLt": "cublasLt", "cufft": "cufft", "cufftw": "cufftw",
                       "curand": "curand", "cusolver": "cusolver", "cusparse": "cusparse", "nvJitLink": "nvJitLink",
                       "nvidia-ml": "nvml", "cupti": "cupti"}
_LIBRARIES_ARG = re.compile(r"\blibraries\s*=\s*\[([^\]]*)\]")
_LINK_FLAG = re.compile(r"""["']-l([A-Za-z0-9_-]+)["']""")
#: aksetup's configure schema (pycuda, pyopencl): `Libraries("CURAND", ["curand"])` declares the
#: option CURAND_LIBNAME with its default; the build links it where setup.py reads conf["CURAND_LIBNAME"].
_AKSETUP_LIBRARIES = re.compile(r"""\bLibraries\s*\(\s*["']([A-Za-z0-9_]+)["']\s*,\s*\[([^\]]*)\]""")
#: A siteconf.py (aksetup's configure output) or setup.cfg value that replaces a default.
_SITECONF_LIBNAME = re.compile(r"^\s*([A-Za-z0-9_]+)_LIBNAME\s*=\s*\[([^\]]*)\]", re.MULTILINE)


def _names(text: str) -> list[str]:
    return re.findall(r"""["']([^"']+)["']""", text)


def _setup_cfg_libraries(project: Path) -> tuple[list[str], str] | None:
    """setup.cfg's [build_ext] libraries (distutils' option: names separated by spaces or commas)."""
    import configparser

    path = project / "setup.cfg"
    if not path.is_file():
        return None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
        if parser.has_option("build_ext", "libraries"):
            value = parser.get("build_ext", "libraries")
            return [n for n in re.split(r"[\s,]+", value) if n], value.strip()
    except configparser.Error:
        return None
    return None


def setup_py_cuda_libraries(project: Path) -> dict[str, str]:
    """The CUDA libraries a setup.py links its extensions with, each with where it is first named
    ("setup.py:LINE libraries=[...]"): pyvkfft 2025.1.1's `libraries=['nvrtc', 'cuda']`, whose
    nvrtc.h the machine's nvcc-only toolkit lacked while doctor said the row was ready; `-lNAME`
    flags; setup.cfg's [build_ext] libraries; and an aksetup configure schema's
    `Libraries("CUDADRV", ["cuda"])` whose CUDADRV_LIBNAME the setup.py reads (pycuda 2026.1: the
    driver API and cuRAND; its Libraries("CUDART", ["cudart"]) is declared and never read, so not
    linked), with the value a siteconf.py gives it instead of the default."""
    try:
        text = (project / "setup.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    found: dict[str, str] = {}
    try:
        siteconf = (project / "siteconf.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        siteconf = ""
    configured = {m.group(1): (_names(m.group(2)), m.group(0).strip()) for m in _SITECONF_LIBNAME.finditer(siteconf)}
    for m in _AKSETUP_LIBRARIES.finditer(text):
        option = m.group(1)
        rest = text[:m.start()] + text[m.end():]
        if not re.search(rf"""["']{option}_LIBNAME["']""", rest):
            continue  # declared, never read: not linked
        line = text.count("\n", 0, m.start()) + 1
        names, where = _names(m.group(2)), f"setup.py:{line} {m.group(0).strip()}) ({option}_LIBNAME)"
        if option in configured:
            names, where = configured[option][0], f"siteconf.py {configured[option][1]}"
        for name in names:
            if name in _SETUP_PY_LIBRARIES:
                found.setdefault(_SETUP_PY_LIBRARIES[name], where)
    cfg = _setup_cfg_libraries(project)
    if cfg is not None:
        for name in cfg[0]:
            if name in _SETUP_PY_LIBRARIES:
                found.setdefault(_SETUP_PY_LIBRARIES[name], f"setup.cfg [build_ext] libraries = {cfg[1]}")
    for m in _LIBRARIES_ARG.finditer(text):
        for name in re.findall(r"""["']([^"']+)["']""", m.group(1)):
            if name in _SETUP_PY_LIBRARIES:
                line = text.count("\n", 0, m.start()) + 1
                found.setdefault(_SETUP_PY_LIBRARIES[name], f"setup.py:{line} libraries=[{m.group(1).strip()}]")
    for m in _LINK_FLAG.finditer(text):
        if m.group(1) in _SETUP_PY_LIBRARIES:
            found.setdefault(_SETUP_PY_LIBRARIES[m.group(1)], f"setup.py:{text.count(chr(10), 0, m.start()) + 1} -l{m.group(1)}")
    return found


class Probe(Protocol):
    """What doctor needs to look at on the machine."""

    def tool(self, name: str, env: Mapping[str, str]) -> tuple[str | None, str | None]:
        """(path, `NAME --version` output) or (None, None)."""

    def distributions(self, python: str, names: Sequence[str]) -> dict[str, str | None]:
        """Installed version of each named distribution for that interpreter (canonical names)."""

    def interpreter(self, python: str) -> tuple[str | None, str | None]:
        """(the X.Y[t] version the interpreter reports, None) or (None, why it does not run)."""


_VERSION_SCRIPT = (
    "import sys, sysconfig\n"
    "print('%d.%d%s' % (*sys.version_info[:2], 't' if sysconfig.get_config_var('Py_GIL_DISABLED') else ''))"
)
_DIST_SCRIPT = (
    "import json,sys\nfrom importlib import metadata\nout={}\n"
    "for n in sys.argv[1:]:\n    try: out[n]=metadata.version(n)\n    except Exception: out[n]=None\n"
    "print(json.dumps(out))"
)


_TOOL_VERSIONS: dict[tuple[object, ...], str] = {}


def is_running_interpreter(python: str) -> bool:
    """Whether `python` is the interpreter buildrows runs on *and* sees the same packages, so its
    distributions can be read in-process. A virtual environment's python links to its base
    interpreter: the file it resolves to says nothing about its site-packages (a row environment
    of the same base as buildrows' own venv holds other packages), so environments are compared
    by their directory, and only two plain interpreters by the file they resolve to."""
    from buildrows.build.drivers import environment_bin

    mine, theirs = environment_bin(sys.executable), environment_bin(python)
    if mine is not None or theirs is not None:
        return mine == theirs
    return Path(python).resolve() == Path(sys.executable).resolve()


@dataclass
class MachineProbe:
    """The real machine: tools through `buildrows.process.runner`, distributions in-process when possible."""

    seen: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)

    def tool(self, name: str, env: Mapping[str, str]) -> tuple[str | None, str | None]:
        from buildrows.process.runner import capture, find_tool

        path = find_tool(name, env)
        if path is None:
            return None, None
        try:  # `--version` of one file, asked once per run (doctor asks it for every row)
            st = os.stat(path)
            ident: tuple[object, ...] | None = (os.path.realpath(path), st.st_mtime_ns, st.st_size)
        except OSError:
            ident = None
        if ident is not None and ident in _TOOL_VERSIONS:
            return path, _TOOL_VERSIONS[ident]
        got = capture([path, "--version"], env, timeout=30)
        if got.error is None and got.code == 0 and ident is not None:
            _TOOL_VERSIONS[ident] = got.output
        return path, (got.output if got.error is None else got.error)

    def interpreter(self, python: str) -> tuple[str | None, str | None]:
        from buildrows.process.runner import capture

        if is_running_interpreter(python):
            from buildrows.plan.host import host_python

            return host_python(), None

        got = capture([python, "-c", _VERSION_SCRIPT], timeout=60)
        if got.error is not None:
            return None, got.error
        last = got.output.strip().splitlines()[-1:] or ["(no output)"]
        if got.code != 0:
            return None, f"it exited with status {got.code}: {last[0][:200]}"
        return last[0].strip(), None

    def distributions(self, python: str, names: Sequence[str]) -> dict[str, str | None]:
        if is_running_interpreter(python):
            from importlib import metadata

            out: dict[str, str | None] = {}
            for n in names:
                try:
                    out[n] = metadata.version(n)
                except metadata.PackageNotFoundError:
                    out[n] = None
            return out
        from buildrows.process.runner import capture

        got = capture([python, "-c", _DIST_SCRIPT, *names], timeout=60)
        try:
            data = json.loads(got.output.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return dict.fromkeys(names)
        return {n: data.get(n) for n in names}


def diagnose(policy: Policy, row: Row, env: Mapping[str, str], project: Path, *, driver: Driver,
             host: HostOs, isolation: bool = False, probe: Probe | None = None,
             interpreter: Interpreter | None = None, toolkit: str | None = None) -> list[Finding]:
    """Every finding for building `row` of `policy` in `project` with `driver` on this machine."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    from buildrows.plan.host import refuse_other_machine
    from buildrows.plan.toolchain import choose_generator
    from buildrows.provision.interpreters import find_interpreter

    probe = probe or MachineProbe()
    row.require_archs("doctor")
    findings: list[Finding] = []
    if row.os != host:
        findings.append(Finding("host", "refused", f"row {row.name} is built on {row.os}, and this host is {host}",
                                f"run it on a {row.os} builder"))
        return findings
    try:
        refuse_other_machine(row.name, row.platform, env, "doctor")
    except Refused as e:
        what, _, fix = str(e).partition("\n    fix: ")
        findings.append(Finding("host", "refused", what.removeprefix("doctor: "), fix))
        return findings
    runs_cmake = driver_runs_cmake(project, driver)
    if runs_cmake:
        findings.append(check_tool("cmake", *probe.tool("cmake", env), MIN_CMAKE, cmake_fix()))
        if choose_generator(row, env, host).is_ninja:
            findings.append(check_tool("ninja", *probe.tool("ninja", env), MIN_NINJA, ninja_fix()))
    else:
        findings.append(not_run_by_driver(project))
    findings.append(check_cuda(row, policy, env, host, toolkit))
    if runs_cmake:
        project_cmake = check_project_cmake(row, project, driver, probe.tool("cmake", env), env)
        if not any(f.check == "generator" for f in project_cmake):  # else it says the generator is left unset
            findings += check_generator(row, env, host)
        findings += project_cmake
        fetches = check_network_fetches(cmake_source_dir(project, driver), row_live(row, project, driver, env),
                                        dict(row.cache))
        if fetches is not None:
            findings.append(fetches)
        if row.is_cuda:
            findings += check_cuda_components(row, project, policy, env, host, driver, toolkit)
    elif row.is_cuda:
        findings += check_cuda_components(row, project, policy, env, host, driver, toolkit)
    project_problem = check_project(project, driver)
    if project_problem is not None:
        findings.append(project_problem)
    from buildrows.build.doctor_predict import predict

    findings += predict(policy, row, project, driver, isolation=isolation)  # the check init foretold
    if driver == "cmake-presets":
        return findings
    from buildrows.build.repair import findings as repair_findings

    findings += repair_findings(policy, row, env)  # [repair] auditwheel: auditwheel and patchelf
    from buildrows.build.doctor_sources import machine_has_gpu, source_findings

    findings += source_findings(policy, row, project, env, gpu=machine_has_gpu())  # downloads, -gencode, GPU
    provided = interpreter is not None  # build --provision passes its row environment's interpreter
    if interpreter is None:
        search = find_interpreter(row.python, env)
        interpreter = search.found
        if interpreter is None:
            finding = check_python(row, None, rejected=search.rejected, env=env, places=search.looked)
        else:
            finding = check_python(row, interpreter.path, probe.interpreter(interpreter.path), env=env)
    else:
        finding = check_python(row, interpreter.path, probe.interpreter(interpreter.path), env=env)
    python = interpreter.path if interpreter else None
    findings.append(finding)
    if python is None or finding.failed:
        return findings
    reqs = [FRONTEND]
    if not isolation and project_problem is None:
        project_reqs, problem = build_requirements(project, driver)
        if problem is not None:
            findings.append(Finding("build requirements", "missing", problem,
                                    "give the project a pyproject.toml with [build-system] requires"))
        reqs += project_reqs
    names: list[str] = []
    for text in reqs:
        with contextlib.suppress(InvalidRequirement):
            names.append(canonicalize_name(Requirement(text).name))
    if not provided and not isolation and project_problem is None:
        # The row environment `build --provision` made earlier (same interpreter, same requirements)
        # is what a provisioned build uses: judge that one.
        from buildrows.provision.buildenv import plan_row_env

        be = plan_row_env(policy, row, interpreter, project, reqs, env) if interpreter is not None else None
        if be is not None and be.ready:
            python = be.python
            findings.append(Finding("row environment", "ok", f"{be.root} (made by `buildrows build "
                                    f"{row.name} --provision`; the build requirements are judged there)"))
    checked = check_requirements(python, reqs, probe.distributions(python, names), isolation=isolation)
    provision = (f"; or `buildrows build {row.name} --provision`, which builds in a cached environment of "
                 "this interpreter holding them")
    findings += [Finding(f.check, f.status, f.seen, f.fix + provision) if f.failed and not provided else f
                 for f in checked]
    if driver == "setup.py" and row.os == "linux":
        linked = link_rpath_findings(policy, python, env)
        findings += linked
    from buildrows.plan.torchenv import uses_torch

    if uses_torch(project, reqs):
        missing = check_torch_installed(policy, row, python, probe.distributions(python, ["torch"])["torch"], env)
        if missing is not None:
            findings.append(missing)
        elif row.is_cuda:
            findings += _torch_cuda_home(policy, row, env, host, python, project)
    return findings


_RPATH_FLAG = re.compile(r"-Wl,-(?:rpath|R)[,=](\S+)")


def link_rpath_findings(policy: Policy, python: str, env: Mapping[str, str]) -> list[Finding]:
    """What the link command a setup.py row's build uses writes as RPATH: the user's LDSHARED as
    it is, else the interpreter's, less its own lib directory, which the build drops
    (`buildrows.build.ldshared`: an ok finding says so)."""
    if "LDSHARED" in env:
        linked = check_link_rpath(policy, env["LDSHARED"])
        return [linked] if linked is not None else []
    from buildrows.build.ldshared import build_ldshared, interpreter_link, own_rpaths

    link = interpreter_link(python)
    ldshared = build_ldshared(link, env)
    out: list[Finding] = []
    if ldshared is not None:
        out.append(Finding("link rpath", "ok", f"the row's interpreter links extensions with -Wl,-rpath,"
                           f"{', '.join(own_rpaths(link.ldshared, link.libdir))} (its own lib directory, in its "
                           "LDSHARED): the build sets LDSHARED without it, so no extension carries that path"))
    linked = check_link_rpath(policy, ldshared if ldshared is not None else link.ldshared)
    return out + ([linked] if linked is not None else [])


def check_link_rpath(policy: Policy, ldshared: str) -> Finding | None:
    """A note when the link command setuptools takes from the row's interpreter (LDSHARED) writes
    an absolute RPATH into every extension (a pyenv Python built with --enable-shared adds
    `-Wl,-rpath,<its lib>`; seen on torch_spline_conv 1.2.2): the check's runtime-reached fails
    each library unless the policy lists the entry under [[check.rpath-exceptions]]."""
    import fnmatch

    kept = [e.entry for e in policy.check.rpath_exceptions if e.entry is not None]
    entries = list(dict.fromkeys(m for m in _RPATH_FLAG.findall(ldshared) if m.startswith("/")))
    uncovered = [e for e in entries if not any(fnmatch.fnmatchcase(e, k) for k in kept)]
    if not uncovered:
        return None
    return Finding("link rpath", "note", f"the row's interpreter links extensions with `{ldshared}` (its LDSHARED): "
                   f"each library gets the absolute RUNPATH {', '.join(uncovered)}, which the check's "
                   "runtime-reached judge fails",
                   "build with an interpreter whose LDSHARED writes no -rpath (manylinux's /opt/python, uv's), set "
                   "LDSHARED for the build, or list the entry under [[check.rpath-exceptions]] with its reason")


def check_torch_installed(policy: Policy, row: Row, python: str, version: str | None,
                          env: Mapping[str, str]) -> Finding | None:
    """A project that builds against torch needs the torch of the row's train in the row's Python:
    None when one is installed, else the finding whose fix names the environment, the torch and
    the index serving the train."""
    if version is not None:
        return None
    import shlex

    from buildrows.provision.torch import reachable_fix, torch_for_row

    t = torch_for_row(row, policy.project.torch, env)
    pip = shlex.join([python, "-m", "pip", "install", *t.pip_arguments()])
    return Finding("torch", "missing", f"not installed for {python}, and the project builds against torch "
                   "(torch.utils.cpp_extension, or torch among its build requirements)",
                   reachable_fix(row, t, f"buildrows build {row.name} --provision", pip))  # routes that work here


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


def verdict(findings: Sequence[Finding], row: Row) -> None:
    """Refuse (exit 3) when any finding failed. The findings themselves, with their fixes, are the
    report printed just before; the refusal names them without repeating them."""
    failed = [f for f in findings if f.failed]
    if failed:
        raise Refused(f"row {row.name} cannot be built on this machine ({len(failed)} problem"
                      f"{'s' if len(failed) != 1 else ''}: {', '.join(f.check for f in failed)}; each with its fix above)")

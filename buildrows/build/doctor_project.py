"""Doctor's findings from the project's own files: its CMake (what it reads, links and fetches) and its setup.py."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path

from buildrows.build.doctor_tools import _dotted
from buildrows.build.findings import Finding, parse_version
from buildrows.policy.model import Driver, Row


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

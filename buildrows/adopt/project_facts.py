"""What the project is: its name, build driver, CUDA option and switches, and how its CMake takes CUDA (`ProjectFacts`).

`detect_project` looks at the project's files (setup.py, pyproject.toml's build backend,
CMakeLists.txt and its presets, a CUDA `option()`); a pure function of what it is given.
Split from `buildrows.adopt.starter`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from buildrows.errors import BadInput
from buildrows.policy.model import Driver
from buildrows.policy.switches import SetupSources

_OPTION = re.compile(r"^\s*option\s*\(\s*([A-Za-z0-9_]*CUDA[A-Za-z0-9_]*)\b", re.MULTILINE | re.IGNORECASE)


@dataclass(frozen=True)
class ProjectFacts:
    """What init found in the project directory, and where."""

    name: str
    driver: Driver
    why: str  # how the driver was detected
    cuda_option: str | None
    cuda_option_from: str | None
    name_from: str = "the directory's name"
    torch: bool = False  # a torch.utils.cpp_extension setup.py: runtime mode torch, stamp
    switches: tuple[str, ...] = ()  # environment switches the setup.py reads ("!NAME": one that means CPU)
    cudart_static: str | None = None  # where its CMake links CUDA::cudart_static, naming no CUDA::cudart
    finds_cuda: str | None = None  # where its CMake looks for CUDA without requiring it (no switch of its own)
    #: What it links when it links the driver API, NVRTC or CUDA libraries and no CUDA runtime (runtime
    #: mode "none"), with where each is named; None otherwise.
    no_runtime: str | None = None
    #: The CUDA components it links then (doctor's names: cuda_driver, curand, ...).
    linked: tuple[str, ...] = ()
    checks_cuda: str | None = None  # where its CMake enables CUDA if check_language(CUDA) finds nvcc (no switch)
    #: Where it links OpenMP (find_package(OpenMP), -fopenmp), not being a torch extension: its
    #: Linux wheels NEED libgomp, which only a repair bundles ([repair] auditwheel); None otherwise.
    openmp: str | None = None
    #: What the setup.py says about CUDA (its switches with their on-values, GPU detection,
    #: downloads, a hard-coded -gencode list, a CUDAExtension-only build): `policy.switches`.
    sources: SetupSources = field(default_factory=SetupSources)
    #: [repair] exclude globs, and why: the project installs its libraries a second time without RPATH.
    repair_excludes: tuple[list[str], str] | None = None


#: Environment switches setup.py files read to turn CUDA on (or, "!", to force CPU).
KNOWN_SWITCHES = ("FORCE_CUDA", "WITH_CUDA", "USE_CUDA", "BUILD_CUDA")
CPU_SWITCHES = ("FORCE_ONLY_CPU", "FORCE_CPU", "CPU_ONLY")
# Switches that mean "CUDA only" (FORCE_ONLY_CUDA) are never listed, so never turned on: upstream's
# CUDA wheel (FORCE_CUDA=1) ships the CPU modules too (torch_scatter, torch_spline_conv: `suffices =
# ['cuda', 'cpu']`), and FORCE_ONLY_CUDA=1 would drop them from the CUDA row's wheel (issue 28).


def _name(project: Path, doc: dict[str, object]) -> tuple[str, str]:
    """The project's distribution name and where it was read: pyproject.toml's [project], an
    sdist's PKG-INFO, setup.cfg's [metadata], setup.py's setup(name=...), else the directory's
    name without a trailing version (an unpacked sdist is NAME-VERSION)."""
    import configparser
    import re

    table = doc.get("project")
    if isinstance(table, dict) and isinstance(table.get("name"), str):
        return table["name"], "pyproject.toml"
    info = project / "PKG-INFO"
    if info.is_file():
        m = re.search(r"^Name:\s*(\S+)", info.read_text(encoding="utf-8", errors="replace"), re.MULTILINE)
        if m:
            return m.group(1), "PKG-INFO"
    cfg = project / "setup.cfg"
    if cfg.is_file():
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(cfg, encoding="utf-8")
            if parser.has_option("metadata", "name"):
                return parser.get("metadata", "name").strip(), "setup.cfg"
        except configparser.Error:
            pass
    setup_py = project / "setup.py"
    if setup_py.is_file():
        m = re.search(r"""\bname\s*=\s*['"]([A-Za-z0-9][A-Za-z0-9._-]*)['"]""",
                      setup_py.read_text(encoding="utf-8", errors="replace"))
        if m:
            return m.group(1), "setup.py"
    folder = project.resolve().name
    return re.sub(r"-\d+(\.\d+)*([a-z]+\d*)?$", "", folder) or folder, "the directory's name"


def _setup_py_facts(project: Path) -> tuple[bool, tuple[str, ...], bool]:
    """(a torch.utils.cpp_extension project, the switches its setup.py reads, whether it runs CMake)."""
    import re

    try:
        text = (project / "setup.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False, (), False
    torch = "torch.utils.cpp_extension" in text or "from torch.utils import cpp_extension" in text
    read = set(re.findall(r"""(?:environ\.get|getenv|environ\[)\s*\(?\s*['"]([A-Z][A-Z0-9_]*)['"]""", text))
    switches = tuple([s for s in KNOWN_SWITCHES if s in read] + ["!" + s for s in CPU_SWITCHES if s in read])
    return torch, switches, "cmake" in text.lower()


def _toml(path: Path) -> dict[str, object]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data: dict[str, object] = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise BadInput(f"{path}: cannot be read: {e}\n    fix: correct the file, then run buildrows init again") from e
    return data


def detect_project(project: Path, driver: Driver | None = None) -> ProjectFacts:
    """The project's name, build driver and CUDA switch, from its files."""
    pyproject = project / "pyproject.toml"
    doc = _toml(pyproject) if pyproject.is_file() else {}
    name, name_from = _name(project, doc)
    system = doc.get("build-system")
    backend = system.get("build-backend", "") if isinstance(system, dict) else ""
    cmakelists = project / "CMakeLists.txt"
    if driver is not None:
        why = "--driver"
    elif isinstance(backend, str) and backend.startswith("scikit_build_core"):
        driver, why = "scikit-build-core", f"pyproject.toml's build-backend {backend}"
    elif (project / "setup.py").is_file():
        driver, why = "setup.py", "setup.py"
    elif pyproject.is_file() and backend:
        driver, why = "setup.py", f"pyproject.toml's build-backend {backend} (built through PEP 517 with the row's environment)"
    elif cmakelists.is_file():
        presets = [p for p in ("CMakePresets.json", "CMakeUserPresets.json") if (project / p).is_file()]
        driver = "cmake-presets"
        why = "CMakeLists.txt" + (f" with {' and '.join(presets)}" if presets else "") + " and no Python packaging"
    else:
        raise BadInput(f"{project} has no setup.py, pyproject.toml or CMakeLists.txt: buildrows cannot tell how it "
                       "is built\n    fix: run buildrows init in the project's root directory (or pass --driver)")
    torch, switches, runs_cmake = _setup_py_facts(project) if driver == "setup.py" else (False, (), True)
    from buildrows.adopt.starter_sources import cmake_cuda_option, merged_switches
    from buildrows.policy.switches import read_setup_py

    sources = read_setup_py(project) if driver == "setup.py" else SetupSources()
    switches = merged_switches(switches, sources)
    option, option_from = None, None
    # A setup.py that never runs CMake never reads a CMakeLists.txt's option (diso ships one for
    # another build): no cuda-option from it.
    if cmakelists.is_file() and runs_cmake:
        m = _OPTION.search(cmakelists.read_text(encoding="utf-8", errors="replace"))
        if m:
            option, option_from = m.group(1), f"option({m.group(1)} ...) in CMakeLists.txt"
    if option is None and runs_cmake and driver != "cmake-presets":  # one in a subdirectory it adds (ggml's GGML_CUDA)
        from buildrows.build.doctor_project import cmake_source_dir

        option, option_from = cmake_cuda_option(cmake_source_dir(project, driver), project) or (None, None)
    static, finds, checks = _cmake_cuda(project, driver) if runs_cmake and not torch else (None, None, None)
    linked = {} if torch else _links_without_runtime(project, driver, runs_cmake)
    openmp = _links_openmp(project, driver, runs_cmake) if driver != "cmake-presets" and not torch else None
    from buildrows.adopt.starter_sources import project_repair_excludes

    excludes = project_repair_excludes(project, driver) if openmp is not None and runs_cmake else None
    return ProjectFacts(name, driver, why, option, option_from, name_from, torch, switches, static,
                        None if option else finds, _linked_text(linked) if linked else None, tuple(linked),
                        checks_cuda=None if option else checks, openmp=openmp, sources=sources,
                        repair_excludes=excludes)


_OPENMP = re.compile(r"\bfind_package\s*\(\s*OpenMP\b|\bOpenMP::OpenMP_(?:C|CXX)\b|-fopenmp\b", re.IGNORECASE)


def _links_openmp(project: Path, driver: Driver, runs_cmake: bool) -> str | None:
    """Where the project links OpenMP (`find_package(OpenMP) in CMakeLists.txt:392`), from its
    CMake files and its setup.py; None when neither names it."""
    from buildrows.build.doctor_project import cmake_files, cmake_source_dir

    texts: list[tuple[Path, str]] = []
    if driver == "setup.py" and (project / "setup.py").is_file():
        texts.append((project / "setup.py", (project / "setup.py").read_text(encoding="utf-8", errors="replace")))
    if runs_cmake:
        texts += list(cmake_files(cmake_source_dir(project, driver)))
    for path, text in texts:
        m = _OPENMP.search(text)
        if m:
            name = path.relative_to(project) if path.is_relative_to(project) else path
            said = "find_package(OpenMP)" if m.group(0).lower().startswith("find_package") else m.group(0)
            return f"{said} in {name}:{text.count(chr(10), 0, m.start()) + 1}"
    return None


#: How init's comment names what a project links (the CUDA components of buildrows.build.doctor).
_COMPONENT_NAMES = {"cuda_driver": "the driver API", "nvrtc": "NVRTC", "curand": "cuRAND", "cublas": "cuBLAS",
                    "cublasLt": "cuBLASLt", "cufft": "cuFFT", "cufftw": "cuFFTW", "cusolver": "cuSOLVER",
                    "cusparse": "cuSPARSE", "nvJitLink": "nvJitLink", "nvml": "NVML", "cupti": "CUPTI"}
#: Components the driver installs (libcuda, libnvidia-ml) or that are headers only: no package to declare.
_NOT_PACKAGED = ("cuda_driver", "nvml", "nvtx3", "toolkit")
#: A setup.py that compiles CUDA with nvcc (a .cu source, torch's CUDAExtension, a compiler swapped in):
#: nvcc links cudart statically by default, so it has a runtime.
_COMPILES_CUDA = re.compile(r"""\.cu["']|\bCUDAExtension\b|\bsrc_extensions\b|\bcompiler_so\b""")


def _links_without_runtime(project: Path, driver: Driver, runs_cmake: bool) -> dict[str, str]:
    """The CUDA components (with where each is named) of a project that links the driver API,
    NVRTC or CUDA libraries and no CUDA runtime: pycuda 2026.1's setup.py (aksetup's
    Libraries("CUDADRV", ["cuda"]) and Libraries("CURAND", ["curand"]), only .cpp compiled by the
    host compiler); a CMake project naming CUDA::cuda_driver or CUDA::nvrtc, no CUDA::cudart*, and
    no CUDA language (whose targets link cudart, statically by default). Empty otherwise."""
    from buildrows.build.doctor_project import (
        cmake_files,
        cmake_source_dir,
        cuda_components,
        setup_py_cuda_libraries,
    )

    if driver == "setup.py" and not runs_cmake:
        used = setup_py_cuda_libraries(project)
        try:
            text = (project / "setup.py").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return {}
        if _COMPILES_CUDA.search(text):
            return {}
    elif driver != "setup.py":
        source = cmake_source_dir(project, driver)
        used = cuda_components(source)
        if any(_CUDA_LANGUAGE.search(text) for _, text in cmake_files(source)):
            return {}
    else:
        return {}  # a setup.py that runs CMake: its CMake is not read here
    used = {k: v for k, v in used.items() if k in _COMPONENT_NAMES or k.removesuffix("_static") in _COMPONENT_NAMES}
    if not used or any(k.startswith("cudart") for k in used):
        return {}
    return used


def _linked_text(linked: dict[str, str]) -> str:
    return "; ".join(f"{_COMPONENT_NAMES.get(k.removesuffix('_static'), k)} ({where})" for k, where in linked.items())


def library_requirements(linked: Sequence[str], major: int) -> tuple[str, ...]:
    """The NVIDIA packages (of CUDA `major`) that carry the shared CUDA libraries a project links, as
    requirements pinned to the soname's major ("nvidia-curand>=10,<11; platform_system == 'Linux'")."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    from buildrows.check.nvidia import carriers
    from buildrows.resources import data_file

    majors = tomllib.loads(data_file("cuda_sonames.toml").read_text(encoding="utf-8")).get("libraries", {})
    out: list[str] = []
    for comp in linked:
        if comp in _NOT_PACKAGED or comp.endswith("_static"):
            continue
        soname_major = majors.get(f"lib{comp}", {}).get("majors", {}).get(str(major))
        if soname_major is None:
            continue
        offer = [p for p in carriers(f"lib{comp}.so.{soname_major}")
                 if not re.search(r"-cu\d+$", p) or p.endswith(f"-cu{major}")]
        if offer:
            req = f"{offer[0]}>={soname_major},<{soname_major + 1}; platform_system == 'Linux'"
            if req not in out:
                out.append(req)
    return tuple(out)


_CUDA_LANGUAGE = re.compile(r"^[ \t]*(?:enable_language\s*\(\s*CUDA\b|project\s*\([^)]*\bLANGUAGES\b[^)]*\bCUDA\b)",
                            re.MULTILINE | re.IGNORECASE)
_SHARED_RUNTIME = re.compile(r"CUDA_RUNTIME_LIBRARY\s+\"?Shared|\bfind_package\s*\(\s*Torch\b|"
                             r"target_link_libraries\s*\([^)]*(?<![\w:])(?:-l)?cudart\b(?!_static)", re.IGNORECASE)
_FINDS_CUDA = re.compile(r"^[ \t]*find_package\s*\(\s*CUDAToolkit\b([^)]*)\)", re.MULTILINE | re.IGNORECASE)
_CHECKS_CUDA = re.compile(r"^[ \t]*check_language\s*\(\s*CUDA\s*\)", re.MULTILINE | re.IGNORECASE)


def _cmake_cuda(project: Path, driver: Driver) -> tuple[str | None, str | None, str | None]:
    """How the project's CMake (every file a configure may read) takes CUDA: where it links
    CUDA::cudart_static when it names no CUDA::cudart (the runtime is linked in statically), and
    where it calls find_package(CUDAToolkit) without REQUIRED (CUDA whenever a toolkit is found:
    cuvec 6.0.1, whose CPU rows then need CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit), and where it
    calls check_language(CUDA) (CUDA whenever nvcc is found: qsimcirq 0.22.0, whose CPU rows then
    need CMAKE_CUDA_COMPILER=NOTFOUND, which check_language leaves as it is)."""
    from buildrows.build.doctor_project import cmake_files, cmake_source_dir, cuda_components

    source = cmake_source_dir(project, driver)
    used = cuda_components(source)
    static = used.get("cudart_static") if "cudart" not in used else None
    if static is not None and source != project and source.is_relative_to(project):
        static = f"{source.relative_to(project).as_posix()}/{static}"
    texts = [(path, text) for path, text in cmake_files(source)]
    if static is None and "cudart" not in used:
        # CMake links the runtime of a target with CUDA sources statically unless told otherwise
        # (CMAKE_CUDA_RUNTIME_LIBRARY defaults to Static): LightGBM 4.7.0 enables CUDA and names
        # no CUDA::cudart, so its CUDA wheel carries cudart. Not for a project that says Shared,
        # links cudart by name, or builds against torch (whose targets bring the shared one).
        for path, text in texts:
            m = _CUDA_LANGUAGE.search(text)
            if m is not None:
                rel = path.relative_to(project) if path.is_relative_to(project) else path
                static = (f"{rel.as_posix()}:{text.count(chr(10), 0, m.start()) + 1} enables CUDA; CMake's default "
                          "CMAKE_CUDA_RUNTIME_LIBRARY is Static")
                break
        if static is not None and any(_SHARED_RUNTIME.search(text) for _, text in texts):
            static = None
    finds = checks = None
    for path, text in texts:
        m = next((m for m in _FINDS_CUDA.finditer(text) if "REQUIRED" not in m.group(1).upper()), None)
        rel = path.relative_to(project) if path.is_relative_to(project) else path
        if m is not None and finds is None:
            finds = f"{rel.as_posix()}:{text.count(chr(10), 0, m.start()) + 1}"
        c = _CHECKS_CUDA.search(text)
        if c is not None and checks is None:
            checks = f"{rel.as_posix()}:{text.count(chr(10), 0, c.start()) + 1}"
    return static, finds, checks


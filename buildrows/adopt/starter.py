"""A starting policy for an existing project (`buildrows init`): detect, then write text.

`detect_project` looks at the project's files (setup.py, pyproject.toml's build backend,
CMakeLists.txt and its presets, a CUDA `option()`); `starter_text` turns what was found, and the
architecture lists taken from a wheel, into a commented buildrows.toml. Both are pure functions of
what they are given; the command validates the text as a policy before writing it, and never
writes over an existing policy.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from buildrows.adopt.from_wheel import (
    WheelFacts,
    check_toml,
    infer,
    list_text,
    runtime_toml,
    train_lists,
    trains_of,
)
from buildrows.errors import BadInput
from buildrows.policy.archs import ArchList, Train
from buildrows.policy.model import Driver
from buildrows.policy.switches import SetupSources

#: Python versions a starting policy builds (the seed's allowlist); the running one is added.
START_PYTHONS = ("3.10", "3.11", "3.12", "3.13")
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


#: How init's comment names what a project links (the CUDA components of buildrows.build.doctor_cuda).
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


@dataclass(frozen=True)
class CudaStart:
    """One train's starting list, and where it came from (a wheel, or buildrows' starting list)."""

    train: Train
    archs: ArchList
    text: str  # as the policy writes it
    ptx_none: bool
    source: str
    facts: WheelFacts | None = None  # what init --from-wheel read of how the wheel is built and loaded


def _q(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def starter_text(facts: ProjectFacts, platform: str, pythons: list[str], cuda: CudaStart | None, cpu: bool) -> str:
    """A commented buildrows.toml for the project: one platform, its CUDA train (if any), CPU rows if asked."""
    lines = [
        "# buildrows policy, started by `buildrows init`: the wheels this project publishes, as rows",
        "# (platform x CUDA train x Python). `buildrows rows` lists them; every key is described in",
        "# buildrows' policy reference (docs/reference/policy.md), and `buildrows schema` prints them.",
        "",
        "[project]",
        f"name = {_q(facts.name)}  # from {facts.name_from}",
        f"driver = {_q(facts.driver)}  # detected from {facts.why}",
        'source-dir = "."',
    ]
    if facts.torch:
        lines.append("stamp = true  # a torch extension's build sets no local version: stamping adds +cuXYZ and pins torch")
    elif facts.driver == "setup.py":
        lines.append("stamp = true  # the built wheel gets the row's local version (+cuXYZ) and runtime requirement; "
                     "setup.py stays as it is")
    if facts.switches:
        lines.append("env-switches = [" + ", ".join(_q(s) for s in facts.switches) + "]  # read by setup.py "
                     "(1 on CUDA rows, 0 on CPU rows; !NAME the other way round; NAME=VALUE: VALUE where on, "
                     "empty where off)")
    if facts.cuda_option:
        lines.append(f"cuda-option = {_q(facts.cuda_option)}  # from {facts.cuda_option_from}: ON for CUDA rows, OFF for CPU rows")
    elif not facts.torch:
        lines.append("# cuda-option = \"MYPROJ_BUILD_CUDA\"  # the project's CMake switch for CUDA, if it has one")
    from buildrows.adopt import starter_sources as ss

    lines += ss.project_lines(facts.sources, facts.torch, keeps_cpu(facts, cuda, cpu))
    lines += ["", "[python]", "versions = [" + ", ".join(_q(v) for v in pythons) + "]"]
    trains = ", ".join(_q(t.dotted) for t in trains_of(cuda.facts, cuda.train)) if cuda is not None else ""
    if cuda is not None:
        lines += ["", "[cuda]", f"trains = [{trains}]"]
        if cuda.facts is not None:
            lines += runtime_toml(cuda.facts, cuda.train)
        elif facts.torch:
            lines += ["", f"[cuda.runtime.{cuda.train.major}]",
                      'mode = "torch"  # a PyTorch extension: torch brings the CUDA runtime; the wheel pins its torch']
        elif facts.cudart_static:
            lines += ["", f"[cuda.runtime.{cuda.train.major}]",
                      f'mode = "static"  # its CMake links the runtime statically ({facts.cudart_static}) and never '
                      "CUDA::cudart: the runtime is in the libraries"]
        elif facts.no_runtime:
            lines += ["", f"[cuda.runtime.{cuda.train.major}]",
                      f'mode = "none"  # it links {facts.no_runtime}, and no CUDA runtime'
                      + (" (compiles no CUDA with nvcc)" if facts.driver == "setup.py" else " (no CUDA language)")]
            reqs = library_requirements(facts.linked, cuda.train.major)
            if reqs:
                lines.append("requirements = [" + ", ".join(_q(r) for r in reqs) + "]  # the NVIDIA packages that "
                             "carry the CUDA libraries it links")
    lines += ["", f"[platforms.{platform}]"]
    lines.append(f"trains = [{trains}]" if cuda is not None else
                 "# trains = [\"13.0\"]  # CUDA trains, each with an archs list (see the README)")
    if keeps_cpu(facts, cuda, cpu):
        lines.append("cpu = true  # CPU rows too (CUDA off)")
        hide = []
        if facts.finds_cuda:
            hide.append('CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit = "ON"  # its CMake builds CUDA whenever it finds '
                        f"a toolkit ({facts.finds_cuda}, not REQUIRED) and has no switch: CPU rows hide it")
        if facts.checks_cuda:
            hide.append('CMAKE_CUDA_COMPILER = "NOTFOUND"  # its CMake enables CUDA whenever check_language(CUDA) '
                        f"finds nvcc ({facts.checks_cuda}) and has no switch: CPU rows say there is none")
        if hide:
            at = lines.index("[python]") - 1
            lines[at:at] = ["", "[project.cpu-cache]  # CMake cache variables for CPU rows only", *hide]
    at = lines.index("[python]") - 1
    lines[at:at] = ss.env_tables(facts.sources, keeps_cpu(facts, cuda, cpu), cuda is not None)
    if cuda is not None:
        lines += ["", f"# {cuda.source}", f"[[platforms.{platform}.cuda]]", f"trains = [{_q(cuda.train.dotted)}]",
                  f"archs = {_q(cuda.text)}"]
        if cuda.ptx_none:
            lines.append('ptx = "none"  # the wheel ships no PTX common to its libraries')
        for others, text, ptx_none in train_lists(cuda.facts, cuda.train) if cuda.facts is not None else []:
            lines += ["", "# the list its library for these trains carries (one kernel library per train)",
                      f"[[platforms.{platform}.cuda]]", "trains = [" + ", ".join(_q(t.dotted) for t in others) + "]",
                      f"archs = {_q(text)}"] + (['ptx = "none"'] if ptx_none else [])
        if cuda.facts is not None:
            lines += check_toml(cuda.facts)
    if facts.openmp and platform.startswith("linux"):
        lines += ["", "[repair]", f"auditwheel = true  # it links OpenMP ({facts.openmp}): `buildrows build` bundles "
                  "libgomp into each Linux wheel with auditwheel before the check"]
        lines += ss.repair_lines(facts.repair_excludes)
    return "\n".join(lines) + "\n"


def keeps_cpu(facts: ProjectFacts, cuda: CudaStart | None, cpu: bool) -> bool:
    """Whether the starting policy has CPU rows: asked for, no CUDA train, or a project that turns
    CUDA off itself (a cuda-option, env-switches, a torch extension) or that CPU rows can keep from
    finding CUDA (`finds_cuda`). `init --cuda 13.0` keeps the
    CPU rows plain `init` writes for such a project, and adds the train (issue 28)."""
    from buildrows.adopt.starter_sources import no_cpu_build

    if cuda is not None and not cpu and no_cpu_build(facts.sources, facts.torch):
        return False  # CUDAExtension only, nothing compiled at run time: a CPU wheel would not import
    return cpu or cuda is None or bool(facts.cuda_option or facts.switches or facts.torch or facts.finds_cuda
                                       or facts.checks_cuda)


class InitRequest(Protocol):
    """What `init` is asked (its command-line options)."""

    from_wheel: list[str] | str | None
    cuda: str | None
    cpu: bool
    python: str | None
    driver: Driver | None


def refuse_existing(project: Path) -> None:
    """A policy is the user's: init stops when buildrows.toml or [tool.buildrows] is already there."""
    from buildrows.policy.read import find_config

    try:
        found = find_config(project)
    except BadInput:
        return
    raise BadInput(f"{found} already holds this project's buildrows policy; buildrows init never overwrites a policy\n"
                   "    fix: edit that policy (`buildrows rows` shows what it publishes), or remove it and run "
                   "buildrows init again")


def starter(project: Path, args: InitRequest) -> tuple[str, list[str]]:
    """The starting policy's text (validated as a policy) and what to tell the user about it."""
    import os

    from buildrows.plan.host import host_platform, host_python
    from buildrows.policy.archs import Train, suggested_archs

    wheels = [Path(w) for w in ([args.from_wheel] if isinstance(args.from_wheel, str) else args.from_wheel or [])]
    facts = _project_or_placeholder(project, args.driver, wheels)
    platform = host_platform(os.environ)
    summary = [f"project {facts.name}: driver {facts.driver} ({facts.why})"]
    if facts.cuda_option:
        summary.append(f"cuda-option {facts.cuda_option} ({facts.cuda_option_from})")
    train: Train | None = None
    if args.cuda:
        try:
            train = Train.parse(args.cuda)
        except ValueError as e:
            raise BadInput(f"--cuda: {e}") from e
    cuda: CudaStart | None = None
    if wheels:
        cuda, platform = _from_wheels(wheels, train, platform)
        summary.append(f"CUDA {cuda.train.dotted}: archs {cuda.text} ({cuda.source})")
        if cuda.facts is not None:
            summary += cuda.facts.summary
            if cuda.facts.reason or cuda.facts.rpath_entries or cuda.facts.own_lists or cuda.facts.vendored:
                summary.append("review: the reasons init wrote say what it saw; replace them with why the project "
                               "does it")
    elif train is None:
        train = _nvcc_train(summary)
    if cuda is None and train is not None:
        text = suggested_archs(train, platform)
        from buildrows.policy.archs import parse_arch_list

        cuda = CudaStart(train, parse_arch_list(text), text, False,
                         f"buildrows' starting list for CUDA {train.dotted}; `buildrows archs --from-wheel TORCH_WHEEL "
                         f"--write '{platform}-{train.cu}-*'` replaces it with what a wheel ships")
        summary.append(f"CUDA {train.dotted}: archs {text} (buildrows' starting list; no --from-wheel)")
    pythons = _pythons(args.python, host_python())
    if args.python is None:  # a wheel's own CPython (cp314, cp313t) is one of the rows it came from
        for w in wheels:
            abi = w.name.removesuffix(".whl").split("-")[-2] if w.name.count("-") >= 4 else ""
            for m in re.finditer(r"(?:^|\.)cp3(\d{1,2})(t?)(?=\.|$)", abi):  # cp312, cp313t; not abi3 or none
                v = f"3.{m.group(1)}{m.group(2)}"
                if v not in pythons:
                    pythons.append(v)
    from buildrows.adopt.starter_sources import hard_coded_start

    cuda = hard_coded_start(facts.sources, cuda)
    text = starter_text(facts, platform, pythons, cuda, cpu=args.cpu)
    _validate(text, project)
    from buildrows.adopt.starter_sources import summary_lines

    summary += summary_lines(facts.sources, facts.switches, facts.cuda_option, facts.torch,
                             keeps_cpu(facts, cuda, args.cpu), bool(facts.finds_cuda or facts.checks_cuda))
    summary.append(f"platform {platform}, Python {', '.join(pythons)}"
                   + (f", CUDA {cuda.train.dotted}" if cuda else "") + (", CPU" if keeps_cpu(facts, cuda, args.cpu) else ""))
    return text, summary


def _nvcc_train(summary: list[str]) -> Train | None:
    """The train of the nvcc this machine has (CUDA_HOME, CUDACXX or PATH, as `build` finds it), with a
    summary line saying so and how to choose; None, with a line saying how to add one, without it."""
    import os

    from buildrows.errors import BuildrowsError
    from buildrows.plan.toolchain import find_cuda_compiler

    try:
        nvcc = find_cuda_compiler(os.environ)
    except BuildrowsError as e:
        summary.append(f"the nvcc found does not run ({str(e).splitlines()[0]}): CPU rows only; "
                       "`buildrows init --cuda 13.0` starts a CUDA train anyway")
        return None
    if nvcc is None or nvcc.train is None:
        summary.append("no nvcc on this machine: CPU rows only; `buildrows init --cuda 13.0` (any train) adds "
                       "the CUDA rows of that train")
        return None
    summary.append(f"CUDA {nvcc.train.dotted}: the train of this machine's nvcc, {nvcc.describe()}; "
                   "`--cuda TRAIN` names another, `--cpu` adds CPU rows")
    return nvcc.train


def _pythons(given: str | None, running: str) -> list[str]:
    import re


    if given is None:
        versions = list(START_PYTHONS)
        if running not in versions:
            versions.append(running)
        return versions
    versions = [v.strip() for v in given.split(",") if v.strip()]
    bad = [v for v in versions if not re.fullmatch(r"3\.\d{1,2}t?", v)]
    if bad or not versions:
        raise BadInput(f"--python {given!r}: {', '.join(bad) or 'no version'} is not a Python version\n"
                       "    fix: write them like --python 3.11,3.12")
    return versions


def _project_or_placeholder(project: Path, driver: Driver | None, wheels: list[Path]) -> ProjectFacts:
    """The project's facts; for `init --from-wheel` in a directory with no sources (auditing a
    published wheel), a placeholder named after the wheel, which the summary and the file say."""
    if wheels and driver is None and not any((project / f).is_file()
                                             for f in ("setup.py", "pyproject.toml", "CMakeLists.txt")):
        from packaging.utils import canonicalize_name

        name = canonicalize_name(wheels[0].name.split("-")[0])
        return ProjectFacts(name, "setup.py", "nothing: this directory has no setup.py, pyproject.toml or "
                            "CMakeLists.txt; a placeholder, set the project's driver where its sources are",
                            None, None, f"{wheels[0].name}'s name")
    return detect_project(project, driver)


def _from_wheels(wheels: list[Path], train: Train | None, platform: str) -> tuple[CudaStart, str]:
    """One wheel, or several of one project (one per CUDA train, or per Python): the first wheel's
    train gives the runtime and the rules; every other train gets the list its wheel carries."""
    starts = [_from_wheel(w, train, platform) for w in wheels]
    first, platform = starts[0]
    others = sorted({p for _, p in starts} - {platform})
    if others:
        raise BadInput(f"--from-wheel: the wheels are for {platform} and {', '.join(others)}; init starts one "
                       "platform\n    fix: pass the wheels of one platform (add the others' tables afterwards)")
    if len(starts) == 1:
        return first, platform
    facts = first.facts
    if facts is None or facts.row is None:
        raise BadInput(f"--from-wheel: {wheels[0].name} carries no device code to start a list from\n"
                       "    fix: pass it alone, or name a wheel with device code first")
    for (start, _), wheel in zip(starts[1:], wheels[1:], strict=True):
        other = start.facts
        if other is None or other.row is None:
            raise BadInput(f"--from-wheel: {wheel.name} carries no device code to start a list from\n"
                           "    fix: leave it out")
        if start.train == first.train:
            if (other.row.elf, other.row.ptx) != (facts.row.elf, facts.row.ptx):
                facts.summary.append(f"note: {wheel.name} carries another list than {wheels[0].name} for the same "
                                     f"train ({list_text(other.row)[0]}); the policy holds both to the first")
            continue
        if start.train.major != first.train.major and other.mode != facts.mode:
            facts.summary.append(f"note: {wheel.name} (CUDA {start.train.dotted}) looks like mode {other.mode}, "
                                 f"written as {facts.mode} for every major: review [cuda.runtime.{start.train.major}]")
        facts.per_train.setdefault(start.train, other.row)
        facts.rpath_entries = sorted(set(facts.rpath_entries) | set(other.rpath_entries))
        facts.vendored = sorted(set(facts.vendored) | set(other.vendored))
        facts.own_lists += [g for g in other.own_lists if g.paths not in {o.paths for o in facts.own_lists}]
    if facts.per_train and not facts.per_train_glob:
        facts.per_train.setdefault(first.train, facts.row)
    n = len({s.train for s, _ in starts})
    source = (f"from {len(wheels)} wheels ({n} train{'s' if n != 1 else ''}): the list the CUDA "
              f"{first.train.dotted} wheel carries; each other train's wheel gives that train's list")
    return CudaStart(first.train, first.archs, first.text, first.ptx_none, source, facts), platform


def _from_wheel(wheel: Path, train: Train | None, platform: str) -> tuple[CudaStart, str]:
    """The train's list as the wheel ships it (the cubins common to its libraries, PTX where all carry it)."""
    from buildrows.check.device_code import read_device_code
    from buildrows.check.judging import platform_of_wheel, train_of_wheel
    from buildrows.errors import Refused
    from buildrows.policy.edit import arch_text, archs_from_names

    code = read_device_code(wheel)
    train_note = ""
    tagged = train_of_wheel(code.info) if code.info is not None else None
    if train is not None and tagged is not None and train != tagged:
        raise BadInput(f"--cuda {train.dotted} contradicts {wheel.name}'s tag +{tagged.cu}\n"
                       "    fix: drop --cuda (the wheel names its train), or name the wheel of that train")
    train = train or tagged
    if train is None and code.info is not None:
        # PyTorch's PyPI wheel has no +cu130 but requires its runtime: cuda-toolkit[...]==13.0.2, nvidia-cuda-runtime==13.0.96
        train = train_from_requirements(code.info.requires_dist)
        if train is not None:
            train_note = (f"CUDA {train.dotted} from its requirements ("
                          + ", ".join(r for r in code.info.requires_dist if "cuda" in r.lower() and "extra" not in r)[:160]
                          + "); pass --cuda to state the train it was built with")
    if train is None:
        raise BadInput(f"{wheel.name} carries no +cuXYZ tag and requires no CUDA runtime of one train (cuda-toolkit, "
                       "nvidia-cuda-runtime), so its CUDA train is unknown\n"
                       "    fix: pass --cuda TRAIN (the train the wheel was built with, e.g. --cuda 13.0)")
    facts = infer(code.info, wheel, train, platform) if code.info is not None else None
    if facts is not None:
        facts.train_note = train_note
    if facts is not None and facts.row is not None:
        text, ptx_none = list_text(facts.row)
        n = len(facts.row.paths)
        others = [f"{len(facts.own_lists)} other list{'s' if len(facts.own_lists) != 1 else ''}"] if facts.own_lists else []
        others += [f"{len(facts.vendored)} bundled NVIDIA librar{'ies' if len(facts.vendored) != 1 else 'y'}"] if facts.vendored else []
        source = (f"from {wheel.name}: the list {n} of its librar{'ies' if n != 1 else 'y'} carry"
                  + (f"; {' and '.join(others)} get their own [[check.libraries]] rules" if others else ""))
        if facts.per_train:
            source = (f"from {wheel.name}: the list its CUDA {train.dotted} library carries; the libraries of "
                      f"{len(facts.per_train) - 1} other trains are held to their trains' lists (per-train rule)")
        from buildrows.policy.archs import ArchError, parse_arch_list

        try:
            archs = parse_arch_list(text, ptx="none" if ptx_none else "newest")
        except ArchError as e:  # a list the parser refuses (a PTX-only entry it does not read yet): said, not hidden
            raise BadInput(f"{wheel.name}: its list {text!r} cannot be written in this buildrows' list syntax: {e}\n"
                           "    fix: a buildrows that reads PTX-only entries (X.Y-virtual)") from None
        if facts.train_note:
            source += f"; {facts.train_note}"
        platform = platform_of_wheel(code.info) or platform if code.info is not None else platform
        return CudaStart(train, archs, text, ptx_none, source, facts), platform
    if facts is not None and facts.host_only:
        from buildrows.adopt.from_wheel import host_only_supported
        from buildrows.policy.archs import parse_arch_list, suggested_archs

        if not host_only_supported():
            raise Refused(f"{wheel.name}: no library carries device code, and {', '.join(facts.host_only[:2])} link CUDA "
                          "libraries: host-only CUDA code, which this buildrows' policy cannot state\n"
                          "    fix: a buildrows with [[check.libraries]] host-only, or pass --cuda TRAIN without "
                          "--from-wheel")
        text = suggested_archs(train, platform)
        platform = (platform_of_wheel(code.info) if code.info else None) or platform
        source = (f"from {wheel.name}: no library carries device code ({len(facts.host_only)} host-only); the list is "
                  f"buildrows' starting list for CUDA {train.dotted}, which nothing in the wheel is held to")
        return CudaStart(train, parse_arch_list(text), text, False, source, facts), platform
    if facts is not None and facts.row is None:  # nothing of the project's carries device code
        from buildrows.policy.archs import parse_arch_list, suggested_archs

        text = suggested_archs(train, platform)
        platform = (platform_of_wheel(code.info) if code.info else None) or platform
        what = ([f"its device code is vendored ({len(facts.vendored)} bundled NVIDIA libraries)"] if facts.vendored else []) \
            + ([f"its only device code is test fixtures ({', '.join(facts.fixtures)})"] if facts.fixtures else [])
        gap = ("; `check` fails cuda-libraries-present on it: nothing says how its kernels come (compiled at run "
               "time? another wheel?); review: state it, or check it as a CPU row") if facts.no_code and not facts.fixtures else (
            "; `check` fails device-code-covers-row on it: vendored code neither keeps nor excuses the row's list, and "
            "nothing of its own carries device code (kernels compiled at run time by a Python JIT cannot be stated)"
            if facts.fixtures or facts.vendored else "")
        source = (f"from {wheel.name}: no library of its own carries device code"
                  + (f" ({'; '.join(what)})" if what else " or links CUDA") + f"; the list is buildrows' starting list "
                  f"for CUDA {train.dotted}, which nothing in the wheel is held to{gap}")
        return CudaStart(train, parse_arch_list(text), text, False, source, facts), platform
    if not code.common_elf:
        raise Refused(f"{wheel.name}: no GPU architecture is common to its libraries with device code "
                      f"({len(code.with_code)} of {len(code.libraries)} carry any); nothing to start a list from\n"
                      "    fix: name a CUDA wheel of the train (PyTorch's, say), or pass --cuda TRAIN without "
                      "--from-wheel for buildrows' starting list")
    archs = archs_from_names(code.common_elf, code.common_ptx)
    text, ptx_none = arch_text(archs)
    n = len(code.with_code)
    source = (f"from {wheel.name}: the architectures common to its {n} librar{'y' if n == 1 else 'ies'} "
              "with device code")
    return CudaStart(train, archs, text, ptx_none, source), (platform_of_wheel(code.info) if code.info else None) or platform


def train_from_requirements(requires: Sequence[str]) -> Train | None:
    """The one CUDA train a wheel's requirements pin (cuda-toolkit==13.0.2, nvidia-cuda-runtime==13.0.96,
    nvidia-cuda-runtime-cu12==12.6.77), or None when they pin none or several."""
    import re

    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    from buildrows.policy.trains import train_table

    found: set[Train] = set()
    majors: set[int] = set()  # requirements that name only the major: ==13.*, nvidia-cuda-runtime-cu12
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if "extra" in str(req.marker or ""):
            continue
        name = canonicalize_name(req.name)
        m = re.fullmatch(r"nvidia-cuda-(?:runtime|nvrtc|cupti)(?:-cu(\d+))?", name)
        if name != "cuda-toolkit" and not m:
            continue
        if m and m.group(1):
            majors.add(int(m.group(1)))
        for spec in req.specifier:
            v = re.match(r"(\d+)\.(\d+)", spec.version)
            if spec.operator in ("==", "~=", ">=") and v:
                found.add(Train(int(v.group(1)), int(v.group(2))))
            elif spec.operator == "==" and (v := re.fullmatch(r"(\d+)(?:\.\*)?", spec.version)):
                majors.add(int(v.group(1)))
    if len(found) == 1:
        return found.pop()
    if found or len(majors) != 1:
        return None
    # Only the major is pinned: the newest train of it that buildrows knows, which loads any code
    # its older trains built (the summary says so; --cuda states the one it was built with).
    major = majors.pop()
    return max((t for t in train_table() if t.major == major), default=None)


def _validate(text: str, project: Path) -> None:
    """The starting policy must load: a list the train cannot compile is refused before anything is written."""
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    from buildrows.errors import BuildrowsError
    from buildrows.policy.load import policy_from_dict

    try:
        policy_from_dict(tomllib.loads(text), str(project / "buildrows.toml"))
    except BuildrowsError as e:
        raise type(e)(f"the starting policy would not load, so nothing was written:\n{e}") from None

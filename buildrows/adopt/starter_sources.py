"""What `buildrows init` writes from a project's own switches and sources (`policy.switches`).

The lines go into the starting policy beside the ones `policy.starter` writes: the switches with
their on-values (`env-switches`), the variable that stops a download of a prebuilt wheel and the
hidden GPU (`[project.cpu-env]` / `[project.cuda-env]`), `cpu-wheel = "pure"` for a CPU build
that is a pure-Python JIT wheel, the architecture list a setup.py hard-codes; and the summary
lines that say what was found, or plainly that nothing was, and what that means for each row.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from buildrows.policy.switches import EnvSwitch, SetupSources

if TYPE_CHECKING:
    from pathlib import Path

    from buildrows.adopt.rows_choice import CudaStart
    from buildrows.policy.model import Driver


def _q(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def merged_switches(known: Sequence[str], sources: SetupSources) -> tuple[str, ...]:
    """init's list of known names, then every other switch the setup.py reads, with its on-value."""
    names = {s.removeprefix("!") for s in known}
    found = {s.name: s for s in sources.switches}
    out: list[str] = []
    for s in known:  # a known name keeps init's spelling, unless its on-value is not 1
        sw = found.get(s.removeprefix("!"))
        out.append(sw.entry if sw is not None and (sw.on != "1" or sw.truthiness) else s)
    out += [s.entry for s in sources.switches if s.name not in names]
    return tuple(out)


def no_cpu_build(sources: SetupSources, torch: bool) -> bool:
    """A torch extension whose setup.py builds only CUDAExtensions and whose package compiles
    nothing at run time: a CPU row gives a wheel with no compiled code that cannot import its
    extension (causal-conv1d 1.7.0 with CAUSAL_CONV1D_SKIP_CUDA_BUILD=TRUE)."""
    return torch and sources.cuda_extension and not sources.cpp_extension and sources.jit is None


def pure_cpu_wheel(sources: SetupSources, torch: bool) -> bool:
    """A torch extension whose setup.py builds only CUDAExtensions and whose package compiles its
    kernels at run time: its CPU wheel is pure Python (gsplat 1.5.3 with BUILD_NO_CUDA=1)."""
    return torch and sources.cuda_extension and not sources.cpp_extension and sources.jit is not None


def project_lines(sources: SetupSources, torch: bool, cpu_rows: bool) -> list[str]:
    """Lines for [project]: cpu-wheel = "pure" where the CPU build is a pure-Python JIT wheel."""
    if cpu_rows and pure_cpu_wheel(sources, torch):
        return [f'cpu-wheel = "pure"  # CUDAExtension only, and the package compiles its kernels at run time '
                f"({sources.jit}): the CPU wheel is pure Python, pinned to no torch minor"]
    return []


def env_tables(sources: SetupSources, cpu_rows: bool, cuda_rows: bool) -> list[str]:
    """[project.cpu-env] / [project.cuda-env] lines: the GPU hidden from CPU rows of a setup.py that
    builds CUDA whenever torch sees one; the variable that stops a download of a prebuilt wheel."""
    cpu: list[str] = []
    cuda: list[str] = []
    force = sources.force_build
    if force is not None and sources.downloads is not None:
        line = (f"{force.name} = {_q(force.on)}  # setup.py downloads a prebuilt wheel ({sources.downloads}) unless "
                f"it is {force.on} ({force.where}): every row builds its own")
        cpu += [line] if cpu_rows else []
        cuda += [line] if cuda_rows else []
    if cpu_rows and sources.detects_gpu is not None:
        cpu.append(f'CUDA_VISIBLE_DEVICES = ""  # setup.py builds CUDA whenever torch sees a GPU ({sources.detects_gpu}): '
                   "CPU rows hide it")
    out: list[str] = []
    if cpu:
        out += ["", "[project.cpu-env]  # environment variables for CPU rows only", *cpu]
    if cuda:
        out += ["", "[project.cuda-env]  # environment variables for CUDA rows only", *cuda]
    return out


def gencode_archs(sources: SetupSources) -> str | None:
    """The architecture list a setup.py hard-codes in -gencode flags ("7.5 8.0 9.0"), or None."""
    if not sources.gencode:
        return None
    numbers = sorted({int("".join(c for c in s if c.isdigit())) for s in sources.gencode})
    return " ".join(f"{n // 10}.{n % 10}" for n in numbers)


def summary_lines(sources: SetupSources, switches: Sequence[str], option: str | None, torch: bool,
                  cpu_rows: bool, hidden: bool) -> list[str]:
    """What init says it found of the project's switches, or that it found none and what that means.
    `hidden`: init hides CUDA from CPU rows another way (a [project.cpu-cache] entry)."""
    out: list[str] = []
    by_name: dict[str, EnvSwitch] = {s.name: s for s in sources.switches}
    for entry in switches:
        name = entry.removeprefix("!").partition("=")[0]
        sw = by_name.get(name)
        where = f" ({sw.where}, on when {'truthy' if sw.truthiness else repr(sw.on)})" if sw else ""
        out.append(f"switch {name}{where}: {'on for CPU rows' if entry.startswith('!') else 'on for CUDA rows'}")
    if option:
        out.append(f"CUDA switch: the CMake option {option} (ON for CUDA rows, OFF for CPU rows)")
    if sources.detects_gpu:
        out.append(f"setup.py builds CUDA whenever torch sees a GPU ({sources.detects_gpu})"
                   + (": CPU rows get CUDA_VISIBLE_DEVICES=\"\"" if cpu_rows else ""))
    if sources.detects_nvcc and cpu_rows:
        out.append(f"setup.py builds CUDA whenever it finds nvcc ({sources.detects_nvcc}), and no switch turns that "
                   "off: build the CPU rows where no nvcc is on PATH, or their wheel gets device code, which the check "
                   "refuses")
    if sources.downloads:
        force = sources.force_build
        out.append(f"setup.py downloads ({sources.downloads})" + (f": {force.name}={force.on} on every row makes it "
                                                                 "build instead" if force else
                                                                 ": no variable that stops it was found"))
    if sources.gencode:
        out.append(f"setup.py hard-codes -gencode for {gencode_archs(sources)} ({sources.gencode_where}): "
                   "TORCH_CUDA_ARCH_LIST is ignored, so the CUDA rows' archs are that list")
    if no_cpu_build(sources, torch):
        out.append("no CPU rows: setup.py builds only CUDAExtensions, and its package compiles nothing at run time, "
                   "so a CPU wheel would not import its extension" if not cpu_rows else
                   "note: CPU rows, as --cpu asks, though setup.py builds only CUDAExtensions: their wheel carries no "
                   "extension and its package cannot import one")
    if not switches and not option and not sources.detects_gpu and not sources.detects_nvcc and not hidden:
        out.append("no CUDA switch found (no environment variable about CUDA that setup.py reads, no CMake CUDA "
                   "option): CUDA rows build with the row's nvcc and CUDA_HOME"
                   + ("; CPU rows have nothing that turns CUDA off: if the project builds CUDA whenever it finds "
                      "nvcc, their wheel gets device code, which the check refuses" if cpu_rows else ""))
    return out


_FUNCTION = re.compile(r"^[ \t]*(?:function|macro)\s*\(\s*([A-Za-z0-9_]+)\s+([A-Za-z0-9_]+)[^)]*\)(.*?)^[ \t]*end(?:function|macro)\b",
                       re.MULTILINE | re.DOTALL | re.IGNORECASE)
_INSTALL_TARGETS = re.compile(r"\binstall\s*\(\s*TARGETS\s+([^)]*?)(?:\s+(?:LIBRARY|RUNTIME|ARCHIVE|EXPORT|PUBLIC_HEADER|"
                              r"DESTINATION|COMPONENT|FRAMEWORK|RESOURCE|INCLUDES)\b|\))", re.IGNORECASE)


def repair_excludes(texts: Sequence[tuple[str, str]]) -> tuple[list[str], str] | None:
    """The `[repair] exclude` globs of a project that installs its libraries twice: once through a
    function of its own (llama-cpp-python's llama_cpp_python_install_target, which gives each the
    RPATH $ORIGIN), and again by a vendored install(TARGETS ...) without it (llama.cpp's
    `install(TARGETS llama LIBRARY)`): auditwheel cannot locate what that copy NEEDS (libggml.so.0)
    and stops. The project's own libraries need no bundling: excluded by their prefix
    (`libggml*.so*`), with where the second install is. None when no such pair is found.
    `texts`: (the file's name, its text) of every CMake file a configure reads."""
    own: list[str] = []
    functions: list[str] = []
    for _, text in texts:
        for m in _FUNCTION.finditer(text):
            if re.search(r"\binstall\s*\(\s*TARGETS\s+\$\{" + re.escape(m.group(2)) + r"\}", m.group(3), re.IGNORECASE):
                functions.append(m.group(1))
    for _, text in texts:
        for name in functions:
            own += re.findall(r"^[ \t]*" + re.escape(name) + r"\s*\(\s*([A-Za-z0-9_.+-]+)\s*\)", text,
                              re.MULTILINE | re.IGNORECASE)
    if not own:
        return None
    for where, text in texts:
        for m in _INSTALL_TARGETS.finditer(text):
            again = [t for t in m.group(1).split() if t in own]
            if again:
                line = text.count("\n", 0, m.start()) + 1
                globs = sorted({f"lib{t.split('-')[0]}*.so*" for t in own})
                return globs, f"{where}:{line} installs {again[0]} again, without the RPATH its own install gives it"
    return None


def repair_lines(excludes: tuple[list[str], str] | None) -> list[str]:
    """`exclude = [...]` under [repair] for `repair_excludes`' finding."""
    if excludes is None:
        return []
    globs, why = excludes
    return ["exclude = [" + ", ".join(_q(g) for g in globs) + f"]  # the project's own libraries: {why}, and "
            "auditwheel stops at what that copy NEEDS"]


def hard_coded_start(sources: SetupSources, cuda: CudaStart | None) -> CudaStart | None:
    """A setup.py that hard-codes its -gencode list builds that list whatever the row says: the
    CUDA rows' list is it (cubins only), where the train can compile it; else `cuda` as it was."""
    from buildrows.policy.archs import ArchError, parse_arch_list

    text = gencode_archs(sources)
    if cuda is None or cuda.facts is not None or text is None:
        return cuda
    try:
        archs = parse_arch_list(text, ptx="none")
    except ArchError:
        return cuda
    return dataclasses.replace(cuda, archs=archs, text=text, ptx_none=True,
                               source=f"the list setup.py hard-codes ({sources.gencode_where}): its -gencode flags "
                                      "make torch ignore TORCH_CUDA_ARCH_LIST")


def project_repair_excludes(project: Path, driver: Driver) -> tuple[list[str], str] | None:
    """`repair_excludes` over every CMake file the project's configure reads."""
    from buildrows.build.doctor_project import cmake_files, cmake_source_dir

    return repair_excludes([(p.relative_to(project).as_posix() if p.is_relative_to(project) else str(p), t)
                            for p, t in cmake_files(cmake_source_dir(project, driver))])


_CMAKE_OPTION = re.compile(r"^[ \t]*option\s*\(\s*([A-Za-z0-9_]+)\s+(?:\"[^\"]*\"|[^\s)]+)\s*([^\s)]*)\s*\)",
                           re.MULTILINE | re.IGNORECASE)
#: A CMake option that turns CUDA on: ends in CUDA (GGML_CUDA, USE_CUDA, MYPROJ_BUILD_CUDA), or names
#: a CUDA build (WITH_CUDA_EXT); not a CUDA sub-feature (GGML_CUDA_FORCE_MMQ).
_CUDA_OPTION = re.compile(r"^(?:[A-Z0-9]+_)*(?:USE_|WITH_|BUILD_|ENABLE_)?CUDA$|^(?:[A-Z0-9]+_)*CUDA_(?:BUILD|SUPPORT|BACKEND)$",
                          re.IGNORECASE)


def cmake_cuda_option(source: Path, project: Path) -> tuple[str, str] | None:
    """The project's CMake CUDA option (name, where: `option(GGML_CUDA ...) in
    vendor/llama.cpp/ggml/CMakeLists.txt:199`) in any file a configure reaches, CMakeLists.txt's
    own first; None when none is declared."""
    from buildrows.build.doctor_project import cmake_files  # the reader doctor uses: the same files

    for path, text in cmake_files(source):
        for m in _CMAKE_OPTION.finditer(text):
            if _CUDA_OPTION.match(m.group(1)):
                rel = path.relative_to(project) if path.is_relative_to(project) else path
                line = text.count("\n", 0, m.start()) + 1
                return m.group(1), f"option({m.group(1)} ...) in {rel.as_posix()}:{line}"
    return None

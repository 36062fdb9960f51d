"""Where a row becomes a concrete build plan on this host: the single home of that decision.

`plan_row` turns a policy row into a :class:`RowPlan` - the generator, the CUDA compiler and the
toolkit root it belongs to, the interpreter that builds the row, the CMake cache variables and the
environment - without side effects. Its readers: the presets (`buildrows.render.presets`), the env files
and the hook (`buildrows.render.envfile`), the build drivers (`buildrows.build.drivers`) and doctor. Finding or
provisioning an interpreter or a toolkit is `buildrows.provision`'s job; the plan only records
what was chosen, so every reader sees the same choice.

Imports stay light: the hook plans a row on every CI job.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from buildrows.errors import BadInput, Refused
from buildrows.frozen import Frozen, frozen_dataclass
from buildrows.plan.host import refuse_other_machine
from buildrows.plan.toolchain import (
    CudaCompiler,
    GeneratorChoice,
    HostOs,
    check_cuda_compiler,
    choose_generator,
    host_os,
    read_train,
)
from buildrows.policy.archs import ArchList
from buildrows.policy.model import Policy, Row
from buildrows.resources import cmake_module

if TYPE_CHECKING:  # the plan's imports stay light: env and hook run on every CI job
    from buildrows.provision.interpreters import Interpreter

#: CCCL 13.2+ stops with #error under cl.exe's traditional preprocessor; 13.0 accepts the flag.
WINDOWS_CUDA_FLAG = "-Xcompiler=/Zc:preprocessor"
#: Steps that build on this machine, so the row must be this machine's (render and env may
#: prepare a row for another machine of the same OS, a dry run).
BUILDS_HERE = ("hook", "build")
#: The cache variables that pin the row's interpreter (FindPython and FindPython3).
PYTHON_PINS = ("Python_EXECUTABLE", "Python3_EXECUTABLE")


@frozen_dataclass(frozen=True, eq=False, repr=False)
class RowPlan(Frozen):
    """Everything a row's configure preset, env file and build fix, decided for this host."""

    row: Row
    host: HostOs
    generator: GeneratorChoice
    compiler: CudaCompiler | None
    cache: tuple[tuple[str, str], ...]
    environment: tuple[tuple[str, str], ...]
    #: The interpreter that builds the row (pinned in the cache), or None when none was chosen.
    interpreter: Interpreter | None = None
    #: A toolkit root buildrows provisioned for the row; it overrides CUDACXX/CUDA_HOME.
    toolkit: str | None = None

    @property
    def cuda_home(self) -> str | None:
        """The CUDA root of the row's nvcc, for CUDA_HOME/CUDA_PATH (setup.py projects,
        torch.utils.cpp_extension): the provisioned toolkit, else the root nvcc itself reports
        (toolchain.ask_cuda_root; /usr/local/bin/nvcc may be a wrapper script whose parent is no
        toolkit). Never a guess: None when nvcc did not say."""
        if self.toolkit is not None:
            return self.toolkit
        return self.compiler.root if self.compiler is not None else None

    def toolkit_variables(self, env: Mapping[str, str]) -> dict[str, str]:
        """CUDACXX, CUDA_HOME and CUDA_PATH for a build of this row. CUDACXX: a provisioned toolkit
        always sets it; otherwise only where the caller left it unset, so options a user put in
        CUDACXX still apply. CUDA_HOME and CUDA_PATH: always the root of the row's nvcc, so a
        project (or torch) reading them builds with the same toolkit as nvcc, whatever the image set."""
        comp = self.compiler
        if comp is None:
            return {}
        out: dict[str, str] = {}
        if self.toolkit is not None or not env.get("CUDACXX", "").strip():
            out["CUDACXX"] = comp.path
        home = self.cuda_home
        if home is not None:
            out["CUDA_HOME"] = out["CUDA_PATH"] = home
        return out


def toolkit_compiler(row: Row, root: str, env: Mapping[str, str]) -> CudaCompiler:
    """The nvcc of a provisioned toolkit root, run and checked to be the row's train."""
    exe = "nvcc.exe" if row.os == "windows" else "nvcc"
    path = os.path.join(root, "bin", exe)
    comp = read_train(CudaCompiler(path, (path,), "provisioned toolkit"), env)
    if row.cuda is not None and comp.train != row.cuda:
        raise Refused(f"the provisioned toolkit {root} is CUDA {comp.version}, not the row's {row.cuda.dotted}\n"
                      f"    fix: `buildrows toolkit install {row.cuda.dotted} --force` to assemble it again")
    from buildrows.plan.nvcc_archs import check_row_archs

    check_row_archs(row, comp, env)  # a train newer than the data: its own nvcc's word
    return comp


def cached_toolkit(row: Row, env: Mapping[str, str]) -> str | None:
    """The root of the row's train in the buildrows cache (`buildrows toolkit install`), or None."""
    if row.cuda is None:
        return None
    from buildrows.provision.toolkit import installed

    found = installed(row.cuda, row.platform, env)
    return str(found.root) if found is not None else None


def plan_row(policy: Policy, row: Row, env: Mapping[str, str], *, host: HostOs | None = None,
             compiler: CudaCompiler | None = None, check_toolchain: bool = True, step: str = "render",
             interpreter: Interpreter | None = None, toolkit: str | None = None) -> RowPlan:
    """Resolve one row on this host. Refuses a CUDA row without a list, a row for another OS,
    and (with `check_toolchain`) a missing nvcc or one of another train. `toolkit` is a CUDA root
    buildrows provisioned (its nvcc is used whatever CUDACXX says); `interpreter` is pinned as
    Python_EXECUTABLE/Python3_EXECUTABLE."""
    archs = row.require_archs(step)
    host = host or host_os(env)
    if row.os != host:
        raise Refused(
            f"{step}: row {row.name} is built on {row.os}, and this host is {host}\n"
            f"    fix: run it on a {row.os} builder (or set BUILDROWS_HOST_OS={row.os} to render a dry run)")
    if step in BUILDS_HERE:
        refuse_other_machine(row.name, row.platform, env, step)
    if not row.is_cuda:
        toolkit = None
    if toolkit is not None and compiler is None:
        compiler = toolkit_compiler(row, toolkit, env)
    if row.is_cuda and compiler is None and check_toolchain:
        try:
            compiler = check_cuda_compiler(row, env, host)
        except (Refused, BadInput):
            # No nvcc of the row's train here: one `buildrows toolkit install` put in the cache
            # serves (the hook never takes this path: a CI job builds with its image's toolkit).
            cached = cached_toolkit(row, env) if step != "hook" else None
            if cached is None:
                raise
            toolkit = cached
            compiler = toolkit_compiler(row, toolkit, env)
    generator = choose_generator(row, env, host)
    cudacxx_set = bool(env.get("CUDACXX", "").strip()) and toolkit is None
    home: str | None = None

    cache: list[tuple[str, str]] = [
        ("BUILDROWS_ROW", row.name),
        ("BUILDROWS_CUDA", "ON" if row.is_cuda else "OFF"),
        ("CMAKE_PROJECT_TOP_LEVEL_INCLUDES", cmake_module().as_posix()),
    ]
    if policy.project.cuda_option:
        cache.append(("BUILDROWS_CUDA_OPTION", policy.project.cuda_option))
    if interpreter is not None:
        cache += [(name, interpreter.path.replace("\\", "/")) for name in PYTHON_PINS]
    # Pinned or not (no interpreter of the row here), the CMake module refuses another version found.
    cache.append(("BUILDROWS_PYTHON", row.python))
    cache += list(generator.cache)
    environment: list[tuple[str, str]] = [("CU_VERSION", row.accel),
                                          ("BUILDROWS_LOCAL_VERSION", row.local_tag)]
    if row.is_cuda:
        cache.append(("CMAKE_CUDA_ARCHITECTURES", archs.cmake_cuda_architectures))
        # Only when CUDACXX is unset: options a user put there (-allow-unsupported-compiler) must apply.
        if compiler is not None and not cudacxx_set:
            cache.append(("CMAKE_CUDA_COMPILER", compiler.path.replace("\\", "/")))
        if host == "windows":
            flags = " ".join(f for f in (env.get("CUDAFLAGS", "").strip(), WINDOWS_CUDA_FLAG) if f)
            cache.append(("CMAKE_CUDA_FLAGS", flags))
        # A list with PTX-only entries (12.0-virtual) cannot be said in TORCH_CUDA_ARCH_LIST (the policy
        # refuses it for rows PyTorch builds): set empty, which every reader treats as unset, so a value
        # the builder's image carries cannot contradict CMAKE_CUDA_ARCHITECTURES.
        environment.insert(0, ("TORCH_CUDA_ARCH_LIST", archs.torch_cuda_arch_list or ""))
        home = toolkit if toolkit is not None else (compiler.root if compiler is not None else None)
        if home is not None:
            # setup.py projects and torch.utils.cpp_extension take the toolkit from CUDA_HOME
            # (Windows: CUDA_PATH); left unset, torch guesses it from nvcc's location on PATH.
            environment += [("CUDA_HOME", home), ("CUDA_PATH", home)]
        if toolkit is not None:
            # CUDAToolkit_ROOT: FindCUDAToolkit looks there first (as an environment variable it
            # does not warn in projects that never call it); CUDA_HOME is set above.
            environment += [("CUDAToolkit_ROOT", toolkit), ("CUDACXX", compiler.path if compiler else "")]
    # The project's own switches (FORCE_CUDA, USE_CUDA, ...): 1 on CUDA rows, 0 on CPU rows, so
    # a builder image that sets them cannot turn CUDA on for a CPU row.
    environment += [(k, _expand(v, row, archs, home)) for k, v in row.switches]
    # The row's own cache (project, platform, train, and the cuda-option ON/OFF) comes last: it wins.
    cache += list(row.cache)
    return RowPlan(row, host, generator, compiler, tuple(_dedupe(cache)), tuple(environment),
                   interpreter, toolkit)


#: What a [project] cuda-env value may name, e.g. CUDA_TOOLKIT_ROOT_DIR = "{cuda_home}".
ROW_ENV_PLACEHOLDERS = ("cuda_home", "cuda", "cu", "archs", "torch_archs")


def _expand(value: str, row: Row, archs: ArchList | None, home: str | None) -> str:
    """A cuda-env value with the row's placeholders filled in (a CPU row's values are kept as written)."""
    if row.cuda is None or "{" not in value:
        return value
    values = {"cuda_home": home or "", "cuda": row.cuda.dotted, "cu": row.cuda.cu,
              "archs": archs.cmake_cuda_architectures if archs else "",
              "torch_archs": (archs.torch_cuda_arch_list or "") if archs else ""}
    for k, v in values.items():
        value = value.replace("{" + k + "}", v)
    return value


def _dedupe(items: list[tuple[str, str]]) -> list[tuple[str, str]]:
    out: dict[str, str] = {}
    for k, v in items:
        out.pop(k, None)
        out[k] = v
    return list(out.items())

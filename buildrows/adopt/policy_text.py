"""Writing the policy text: the commented buildrows.toml init starts (`starter_text`), and its validation.

`starter_text` turns what was found, and the architecture lists taken from a wheel, into a
commented buildrows.toml; a pure function of what it is given. Split from `buildrows.adopt.starter`.
"""

from __future__ import annotations

from pathlib import Path

from buildrows.adopt.project_facts import ProjectFacts, library_requirements
from buildrows.adopt.rows_choice import CudaStart
from buildrows.adopt.wheel_lists import train_lists, trains_of
from buildrows.adopt.wheel_rules import check_toml
from buildrows.adopt.wheel_runtime import runtime_toml


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

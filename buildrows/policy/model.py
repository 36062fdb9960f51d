"""The loaded policy: frozen, normalised, trusted downstream."""

from __future__ import annotations

from typing import Literal

from buildrows.errors import Problem, Refused
from buildrows.frozen import Frozen, field, frozen_dataclass
from buildrows.policy.archs import ArchList, Train

Os = Literal["linux", "windows"]
Machine = Literal["x86_64", "aarch64", "amd64"]
Driver = Literal["cmake-presets", "scikit-build-core", "setup.py"]
RuntimeMode = Literal["dynamic", "static", "none", "torch", "preload", "torch-runtime"]
RUNTIME_MODES: tuple[RuntimeMode, ...] = ("dynamic", "static", "none", "torch", "preload", "torch-runtime")
#: Modes that describe how a project loads CUDA itself: the policy says why (`reason`).
MODES_WITH_REASON: tuple[RuntimeMode, ...] = ("preload", "torch-runtime")

#: One-line documentation of each policy key these dataclasses hold; the schema (and so the
#: checked-in JSON Schema and every "did you mean" fix) reuses these strings.
DOCS: dict[str, str] = {
    "runtime.mode": (
        "How the CUDA runtime reaches the libraries: \"dynamic\" (default: at least one library links it, the "
        "requirement is declared, RPATH reaches library-dir), \"static\" (linked in: nothing links it dynamically, "
        "no requirement), \"none\" (no CUDA runtime at all: the libraries call the driver API, NVRTC or CUDA "
        "libraries only, e.g. pycuda; none links libcudart or carries the static runtime), \"torch\" (a PyTorch extension: requires the torch it was built against, recorded in the "
        "wheel or given with `check --torch`), \"preload\" (the project loads NVIDIA's library wheels itself: "
        "ctypes, a path finder, dlopen; the declared NVIDIA packages must carry the sonames the libraries NEED) or "
        "\"torch-runtime\" (a kernel library loaded with ctypes that uses torch's CUDA runtime but is not compiled "
        "against torch: requires torch, imports no libtorch C++ symbol); preload and torch-runtime need a reason."),
    "runtime.reason": "Why the project loads CUDA this way (required by mode \"preload\" and \"torch-runtime\").",
    "runtime.extra": ("Preload mode: the Requires-Dist extra under which the NVIDIA packages are declared "
                      "(e.g. \"with-cuda\"); default: declared unconditionally."),
    "runtime.jit": ("The project's kernels are compiled at run time by a JIT, and the wheel ships no precompiled "
                    "device code of its own (vendored code aside): the run-time compilers it needs, as sonames "
                    "(\"libnvrtc.so.13\", \"libnvvm.so.4\", \"libnvJitLink.so.13\") or NVIDIA packages "
                    "(\"nvidia-cuda-nvrtc\"). The check holds each to the row's CUDA major and to a package the wheel "
                    "declares (any extra), and the row's list to what the train compiles; needs a reason."),
    "runtime.optional": ("Preload mode: sonames (globs, e.g. \"libnccl.so.*\") the project loads only when present, "
                         "so no declared package needs to carry them."),
    "libraries": ("Per-library device-code rules: the libraries a rule's files match are held to its own list, to "
                  "their own train's list (per-train), to none (vendored), or carry none (host-only); a rule may also name "
                  "what they dlopen (dlopens); the first matching rule wins."),
    "libraries.files": ("Wheel member globs; with per-train, \"{cu}\" stands for the train's digits in the name "
                        "(e.g. \"bitsandbytes/libbitsandbytes_cuda{cu}.so\" matches _cuda128.so as CUDA 12.8)."),
    "libraries.archs": "The architecture list these libraries carry, e.g. \"6.0 7.0 8.0\" (same syntax as a platform's).",
    "libraries.ptx": ("Which of archs also ships as PTX: \"newest\" (default), \"none\" or one of the list; not "
                      "with a list that marks PTX itself (+PTX, 12.0-virtual)."),
    "libraries.per-train": ("Hold each library to the policy's list for the train its name carries ({cu} in files): "
                            "one kernel library per CUDA train in one wheel."),
    "libraries.vendored": "A library bundled from elsewhere (NVIDIA's libnvjpeg): its device code is not the project's list.",
    "libraries.host-only": ("A CUDA library without device code (host code calling the CUDA runtime, linked in "
                            "statically or not): a CUDA row may ship it without kernels; a CPU row never may."),
    "libraries.dlopens": ("NVIDIA libraries these libraries load only by dlopen, by soname (e.g. \"libcublas.so.12\"): "
                          "held to the row's soname majors, and a declared NVIDIA package must carry each."),
    "libraries.system": ("Libraries these libraries NEED that the user's system provides, not the wheel (globs, e.g. "
                         "\"libsox.so\", \"libav*.so.*\"): an optional feature that loads only where they are installed. "
                         "libraries-load names them instead of failing."),
    "libraries.provided-by": ("Libraries these libraries NEED that a non-NVIDIA requirement of the wheel installs, "
                              "soname (glob) = distribution, e.g. { \"librapids_logger.so\" = \"rapids-logger\" }: "
                              "the wheel must Require-Dist that distribution; libraries-load then judges the library "
                              "found, as the requirement's package loads it once pip installed it."),
    "libraries.rows": "Rows this applies to (names or globs); default every row.",
    "libraries.reason": "Why these libraries carry another list; shown by the check.",
    "rpath-exception.climbs-out": (
        "Accept the entry even though it climbs out of site-packages (a plugin whose RPATH serves two install "
        "layouts at once, e.g. \"$ORIGIN/../../nvidia/*/lib\"); needs entry."),
}


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Runtime(Frozen):
    """What a wheel of one CUDA major declares and must reach.

    `mode` is how the CUDA runtime reaches the libraries: `dynamic` (linked from the runtime
    wheel, which is declared and reached through RPATH), `static` (linked in; nothing links it
    dynamically), `none` (no CUDA runtime at all, linked or linked in: the driver API, NVRTC or CUDA
    libraries only) or `torch` (a PyTorch extension: torch brings the runtime, and the wheel pins the
    torch it was built against); `preload` and `torch-runtime` see DOCS["runtime.mode"].
    `library_dir` is empty unless the mode is dynamic.
    """

    requirements: tuple[str, ...]
    library_dir: str
    source: str
    mode: RuntimeMode = "dynamic"
    reason: str = ""  # DOCS["runtime.reason"]
    extra: str | None = None  # DOCS["runtime.extra"]
    optional: tuple[str, ...] = ()  # DOCS["runtime.optional"]
    jit: tuple[str, ...] = ()  # DOCS["runtime.jit"]: the run-time compilers of a JIT-only wheel


@frozen_dataclass(frozen=True, eq=False, repr=False)
class RpathException(Frozen):
    """An RPATH/RUNPATH entry the check accepts, and why: `entry` (a literal, or a glob) or
    `reaches` (where an $ORIGIN entry lands, relative to site-packages: another package's
    library directory). `libraries` (globs over wheel members) limits it; empty means every one."""

    reason: str
    source: str
    entry: str | None = None
    reaches: str | None = None
    libraries: tuple[str, ...] = ()
    climbs_out: bool = False  # DOCS["rpath-exception.climbs-out"]


@frozen_dataclass(frozen=True, eq=False, repr=False)
class FileRule(Frozen):
    """A promise about named files of the wheel, for the rows `rows` (globs; empty: every row).

    `required`: every glob of `files` matches at least one member. `no-cuda`: the libraries it
    matches (at least one) link no CUDA library, except the names in `allow` (`nvcuda.dll`)."""

    kind: Literal["required", "no-cuda"]
    files: tuple[str, ...]
    reason: str
    source: str
    rows: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()

    def applies_to(self, row: str) -> bool:
        import fnmatch

        return not self.rows or any(fnmatch.fnmatchcase(row, g) for g in self.rows)


@frozen_dataclass(frozen=True, eq=False, repr=False)
class LibraryRule(Frozen):
    """Device code of the libraries `files` match, judged by its own rule (DOCS["libraries"]):
    `archs` (its own list), `per_train` (each library's train's list, from {cu} in its name),
    `vendored` (not the project's list) or `host_only` (no device code: host code using CUDA);
    `dlopens` names the NVIDIA libraries they load by dlopen (with a kind or alone)."""

    files: tuple[str, ...]  # DOCS["libraries.files"]
    reason: str  # DOCS["libraries.reason"]
    source: str
    archs: ArchList | None = None  # DOCS["libraries.archs"]
    per_train: bool = False  # DOCS["libraries.per-train"]
    vendored: bool = False  # DOCS["libraries.vendored"]
    rows: tuple[str, ...] = ()  # DOCS["libraries.rows"]
    host_only: bool = False  # DOCS["libraries.host-only"]
    dlopens: tuple[str, ...] = ()  # DOCS["libraries.dlopens"]
    system: tuple[str, ...] = ()  # DOCS["libraries.system"]
    provided_by: tuple[tuple[str, str], ...] = ()  # DOCS["libraries.provided-by"]: (soname glob, distribution)

    def applies_to(self, row: str) -> bool:
        import fnmatch

        return not self.rows or any(fnmatch.fnmatchcase(row, g) for g in self.rows)

    def match(self, path: str) -> tuple[bool, str | None]:
        """(whether `path` is one of these libraries, the {cu} digits it carries if per-train)."""
        import fnmatch
        import re

        for glob in self.files:
            if "{cu}" not in glob:
                if fnmatch.fnmatchcase(path, glob):
                    return True, None
                continue
            head, _, tail = glob.partition("{cu}")
            pattern = fnmatch.translate(head).removesuffix(r"\Z").removeprefix("(?s:").removesuffix(")")
            rest = fnmatch.translate(tail).removesuffix(r"\Z").removeprefix("(?s:").removesuffix(")")
            m = re.fullmatch(f"(?s:{pattern})(\\d{{2,3}})(?s:{rest})", path)
            if m:
                return True, m.group(1)
        return False, None


@frozen_dataclass(frozen=True, eq=False, repr=False)
class CheckPolicy(Frozen):
    """What the project promises about its wheels beyond the defaults (SPEC §8, real projects)."""

    rpath_exceptions: tuple[RpathException, ...] = ()
    files: tuple[FileRule, ...] = ()
    libraries: tuple[LibraryRule, ...] = ()  # DOCS["libraries"]
    same_members: bool = False  # rows built together must ship the same members (buildrows.check.members)


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Row(Frozen):
    """One wheel to build: platform x accelerator x Python."""

    name: str
    platform: str
    os: Os
    machine: Machine
    cuda: Train | None
    python: str
    archs: ArchList | None
    image: str | None = None
    empty_reason: str | None = None
    runtime: Runtime | None = None
    cache: tuple[tuple[str, str], ...] = ()
    provenance: tuple[tuple[str, str], ...] = ()
    #: The CMake generator the policy fixes for this row's platform (None: the host's default rule),
    #: and where it was written.
    generator: str | None = None
    generator_source: str = ""
    #: The project's environment for this row: its switches with this row's value ("1" on CUDA
    #: rows, "0" on CPU rows; inverted ones the other way round) and its cpu-env or cuda-env
    #: (placeholders expanded by buildrows.plan.row).
    switches: tuple[tuple[str, str], ...] = ()

    @property
    def is_cuda(self) -> bool:
        return self.cuda is not None

    @property
    def accel(self) -> str:
        return self.cuda.cu if self.cuda else "cpu"

    @property
    def local_tag(self) -> str:
        """The wheel's local version tag: `+cu130` for CUDA rows, none for CPU rows."""
        return f"+{self.cuda.cu}" if self.cuda else ""

    @property
    def requires_dist(self) -> list[str]:
        """The runtime requirements this row's wheel declares: the train's set on Linux, none on
        Windows or for CPU rows. Entries keep their markers (pip evaluates them at install time);
        `buildrows check` holds the wheel to the same rule (requirements.expected_requirements)."""
        if self.cuda is None or self.runtime is None or self.os != "linux":
            return []
        return list(self.runtime.requirements)

    @property
    def python_tag(self) -> str:
        return "cp" + self.python.replace(".", "")

    def require_archs(self, step: str) -> ArchList:
        """The guard every step runs: a CUDA row without a list never falls back to detection."""
        if self.empty_reason is not None:
            raise Refused(f"row {self.name} is declared empty: {self.empty_reason}")
        if self.cuda is not None and (self.archs is None or not self.archs.entries):
            raise Refused(
                f"{step}: row {self.name} is a CUDA {self.cuda.dotted} row with no architecture list; "
                "buildrows will not fall back to detecting the builder's GPU",
                [Problem("no architecture list", row=self.name, field="archs", refusal=True,
                         hint=f"add the train to an archs list under [[platforms.{self.platform}.cuda]]")],
            )
        assert self.archs is not None or self.cuda is None
        return self.archs if self.archs is not None else ArchList((), ())


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Project(Frozen):
    name: str
    driver: Driver
    source_dir: str
    cuda_option: str | None
    cache: tuple[tuple[str, str], ...] = ()
    #: Environment variables the project reads to turn CUDA on or off (USE_CUDA, FORCE_CUDA, ...).
    switches: tuple[str, ...] = ()
    #: Stamp built wheels that lack the row's local version or runtime requirement (opt-in).
    stamp: bool = False
    #: The torch a torch extension's rows build against (a requirement: "torch==2.14.*"); None:
    #: the newest the row's train's index serves. `build --provision` installs it.
    torch: str | None = None
    #: Cache variables and environment variables for CPU rows only, or CUDA rows only (a cuda-env
    #: value may name {cuda_home}, {cuda}, {cu}, {archs}, {torch_archs}).
    cpu_cache: tuple[tuple[str, str], ...] = ()
    cuda_cache: tuple[tuple[str, str], ...] = ()
    cpu_env: tuple[tuple[str, str], ...] = ()
    cuda_env: tuple[tuple[str, str], ...] = ()
    #: What a CPU row's wheel is: "compiled" (extensions built, as the CUDA rows'), or "pure" (a
    #: pure-Python wheel whose package compiles its kernels at run time: no library, no torch pin).
    cpu_wheel: str = "compiled"

    def row_switches(self, *, cuda: bool) -> tuple[tuple[str, str], ...]:
        """The environment a row of this kind gets from the project: each switch 1 on CUDA rows
        and 0 on CPU rows ("!NAME": the other way round: a switch that means CPU; "NAME=VALUE":
        VALUE where it is on, empty where off), then the kind's own variables."""
        out = []
        for s in self.switches:
            inverted = s.startswith("!")
            name, eq, on = s.removeprefix("!").partition("=")
            # "NAME=TRUE": the on-value as the project compares it; off is empty, which a setup.py
            # reading it as a truth value (or comparing it with TRUE) takes as off, as "0" is not.
            out.append((name, (on if eq else "1") if cuda != inverted else ("" if eq else "0")))
        return (*out, *(self.cuda_env if cuda else self.cpu_env))


InstallKind = Literal["version", "vcs", "path"]
Submodules = Literal["recursive", "true", "false"]


@frozen_dataclass(frozen=True, eq=False, repr=False)
class GpuTest(Frozen):
    """[ci.gpu-test]: the end-to-end GPU job rendered per train the build job built."""

    script: str  # relative to the policy file
    linux_runner: str | None = None
    windows_runner: str | None = None


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Ci(Frozen):
    """How CI builds the rows ([ci]): what `buildrows workflow` renders from."""

    #: How CI installs buildrows, pinned: `buildrows==X`, a VCS URL at a full commit, or a path
    #: (relative to the policy file). None when the policy does not say; `workflow` then refuses.
    install: str | None = None
    install_kind: InstallKind | None = None
    #: Project sources that decide a row (globs relative to the policy file), for the path filters.
    paths: tuple[str, ...] = ()
    submodules: Submodules = "recursive"
    #: Run test-infra's Linux smoke test (it also greps the wheel for a pinned torch). None: where
    #: every row's wheel pins torch (runtime mode torch), else buildrows' own in the post-script.
    smoke_test: bool | None = None
    #: The Python package the smoke test imports.
    import_name: str = ""
    #: Assemble a train the builder image lacks in the pre-script ([ci] provision-toolkit): "auto"
    #: (PyPI where the train is pinned, else the redistributable archives), "redist" or "pypi"; None: off.
    provision_toolkit: str | None = None
    gpu_test: GpuTest | None = None


#: Refs whose jobs write to the remote compiler cache when the policy does not say.
DEFAULT_WRITE_REFS = ("refs/heads/main", "refs/tags/v*")


@frozen_dataclass(frozen=True, eq=False, repr=False)
class CompilerCacheSettings(Frozen):
    """The compiler cache shared past one machine ([compiler-cache]); see buildrows.build.remote_cache."""

    #: The remote store (redis://, redis+unix:, http://), credentials as ${VAR}; None: local only.
    #: Every job reads with it (the reader's credential, or none for anonymous reads).
    url: str | None = None
    #: The same store with the writer's credential, used only by jobs `write_refs` allows; None:
    #: one credential for every job (the store cannot tell a trusted job from another).
    write_url: str | None = None
    #: Refs (globs) whose pushes, manual and scheduled runs write; every other job reads only.
    write_refs: tuple[str, ...] = DEFAULT_WRITE_REFS
    #: Refs (globs) that build without reading the store at all (e.g. release tags).
    hermetic_refs: tuple[str, ...] = ()
    #: Where the store was configured, for messages (`compiler-cache.remote (buildrows.toml:12)`).
    source: str = ""
    #: Where the writer was configured (`compiler-cache.write-remote (buildrows.toml:13)`).
    write_source: str = ""


@frozen_dataclass(frozen=True, eq=False, repr=False)
class RepairSettings(Frozen):
    """[repair]: auditwheel repair of each Linux row's wheel after the build (buildrows.build.repair)."""

    auditwheel: bool = False
    #: The manylinux/musllinux policy without the machine ("manylinux_2_28"); None: auditwheel's choice.
    plat: str | None = None
    #: More sonames (globs) never bundled, beyond the automatic NVIDIA, driver and torch ones.
    exclude: tuple[str, ...] = ()
    #: Where auditwheel was turned on, for messages (`repair.auditwheel (buildrows.toml:30)`).
    source: str = ""


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Policy(Frozen):
    """Everything a policy file says, after validation."""

    path: str
    project: Project
    pythons: tuple[str, ...]
    excluded_pythons: tuple[tuple[str, str], ...]
    trains: tuple[Train, ...]
    runtimes: tuple[tuple[int, Runtime], ...]
    platforms: tuple[str, ...]
    rows: tuple[Row, ...] = field(default=())
    ci: Ci = field(default_factory=Ci)
    check: CheckPolicy = field(default_factory=CheckPolicy)
    compiler_cache: CompilerCacheSettings = field(default_factory=CompilerCacheSettings)
    repair: RepairSettings = field(default_factory=RepairSettings)
    pull_request_trains: tuple[Train, ...] = ()  # preferred first; unlisted trains follow (pull_request_fallback)
    #: Trains built from source (build, doctor, hook) but not published: absent from the release
    #: matrix and from pull requests ([cuda] build-only).
    build_only_trains: tuple[Train, ...] = ()
    #: When no preferred train is on offer: "newest" (the newest train on offer) or "closest" (the
    #: nearest older train to the first preferred one, then the nearest newer: ExecuTorch's rule).
    pull_request_fallback: str = "newest"
    #: A pull request's Python: "newest" on offer, or "first" (the earliest of [python] versions on offer).
    pull_request_python: str = "newest"
    #: Where the policy sits in its file: "tool.buildrows." in pyproject.toml, else "".
    key_prefix: str = ""

    def key(self, path: str) -> str:
        """A key path as the policy file spells it (`tool.buildrows.python.excluded` in pyproject.toml)."""
        return self.key_prefix + path

    def publishes(self, row: Row) -> bool:
        """Whether the release matrix carries ROW: not declared empty, not of a build-only train."""
        return row.empty_reason is None and (row.cuda is None or row.cuda not in self.build_only_trains)

    def torch_extension(self, row: Row) -> bool:
        """Whether the row's wheel is a PyTorch extension, tied to the torch it was built against: its
        runtime's mode is torch; for a CPU row (no runtime), any of the policy's runtimes is, unless
        the CPU wheel is pure Python ([project] cpu-wheel = "pure")."""
        if row.runtime is not None:
            return row.runtime.mode == "torch"
        return (row.cuda is None and self.project.cpu_wheel != "pure"
                and any(rt.mode == "torch" for _, rt in self.runtimes))

    def row(self, name: str) -> Row | None:
        for r in self.rows:
            if r.name == name:
                return r
        return None


#: What a [project] cuda-env value may name, e.g. CUDA_TOOLKIT_ROOT_DIR = "{cuda_home}" (the plan expands them).
ROW_ENV_PLACEHOLDERS = ("cuda_home", "cuda", "cu", "archs", "torch_archs")

"""The commands each build driver runs for a row: computed here, run by `buildrows.process.runner`.

Three drivers, as the policy's `project.driver` says:

- ``cmake-presets``: ``cmake --workflow --preset ROW`` over the presets `buildrows render` wrote.
- ``scikit-build-core``: a PEP 517 wheel build (``python -m build --wheel``) of the project as it
  is; the row reaches scikit-build-core only through its own settings (``-C cmake.args=-G...``,
  ``-C cmake.define.X=V``, ``-C build-dir=...``) and the environment, never by editing files.
- ``setup.py``: the row's environment (``CMAKE_ARGS``, ``TORCH_CUDA_ARCH_LIST``, ``CU_VERSION``,
  ...) around the same PEP 517 wheel build.

The wheel's per-row metadata travels in two variables a project reads at build time (the
example does so through a scikit-build-core metadata provider; `buildrows.render.envfile` sets them, so
`env` and the hook write the same): ``BUILDROWS_LOCAL_VERSION``
(``+cu130``; empty for CPU rows) and ``BUILDROWS_REQUIRES_DIST`` (the train's runtime
requirements, one per line; empty for CPU and Windows rows).

By default the frontend runs without build isolation: the build uses the row's Python as it is
(doctor checks the project's build requirements are there), which needs no package registry
and does not reinstall cmake and scikit-build-core on every build. ``isolation=True`` lets the
frontend make a fresh environment from the registry instead, as a release job may prefer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from buildrows.frozen import Frozen, frozen_dataclass
from buildrows.plan.host import row_python as row_python
from buildrows.plan.row import RowPlan
from buildrows.policy.model import Driver, Row
from buildrows.process.runner import Command

if TYPE_CHECKING:
    from buildrows.build.compiler_cache import CompilerCache


@frozen_dataclass(frozen=True, eq=False, repr=False)
class BuildPlan(Frozen):
    """What building one row runs, and where its wheel lands (None: the driver makes no wheel)."""

    row: Row
    driver: Driver
    commands: tuple[Command, ...]
    wheel_dir: Path | None
    install_dir: Path | None = None  # cmake-presets: the install tree `build` checks instead of a wheel
    files: tuple[tuple[Path, str], ...] = ()  # written before the commands run (setup.py: its setuptools config)
    tree: Path | None = None  # the row's own build tree, tied to what built it (buildrows.build.buildtree)


def requires_dist(row: Row) -> list[str]:
    """The runtime requirements a row's wheel declares (see Row.requires_dist)."""
    return row.requires_dist


def cmake_presets_plan(row: Row, project: Path) -> BuildPlan:
    """`cmake --workflow --preset ROW` in the project (configure, build and test, as rendered), then
    `cmake --install` into build/ROW/install: the tree the wheel check holds to the row."""
    cmd = Command("build (cmake --workflow)", ("cmake", "--workflow", "--preset", row.name), cwd=str(project))
    build_dir = f"build/{row.name}"  # the presets' binaryDir (presets/buildrows-presets.json.j2)
    install = Command("install (cmake --install)",
                      ("cmake", "--install", build_dir, "--config", "Release", "--prefix", f"{build_dir}/install"),
                      cwd=str(project))  # Release: the configuration the build preset builds
    return BuildPlan(row, "cmake-presets", (cmd, install), None, project / build_dir / "install",
                     tree=project / build_dir)


def _frontend(python: str, project: Path, wheel_dir: Path, isolation: bool, *, checked: bool = False) -> list[str]:
    """`python -m build --wheel`. `checked`: doctor has checked the build requirements in this
    interpreter, so the frontend need not start the backend once more only to ask for them."""
    argv = [python, "-m", "build", "--wheel", "--outdir", str(wheel_dir)]
    if not isolation:
        argv.append("--no-isolation")
        if checked:
            argv.append("--skip-dependency-check")
    argv.append(str(project))
    return argv


def scikit_build_core_plan(plan: RowPlan, python: str, project: Path, wheel_dir: Path, *,
                           isolation: bool = False, provider_path: str | None = None) -> BuildPlan:
    """A PEP 517 wheel build with the row's generator, cache and environment as scikit-build-core settings."""
    row = plan.row
    g = plan.generator
    cmake_args = [f"-G{g.generator}"]
    if g.toolset:
        cmake_args.append(f"-T{g.toolset}")
    if g.architecture:
        cmake_args.append(f"-A{g.architecture}")
    settings = [f"cmake.args={';'.join(cmake_args)}"]
    # A list value (75-real;90-real) stays one cache value: cmake.define keeps the semicolons.
    settings += [f"cmake.define.{k}={v}" for k, v in plan.cache]
    # One build tree per row beside the project's own build/, so a rebuild is incremental.
    tree = project / "build" / f"skbuild-{row.name}"
    settings.append(f"build-dir={tree.as_posix()}")
    # doctor checked the project's requirements, and cmake and ninja (what scikit-build-core would add).
    argv = _frontend(python, project, wheel_dir, isolation, checked=True)
    for s in settings:
        argv[-1:-1] = ["-C", s]
    # The generator and cache travel as -C settings above; the environment carries the row's own variables.
    from buildrows.build.rowenv import build_variables

    env = build_variables(plan, "scikit-build-core", python, None, {}, row_only=True).as_dict()
    if provider_path is not None:
        env["PYTHONPATH"] = provider_path
    notes = (f"generator: {g.generator} ({g.reason})",)
    cmd = Command("build (scikit-build-core wheel)", tuple(argv), tuple(env.items()), str(project), notes)
    return BuildPlan(row, "scikit-build-core", (cmd,), wheel_dir, tree=tree)


def setup_py_plan(plan: RowPlan, python: str, project: Path, wheel_dir: Path, base_env: Mapping[str, str], *,
                  isolation: bool = False, provider_path: str | None = None) -> BuildPlan:
    """The row's environment (CMAKE_ARGS, TORCH_CUDA_ARCH_LIST, CU_VERSION, ...), then a PEP 517 wheel build."""
    from buildrows.build.rowenv import build_variables

    # The same builder as `env` and the CI hook (buildrows.build.rowenv): the row's variables and
    # LDSHARED without the interpreter's own rpath. SOURCE_DATE_EPOCH comes later, for every driver.
    shared = build_variables(plan, "setup.py", python if plan.row.os == "linux" else None, None, base_env)
    values = shared.as_dict()
    notes = [f"generator: {plan.generator.generator} ({plan.generator.reason})"]
    from buildrows.build.project_cmake import setup_py_runs_make

    if plan.row.generator is None and setup_py_runs_make(project):
        # It runs `make` in the tree its CMake wrote: CMAKE_GENERATOR=Ninja would leave no Makefile.
        for var in ("CMAKE_GENERATOR", "CMAKE_GENERATOR_TOOLSET", "CMAKE_GENERATOR_PLATFORM"):
            values.pop(var, None)
        notes = ["generator: left to CMake's default (setup.py runs `make` itself; the policy fixes none)"]
    if provider_path is not None:
        values["PYTHONPATH"] = provider_path
    notes += shared.notes
    from buildrows.build.setup_parallel import parallel_jobs

    jobs = parallel_jobs(project, plan.row.is_cuda, {**base_env, **values})
    config, text = setuptools_config(plan.row, project, base_env, parallel=jobs)
    if jobs is not None and f"parallel = {jobs}" in text:
        values["TORCH_NO_COMPILER_WRAPPER"] = "1"
        notes.append(f"extensions: {jobs} at once (torch's BuildExtension without ninja, a CPU row: "
                     "[build_ext] parallel; TORCH_NO_COMPILER_WRAPPER=1, so its compiler swap does not race)")
    values["DIST_EXTRA_CONFIG"] = str(config)
    argv = _frontend(python, project, wheel_dir, isolation)
    cmd = Command("build (setup.py wheel)", tuple(argv), tuple(values.items()), str(project),
                  (*notes, f"setuptools builds in {config.parent / config.stem} (DIST_EXTRA_CONFIG), this row's own directory"))
    return BuildPlan(plan.row, "setup.py", (cmd,), wheel_dir, files=((config, text),), tree=config.parent / config.stem)


def setuptools_config(row: Row, project: Path, env: Mapping[str, str], *,
                      parallel: int | None = None) -> tuple[Path, str]:
    """The extra setuptools configuration (DIST_EXTRA_CONFIG, read after setup.cfg) that gives a
    setup.py row its own build directory, build/setuptools-ROW, as scikit-build-core rows get
    build/skbuild-ROW. setuptools' build/lib.<platform>-<python> is the same for a train's CUDA
    row and the CPU row of that Python: without this, a CPU build after a CUDA one in the same
    checkout packs the CUDA row's stale extension (seen on the H200 with torchsort, whose
    isotonic_cuda module the CPU row's wheel then shipped). A user's own DIST_EXTRA_CONFIG is kept:
    its sections are copied, and only [build] build_base is set (and, with ``parallel``, [build_ext]
    parallel where theirs sets none: buildrows.build.setup_parallel)."""
    import configparser

    base = project / "build" / f"setuptools-{row.name}"
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    theirs = env.get("DIST_EXTRA_CONFIG", "")
    if theirs:
        parser.read(theirs, encoding="utf-8")
    if not parser.has_section("build"):
        parser.add_section("build")
    parser.set("build", "build_base", base.as_posix())
    if parallel is not None and not (parser.has_section("build_ext") and parser.has_option("build_ext", "parallel")):
        if not parser.has_section("build_ext"):
            parser.add_section("build_ext")
        parser.set("build_ext", "parallel", str(parallel))
    import io

    out = io.StringIO()
    out.write("# Written by buildrows for row " + row.name + (f"; from {theirs}" if theirs else "") + "\n")
    parser.write(out)
    return project / "build" / f"setuptools-{row.name}.cfg", out.getvalue()


def with_compiler_cache(bp: BuildPlan, env: Mapping[str, str], launchers: Mapping[str, str]) -> BuildPlan:
    """The plan with the compiler cache's variables added to every command; a scikit-build-core
    build also gets the launchers as -C cmake.define settings, so they apply on a reconfigure of
    an existing build tree too (CMake reads the environment only on the first configure)."""
    from dataclasses import replace

    commands = []
    for cmd in bp.commands:
        argv = list(cmd.argv)
        if bp.driver == "scikit-build-core":
            for k, v in launchers.items():
                argv[-1:-1] = ["-C", f"cmake.define.{k}={v}"]
        commands.append(replace(cmd, argv=tuple(argv), env=(*cmd.env, *env.items())))
    return replace(bp, commands=tuple(commands))


def environment_bin(python: str) -> Path | None:
    """The scripts directory of the virtual environment `python` belongs to (its `bin`, Scripts on
    Windows), or None when it is not one. Judged by the path as given, never by the file it
    resolves to: a venv's python is a link to its base interpreter."""
    here = Path(os.path.abspath(python)).parent
    return here if (here.parent / "pyvenv.cfg").is_file() else None


def with_environment_bin(bp: BuildPlan, python: str, base_env: Mapping[str, str]) -> BuildPlan:
    """The plan with the row's environment's scripts directory first on every command's PATH, as
    an isolated PEP 517 frontend does: the programs its build requirements install (swig, cmake,
    ninja, cython) and its `python` are the ones the build finds. Unchanged when the row's
    interpreter is not in a virtual environment (a system python's directory, /usr/bin, must not
    go before the user's PATH)."""
    from dataclasses import replace

    scripts = environment_bin(python)
    if scripts is None:
        return bp
    commands = []
    for cmd in bp.commands:
        path = cmd.environment(base_env).get("PATH", "")
        commands.append(replace(cmd, env=(*cmd.env, ("PATH", f"{scripts}{os.pathsep}{path}" if path else str(scripts)))))
    return replace(bp, commands=tuple(commands))


def with_cuda_bin_on_path(bp: BuildPlan, plan: RowPlan, base_env: Mapping[str, str]) -> BuildPlan:
    """A setup.py build of a CUDA row with the row's CUDA root's `bin` first on every command's PATH:
    a setup.py that takes its toolkit from the first `nvcc` on PATH (pycuda 2026.1's aksetup
    configure: CUDA_ROOT is that nvcc's parent; CUDA_HOME and CUDACXX play no part) builds with the
    row's toolkit, the one doctor judged, not with whatever nvcc the machine's PATH has first
    (/usr/local/bin/nvcc, a wrapper whose parent /usr/local has no cuda.h). Unchanged when the
    root has no bin/nvcc."""
    from dataclasses import replace

    root = plan.cuda_home
    if root is None or plan.compiler is None:
        return bp
    cuda_bin = os.path.join(root, "bin")
    if not os.path.isfile(os.path.join(cuda_bin, os.path.basename(plan.compiler.path))):
        return bp
    commands = []
    for cmd in bp.commands:
        path = cmd.environment(base_env).get("PATH", "")
        commands.append(replace(cmd, env=(*cmd.env, ("PATH", os.pathsep.join(p for p in (cuda_bin, path) if p)))))
    return replace(bp, commands=tuple(commands))


def with_ccache_on_path(bp: BuildPlan, cache: CompilerCache, base_env: Mapping[str, str],
                       python: str | None = None) -> BuildPlan:
    """A setup.py build with `ccache` (the row's compiler cache) first on every command's PATH,
    where torch.utils.cpp_extension looks for it (CompilerCache.on_path), and before it ccache's
    masquerade directory, through which setuptools' own C and C++ compiles go
    (buildrows.build.cache_masquerade; the link commands by full path, from `python`'s sysconfig)."""
    from dataclasses import replace

    from buildrows.build.cache_masquerade import interpreter_link_commands, masquerade_environment

    links = interpreter_link_commands(python) if os.name != "nt" else ("", "")
    commands = []
    for cmd in bp.commands:
        env = cmd.environment(base_env)
        extra = cache.on_path(env.get("PATH", ""))
        extra.update(masquerade_environment(cache.directory / "masquerade", cache.executable,
                                            {**env, **extra}, links))
        commands.append(replace(cmd, env=(*cmd.env, *extra.items())))
    return replace(bp, commands=tuple(commands))


def launchers_without_cache(env: Mapping[str, str]) -> dict[str, str]:
    """With the compiler cache off: the launchers the user's environment names, else none (an
    existing build tree may remember buildrows' ccache from an earlier build)."""
    from buildrows.build.compiler_cache import LANGUAGES

    names = [f"CMAKE_{lang}_COMPILER_LAUNCHER" for lang in LANGUAGES]
    return {n: env.get(n, "") for n in names}


def project_dir(policy_path: str, source_dir: str, override: str | None) -> Path:
    """The project to build: --project, else the policy's source-dir relative to the policy file."""
    if override:
        return Path(override).resolve()
    return (Path(policy_path).resolve().parent / source_dir).resolve()


def default_wheel_dir(project: Path, override: str | None) -> Path:
    return Path(override).resolve() if override else project / "dist"


def snapshot(wheel_dir: Path) -> dict[Path, int]:
    """The wheels in wheel_dir and their modification times, taken before a build."""
    if not wheel_dir.is_dir():
        return {}
    return {p: p.stat().st_mtime_ns for p in wheel_dir.glob("*.whl")}


def new_wheels(wheel_dir: Path, before: Mapping[Path, int]) -> list[Path]:
    """Wheels the build wrote (new, or rewritten since the snapshot), newest first."""
    now = snapshot(wheel_dir)
    changed = [p for p, t in now.items() if before.get(p) != t]
    return sorted(changed, key=lambda p: now[p], reverse=True)


def provider_path(cache: Path, env: Mapping[str, str]) -> str:
    """PYTHONPATH for a build, so its interpreter can import `buildrows.metadata` (the metadata
    provider) whatever environment builds it (the row's provisioned one, an isolated one, another
    interpreter): a directory under buildrows' cache holding only a link to this `buildrows`
    package (a copy of the provider where links cannot be made), before the caller's PYTHONPATH.
    Only buildrows is exposed, never the packages installed beside it. The directory is this
    installation's own (`installation_key`: the package's path and version), so two installations
    sharing one cache never run each other's code. Creates the directory."""
    import os

    package = Path(__file__).resolve().parent.parent
    where = cache / "importable" / installation_key(package)
    _expose(package, where / "buildrows")
    previous = env.get("PYTHONPATH", "")
    return os.pathsep.join(p for p in (str(where), previous) if p)


def with_source_date_epoch(bp: BuildPlan, project: Path, env: Mapping[str, str]) -> tuple[BuildPlan, str]:
    """The plan with SOURCE_DATE_EPOCH on every command (the user's, else the project's last commit
    time: buildrows.build.stamp.source_date_epoch), so the wheel's zip timestamps, and with them its
    bytes, depend on the sources only; and a line saying where the value came from."""
    from dataclasses import replace

    from buildrows.build.epoch import source_date_epoch

    value, why = source_date_epoch(project, env)
    commands = tuple(replace(cmd, env=(*cmd.env, ("SOURCE_DATE_EPOCH", value))) for cmd in bp.commands)
    return replace(bp, commands=commands), f"SOURCE_DATE_EPOCH={value} ({why}): a rebuild of the same sources gives the same wheel"


def installation_key(package: Path) -> str:
    """What tells this buildrows installation from another sharing the cache: its package
    directory and its version, hashed (an editable checkout is its own installation)."""
    import hashlib

    from buildrows.check.record import own_version

    return hashlib.sha256(f"{package}\0{own_version()}".encode()).hexdigest()[:16]


def _expose(package: Path, link: Path) -> None:
    """`link` made (or corrected) to be this package: a symlink to it, or, without symlinks
    (Windows without the privilege), a package holding a current copy of its provider alone."""
    import shutil

    if link.is_symlink() and link.resolve() == package:
        return
    provider = package / "metadata.py"
    copied = link / "metadata.py"
    if not link.is_symlink() and copied.is_file() and copied.read_bytes() == provider.read_bytes():
        return
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link)
    try:
        link.symlink_to(package, target_is_directory=True)
    except FileExistsError:  # another build of this installation made it meanwhile
        return
    except OSError:  # no symlinks: the provider alone suffices
        link.mkdir(exist_ok=True)
        (link / "__init__.py").write_text("", encoding="utf-8")
        shutil.copy2(provider, copied)

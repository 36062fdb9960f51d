"""Running one row's steps: render, the build's environment and compiler cache, the build, then stamping, repair and the check.

`_build_row` is what `buildrows.build.orchestrate.build_row` runs for each row once its staging
directory and tree lock are held; the wheel it makes is placed by `buildrows.build.placement`."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from buildrows.build.placement import _unstage
from buildrows.build.wheel_finish import _size, check_built_wheel, stamp_built_wheel
from buildrows.provision.wheel_dirs import KEPT, REJECTED, rejected_dir

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from contextlib import AbstractContextManager

    from buildrows.build import drivers
    from buildrows.build.compiler_cache import CacheStats, CompilerCache
    from buildrows.build.prepare import Provided
    from buildrows.build.rows_plan import _Run
    from buildrows.build.summary import RowOutcome
    from buildrows.plan.row import RowPlan
    from buildrows.policy.model import Row


def _build_row(state: _Run, row: Row, provided: Provided | None, wheel_dir: Path, final_dir: Path) -> RowOutcome:
    from buildrows.build import drivers
    from buildrows.build.prepare import doctor_command, driver_of, project_of
    from buildrows.build.summary import RowOutcome, size_text
    from buildrows.errors import EXIT_CHECK_FAILED, ExternalFailure, Refused
    from buildrows.plan.row import plan_row
    from buildrows.process.runner import run_step
    from buildrows.render.presets import render_plans

    pol, env, host, args, ui = state.pol, state.env, state.host, state.args, state.ui
    driver = driver_of(pol, args)
    project = project_of(pol, args)
    interp = provided.interpreter if provided else None
    toolkit = provided.toolkit if provided else None
    python = None
    if driver == "cmake-presets":
        ui.step(f"render presets for {row.name} into {project}")
        plan = plan_row(pol, row, env, host=host, step="build", interpreter=interp, toolkit=toolkit)
        rendered = render_plans([plan], project)
        for note in rendered.notes:
            ui.warn(f"  {note}")
        for path in rendered.paths:
            ui.info(f"  wrote {path}")
        from buildrows.render.presets import gitignore_advice

        gitignore_advice(project, False, ui)
        bp = drivers.cmake_presets_plan(row, project)
    else:
        ui.step(f"render {row.name}: generator, cache variables and environment")
        plan = plan_row(pol, row, env, host=host, step="build", interpreter=interp, toolkit=toolkit)
        python = interp.path if interp else drivers.row_python(row, env)
        if python is None:
            raise Refused(f"no Python {row.python} to build {row.name} with\n    fix: `{doctor_command(pol, row)}` says how to get one")
        from buildrows.plan.provisioned import cache_root

        importable = drivers.provider_path(cache_root(env), env)  # buildrows.metadata for the build
        if driver == "scikit-build-core":
            bp = drivers.scikit_build_core_plan(plan, python, project, wheel_dir, isolation=args.isolation,
                                                provider_path=importable)
        else:
            bp = drivers.setup_py_plan(plan, python, project, wheel_dir, env, isolation=args.isolation,
                                       provider_path=importable)
    cache = state.compiler_cache(row, project, plan.compiler, dict(plan.cache))
    if cache is not None:
        from buildrows.build.compiler_cache import prepare
        from buildrows.process.diskfull import is_disk_full

        try:
            prepare(cache)
        except OSError as e:  # a full BUILDROWS_CACHE costs the cache, not the build
            if not is_disk_full(e):
                raise
            ui.warn(f"the compiler cache {cache.directory} cannot be written (no space left on its device): building "
                    "without the compiler cache\n    fix: free space there, or point BUILDROWS_CACHE at another disk")
            cache = None
    # A setup.py CUDA row's nvcc compiles get a stats log of their own (one path per row, so a
    # CMake tree the project's setup.py keeps still writes where this reads).
    nvcc_log = (cache.stats_log.parent / f"{row.name}-nvcc.log"
                if cache is not None and driver == "setup.py" and row.is_cuda else None)
    base_env: Mapping[str, str] = env  # state.env: the writer's secret only in a job that writes
    if cache is not None:
        from buildrows.build.compiler_cache import without_ccache_settings
        from buildrows.build.remote_cache import withhold

        # Without the user's ccache settings, and without the writer's secret unless this job writes.
        base_env = withhold(state.remote, without_ccache_settings(env))
        nvcc = plan.compiler.path if plan.compiler is not None and driver == "setup.py" else None
        if nvcc_log is not None:
            nvcc_log.unlink(missing_ok=True)
        bp = drivers.with_compiler_cache(bp, cache.environment(nvcc, nvcc_log), cache.launchers(nvcc_log))
        ui.info(f"  compiler cache: {cache.directory} (ccache {cache.executable}, base_dir {cache.base_dir})")
    elif driver == "scikit-build-core":
        bp = drivers.with_compiler_cache(bp, {}, drivers.launchers_without_cache(env))
    if python is not None:
        bp = drivers.with_environment_bin(bp, python, base_env)
        bp, epoch = drivers.with_source_date_epoch(bp, project, base_env)
        ui.info(f"  {epoch}")
    if cache is not None and driver == "setup.py":
        bp = drivers.with_ccache_on_path(bp, cache, base_env, python)
    if driver == "setup.py" and row.is_cuda:
        unchanged = bp
        bp = drivers.with_cuda_bin_on_path(bp, plan, base_env)  # a setup.py that finds nvcc on PATH (pycuda)
        if bp is not unchanged:
            ui.info(f"  PATH: {plan.cuda_home}/bin first, so a setup.py that finds nvcc on PATH builds with the row's toolkit")
    for path, text in bp.files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    _tie_tree(state, plan, bp, python, project, base_env)
    from buildrows.build import source_outputs

    for line in source_outputs.settle(project, row.name):  # another row's outputs in the source tree
        ui.info(f"  {line}")
    sources_before = source_outputs.snapshot(project, (wheel_dir, final_dir))
    before = drivers.snapshot(wheel_dir)
    seeded = False
    try:
        seeding = state.seeding(bp, base_env) if cache is not None else None
        if seeding is None:
            for cmd in bp.commands:
                run_step(ui, cmd, base_env, doctor=doctor_command(pol, row))
        else:
            seeded = _build_seeded(state, row, bp, base_env, seeding, project, python, before)
        sources_after = source_outputs.snapshot(project, (wheel_dir, final_dir)) if sources_before is not None else None
        if sources_before is not None and sources_after is not None:
            source_outputs.record(project, row.name, source_outputs.written(sources_before, sources_after, project))
    finally:
        stats = _read_stats(cache)
        nvcc_stats = _read_log(nvcc_log) if nvcc_log is not None else None
        if nvcc_stats is not None:
            from buildrows.build.compiler_cache import CacheStats as Stats

            stats = nvcc_stats if stats is None else Stats(stats.compiles + nvcc_stats.compiles,
                                                           stats.remote_errors + nvcc_stats.remote_errors)
        if stats is not None:
            ui.info(f"  compiler cache: {stats.report()}")
            if stats.remote_errors:
                ui.warn(f"the remote compiler cache failed {stats.remote_errors} compile"
                        f"{'s' if stats.remote_errors != 1 else ''} of {row.name} (it went away, timed out, "
                        "refused the credential, or refused a write: a full store): they were compiled here, and the wheel is the same\n"
                        f"    fix: check the store; export BUILDROWS_CACHE_REMOTE=off to build without it")
    cache_text = "off" if cache is None else (stats.describe() if stats is not None else "-")
    if cache is not None and driver == "setup.py":
        logs = getattr(ui, "logs", None)
        from buildrows.build.summary import cxx_compiles_in_logs

        cache_text = _setup_py_cache_text(stats, row.is_cuda, nvcc_stats,
                                          _nvcc_runs(logs.directory) if logs is not None else None,
                                          cxx_compiles_in_logs(logs.directory) if logs is not None else None)
        ui.info("  compiler cache: `ccache` is first on the build's PATH, where torch.utils.cpp_extension finds it "
                "for nvcc and C++, and PYTORCH_NVCC names it (ninja builds); ccache's masquerade directory "
                "is before it, so setuptools' own C/C++ compiles go through it too")
    if seeded:
        cache_text += ", detection reused"
    if bp.wheel_dir is None:
        if bp.install_dir is None:
            ui.warn(f"the {driver} driver builds the tree, not a wheel: nothing to check for {row.name}")
            return RowOutcome(row.name, "built", cache=cache_text)
        ui.info(f"  install tree: {bp.install_dir}")
        tree_ok = None if args.no_check else check_built_wheel(pol, row, bp.install_dir, ui)
        if tree_ok is False:
            ui.error("check failed", f"the check failed for {row.name}: {bp.install_dir} (its report is above)")
        return RowOutcome(row.name, "built", EXIT_CHECK_FAILED if tree_ok is False else 0,
                          f"{bp.install_dir.name}/ (install tree)", _size(bp.install_dir), tree_ok,
                          cache=cache_text, wheel_path=str(bp.install_dir),
                          reason="" if tree_ok is not False else "the check failed (its report is above)")
    made = drivers.new_wheels(bp.wheel_dir, before)
    if not made:
        raise ExternalFailure(f"step 'build' for {row.name} finished but wrote no wheel into {bp.wheel_dir}")
    wheel = made[0]
    ui.info(f"  wheel: {wheel} ({size_text(_size(wheel))})")
    if python is not None:
        wheel = stamp_built_wheel(pol, plan, python, project, driver, wheel, env, args, ui)
    from buildrows.build.repair import repair_wheel

    wheel, unrepaired = repair_wheel(pol, row, wheel, env, ui, doctor=doctor_command(pol, row))  # [repair]
    if unrepaired:
        ui.error("repair failed", f"{unrepaired}\n    fix: exclude what must not be bundled ([repair] exclude), "
                 "or make the library auditwheel could not find reachable (LD_LIBRARY_PATH); the check below judges "
                 "the wheel as built")
    # Checked where it was built: only a wheel that passed (or was not checked) joins the wheel
    # directory's top level; one that failed goes under its .buildrows/rejected/ (`dist/*` is what
    # passed, so `twine upload dist/*` never publishes a failed one).
    torch_python = python if python is not None and not args.isolation else None  # its torch built the wheel
    ok = None if args.no_check else check_built_wheel(pol, row, wheel, ui, torch_python=torch_python)
    if unrepaired:
        ok = False  # a wheel [repair] asks to repair is not published unrepaired
    if ok is False or wheel_dir != final_dir:
        wheel = _unstage(state, row, wheel, final_dir if ok is not False else rejected_dir(final_dir))
    shown = wheel.name if ok is not False else f"{KEPT}/{REJECTED}/{wheel.name}"
    if unrepaired:
        ui.error("not repaired", f"{row.name}'s wheel {wheel.name} was not repaired (auditwheel's output is above); "
                 f"it is kept out of {final_dir}, at {wheel}")
    elif ok is False:
        ui.error("check failed", f"the wheel check failed for {row.name}: {wheel.name} (its report is above); it is "
                 f"kept out of {final_dir}, at {wheel}\n    fix: correct what the report names and build again; to "
                 f"check it again: buildrows --config {pol.path} check {wheel} --row {row.name}")
    failure = "auditwheel could not repair it" if unrepaired else "the wheel check failed"
    return RowOutcome(row.name, "built", EXIT_CHECK_FAILED if ok is False else 0, shown,
                      _size(wheel), ok, cache=cache_text, wheel_path=str(wheel),
                      reason="" if ok is not False else f"{failure} (its report is above); the wheel is kept apart "
                      f"in {wheel.parent}")


def _tie_tree(state: _Run, plan: RowPlan, bp: drivers.BuildPlan, python: str | None, project: Path,
              base_env: Mapping[str, str]) -> None:
    """Tie the row's build tree to what builds it now: reused when it was built with the same
    interpreter, torch, compilers and CMake, else started afresh, and said so (buildrows.build.buildtree)."""
    if bp.tree is None or not bp.commands:
        return
    from buildrows.build import buildtree

    built_with = buildtree.facts(plan, bp, python, project, bp.commands[0].environment(base_env),
                                 isolation=state.args.isolation)
    state.ui.info("  " + buildtree.settle(bp.tree, built_with).describe(project))


def _build_seeded(state: _Run, row: Row, bp: drivers.BuildPlan, base_env: Mapping[str, str],
                  seeding: tuple[str, Path], project: Path, python: str | None, before: Mapping[Path, int]) -> bool:
    """Run the row's build commands with CMake's compiler detection planted from an earlier row of
    the same key when its tree is fresh (buildrows.build.configure_seed), and keep this tree's detection
    for later rows when it ran its own. Returns whether the build that stands was seeded."""
    import shutil

    from buildrows.build import configure_seed, drivers
    from buildrows.build.prepare import doctor_command
    from buildrows.errors import ExternalFailure
    from buildrows.process.runner import run_step

    ui, doctor = state.ui, doctor_command(state.pol, row)
    key, tree = seeding
    fresh = not (tree / "CMakeCache.txt").exists()
    seed = state.seeds.get(key) if fresh else None
    if seed is not None:
        configure_seed.plant(seed, tree, project)
        ui.info(f"  CMake compiler detection: taken from {seed.donor}'s tree (same CMake, generator, compilers, "
                "flags, architecture list and environment), not run again")
    failed: ExternalFailure | None = None
    try:
        for cmd in bp.commands:
            run_step(ui, cmd, base_env, doctor=doctor)
    except ExternalFailure as e:
        if seed is None:
            raise
        failed = e  # perhaps the planted detection: the build without it decides
    if seed is not None:
        problem = "its build failed" if failed is not None else configure_seed.verify(seed, tree)
        if problem is None:
            return True
        ui.warn(f"  the planted detection does not fit {row.name}'s tree: {problem}; building it again in a fresh "
                "tree without it")
        shutil.rmtree(tree, ignore_errors=True)
        if bp.wheel_dir is not None:
            for wheel in drivers.new_wheels(bp.wheel_dir, before):
                wheel.unlink(missing_ok=True)
        for cmd in bp.commands:
            run_step(ui, cmd, base_env, doctor=doctor)
    if fresh and key not in state.seeds:
        private = [python or "", str(Path(python).parent.parent) if python else ""]
        got = configure_seed.harvest(tree, project, row.name, private)
        if got is not None:
            state.seeds[key] = got
    return False


def _tree_lock(state: _Run, row: Row) -> AbstractContextManager[None]:
    """The lock of the row's build tree (buildrows.process.lock): the row's own for
    scikit-build-core (build/skbuild-ROW), the project's for the drivers that write into it."""
    from buildrows.build.prepare import driver_of, project_of
    from buildrows.process.lock import holding, lock_path

    project = project_of(state.pol, state.args)
    if driver_of(state.pol, state.args) == "scikit-build-core":
        return holding(lock_path(project / "build", row.name), f"row {row.name} (build/skbuild-{row.name})", state.ui)
    return holding(lock_path(project / "build", "project"), f"{project}/build", state.ui)


def _read_log(path: Path) -> CacheStats | None:
    """A stats log read and removed (None when the build wrote none)."""
    from buildrows.build.compiler_cache import read_stats_log

    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    path.unlink(missing_ok=True)
    return read_stats_log(text)


def _read_stats(cache: CompilerCache | None) -> CacheStats | None:
    """What the compiler cache did for the row, read from (and then removing) its stats log."""
    if cache is None:
        return None
    from buildrows.build.compiler_cache import read_stats_log

    try:
        text = cache.stats_log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    cache.stats_log.unlink(missing_ok=True)
    stats = read_stats_log(text)
    return stats


# A compile command as setuptools and build_ext print it: the compiler first on its line.
_NVCC_LINE = re.compile(r"^(\S*ccache\s+)?(\S*nvcc)\s+\S", re.MULTILINE)


def _nvcc_runs(log_dir: Path) -> tuple[int, str] | None:
    """How many nvcc commands the row's step logs show that did not go through ccache, and the
    nvcc they named (None when the logs cannot be read)."""
    try:
        text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in sorted(log_dir.glob("[0-9]*.log")))
    except OSError:
        return None
    runs = [m.group(2) for m in _NVCC_LINE.finditer(text) if not m.group(1)]
    return (len(runs), runs[0]) if runs else (0, "")


def _setup_py_cache_text(stats: CacheStats | None, cuda: bool, nvcc_stats: CacheStats | None = None,
                         nvcc_runs: tuple[int, str] | None = None, cxx_runs: int | None = None) -> str:
    """A setup.py row's cache column: nvcc's compiles and the C/C++ ones apart, and, where none
    went through the cache, why ("no compiles" after a build that compiled would mislead).
    nvcc's are those its own stats log holds (`nvcc_stats`: CMake's CUDA launcher, PYTORCH_NVCC),
    whatever their names, and the `.cu` sources of the shared log (torch's ccache on PATH); the
    build's log says whether nvcc ran past the cache at all, and by what name (`nvcc_runs`)."""
    compiles = stats.compiles if stats is not None else ()
    own = list(nvcc_stats.compiles) if nvcc_stats is not None else []
    rest = list(compiles)
    for c in own:  # `stats` holds them too (merged for the row's log line)
        if c in rest:
            rest.remove(c)
    nvcc = own + [c for c in rest if c[0].lower().endswith(".cu")]
    other = [c for c in rest if not c[0].lower().endswith(".cu")]

    def hits(part: Sequence[tuple[str, str]]) -> str:
        return f"{sum(1 for _, how in part if how != 'miss')}/{len(part)} hits"

    parts = []
    if nvcc:
        parts.append(f"nvcc {hits(nvcc)}")
    elif cuda and nvcc_runs is not None and nvcc_runs[0] and "/" in nvcc_runs[1]:
        count, name = nvcc_runs
        parts.append(f"nvcc not cached ({count} compile{'s' if count != 1 else ''} ran {name} by its full path, "
                     "which the ccache first on PATH never sees: the project's build picks nvcc itself)")
    elif cuda and nvcc_runs is not None and not nvcc_runs[0]:
        parts.append("nvcc not cached (the build's log shows no nvcc command: nothing was compiled by nvcc)")
    elif cuda:
        parts.append("nvcc not cached (none went through ccache: nothing to compile, TORCH_NO_COMPILER_WRAPPER set, "
                     "or a torch whose cpp_extension runs CUDA_HOME/bin/nvcc itself without ninja)")
    else:
        parts.append("no nvcc compiles")
    if other:
        parts.append(f"C/C++ {hits(other)}")
    elif cxx_runs == 0:  # `summary.cxx_compiles_in_logs`: ninja had no work, or a pure wheel
        parts.append("no C/C++ compiles (the build's log shows none: nothing to compile)")
    elif os.name == "nt":
        parts.append("C/C++ not cached (setup.py on Windows: setuptools runs MSVC itself)")
    elif cxx_runs:  # the log shows compiles the cache never saw: a compiler named by its full path
        parts.append(f"C/C++ not cached (the build's log shows {cxx_runs} C/C++ compile{'s' if cxx_runs != 1 else ''} "
                     "the cache did not see: a compiler named by its full path in CC/CXX runs without it)")
    else:
        parts.append("no C/C++ compiles")
    return "; ".join(parts)

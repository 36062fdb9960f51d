"""The pre-build hook of a wheel workflow (SPEC §5), as a library: find the CI job's row, plan it
(refusing a row that cannot be built honestly), and append its environment to $BUILD_ENV_FILE
(shell) and $GITHUB_ENV (github).

Finds the CI row from CU_VERSION (falling back to DESIRED_CUDA: reading only one of them once
made every row fall back to detection), the running Python and the platform; checks the row's
nvcc; then appends the same values to both files. Every check runs before the first write, so a
refusal leaves both files as they were.

When the policy (or BUILDROWS_CACHE_REMOTE) names a remote compiler cache, the values also carry
the compiler cache for test-infra's own build step: the launchers (CMAKE_<LANG>_COMPILER_LAUNCHER,
PYTORCH_NVCC) and ccache's configuration (CCACHE_CONFIGPATH naming the file the hook writes,
CCACHE_REMOTE_STORAGE read-only or read-write as the job's ref and event allow), keyed as
`build` keys them (buildrows.build.compiler_cache).
"""

from __future__ import annotations

from collections.abc import Mapping

from buildrows.errors import BadInput, Refused
from buildrows.plan.row import RowPlan
from buildrows.policy.model import Policy, Row
from buildrows.ui import UI


def find_row(pol: Policy, env: Mapping[str, str], python: str, platform: str) -> Row:
    """The policy's row for this CI job, or a refusal that says where the policy must change."""
    from buildrows.plan.host import requested_accel
    from buildrows.policy.build_rows import row_name
    from buildrows.policy.trains import Train, train_table

    asked = requested_accel(env)
    if asked is None:
        # Guessing here is a silent fallback: a CUDA job whose variables were not passed would build CPU.
        raise BadInput("neither CU_VERSION nor DESIRED_CUDA is set, so the hook cannot tell which row this CI "
                       "job builds (it does not guess: a CUDA job would silently build the CPU row)\n"
                       "    fix: export CU_VERSION=cpu or cuXYZ (cu130 for CUDA 13.0) in the job's environment")
    var, accel = asked
    file = pol.path
    if platform not in pol.platforms:
        raise Refused(f"{file}: platform {platform} has no rows (the policy builds {', '.join(pol.platforms)})\n"
                      f"    fix: add [platforms.{platform}] to {file}, or pass --platform")
    if python not in pol.pythons:
        why = dict(pol.excluded_pythons).get(python)
        raise Refused(f"{file}: Python {python} is not on the allowlist ({', '.join(pol.pythons)})"
                      + (f"; it is excluded: {why}" if why else "")
                      + f"\n    fix: add \"{python}\" to [python] versions in {file}, or pass --python")
    if accel == "cpu":
        name = row_name(platform, None, python)
        if pol.row(name) is None:
            raise Refused(f"{file}: {var}={env[var].strip()} asks for a CPU row, and platform {platform} has no CPU rows\n"
                          f"    fix: set cpu = true under [platforms.{platform}] in {file}, "
                          f"or export {var}=cuXYZ for one of its CUDA rows")
        row = pol.row(name)
        assert row is not None
        return row
    train = Train.parse(accel)
    policy_trains = ", ".join(f"{t.dotted} (cu{t.major}{t.minor})" for t in pol.trains) or "none"
    if train not in train_table() and train not in pol.trains:  # a policy's train newer than the data is its own
        # cu999 and cu13 parse as "CUDA 99.9" and "CUDA 1.3": name the value as given, not as a version.
        example = f"{var}=cu{pol.trains[0].major}{pol.trains[0].minor}" if pol.trains else f"{var}=cpu"
        raise Refused(f"{file}: {var}={accel} is not a CUDA train buildrows knows; the policy's trains are "
                      f"{policy_trains}\n    fix: export {var} as one of them, e.g. {example}")
    if train not in pol.trains:
        raise Refused(
            f"{file}: {var}={accel} asks for CUDA {train.dotted}, which is not on the train allowlist "
            f"({policy_trains})\n"
            f"    fix: add \"{train.dotted}\" to [cuda] trains and to [platforms.{platform}] trains in {file}, "
            f"with its architectures in a [[platforms.{platform}.cuda]] list")
    name = row_name(platform, train, python)
    row = pol.row(name)
    if row is None:
        raise Refused(
            f"{file}: {var}={accel} asks for CUDA {train.dotted} on {platform}, which that platform does not publish\n"
            f"    fix: add \"{train.dotted}\" to [platforms.{platform}] trains in {file}, "
            f"with its architectures in a [[platforms.{platform}.cuda]] list")
    return row


#: The variable the hook writes with a provisioned toolkit's bin directory (native path): the
#: rendered pre-script puts it on the build's PATH in the shell's own spelling (Git Bash on Windows).
CUDA_BIN_VAR = "BUILDROWS_CUDA_BIN"
PROVISION_SOURCES = ("auto", "redist", "pypi")


def provision_toolkit(row: Row, env: Mapping[str, str], platform: str, source: str, ui: UI) -> str | None:
    """The root of the row's train assembled into buildrows' cache when the builder has no nvcc
    of that train (`buildrows toolkit install`: checksummed archives or pinned wheels), else None
    (the builder's nvcc is used, as without provisioning). Refuses a source that cannot apply."""
    from buildrows.plan.toolchain import find_cuda_compiler
    from buildrows.provision import toolkit

    if row.cuda is None:
        return None
    try:
        have = find_cuda_compiler(env)
    except (Refused, BadInput):  # an nvcc that does not run is no nvcc of the train
        have = None
    if have is not None and have.train == row.cuda:
        ui.info(f"buildrows hook: provision-toolkit: the builder's nvcc is CUDA {row.cuda.dotted} ({have.path}); nothing to assemble")
        return None
    found = f"its nvcc is CUDA {have.version} ({have.path})" if have is not None else "it has no nvcc"
    ui.info(f"buildrows hook: provision-toolkit: the builder lacks CUDA {row.cuda.dotted} ({found}); assembling it "
            f"({'the default source' if source == 'auto' else source})")
    chosen = None if source == "auto" else source
    tk = toolkit.install(row.cuda, platform, env, source=chosen, progress=ui.info)  # type: ignore[arg-type]
    ui.info(f"buildrows hook: provision-toolkit: {tk.describe()} at {tk.root}")
    return str(tk.root)


def hook(pol: Policy, env: Mapping[str, str], python: str, platform: str, ui: UI, provision: str | None = None) -> None:
    """Find the job's row, plan it (refusing what cannot be built honestly), and append its
    environment to $BUILD_ENV_FILE and $GITHUB_ENV (printing it when neither is set). With
    `provision` (the policy's [ci] provision-toolkit), a train the builder lacks is assembled first,
    so the nvcc check below sees it."""
    import os

    from buildrows.build.rowenv import build_variables
    from buildrows.plan.row import plan_row
    from buildrows.render.envfile import Format, append_files, format_env

    row = find_row(pol, env, python, platform)
    ui.info(f"buildrows hook: row {row.name} (policy {pol.path})")
    root = provision_toolkit(row, env, platform, provision, ui) if provision else None
    # refuses: no list, wrong OS, missing or wrong nvcc
    # The interpreter that runs the hook runs the build step: its LDSHARED is the build's. It is not
    # pinned as Python_EXECUTABLE: the build step's frontend (an isolated one, in test-infra) picks it.
    from buildrows.build.rowenv import running_interpreter

    running = running_interpreter(row)
    plan = plan_row(pol, row, env, step="hook", toolkit=root)
    if plan.compiler is not None:
        ui.info(f"CUDA compiler: {plan.compiler.describe()}")
    ui.info(f"generator: {plan.generator.generator} - {plan.generator.reason}")
    # What `build` sets for the row (buildrows.build.rowenv): LDSHARED without this interpreter's own
    # rpath (the one the build step runs), SOURCE_DATE_EPOCH, the row's variables.
    from buildrows.build.rowenv import policy_project

    shared = build_variables(plan, pol.project.driver, running.path if running is not None else None,
                             policy_project(pol), env)
    for note in shared.notes:
        ui.info(note)
    values = shared.as_dict()
    values.update(compiler_cache_variables(pol, plan, env, ui))
    if root is not None:
        values[CUDA_BIN_VAR] = os.path.join(root, "bin")
    dests: tuple[tuple[str, Format], ...] = (("BUILD_ENV_FILE", "shell"), ("GITHUB_ENV", "github"))
    targets = [(env[var], format_env(values, fmt)) for var, fmt in dests if env.get(var)]
    append_files(targets)  # opens and locks every file before writing any
    for path, _ in targets:
        ui.info(f"appended {len(values)} variables to {path}")
    if not targets:
        ui.warn("neither BUILD_ENV_FILE nor GITHUB_ENV is set; printing the values instead")
        ui.print(format_env(values, "shell").rstrip("\n"))


def compiler_cache_variables(pol: Policy, plan: RowPlan, env: Mapping[str, str], ui: UI) -> dict[str, str]:
    """The compiler cache for the build step, when a remote store is configured and usable: the
    same key `build` uses (toolkit and host compilers' content, NVCC_* variables, base_dir the
    project), ccache's configuration written to its file, and the store with its credentials as
    `${VAR}` (never expanded here). Empty, with a line saying why, otherwise."""
    from buildrows.build.remote_cache import REMOTE_VAR, resolve

    # `build --container` asks for the local cache too: its directory is the host's, mounted.
    local = env.get("BUILDROWS_HOOK_COMPILER_CACHE", "") == "1"  # = buildrows.ci.container.LOCAL_CACHE_VARIABLE
    if not pol.compiler_cache.url and not env.get(REMOTE_VAR, "").strip() and not local:
        return {}
    # Imported here: a hook without a store does not pay for them (it runs on every CI job).
    from buildrows.build import compiler_cache as cc
    from buildrows.build.drivers import project_dir

    executable = cc.find_ccache(env)
    if executable is None:
        ui.warn(f"no ccache found: the build step compiles without the remote compiler cache\n"
                f"    fix: pip install {cc.PINNED} in the build environment (the rendered pre-script does)")
        return {}
    remote = resolve(pol.compiler_cache, env, ui)  # says why when it is off or unusable
    if (remote is None or remote.storage is None) and not local:
        return {}
    cuda_files: tuple[str, ...] = ()
    if plan.compiler is not None:
        named = [dict(plan.cache).get("CMAKE_CUDA_HOST_COMPILER", "")]
        cuda_files = cc.toolkit_files(plan.compiler.argv, env) + cc.host_compilers(env, named)
    directory = cc.cache_dir(env)
    cache = cc.CompilerCache(executable, directory, project_dir(pol.path, pol.project.source_dir, None),
                             directory / "stats" / f"hook-{plan.row.name}.log", cc.namespace(env), cuda_files,
                             remote.storage if remote is not None else None)
    cc.prepare(cache)
    ui.info(f"compiler cache for the build step: {cache.directory} (ccache {cache.executable})")
    return cache.environment(plan.compiler.path if plan.compiler is not None else None)

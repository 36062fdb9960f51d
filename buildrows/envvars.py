"""Every environment variable buildrows reads, and those it sets for a build, as data.

One table, three readers: `buildrows --help` (its epilog lists the names), the generated
docs/reference/environment.md (`scripts/gen_reference.py`), and tests/test_envvars.py, which scans
the package, its templates and scripts for every ``BUILDROWS_*`` name and fails on one this table
lacks. Nothing here is imported by `env` or `hook` at start-up: the parser asks for it only when
`--help` is printed.
"""

from __future__ import annotations

#: (name, default, what it does): variables buildrows reads. Keep them sorted by name.
READ: tuple[tuple[str, str, str], ...] = (
    ("BUILDROWS_CACHE", "$XDG_CACHE_HOME/buildrows, else ~/.cache/buildrows",
     "Where buildrows keeps what it provisions (toolkits, interpreters, build environments, downloads) "
     "and the local compiler cache. `buildrows cache` shows it, `cache prune` trims it."),
    ("BUILDROWS_CACHE_REMOTE", "the policy's [compiler-cache] remote",
     "The remote compiler-cache store every job reads from (redis://, redis+unix:, http://); `off` "
     "turns the remote store off. A password or token only as ${VAR}, never written out."),
    ("BUILDROWS_CACHE_WRITE_REMOTE", "the policy's [compiler-cache] write-remote",
     "The same store with the writer's credential, used only by jobs that write-refs allows; removed "
     "from every other job's environment."),
    ("BUILDROWS_CONFIG", "buildrows.toml (or pyproject.toml's [tool.buildrows]) in the current directory",
     "The policy file, when `--config` is not given."),
    ("BUILDROWS_CONTAINER_RUNTIME", "podman if found, else docker",
     "The container runtime of `build --container` and `doctor --container`: `podman` or `docker`."),
    ("BUILDROWS_CUDA_MIRROR", "NVIDIA's redistributable archives",
     "A mirror of NVIDIA's CUDA redistributable archives for `toolkit install` and `--provision`."),
    ("BUILDROWS_DEBUG", "unset",
     "`1`: an internal error (exit 1) prints its traceback as well as the one-line report."),
    ("BUILDROWS_HEARTBEAT", "30",
     "Seconds of silence from a build step before buildrows prints a heartbeat line; `0` turns it off."),
    ("BUILDROWS_HOOK_COMPILER_CACHE", "unset",
     "`1`: `buildrows hook` writes the local compiler cache's launchers into BUILD_ENV_FILE too (a `build --container` job sets it; without it only a remote store's are written)."),
    ("BUILDROWS_HOST_OS", "the running operating system",
     "Render for another operating system (`linux`, `windows`): a dry run of another builder's row."),
    ("BUILDROWS_INFLATER", "auto (ISA-L, else zlib-ng, else zlib)",
     "Force the inflater the wheel reader uses: `isal`, `zlib-ng` or `zlib` (benchmarks compare them)."),
    ("BUILDROWS_KEEP_DOWNLOADS", "unset",
     "`1`: keep a provisioned toolkit's downloaded archives in the cache (offline reinstalls)."),
    ("BUILDROWS_LOCAL_VERSION", "set by buildrows for the build",
     "Read by the metadata provider (`buildrows.metadata`, or the in-tree copy `init` writes): the row's "
     "local version (`+cu130`)."),
    ("BUILDROWS_MANYLINUX_PYTHONS", "/opt/python",
     "Where the manylinux images keep their interpreters (`--provision` looks there)."),
    ("BUILDROWS_PYTHON_EXE", "python",
     "The interpreter the rendered CI scripts (pre-build and check-wheels) run buildrows with."),
    ("BUILDROWS_REQUIRES_DIST", "set by buildrows for the build",
     "Read by the metadata provider: the row's CUDA runtime requirements."),
    ("BUILDROWS_TOOLKIT_WHEELS", "PyPI",
     "A directory or URL holding the pinned NVIDIA toolkit wheels, for machines that reach no PyPI."),
    ("BUILDROWS_TORCH_INDEX", "https://download.pytorch.org/whl/{accel}",
     "Where `--provision` installs a PyTorch extension's torch from: a URL template with {accel} "
     "(cu130, cpu), or `pypi`."),
    ("BUILD_ENV_FILE", "unset",
     "`buildrows hook` and `env --build-env-file` append the row's variables here as shell export lines "
     "(test-infra's wheel workflow sources it before the build)."),
    ("FORCE_COLOR", "unset",
     "Non-empty: colour the output even when it is not a terminal (https://force-color.org). NO_COLOR wins."),
    ("GITHUB_ACTIONS", "unset",
     "`true`: output folds into `::group::` sections and errors become annotations; no colour."),
    ("GITHUB_ENV", "unset",
     "`buildrows hook` and `env --format github` append the row's variables here in a GitHub job."),
    ("GITHUB_EVENT_NAME", "unset",
     "With GITHUB_REF, decides whether a CI job may write to the remote compiler cache (write-refs)."),
    ("GITHUB_OUTPUT", "unset",
     "`buildrows matrix --github-output` writes the narrowed matrix here in a GitHub job."),
    ("GITHUB_REF", "unset",
     "The ref a CI job builds, held to the policy's write-refs before the job may write to the remote cache."),
    ("GITHUB_STEP_SUMMARY", "unset",
     "`buildrows build` appends its summary table here as Markdown in a GitHub job."),
    ("NO_COLOR", "unset",
     "Non-empty: no colour, whatever else is set (https://no-color.org)."),
    ("PYENV_ROOT", "~/.pyenv",
     "Where `--provision` looks for pyenv's interpreters."),
    ("SOURCE_DATE_EPOCH", "the commit's time, else the build's",
     "The timestamp a build and stamping give the wheel's members (reproducible wheels)."),
    ("UV_PYTHON_INSTALL_DIR", "$XDG_DATA_HOME/uv/python",
     "Where `--provision` looks for uv's managed interpreters."),
    ("XDG_CACHE_HOME", "~/.cache",
     "The base of buildrows' cache when BUILDROWS_CACHE is not set."),
)

#: (name, value): variables buildrows sets for a row's build (presets, env files, the hook), beside
#: the conventional ones (CMAKE_ARGS, TORCH_CUDA_ARCH_LIST, CUDA_HOME, CUDACXX, ...).
SET: tuple[tuple[str, str], ...] = (
    ("BUILDROWS_CUDA", "`ON` for a CUDA row, `OFF` otherwise."),
    ("BUILDROWS_CUDA_ARCHS", "The row's architecture list as TORCH_CUDA_ARCH_LIST writes it (`7.5 9.0+PTX`); empty on a CPU row."),
    ("BUILDROWS_CUDA_BIN", "The bin directory of a toolkit the hook provisioned (the pre-script puts it on PATH)."),
    ("BUILDROWS_CUDA_GENCODE", "The row's nvcc `-gencode=...` flags, for a setup.py that calls nvcc itself; empty on a CPU row."),
    ("BUILDROWS_CUDA_OPTION", "The project's CUDA option (the policy's `cuda-option`), as a CMake cache variable."),
    ("BUILDROWS_LOCAL_VERSION", "The row's local version (`+cu130`), for the metadata provider."),
    ("BUILDROWS_PLATFORM", "The row's platform (`linux-x86_64`)."),
    ("BUILDROWS_PYTHON", "The row's Python (`3.12`)."),
    ("BUILDROWS_REQUIRES_DIST", "The row's CUDA runtime requirements, for the metadata provider."),
    ("BUILDROWS_ROW", "The row's name (`linux-x86_64-cu130-py312`)."),
    ("BUILDROWS_SPEC", "In the rendered pre-script: the pip requirement that installs buildrows."),
)


def help_epilog() -> str:
    """The names, for `buildrows --help`; the reference page has what each does."""
    names = ", ".join(name for name, _default, _doc in READ)
    return f"Environment variables read: {names} (docs/reference/environment.md says what each does)."

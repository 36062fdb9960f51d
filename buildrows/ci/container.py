"""A row's CI job as a container command (`build --container`): the image, the job script, the command line.

CI builds a Linux row inside its builder image (test-infra's `container: image:` from the matrix's
`container_image`: the policy's `image`, else the generator's image for the row's train), through
the pre-script (install buildrows, run the hook, which appends the row's values to BUILD_ENV_FILE),
the workflow's own build step (`source "$BUILD_ENV_FILE"`, then the build command `buildrows workflow`
renders) and the post-script (`buildrows stamp`, then `buildrows check`). This module computes that
job for one row on this machine, without side effects: the job script the container runs (the same
hook, build command and stamp, with buildrows installed from this checkout's wheel), and the
docker or podman command line that runs it with the project, the job directory and buildrows'
cache (compiler cache, toolkits) mounted at their own paths. buildrows.ci.container_run runs it and
checks the wheel on the host as every row's wheel is checked.
"""

from __future__ import annotations

import os
import posixpath
import shlex
from collections.abc import Mapping
from pathlib import Path

from buildrows.errors import BadInput, Refused
from buildrows.frozen import Frozen, frozen_dataclass
from buildrows.policy.model import Policy, Row

#: The runtime to use (a name on PATH or a path): otherwise podman, else docker, whichever runs.
RUNTIME_VARIABLE = "BUILDROWS_CONTAINER_RUNTIME"
RUNTIMES = ("podman", "docker")
#: The hook writes the local compiler cache's launchers into BUILD_ENV_FILE when this is "1" (the
#: container job sets it: the cache directory is the host's, mounted), as it does for a remote store.
LOCAL_CACHE_VARIABLE = "BUILDROWS_HOOK_COMPILER_CACHE"
#: The generator's builder images (pytorch/test-infra's generate_binary_build_matrix.py), by
#: platform: (CPU image, CUDA image with {cuda} the train's dotted version).
GENERATOR_IMAGES = {
    "linux-x86_64": ("pytorch/manylinux2_28-builder:cpu", "pytorch/manylinux2_28-builder:cuda{cuda}"),
    "linux-aarch64": ("pytorch/manylinux2_28_aarch64-builder:cpu-aarch64", "pytorch/manylinuxaarch64-builder:cuda{cuda}"),
}
#: Variables of this machine the job gets as they are: where pip and buildrows download from.
PASSED = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX", "PIP_TRUSTED_HOST",
          "BUILDROWS_CUDA_MIRROR", "BUILDROWS_TORCH_INDEX", "BUILDROWS_CACHE_REMOTE", "SOURCE_DATE_EPOCH")
#: The frontend test-infra's python-build-package step installs before the build command.
BUILD_FRONTEND = "build==1.2.2"
#: Where the job's Python environment lives inside the container (test-infra's conda environment).
JOB_ENV = "/tmp/buildrows-job-env"


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Runtime(Frozen):
    """docker or podman, as found: its name and executable."""

    name: str
    path: str


def row_image(pol: Policy, row: Row, override: str | None = None) -> tuple[str, str]:
    """The image CI builds the row in, and where that came from: --image, the policy's `image`,
    else the generator's default for the row's platform and train. Refuses a row CI does not build
    in a Linux container (Windows)."""
    if override is not None:
        if not override.strip() or any(c.isspace() for c in override):
            raise BadInput(f"--image {override!r} is not an image name\n    fix: pass a name such as "
                           "localhost/my-builder:tag (`podman images` lists the local ones)")
        return override, "--image"
    if row.image is not None:
        return row.image, f"{pol.path}: image"
    images = GENERATOR_IMAGES.get(row.platform)
    if images is None:
        raise Refused(f"row {row.name}: CI builds {row.platform} rows on the runner itself, not in a Linux builder "
                      f"image, so there is no container to reproduce\n    fix: build it with `buildrows build "
                      f"{row.name}` on a {row.platform} machine")
    cpu, cuda = images
    image = cpu if row.cuda is None else cuda.format(cuda=row.cuda.dotted)
    return image, "the matrix generator's image for the row's train"


def python_candidates(python: str) -> tuple[str, ...]:
    """Where the job looks for the row's Python in the image: manylinux's /opt/python first, then PATH."""
    ft = python.endswith("t")
    digits = python.rstrip("t").replace(".", "")
    return (f"/opt/python/cp{digits}-cp{digits}{'t' if ft else ''}/bin/python", f"python{python}")


def mount_root(policy_path: str, project: Path) -> Path:
    """What the container sees of the project: its repository (the directory with `.git` above the
    policy), else the directory holding both the policy and the project."""
    from buildrows.ci.paths import repository_root

    policy_dir = Path(policy_path).resolve().parent
    root = repository_root(policy_dir)
    if root is not None and project.resolve().is_relative_to(root):
        return root
    return Path(os.path.commonpath([policy_dir, project.resolve()]))


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Job(Frozen):
    """One row's container job, as plain data."""

    row: str
    accel: str  # CU_VERSION: cpu or cuXYZ
    python: str
    image: str
    config: str  # the policy, relative to `root`
    root: Path  # mounted at its own path; the job's working directory
    job_dir: Path  # job.sh, build_env.sh (BUILD_ENV_FILE) and the buildrows wheel; mounted
    out_dir: Path  # where the build step writes the wheel (the host's staging directory); mounted
    cache_dir: Path  # buildrows' cache: the compiler cache and the toolkits; mounted
    buildrows_wheel: Path  # this checkout's buildrows, installed in the job
    build_command: str  # the workflow's build command, with the wheel written to out_dir
    provision: str = ""  # hook --provision SOURCE ("" off)
    install: tuple[str, ...] = ()  # what the pre-script installs besides buildrows (ccache, auditwheel)
    compiler_cache: bool = True  # the hook writes the launchers of the (mounted) compiler cache
    torch: tuple[str, ...] = ()  # pip install arguments of the row's torch (a PyTorch extension); () none


def build_command(pol: Policy, root: Path, out_dir: Path) -> str:
    """The workflow's build step for this project (buildrows.ci.workflow.build_inputs: what
    `buildrows workflow` passes test-infra), writing the wheel to out_dir instead of dist/."""
    from buildrows.ci.workflow import build_inputs

    policy_dir = posixpath.relpath(Path(pol.path).resolve().parent.as_posix(), root.as_posix())
    inputs = dict(build_inputs(pol, "" if policy_dir == "." else policy_dir))
    out = shlex.quote(str(out_dir))
    if inputs.get("build-platform") == "setup-py":
        # test-infra's setup-py route: `python setup.py clean`, then `python setup.py bdist_wheel`.
        return f"python setup.py clean && python setup.py bdist_wheel --dist-dir {out}"
    # test-infra's python-build-package route installs the frontend, then runs the build command;
    # python -m build takes the last --outdir: the wheel goes to the host's staging directory.
    return f"python -m pip install --quiet {BUILD_FRONTEND} && {inputs['build-command']} --outdir {out}"


def job_script(job: Job) -> str:
    """The job the container runs, step for step as test-infra's build job runs them (bash)."""
    q = shlex.quote
    env_file = q(str(job.job_dir / "build_env.sh"))
    pythons = " ".join(q(c) for c in python_candidates(job.python))
    hook = f"python -m buildrows --config {q(job.config)} hook" + (f" --provision {job.provision}" if job.provision else "")
    lines = [
        "#!/usr/bin/env bash",
        f"# Written by `buildrows build {job.row} --container` (image {job.image}): the row's CI job, as test-infra's",
        "# build job runs it: the pre-script (install buildrows, run the hook), the build step (source BUILD_ENV_FILE,",
        "# then the workflow's build command), and the post-script's stamp. The check runs on the host afterwards.",
        "set -euo pipefail",
        f"cd {q(str(job.root))}",
        f"export CU_VERSION={job.accel} DESIRED_CUDA={job.accel} PYTHON_VERSION={job.python} PACKAGE_TYPE=wheel",
        f"export BUILD_ENV_FILE={env_file}" + (f" {LOCAL_CACHE_VARIABLE}=1" if job.compiler_cache else ""),
        'echo "buildrows: image $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"), $(uname -m)"',
        "# The row's Python (test-infra makes a conda environment of it; here a venv of the image's).",
        "PY=",
        f"for c in {pythons}; do",
        '  if command -v "$c" >/dev/null 2>&1; then PY="$(command -v "$c")"; break; fi',
        "done",
        'if [[ -z "$PY" ]]; then',
        f"  echo \"buildrows: the image has no Python {job.python} (looked for: {' '.join(python_candidates(job.python))})\" >&2",
        "  exit 4",
        "fi",
        f'echo "+ $PY -m venv {JOB_ENV}"',
        f'"$PY" -m venv {JOB_ENV}',
        f'export PATH={JOB_ENV}/bin:"$PATH"',
        ": > \"$BUILD_ENV_FILE\"",
        *_torch_lines(job),
        "# The pre-script: buildrows (this checkout's wheel) and what the rendered pre-script installs, then the hook.",
        "echo " + q(f"+ python -m pip install {q(str(job.buildrows_wheel))} {' '.join(job.install)}"),
        f"python -m pip install --quiet {q(str(job.buildrows_wheel))} {' '.join(q(s) for s in job.install)}",
        "echo " + q(f"+ {hook}"),
        hook,
        "# The build step: the values the hook appended, then the workflow's build command.",
        'set +u; source "$BUILD_ENV_FILE"; set -u',
        f"echo {q('+ ' + job.build_command)}",
        job.build_command,
        "# The post-script's stamp (the build record; with [project] stamp the local version and requirement;",
        "# with [repair] auditwheel the repair, which gives the wheel this image's platform tag).",
        "shopt -s nullglob",
        f"wheels=({q(str(job.out_dir))}/*.whl)",
        'if (( ${#wheels[@]} == 0 )); then echo "buildrows: the build step wrote no wheel" >&2; exit 5; fi',
        'for whl in "${wheels[@]}"; do',
        "  echo " + q(f"+ python -m buildrows --config {q(job.config)} stamp --row") + ' "$BUILDROWS_ROW" "$whl"',
        f'  python -m buildrows --config {q(job.config)} stamp --row "$BUILDROWS_ROW" "$whl"',
        "done",
    ]
    return "\n".join(lines) + "\n"


def torch_arguments(pol: Policy, row: Row, env: Mapping[str, str]) -> tuple[str, ...]:
    """What test-infra's "Install torch dependency" step installs for the row (PIP_INSTALL_TORCH:
    torch from the index of the row's train), when the project builds against torch: a PyTorch
    extension's row, or a policy naming its torch. BUILDROWS_TORCH_INDEX picks the index as for
    `build --provision`; a machine without a registry points pip at a local wheelhouse
    (PIP_FIND_LINKS and PIP_NO_INDEX=1, passed to the job: pip then ignores the index)."""
    if not pol.torch_extension(row) and pol.project.torch is None:
        return ()
    from buildrows.provision.torch import torch_for_row

    return torch_for_row(row, pol.project.torch, env).pip_arguments()


def _torch_lines(job: Job) -> list[str]:
    if not job.torch:
        return []
    args = " ".join(shlex.quote(a) for a in job.torch)
    return ["# test-infra's \"Install torch dependency\" step (PIP_INSTALL_TORCH): the torch of the row's train.",
            "echo " + shlex.quote(f"+ python -m pip install {args}"),
            f"python -m pip install --quiet {args}"]


def mounts(job: Job, env: Mapping[str, str]) -> list[str]:
    """Directories the container sees at their own paths: the project's root, the job directory,
    the staging directory, buildrows' cache, and local directories pip is pointed at."""
    dirs = [job.root, job.job_dir, job.out_dir, job.cache_dir]
    for entry in env.get("PIP_FIND_LINKS", "").split():
        if entry.startswith("/") and Path(entry).is_dir():
            dirs.append(Path(entry))
    out: list[str] = []
    for d in dirs:
        if any(d == o or d.is_relative_to(o) for o in map(Path, out)):
            continue
        out.append(str(d))
    return out


def command(runtime: Runtime, job: Job, env: Mapping[str, str], *, uid: int | None = None,
            gid: int | None = None) -> list[str]:
    """The docker or podman command line that runs the job (uid/gid: this user, for docker)."""
    argv = [runtime.path, "run", "--rm", "--init"]
    if runtime.name == "docker" and uid:
        # Docker runs the job as root unless told: files it writes into the mounted project, cache
        # and wheel directory would then be root's. Rootless podman maps its root to this user.
        argv += ["--user", f"{uid}:{gid}", "-e", f"HOME={job.job_dir / 'home'}"]
    # On SELinux hosts a bind mount is unreadable to a confined container; the job needs no confinement.
    argv += ["--security-opt", "label=disable"]
    for d in mounts(job, env):
        argv += ["-v", f"{d}:{d}"]
    argv += ["-w", str(job.root), "-e", f"BUILDROWS_CACHE={job.cache_dir}"]
    for var in PASSED:
        if env.get(var):
            argv += ["-e", f"{var}={env[var]}"]
    argv += [job.image, "bash", str(job.job_dir / "job.sh")]
    return argv


def find_runtime(env: Mapping[str, str], probe: bool = True) -> tuple[Runtime | None, list[str]]:
    """The runtime to use, and what was tried (for the error): BUILDROWS_CONTAINER_RUNTIME when set,
    else podman, else docker; with `probe`, one whose `info` fails (docker without its daemon) is
    passed over."""
    import shutil

    from buildrows.process.runner import capture

    wanted = env.get(RUNTIME_VARIABLE, "").strip()
    names = (wanted,) if wanted else RUNTIMES
    tried: list[str] = []
    for name in names:
        path = shutil.which(name, path=env.get("PATH", os.defpath))
        kind = "docker" if "docker" in Path(name).name else "podman"
        if path is None:
            tried.append(f"{name}: not found" + (" on PATH" if "/" not in name else ""))
            continue
        if probe:
            got = capture([path, "info", "--format", "{{json .}}"], env=env, timeout=30)
            if got.code != 0:
                last = (got.output.strip().splitlines() or ["no output"])[-1]
                tried.append(f"{path}: `{Path(path).name} info` failed: {last}")
                continue
        return Runtime(kind, path), tried
    return None, tried


def install_fix(env: Mapping[str, str]) -> str:
    """The command that installs a runtime here."""
    import shutil

    sudo = "" if hasattr(os, "geteuid") and os.geteuid() == 0 else "sudo "
    if shutil.which("apt-get", path=env.get("PATH", os.defpath)):
        return f"{sudo}apt-get install -y podman runc"
    if shutil.which("dnf", path=env.get("PATH", os.defpath)):
        return f"{sudo}dnf install -y podman"
    return "install podman (https://podman.io/docs/installation) or docker"


def pull_fix(runtime: Runtime, image: str) -> str:
    return f"{Path(runtime.path).name} pull {image}"

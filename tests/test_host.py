"""buildrows.plan.host: this machine's platform, Python and the row CI asks for, decided in one place."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.errors import BadInput, Refused
from buildrows.plan import host
from tests.conftest import REPO, Result

CUDA_EXAMPLE = REPO / "examples" / "cuda-extension" / "buildrows.toml"
PY = host.host_python().replace(".", "")


@pytest.mark.parametrize(("os_", "machine", "env", "want"), [
    ("linux", "x86_64", {}, "linux-x86_64"),
    ("linux", "amd64", {}, "linux-x86_64"),
    ("linux", "aarch64", {}, "linux-aarch64"),
    ("linux", "arm64", {}, "linux-aarch64"),
    ("windows", "AMD64", {}, "windows-amd64"),
    ("windows", "x86_64", {}, "windows-amd64"),
    ("windows", "whatever", {"PROCESSOR_ARCHITEW6432": "AMD64", "PROCESSOR_ARCHITECTURE": "x86"}, "windows-amd64"),
])
def test_host_platform_maps_machine_names(monkeypatch: pytest.MonkeyPatch, os_: str, machine: str,
                                          env: dict[str, str], want: str) -> None:
    monkeypatch.setattr(host, "_machine", lambda: machine)
    assert host.host_platform({"BUILDROWS_HOST_OS": os_, **env}) == want


@pytest.mark.parametrize(("os_", "machine"), [("linux", "riscv64"), ("linux", "ppc64le"), ("windows", "ARM64")])
def test_host_platform_refuses_an_unknown_machine(monkeypatch: pytest.MonkeyPatch, os_: str, machine: str) -> None:
    monkeypatch.setattr(host, "_machine", lambda: machine)
    with pytest.raises(BadInput, match=rf"{machine!r}.*it knows linux-x86_64, linux-aarch64, windows-amd64"):
        host.host_platform({"BUILDROWS_HOST_OS": os_})


def test_host_python_marks_a_free_threaded_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sysconfig.get_config_var", lambda name: 1 if name == "Py_GIL_DISABLED" else None)
    assert host.host_python().endswith("t")
    monkeypatch.setattr("sysconfig.get_config_var", lambda name: 0)
    assert not host.host_python().endswith("t")


@pytest.mark.parametrize(("env", "want"), [
    ({}, None),
    ({"CU_VERSION": "cu130"}, ("CU_VERSION", "cu130")),
    ({"DESIRED_CUDA": "cu126"}, ("DESIRED_CUDA", "cu126")),
    ({"CU_VERSION": "", "DESIRED_CUDA": "cu126"}, ("DESIRED_CUDA", "cu126")),
    ({"CU_VERSION": "cu126", "DESIRED_CUDA": "cu126"}, ("CU_VERSION", "cu126")),
    ({"CU_VERSION": "CPU"}, ("CU_VERSION", "cpu")),
    ({"CU_VERSION": "", "DESIRED_CUDA": "cpu"}, ("DESIRED_CUDA", "cpu")),
    ({"DESIRED_CUDA": " cpu "}, ("DESIRED_CUDA", "cpu")),
])
def test_requested_accel(env: dict[str, str], want: tuple[str, str] | None) -> None:
    assert host.requested_accel(env) == want


@pytest.mark.parametrize(("env", "message"), [
    ({"CU_VERSION": "13.0"}, "CU_VERSION='13.0' is neither 'cpu' nor a CUDA train such as 'cu130'"),
    ({"CU_VERSION": "cu13.0"}, "fix: export CU_VERSION=cpu or CU_VERSION=cuXYZ (cu130 for CUDA 13.0)"),
    ({"DESIRED_CUDA": "CU126"}, "DESIRED_CUDA='CU126' is neither 'cpu' nor a CUDA train"),
    ({"DESIRED_CUDA": "rocm6.2"}, "DESIRED_CUDA='rocm6.2' is neither"),
    ({"CU_VERSION": ""}, "CU_VERSION is set but empty"),
    ({"CU_VERSION": " ", "DESIRED_CUDA": ""}, "CU_VERSION and DESIRED_CUDA are set but empty"),
])
def test_requested_accel_refuses_malformed_values(env: dict[str, str], message: str) -> None:
    with pytest.raises(BadInput, match=message.replace("(", r"\(").replace(")", r"\)")):
        host.requested_accel(env)


def test_requested_accel_refuses_disagreeing_variables() -> None:
    with pytest.raises(Refused, match="name different rows"):
        host.requested_accel({"CU_VERSION": "cu130", "DESIRED_CUDA": "cu126"})


def _ci_env(monkeypatch: pytest.MonkeyPatch, **values: str) -> None:
    for var in ("CU_VERSION", "DESIRED_CUDA", "BUILDROWS_HOST_OS", "BUILD_ENV_FILE", "GITHUB_ENV"):
        monkeypatch.delenv(var, raising=False)
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(host, "_machine", lambda: "x86_64")


@pytest.mark.parametrize("command", ["doctor", "build"])
def test_a_malformed_cu_version_is_bad_input_in_doctor_and_build(cli: Callable[..., Result],
                                                                  monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    _ci_env(monkeypatch, CU_VERSION="cu13.0")  # was an internal error (exit 1) from Train.parse
    r = cli("--config", str(CUDA_EXAMPLE), command)
    assert r.code == 2, r.err
    assert "CU_VERSION='cu13.0' is neither 'cpu' nor a CUDA train" in r.err


@pytest.mark.parametrize("command", ["doctor", "build", "hook"])
def test_desired_cuda_alone_selects_the_row_everywhere(cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch,
                                                       command: str) -> None:
    _ci_env(monkeypatch, DESIRED_CUDA="cu126", PATH="")  # no nvcc: detection would pick CPU
    r = cli("--config", str(CUDA_EXAMPLE), command)
    assert f"linux-x86_64-cu126-py{PY}" in r.err, r.err
    assert "cpu" not in r.err.split("\n")[0]


@pytest.mark.parametrize(("command", "argv"), [
    ("hook", ["--python", "3.11", "--platform", "linux-aarch64"]),
    ("doctor", ["linux-aarch64-cpu-py311"]),
    ("build", ["linux-aarch64-cpu-py311"]),
])
def test_a_row_of_another_machine_is_refused_where_it_would_be_built(
        cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        command: str, argv: list[str]) -> None:
    _ci_env(monkeypatch, CU_VERSION="cpu", BUILD_ENV_FILE=str(tmp_path / "be.env"))
    r = cli("--config", str(CUDA_EXAMPLE), command, *argv)
    assert r.code == 3, r.err
    # doctor's report is its result (stdout); build and the hook say it on stderr
    assert "row linux-aarch64-cpu-py311 is built on linux-aarch64, and this machine is linux-x86_64" in r.out + r.err
    assert not (tmp_path / "be.env").exists()


def test_render_may_still_prepare_a_row_of_another_machine(cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    _ci_env(monkeypatch)
    r = cli("--config", str(CUDA_EXAMPLE), "render", "linux-aarch64-cpu-py311", "--project", str(tmp_path))
    assert r.code == 0, r.err

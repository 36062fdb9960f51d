"""`buildrows build`: the commands each driver computes, the runner, and every guard of the build."""

from __future__ import annotations

import io
import os
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.build import drivers
from buildrows.check.tags import local_tag_problem
from buildrows.errors import ExternalFailure
from buildrows.policy.load import load_policy
from buildrows.process.runner import Command, run_step
from buildrows.render.presets import plan_row
from buildrows.ui import UI

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "cuda-extension"
EXAMPLE_POLICY = EXAMPLE / "buildrows.toml"
PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def _row(name: str):  # type: ignore[no-untyped-def]
    pol = load_policy(EXAMPLE_POLICY)
    row = pol.row(name)
    assert row is not None
    return pol, row


def test_scikit_build_core_passes_the_row_through_its_own_settings(tmp_path: Path) -> None:
    pol, row = _row("linux-x86_64-cu130-py311")
    plan = plan_row(pol, row, {"PATH": ""}, host="linux", check_toolchain=False)
    bp = drivers.scikit_build_core_plan(plan, "/usr/bin/python3.11", EXAMPLE, tmp_path)
    (cmd,) = bp.commands
    argv = list(cmd.argv)
    assert argv[:5] == ["/usr/bin/python3.11", "-m", "build", "--wheel", "--outdir"]
    assert "--no-isolation" in argv and argv[-1] == str(EXAMPLE)
    settings = [argv[i + 1] for i, a in enumerate(argv) if a == "-C"]
    assert "cmake.args=-GNinja" in settings
    assert "cmake.define.CUDA_EXTENSION_BUILD_CUDA=ON" in settings
    assert ("cmake.define.CMAKE_CUDA_ARCHITECTURES="
            "75-real;80-real;86-real;89-real;90-real;100-real;120-real;120-virtual") in settings
    assert any(s.startswith("build-dir=") and s.endswith("skbuild-linux-x86_64-cu130-py311") for s in settings)
    env = dict(cmd.env)
    assert env["TORCH_CUDA_ARCH_LIST"] == "7.5;8.0;8.6;8.9;9.0;10.0;12.0+PTX"
    assert env["CU_VERSION"] == "cu130"
    assert env["BUILDROWS_LOCAL_VERSION"] == "+cu130"
    assert env["BUILDROWS_REQUIRES_DIST"] == "nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'"
    assert bp.wheel_dir == tmp_path


def test_cpu_row_turns_cuda_off_and_hides_the_builders_arch_variables(tmp_path: Path) -> None:
    pol, row = _row("linux-x86_64-cpu-py311")
    plan = plan_row(pol, row, {"PATH": ""}, host="linux", check_toolchain=False)
    (cmd,) = drivers.scikit_build_core_plan(plan, "python3.11", EXAMPLE, tmp_path, isolation=True).commands
    assert "--no-isolation" not in cmd.argv
    assert "cmake.define.CUDA_EXTENSION_BUILD_CUDA=OFF" in cmd.argv
    assert not any("CMAKE_CUDA_ARCHITECTURES" in a for a in cmd.argv)
    env = dict(cmd.env)
    assert env["BUILDROWS_LOCAL_VERSION"] == "" and env["BUILDROWS_REQUIRES_DIST"] == ""
    seen = cmd.environment({"TORCH_CUDA_ARCH_LIST": "9.0a", "CUDAARCHS": "90", "HOME": "/h"})
    assert seen["TORCH_CUDA_ARCH_LIST"] == seen["CUDAARCHS"] == seen["CMAKE_CUDA_ARCHITECTURES"] == ""
    assert seen["HOME"] == "/h"


def test_setup_py_driver_gets_the_rows_environment(tmp_path: Path) -> None:
    pol, row = _row("linux-x86_64-cu130-py311")
    plan = plan_row(pol, row, {"PATH": ""}, host="linux", check_toolchain=False)
    bp = drivers.setup_py_plan(plan, "python3.11", tmp_path, tmp_path / "dist", {"CMAKE_ARGS": "-DUSER=1"})
    (cmd,) = bp.commands
    env = dict(cmd.env)
    assert env["CMAKE_ARGS"].startswith("-DUSER=1 ")  # extended, not replaced
    assert "-DCUDA_EXTENSION_BUILD_CUDA=ON" in env["CMAKE_ARGS"]
    assert env["TORCH_CUDA_ARCH_LIST"].endswith("12.0+PTX") and env["CU_VERSION"] == "cu130"
    assert cmd.argv[1:4] == ("-m", "build", "--wheel")


def test_cmake_presets_driver_runs_the_workflow_and_installs_the_tree_it_checks() -> None:
    _, row = _row("linux-x86_64-cu130-py311")
    bp = drivers.cmake_presets_plan(row, EXAMPLE)
    assert bp.commands[0].argv == ("cmake", "--workflow", "--preset", "linux-x86_64-cu130-py311")
    assert bp.commands[0].cwd == str(EXAMPLE) and bp.wheel_dir is None
    assert bp.commands[1].argv == ("cmake", "--install", "build/linux-x86_64-cu130-py311", "--config", "Release",
                                   "--prefix", "build/linux-x86_64-cu130-py311/install")
    assert bp.install_dir == EXAMPLE / "build" / "linux-x86_64-cu130-py311" / "install"


def test_windows_rows_declare_no_nvidia_package() -> None:
    pol = load_policy(REPO / "tests" / "data" / "policies" / "executorch" / "buildrows.toml")
    win = pol.row("windows-amd64-cu130-py311")
    lin = pol.row("linux-x86_64-cu130-py311")
    assert win is not None and lin is not None
    assert drivers.requires_dist(win) == []
    assert drivers.requires_dist(lin) == ["nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'"]


def test_project_dir_is_relative_to_the_policy_file(tmp_path: Path) -> None:
    assert drivers.project_dir(str(EXAMPLE_POLICY), ".", None) == EXAMPLE
    assert drivers.project_dir(str(EXAMPLE_POLICY), ".", str(tmp_path)) == tmp_path.resolve()


def test_new_wheels_are_only_those_the_build_wrote(tmp_path: Path) -> None:
    old = tmp_path / "a-1.0-py3-none-any.whl"
    old.write_bytes(b"x")
    before = drivers.snapshot(tmp_path)
    new = tmp_path / "b-1.0-py3-none-any.whl"
    new.write_bytes(b"y")
    assert drivers.new_wheels(tmp_path, before) == [new]
    assert drivers.new_wheels(tmp_path / "missing", {}) == []


# --- the runner -------------------------------------------------------------------------------


def _ui() -> tuple[UI, io.StringIO]:
    err = io.StringIO()
    return UI(out=io.StringIO(), err=err), err


def test_runner_logs_the_exact_command_and_streams_output() -> None:
    ui, err = _ui()
    run_step(ui, Command("greet", (sys.executable, "-c", "print('hello from the step')"), (("X", "a b"),)))
    text = err.getvalue()
    assert "==> greet" in text
    assert f"+ {sys.executable} -c 'print('\"'\"'hello from the step'\"'\"')'" in text
    assert "hello from the step" in text
    assert "X='a b'" not in text  # the step's variables: -v shows them (issue 31: less noise)
    ui.verbose = True
    run_step(ui, Command("greet", (sys.executable, "-c", "print('hello from the step')"), (("X", "a b"),)))
    assert "  X='a b'" in err.getvalue()


def test_runner_failure_names_the_step_and_the_status() -> None:
    ui, _ = _ui()
    with pytest.raises(ExternalFailure, match=r"step 'compile' failed after \d+\.\ds \(exited with status 7\)"):
        run_step(ui, Command("compile", (sys.executable, "-c", "raise SystemExit(7)")))


def test_a_failed_step_prints_how_to_rerun_it_and_the_rows_doctor(tmp_path: Path) -> None:
    """The rerun line is the step's exact environment and command: pasted into a shell, it does
    what the step did. The doctor command names the real row (it once said `doctor ROW`)."""
    import os
    import subprocess

    ui, _ = _ui()
    script = "import os, sys; print(os.environ['ROW_VAR']); sys.exit(7)"
    cmd = Command("compile", (sys.executable, "-c", script), (("ROW_VAR", "a 'b' $c"),), str(tmp_path))
    with pytest.raises(ExternalFailure) as e:
        run_step(ui, cmd, dict(os.environ), doctor="buildrows --config p.toml doctor linux-x86_64-cu130-py311")
    text = str(e.value)
    assert "`buildrows --config p.toml doctor linux-x86_64-cu130-py311` checks the toolchain" in text
    assert "doctor ROW" not in text
    line = text.split("to rerun it by hand, with the environment it had:\n      ")[1].splitlines()[0]
    assert line.startswith(f"cd {tmp_path} && env ROW_VAR=")
    again = subprocess.run(["sh", "-c", line], capture_output=True, text=True, check=False)
    assert again.returncode == 7 and again.stdout == "a 'b' $c\n"


def test_runner_refuses_a_tool_missing_from_the_steps_path() -> None:
    ui, _ = _ui()
    with pytest.raises(ExternalFailure, match=r"step 'configure': 'cmake' is not on the PATH this step runs with"):
        run_step(ui, Command("configure", ("cmake", "--version")), {"PATH": "/nonexistent"})


# --- guards -----------------------------------------------------------------------------------


def _wheel(tmp_path: Path, name: str) -> Path:
    p = tmp_path / name
    with zipfile.ZipFile(p, "w") as z:
        z.writestr(name.split("-")[0] + "-" + name.split("-")[1] + ".dist-info/METADATA", "Name: x\n")
    return p


def test_guard_cuda_wheel_without_local_tag(tmp_path: Path) -> None:
    _, row = _row("linux-x86_64-cu130-py311")
    problem = local_tag_problem(row, _wheel(tmp_path, "cuda_extension-0.1.0-cp311-cp311-linux_x86_64.whl"))
    assert problem is not None and "not tagged +cu130" in problem and "BUILDROWS_LOCAL_VERSION" in problem
    assert local_tag_problem(row, _wheel(tmp_path, "cuda_extension-0.1.0+cu130-cp311-cp311-linux_x86_64.whl")) is None


def test_guard_cpu_wheel_with_a_cuda_tag(tmp_path: Path) -> None:
    _, row = _row("linux-x86_64-cpu-py311")
    problem = local_tag_problem(row, _wheel(tmp_path, "cuda_extension-0.1.0+cu130-cp311-cp311-linux_x86_64.whl"))
    assert problem is not None and "carries the CUDA tag +cu130" in problem


def test_build_refuses_an_empty_row(cli: Callable[..., object]) -> None:
    r = cli("--config", str(REPO / "tests" / "data" / "policies" / "executorch" / "buildrows.toml"), "build", "linux-aarch64-jetpack*")
    assert r.code == 3  # type: ignore[attr-defined]
    assert "declared empty" in r.err and "no device code for that GPU" in r.err  # type: ignore[attr-defined]


def test_build_refuses_a_cuda_row_without_archs() -> None:
    from buildrows.errors import Refused

    _, row = _row("linux-x86_64-cu130-py311")
    bare = type(row)(**{**row.__dict__, "archs": None})
    with pytest.raises(Refused, match="no architecture list; buildrows will not fall back"):
        bare.require_archs("build")


def test_build_unknown_row_is_bad_input(cli: Callable[..., object]) -> None:
    r = cli("--config", str(EXAMPLE_POLICY), "build", "linux-x86_64-cu131-py311")
    assert r.code == 2 and "did you mean" in r.err  # type: ignore[attr-defined]


def test_this_machines_row_follows_cu_version(monkeypatch: pytest.MonkeyPatch) -> None:
    from buildrows.build.prepare import this_machines_row

    pol = load_policy(EXAMPLE_POLICY)
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    row, why = this_machines_row(pol, {"CU_VERSION": "cpu", "PATH": ""})
    assert row.name == f"linux-x86_64-cpu-py{PY.replace('.', '')}" and "CU_VERSION=cpu" in why


def test_this_machines_row_refuses_a_train_the_policy_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    from buildrows.build.prepare import this_machines_row
    from buildrows.errors import Refused

    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    with pytest.raises(Refused, match=r"this machine's row would be linux-x86_64-cu134-py\d+ .* has no such row"):
        this_machines_row(load_policy(EXAMPLE_POLICY), {"CU_VERSION": "cu134", "PATH": ""})


def test_build_command_imports_stay_light() -> None:
    import subprocess

    code = ("import sys, buildrows.build.orchestrate, buildrows.commands.doctor; "
            "heavy = [m for m in ('jinja2', 'packaging', 'buildrows.render.presets', 'buildrows.build.doctor') if m in sys.modules]; "
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}).stdout
    assert out.strip() == "[]"


def test_setup_py_rows_build_in_their_own_setuptools_directory(tmp_path: Path) -> None:
    """DIST_EXTRA_CONFIG (read after setup.cfg) names build/setuptools-ROW; a user's own extra
    configuration is kept, with only [build] build_base set."""
    import configparser

    pol, row = _row("linux-x86_64-cu130-py311")
    plan = plan_row(pol, row, {"PATH": ""}, host="linux", check_toolchain=False)
    theirs = tmp_path / "mine.cfg"
    theirs.write_text("[build_ext]\nparallel = 4\n[build]\nbuild_base = /elsewhere\n", encoding="utf-8")
    bp = drivers.setup_py_plan(plan, "python3.11", tmp_path, tmp_path / "dist", {"DIST_EXTRA_CONFIG": str(theirs)})
    (cmd,) = bp.commands
    ((path, text),) = bp.files
    assert dict(cmd.env)["DIST_EXTRA_CONFIG"] == str(path) == str(tmp_path / "build" / "setuptools-linux-x86_64-cu130-py311.cfg")
    cfg = configparser.ConfigParser()
    cfg.read_string(text)
    assert cfg["build"]["build_base"] == (tmp_path / "build" / "setuptools-linux-x86_64-cu130-py311").as_posix()
    assert cfg["build_ext"]["parallel"] == "4"
    assert text.startswith(f"# Written by buildrows for row linux-x86_64-cu130-py311; from {theirs}")

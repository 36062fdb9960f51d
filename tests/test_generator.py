"""The generator per project and platform (SPEC §5), and the build-tree layout it gives a project's
own packaging: ExecuTorch's setup.py reads a single-config tree on Linux and Release/ on Windows."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.plan.toolchain import choose_generator
from buildrows.policy.load import load_policy, policy_from_dict
from tests.conftest import EXAMPLE_POLICY, Result
from tests.test_env import fake_nvcc, read_back_bash, tool_env

CMAKE = shutil.which("cmake")
NINJA = shutil.which("ninja")

# One library in a subdirectory, as ExecuTorch's extension/cuda/ builds libexecutorch_extension_cuda.so.
MINI = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.25)\nproject(layout C)\nadd_subdirectory(extension/cuda)\n",
    "extension/cuda/CMakeLists.txt": "add_library(executorch_extension_cuda SHARED lib.c)\n",
    "extension/cuda/lib.c": "int executorch_extension_cuda_answer(void) { return 42; }\n",
}
#: How ExecuTorch's setup.py names the library it packages (BuiltFile src_dir), and its rule for
#: %BUILD_TYPE%: replaced by the configuration on Windows, removed with its slash elsewhere.
SRC = "%CMAKE_CACHE_DIR%/extension/cuda/%BUILD_TYPE%/libexecutorch_extension_cuda.so"


def executorch_src_path(windows: bool, cfg: str = "Release") -> str:
    src = SRC.replace("%CMAKE_CACHE_DIR%/", "")
    return src.replace("%BUILD_TYPE%", cfg) if windows else src.replace("/%BUILD_TYPE%", "")


def _policy(extra_project: str = "", extra_linux: str = "", extra_windows: str = "") -> dict[str, object]:
    import tomllib

    text = f"""
[project]
driver = "setup.py"
{extra_project}
[python]
versions = ["3.11"]
[platforms.linux-x86_64]
cpu = true
{extra_linux}
[platforms.windows-amd64]
cpu = true
{extra_windows}
"""
    return tomllib.loads(text)


def test_linux_default_is_single_config_and_windows_keeps_its_rule() -> None:
    pol = policy_from_dict(_policy(), "buildrows.toml")
    linux = choose_generator(pol.rows[0], {"PATH": ""}, "linux")
    assert linux.generator == "Ninja" and not linux.multi_config
    assert "single-config" in linux.reason
    win = choose_generator(pol.rows[1], {"PATH": ""}, "windows")
    assert win.generator.startswith("Visual Studio") and win.toolset == "ClangCL" and win.multi_config


def test_platform_generator_overrides_the_projects() -> None:
    pol = policy_from_dict(_policy('generator = "Unix Makefiles"', "", 'generator = "Ninja Multi-Config"'),
                           "buildrows.toml")
    linux, win = pol.rows
    assert (linux.generator, win.generator) == ("Unix Makefiles", "Ninja Multi-Config")
    g = choose_generator(linux, {"PATH": ""}, "linux")
    assert g.generator == "Unix Makefiles" and g.reason.startswith("fixed by the policy (project.generator")
    # Windows: a fixed Ninja generator takes clang-cl; outside a developer environment doctor says so.
    g = choose_generator(win, {"PATH": ""}, "windows")
    assert g.generator == "Ninja Multi-Config" and dict(g.cache)["CMAKE_C_COMPILER"] == "clang-cl"
    assert "a Visual Studio developer environment" in g.missing_tools
    pol = policy_from_dict(_policy('generator = "Ninja"', 'generator = "Ninja Multi-Config"'), "buildrows.toml")
    assert [r.generator for r in pol.rows] == ["Ninja Multi-Config", "Ninja"]


def test_executorch_example_generators() -> None:
    """Linux rows: single-config Ninja, fixed with its reason; Windows rows: the seed's rule."""
    pol = load_policy(EXAMPLE_POLICY)
    for row in pol.rows:
        if row.empty_reason is not None:
            continue
        if row.os == "linux":
            assert row.generator == "Ninja", row.name
            assert not choose_generator(row, {"PATH": ""}, "linux").multi_config
        else:
            assert row.generator is None, row.name
            assert choose_generator(row, {"PATH": ""}, "windows").multi_config


def _configure_and_build(project: Path, env: dict[str, str]) -> Path:
    out = project / "pip-out" / "cmake-out"
    for argv in ([CMAKE, "-S", str(project), "-B", str(out), "-DCMAKE_BUILD_TYPE=Release"],
                 [CMAKE, "--build", str(out), "--config", "Release"]):
        p = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        assert p.returncode == 0, p.stdout + p.stderr
    return out


@pytest.mark.skipif(CMAKE is None or NINJA is None, reason="needs cmake and ninja")
def test_executorch_linux_env_gives_the_tree_its_setup_py_reads(cli: Callable[..., Result], tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """`buildrows env` for an ExecuTorch Linux row, sourced, then cmake as ExecuTorch's setup.py runs it
    (`cmake -B pip-out/.../cmake-out`, `cmake --build --config Release`, generator from CMAKE_GENERATOR):
    the library is exactly where setup.py's Linux rule looks. Under the old Multi-Config default it
    lands in Release/ and that rule finds nothing, which is the breakage this guards against."""
    tool_env(monkeypatch, tmp_path / "bin")
    fake_nvcc(tmp_path / "bin")
    env_file = tmp_path / "row.env"
    r = cli("--config", str(EXAMPLE_POLICY), "env", "linux-x86_64-cu130-py311", "--format", "shell",
            "--output", str(env_file))
    assert r.code == 0, r.err
    generator = read_back_bash(env_file, ["CMAKE_GENERATOR"])["CMAKE_GENERATOR"].decode()
    assert generator == "Ninja"

    def build(gen: str) -> list[str]:
        project = tmp_path / gen.replace(" ", "-")
        for rel, text in MINI.items():
            (project / rel).parent.mkdir(parents=True, exist_ok=True)
            (project / rel).write_text(text)
        env = {**os.environ, "CMAKE_GENERATOR": gen, "PATH": f"{Path(NINJA).parent}{os.pathsep}{os.environ['PATH']}"}
        env.pop("CMAKE_GENERATOR_PLATFORM", None)
        out = _configure_and_build(project, env)
        return glob.glob(str(out / executorch_src_path(windows=False)))

    assert len(build(generator)) == 1  # setup.py wants exactly one match
    assert build("Ninja Multi-Config") == []  # what the old default gave: packaging breaks


def test_executorch_windows_env_gives_a_release_tree(cli: Callable[..., Result], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """On Windows ExecuTorch's setup.py reads <dir>/Release/: both generators of the seed's rule are multi-config."""
    tool_env(monkeypatch, tmp_path / "bin")
    monkeypatch.setenv("BUILDROWS_HOST_OS", "windows")
    fake_nvcc(tmp_path / "bin", name="nvcc.exe")
    r = cli("--config", str(EXAMPLE_POLICY), "env", "windows-amd64-cu130-py311", "--format", "dotenv")
    assert r.code == 0, r.err
    assert "CMAKE_GENERATOR='Visual Studio 17 2022'" in r.out
    assert "CMAKE_GENERATOR_TOOLSET='ClangCL'" in r.out
    assert executorch_src_path(windows=True).startswith("extension/cuda/Release/")

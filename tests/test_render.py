"""`buildrows render`: the presets' content per host (Linux, simulated Windows), CMakeUserPresets.json
handling, the toolkit guard, and real cmake runs (list, and a workflow checked with cuobjdump)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_POLICY, REPO, Result
from tests.test_env import fake_nvcc, tool_env

ROW = "linux-x86_64-cu130-py311"
CMAKES = [c for c in ("/usr/bin/cmake", str(Path(os.sys.executable).parent / "cmake")) if Path(c).is_file()]
needs_cmake_now = pytest.mark.skipif(not CMAKES or shutil.which("ninja") is None, reason="needs cmake and ninja")
CUOBJDUMP = next((str(p) for p in (Path(os.sys.executable).parent.parent / "lib").glob(
    "python3*/site-packages/nvidia/cu13/bin/cuobjdump")), shutil.which("cuobjdump"))

MINI_POLICY = """
[project]
name = "cuda-mini"
driver = "cmake-presets"
cuda-option = "MINI_BUILD_CUDA"
[python]
versions = ["3.11"]
[cuda]
trains = ["13.0"]
[platforms.linux-x86_64]
trains = ["13.0"]
cpu = true
[[platforms.linux-x86_64.cuda]]
trains = ["13.0"]
archs = "ARCHS"
"""


def render(cli: Callable[..., Result], policy: Path, project: Path, *rows: str) -> tuple[Result, dict[str, dict]]:
    r = cli("--config", str(policy), "render", *rows, "--project", str(project))
    return r, _presets(r, project)


def _presets(r: Result, project: Path) -> dict[str, dict]:
    """The rows' configure presets as CMake sees them: each merged with what it inherits."""
    if r.code != 0:
        return {}
    data = json.loads((project / "buildrows-presets.json").read_text())
    return resolved(data["configurePresets"])


def resolved(presets: list[dict]) -> dict[str, dict]:
    """Visible presets with their `inherits` applied (the row's own values win; maps merge)."""
    by_name = {p["name"]: p for p in presets}
    out: dict[str, dict] = {}
    for p in presets:
        if p.get("hidden"):
            continue
        merged: dict = {}
        parents = p.get("inherits", [])
        for parent in [parents] if isinstance(parents, str) else parents:
            for k, v in by_name[parent].items():
                merged[k] = dict(v) if isinstance(v, dict) else v
        for k, v in p.items():
            merged[k] = {**merged.get(k, {}), **v} if isinstance(v, dict) and isinstance(merged.get(k), dict) else v
        merged.pop("hidden", None)
        out[p["name"]] = merged
    return out


def test_linux_cuda_row(cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool_env(monkeypatch, tmp_path / "bin")
    nvcc = fake_nvcc(tmp_path / "bin")
    r, presets = render(cli, EXAMPLE_POLICY, tmp_path, ROW)
    assert r.code == 0, r.err
    assert f"generator for {ROW}: Ninja - fixed by the policy (platforms.linux-x86_64.generator (buildrows.toml:" in r.err
    data = json.loads((tmp_path / "buildrows-presets.json").read_text())
    assert data["version"] >= 6
    for kind in ("configurePresets", "buildPresets", "testPresets", "workflowPresets"):
        assert [p["name"] for p in data[kind] if not p.get("hidden")] == [ROW]
    p = presets[ROW]
    assert p["generator"] == "Ninja"
    assert p["cacheVariables"]["CMAKE_BUILD_TYPE"] == "Release"  # single-config: chosen at configure
    assert p["binaryDir"] == "${sourceDir}/build/${presetName}"
    assert p["environment"]["TORCH_CUDA_ARCH_LIST"] == "7.5;8.0;8.6;8.9;9.0;10.0;12.0+PTX"
    cache = p["cacheVariables"]
    assert cache["CMAKE_CUDA_ARCHITECTURES"] == "75-real;80-real;86-real;89-real;90-real;100-real;120-real;120-virtual"
    assert cache["CMAKE_CUDA_COMPILER"] == str(nvcc)
    assert cache["EXECUTORCH_BUILD_CUDA"] == "ON"
    # the module's copy beside the presets: no path into buildrows' installation
    assert cache["CMAKE_PROJECT_TOP_LEVEL_INCLUDES"] == "${sourceDir}/BuildrowsCudaArchs.cmake"
    assert (tmp_path / "BuildrowsCudaArchs.cmake").read_text() == (REPO / "cmake" / "BuildrowsCudaArchs.cmake").read_text()
    assert "CMAKE_CUDA_FLAGS" not in cache  # /Zc:preprocessor is for Windows only
    assert data["workflowPresets"][0]["steps"] == [{"type": t, "name": ROW} for t in ("configure", "build", "test")]


def test_cudacxx_set_means_no_cmake_cuda_compiler(cli: Callable[..., Result], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    tool_env(monkeypatch, tmp_path / "bin")
    nvcc = fake_nvcc(tmp_path / "bin")
    monkeypatch.setenv("CUDACXX", f"{nvcc} -allow-unsupported-compiler")
    r, presets = render(cli, EXAMPLE_POLICY, tmp_path, ROW)
    assert r.code == 0, r.err
    assert "CMAKE_CUDA_COMPILER" not in presets[ROW]["cacheVariables"]


def test_cpu_row_renders_cuda_off_even_with_a_toolkit(cli: Callable[..., Result], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch, policy_copy: Callable[..., Path]) -> None:
    tool_env(monkeypatch, tmp_path / "bin")
    fake_nvcc(tmp_path / "bin")
    pol = policy_copy('[platforms.linux-x86_64]\n', '[platforms.linux-x86_64]\ncpu = true\n')
    r, presets = render(cli, pol, tmp_path, "linux-x86_64-cpu-py311")
    assert r.code == 0, r.err
    p = presets["linux-x86_64-cpu-py311"]
    cache = p["cacheVariables"]
    assert cache["EXECUTORCH_BUILD_CUDA"] == "OFF" and cache["BUILDROWS_CUDA"] == "OFF"
    assert not any(k.startswith("CMAKE_CUDA") for k in cache)
    assert "TORCH_CUDA_ARCH_LIST" not in p["environment"]


def test_train_mismatch_is_refused_naming_both_and_writes_nothing(cli: Callable[..., Result], tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    tool_env(monkeypatch, tmp_path / "bin")
    fake_nvcc(tmp_path / "bin", "13.0", "13.0.88")
    r, _ = render(cli, EXAMPLE_POLICY, tmp_path, "linux-x86_64-cu132-py311")
    assert r.code == 3
    assert "row linux-x86_64-cu132-py311 is CUDA 13.2, but the toolkit found is CUDA 13.0.88" in r.err
    assert "fix: point CUDA_HOME (or CUDACXX) at a CUDA 13.2 toolkit" in r.err
    assert not (tmp_path / "buildrows-presets.json").exists()
    assert not (tmp_path / "CMakeUserPresets.json").exists()


def test_user_presets_are_kept_and_include_is_idempotent(cli: Callable[..., Result], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    tool_env(monkeypatch, tmp_path / "bin")
    fake_nvcc(tmp_path / "bin")
    mine = {"version": 4, "include": ["mine.json"], "configurePresets": [{"name": "my-debug", "generator": "Ninja",
                                                                          "binaryDir": "${sourceDir}/b"}]}
    (tmp_path / "CMakeUserPresets.json").write_text(json.dumps(mine))
    for _ in range(2):
        r, _ = render(cli, EXAMPLE_POLICY, tmp_path, ROW)
        assert r.code == 0, r.err
    data = json.loads((tmp_path / "CMakeUserPresets.json").read_text())
    assert data["include"] == ["mine.json", "buildrows-presets.json"]
    assert data["configurePresets"] == mine["configurePresets"]
    assert data["version"] == 4


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "not valid JSON"),
    ('{"version": 6, "include": "x.json"}', "`include` must be a list"),
    ("[1, 2]", "expected a JSON object"),
])
def test_broken_user_presets_are_not_overwritten(cli: Callable[..., Result], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch, content: str, message: str) -> None:
    tool_env(monkeypatch, tmp_path / "bin")
    fake_nvcc(tmp_path / "bin")
    (tmp_path / "CMakeUserPresets.json").write_text(content)
    r, _ = render(cli, EXAMPLE_POLICY, tmp_path, ROW)
    assert r.code == 2 and message in r.err
    assert (tmp_path / "CMakeUserPresets.json").read_text() == content


def test_a_project_preset_with_a_row_name_is_refused(cli: Callable[..., Result], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    tool_env(monkeypatch, tmp_path / "bin")
    fake_nvcc(tmp_path / "bin")
    (tmp_path / "CMakePresets.json").write_text(json.dumps({"version": 6, "configurePresets": [{"name": ROW}]}))
    r, _ = render(cli, EXAMPLE_POLICY, tmp_path, ROW)
    assert r.code == 3 and f"CMakePresets.json: configure preset '{ROW}'" in r.err


def _files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file() and "bin" not in p.parts}


@pytest.mark.parametrize(("layout", "where"), [
    # the user's own file, a build preset of the row's name
    ({"CMakeUserPresets.json": {"version": 6, "buildPresets": [{"name": ROW, "configurePreset": "x"}]}},
     f"CMakeUserPresets.json: build preset '{ROW}'"),
    # two includes deep, relative to the including file
    ({"CMakeUserPresets.json": {"version": 4, "include": ["user/more.json"]},
      "user/more.json": {"version": 4, "include": ["deeper.json"]},
      "user/deeper.json": {"version": 4, "configurePresets": [{"name": ROW, "generator": "Ninja"}]}},
     f"deeper.json (included from more.json): configure preset '{ROW}'"),
    # through ${sourceDir}, and an include cycle that must not loop
    ({"CMakeUserPresets.json": {"version": 6, "include": ["${sourceDir}/p/a.json"]},
      "p/a.json": {"version": 6, "include": ["../CMakeUserPresets.json"], "workflowPresets": [{"name": ROW, "steps": []}]}},
     f"a.json (included from CMakeUserPresets.json): workflow preset '{ROW}'"),
])
def test_a_user_preset_with_a_row_name_is_refused_before_anything_is_written(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        layout: dict[str, dict[str, object]], where: str) -> None:
    tool_env(monkeypatch, tmp_path / "bin")
    fake_nvcc(tmp_path / "bin")
    for rel, doc in layout.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(json.dumps(doc))
    before = _files(tmp_path)
    r, _ = render(cli, EXAMPLE_POLICY, tmp_path, ROW)
    assert r.code == 3, r.err
    assert where in r.err and "nothing was written" in r.err and "Traceback" not in r.err
    assert _files(tmp_path) == before


@pytest.mark.integration
@needs_cmake_now
def test_a_version_3_user_file_is_raised_to_4_and_the_output_says_so(cli: Callable[..., Result], tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    tool_env(monkeypatch, tmp_path / "bin")
    fake_nvcc(tmp_path / "bin")
    (tmp_path / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.25)\nproject(x NONE)\n")
    mine = {"version": 3, "configurePresets": [{"name": "mine", "generator": "Ninja", "binaryDir": "${sourceDir}/b"}]}
    (tmp_path / "CMakeUserPresets.json").write_text(json.dumps(mine))
    r, _ = render(cli, EXAMPLE_POLICY, tmp_path, ROW)
    assert r.code == 0, r.err
    assert "CMakeUserPresets.json: schema version 3 -> 4: including buildrows-presets.json needs `include`" in r.err
    data = json.loads((tmp_path / "CMakeUserPresets.json").read_text())
    assert data["version"] == 4 and data["configurePresets"] == mine["configurePresets"]
    out = subprocess.run([CMAKES[0], "--list-presets=all"], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert '"mine"' in out and f'"{ROW}"' in out


def windows_path(tmp_path: Path, tools: tuple[str, ...]) -> Path:
    """A simulated Visual Studio prompt: fake executables named as on Windows."""
    bindir = tmp_path / "winbin"
    fake_nvcc(bindir, name="nvcc.exe")
    for t in tools:
        p = bindir / f"{t}.exe"
        p.write_text("#!/bin/sh\nexit 0\n")
        p.chmod(0o755)
    return bindir


def windows_env(monkeypatch: pytest.MonkeyPatch, bindir: Path, *, developer: bool = True) -> None:
    """A simulated Windows host; `developer`: a Visual Studio developer prompt (vcvars sets VSCMD_VER)."""
    tool_env(monkeypatch, bindir)
    monkeypatch.setenv("PATH", str(bindir))  # only the simulated prompt's tools
    monkeypatch.setenv("BUILDROWS_HOST_OS", "windows")
    monkeypatch.delenv("VCToolsInstallDir", raising=False)
    if developer:
        monkeypatch.setenv("VSCMD_VER", "17.12.3")
    else:
        monkeypatch.delenv("VSCMD_VER", raising=False)


@pytest.mark.parametrize("train", ["cu130", "cu132"])
def test_windows_developer_environment_uses_ninja_clang_cl_and_cl_host(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, train: str) -> None:
    windows_env(monkeypatch, windows_path(tmp_path, ("ninja", "clang-cl", "cl")))
    if train == "cu132":
        fake_nvcc(tmp_path / "winbin", "13.2", "13.2.86", name="nvcc.exe")
    monkeypatch.setenv("CUDAFLAGS", "-lineinfo")
    row = f"windows-amd64-{train}-py311"
    r, presets = render(cli, EXAMPLE_POLICY, tmp_path, row)
    assert r.code == 0, r.err
    assert "Visual Studio developer environment (17.12.3) with ninja, clang-cl and cl on PATH" in r.err
    p = presets[row]
    cache = p["cacheVariables"]
    assert p["generator"] == "Ninja Multi-Config" and "toolset" not in p
    assert cache["CMAKE_C_COMPILER"] == cache["CMAKE_CXX_COMPILER"] == "clang-cl"
    assert cache["CMAKE_CUDA_HOST_COMPILER"] == "cl"
    assert cache["CMAKE_CUDA_FLAGS"] == "-lineinfo -Xcompiler=/Zc:preprocessor"
    assert cache["CMAKE_CUDA_COMPILER"].endswith("winbin/nvcc.exe")
    assert cache["CMAKE_CUDA_ARCHITECTURES"] == "80-real;86-real;89-real;90-real;100-real;120-real;120-virtual"


def test_windows_without_ninja_falls_back_to_visual_studio_clangcl(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    windows_env(monkeypatch, windows_path(tmp_path, ("clang-cl",)))
    monkeypatch.setenv("BUILDROWS_HOST_OS", "windows")
    row = "windows-amd64-cu130-py311"
    r, presets = render(cli, EXAMPLE_POLICY, tmp_path, row)
    assert r.code == 0, r.err
    assert "Visual Studio developer environment (17.12.3), but ninja, cl not on PATH" in r.err
    p = presets[row]
    assert p["generator"] == "Visual Studio 17 2022"
    assert p["toolset"] == {"value": "ClangCL", "strategy": "set"}
    assert p["architecture"] == {"value": "x64", "strategy": "set"}
    cache = p["cacheVariables"]
    assert "CMAKE_C_COMPILER" not in cache and "CMAKE_CUDA_HOST_COMPILER" not in cache
    assert cache["CMAKE_CUDA_FLAGS"] == "-Xcompiler=/Zc:preprocessor"


def test_windows_tools_on_path_outside_a_developer_prompt_fall_back_to_visual_studio(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    windows_env(monkeypatch, windows_path(tmp_path, ("ninja", "clang-cl", "cl")), developer=False)
    row = "windows-amd64-cu130-py311"
    r, presets = render(cli, EXAMPLE_POLICY, tmp_path, row)
    assert r.code == 0, r.err
    assert ("not a Visual Studio developer environment (neither VSCMD_VER nor VCToolsInstallDir is set): "
            "Visual Studio 17 2022 with the ClangCL toolset") in r.err
    p = presets[row]
    assert p["generator"] == "Visual Studio 17 2022" and p["toolset"] == {"value": "ClangCL", "strategy": "set"}
    assert "CMAKE_C_COMPILER" not in p["cacheVariables"]


def test_windows_cpu_row_has_no_cuda_flags(cli: Callable[..., Result], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch, policy_copy: Callable[..., Path]) -> None:
    windows_env(monkeypatch, windows_path(tmp_path, ("ninja", "clang-cl", "cl")))
    monkeypatch.setenv("BUILDROWS_HOST_OS", "windows")
    pol = policy_copy('[platforms.windows-amd64]\n', '[platforms.windows-amd64]\ncpu = true\n')
    r, presets = render(cli, pol, tmp_path, "windows-amd64-cpu-py311")
    assert r.code == 0, r.err
    cache = presets["windows-amd64-cpu-py311"]["cacheVariables"]
    assert cache["CMAKE_C_COMPILER"] == "clang-cl" and cache["EXECUTORCH_BUILD_CUDA"] == "OFF"
    assert not any(k.startswith("CMAKE_CUDA") for k in cache)


def test_windows_row_on_a_linux_host_is_refused(cli: Callable[..., Result], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    tool_env(monkeypatch, tmp_path / "bin")
    fake_nvcc(tmp_path / "bin")
    r, _ = render(cli, EXAMPLE_POLICY, tmp_path, "windows-amd64-cu130-py311")
    assert r.code == 3 and "is built on windows, and this host is linux" in r.err
    monkeypatch.setenv("BUILDROWS_HOST_OS", "beos")
    r, _ = render(cli, EXAMPLE_POLICY, tmp_path, ROW)
    assert r.code == 2 and "BUILDROWS_HOST_OS='beos'" in r.err


# --- real cmake -----------------------------------------------------------------------------------

def mini_project(tmp_path: Path, archs: str) -> tuple[Path, Path]:
    project = tmp_path / "cuda-mini"
    shutil.copytree(REPO / "tests" / "data" / "cuda-mini", project)
    policy = project / "buildrows.toml"
    policy.write_text(MINI_POLICY.replace("ARCHS", archs))
    return project, policy


needs_cmake = pytest.mark.skipif(not CMAKES or shutil.which("ninja") is None, reason="needs cmake and ninja")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")


@pytest.mark.integration
@needs_cmake
@pytest.mark.parametrize("cmake", CMAKES)
def test_cmake_lists_the_rendered_presets(cli: Callable[..., Result], tmp_path: Path, cmake: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    tool_env(monkeypatch, tmp_path / "bin")
    fake_nvcc(tmp_path / "bin")
    (tmp_path / "CMakeUserPresets.json").write_text(json.dumps({"version": 4, "configurePresets": [
        {"name": "mine", "generator": "Ninja", "binaryDir": "${sourceDir}/b"}]}))
    r = cli("--config", str(EXAMPLE_POLICY), "render", "linux-x86_64-cu13*-py31[01]", "--project", str(tmp_path),
            "--no-toolchain-check")
    assert r.code == 0, r.err
    out = subprocess.run([cmake, "--list-presets=all"], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    for name in ("mine", "linux-x86_64-cu130-py310", "linux-x86_64-cu132-py311"):
        assert f'"{name}"' in out


def cuobjdump(lib: Path) -> tuple[list[str], list[str]]:
    assert CUOBJDUMP, "cuobjdump is missing"
    elf = subprocess.run([CUOBJDUMP, "--list-elf", str(lib)], capture_output=True, text=True, check=True).stdout
    ptx = subprocess.run([CUOBJDUMP, "--list-ptx", str(lib)], capture_output=True, text=True, check=True).stdout
    pick = lambda text: sorted(line.rsplit(".", 2)[-2] for line in text.splitlines() if line.strip())  # noqa: E731
    return pick(elf), pick(ptx)


@pytest.mark.integration
@needs_cmake
@needs_nvcc
@pytest.mark.skipif(CUOBJDUMP is None, reason="needs cuobjdump (pip install nvidia-cuda-cuobjdump)")
@pytest.mark.parametrize("cmake", CMAKES)
@pytest.mark.parametrize(("archs", "cmake_list", "code"), [
    ("9.0 7.5", "75-real;90-real;90-virtual", (["sm_75", "sm_90"], ["sm_90"])),
    # PTX without a cubin (issue 27): 9.0's PTX, no sm_90 cubin, and TORCH_CUDA_ARCH_LIST left empty
    ("7.5 compute_90", "75-real;90-virtual", (["sm_75"], ["sm_90"])),
])
def test_workflow_builds_exactly_the_rows_device_code(cli: Callable[..., Result], tmp_path: Path, cmake: str,
                                                      monkeypatch: pytest.MonkeyPatch, archs: str, cmake_list: str,
                                                      code: tuple[list[str], list[str]]) -> None:
    """Render the row into a tiny CUDA project; `cmake --workflow` must build exactly the row's cubins and PTX."""
    for var in ("CUDACXX", "CUDAARCHS", "TORCH_CUDA_ARCH_LIST", "CMAKE_ARGS", "BUILDROWS_HOST_OS"):
        monkeypatch.delenv(var, raising=False)
    project, policy = mini_project(tmp_path, archs)
    r = cli("--config", str(policy), "render", ROW, "linux-x86_64-cpu-py311")
    assert r.code == 0, r.err
    p = subprocess.run([cmake, "--workflow", "--preset", ROW], cwd=project, capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"buildrows: CMAKE_CUDA_ARCHITECTURES={cmake_list}" in p.stdout
    assert "unused" not in p.stderr.lower()
    assert cuobjdump(project / "build" / ROW / "libmini.so") == code
    # The CPU row of the same project builds with CUDA off although nvcc is right here.
    p = subprocess.run([cmake, "--workflow", "--preset", "linux-x86_64-cpu-py311"], cwd=project,
                       capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    cache = (project / "build" / "linux-x86_64-cpu-py311" / "CMakeCache.txt").read_text()
    assert "MINI_BUILD_CUDA:BOOL=OFF" in cache and "CMAKE_CUDA_COMPILER:" not in cache


# --- issue 15: presets a person can read, that survive a move, and say what to ignore ---------


def test_rows_inherit_a_hidden_base_instead_of_full_copies(cli: Callable[..., Result], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    tool_env(monkeypatch, tmp_path / "bin")
    fake_nvcc(tmp_path / "bin")
    r = cli("--config", str(EXAMPLE_POLICY), "render", "linux-x86_64-cu13*", "--project", str(tmp_path),
            "--no-toolchain-check")
    assert r.code == 0, r.err
    data = json.loads((tmp_path / "buildrows-presets.json").read_text())
    configure = data["configurePresets"]
    base, rows = configure[0], configure[1:]
    assert base["name"] == "buildrows-base" and base["hidden"] is True
    assert base["generator"] == "Ninja" and base["binaryDir"] == "${sourceDir}/build/${presetName}"
    assert base["cacheVariables"]["CMAKE_PROJECT_TOP_LEVEL_INCLUDES"] == "${sourceDir}/BuildrowsCudaArchs.cmake"
    assert len(rows) == 8
    for row in rows:
        assert row["inherits"] == "buildrows-base"
        assert "generator" not in row and "binaryDir" not in row
        assert "CMAKE_PROJECT_TOP_LEVEL_INCLUDES" not in row["cacheVariables"]
        assert row["cacheVariables"]["BUILDROWS_ROW"] == row["name"]
    # the reason for the generator is said once, not once per row
    assert r.err.count("fixed by the policy (platforms.linux-x86_64.generator") == 1
    assert "generator for every row: Ninja - fixed by the policy" in r.err
    for kind in ("buildPresets", "testPresets"):
        assert data[kind][0] == {**data[kind][0], "name": "buildrows-base", "hidden": True}
        assert all(p["inherits"] == "buildrows-base" for p in data[kind][1:])
    for kind, verb in (("buildPresets", "Build "), ("testPresets", "Test "), ("workflowPresets", "Configure, build and test ")):
        for p in data[kind]:
            if not p.get("hidden"):
                assert p["displayName"].startswith(verb + p["name"] + " (CUDA 13."), p


def test_no_path_into_buildrows_installation(cli: Callable[..., Result], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from buildrows.resources import resource_dir

    tool_env(monkeypatch, tmp_path / "bin")
    fake_nvcc(tmp_path / "bin")
    r = cli("--config", str(EXAMPLE_POLICY), "render", ROW, "--project", str(tmp_path))
    assert r.code == 0, r.err
    text = (tmp_path / "buildrows-presets.json").read_text()
    import buildrows

    # the module and the templates (cmake/, presets/, or buildrows/_data/ in a wheel) are never named;
    # the row's compiler and interpreter are, and those are this machine's on purpose
    for where in (resource_dir("cmake"), resource_dir("presets"), Path(buildrows.__file__).parent):
        assert str(where) not in text, where


def test_a_foreign_file_named_like_the_module_is_not_overwritten(cli: Callable[..., Result], tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    tool_env(monkeypatch, tmp_path / "bin")
    fake_nvcc(tmp_path / "bin")
    (tmp_path / "BuildrowsCudaArchs.cmake").write_text("# the project's own\n")
    r = cli("--config", str(EXAMPLE_POLICY), "render", ROW, "--project", str(tmp_path))
    assert r.code == 2 and "is not buildrows' CMake module; it will not be overwritten" in r.err
    assert (tmp_path / "BuildrowsCudaArchs.cmake").read_text() == "# the project's own\n"
    assert not (tmp_path / "buildrows-presets.json").exists()


def test_render_says_what_belongs_in_gitignore_and_can_add_it(cli: Callable[..., Result], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    tool_env(monkeypatch, tmp_path / "bin")
    fake_nvcc(tmp_path / "bin")
    (tmp_path / ".gitignore").write_text("build/\n/CMakeUserPresets.json")  # no final newline
    r = cli("--config", str(EXAMPLE_POLICY), "render", ROW, "--project", str(tmp_path))
    assert r.code == 0, r.err
    assert (f"add to {tmp_path / '.gitignore'} (rendered, machine-specific files): /buildrows-presets.json "
            "/BuildrowsCudaArchs.cmake  (`buildrows render --gitignore ...` appends them)") in r.err
    r = cli("--config", str(EXAMPLE_POLICY), "render", ROW, "--project", str(tmp_path), "--gitignore")
    assert r.code == 0, r.err
    assert (tmp_path / ".gitignore").read_text() == ("build/\n/CMakeUserPresets.json\n# rendered by buildrows "
                                                     "(machine-specific)\n/buildrows-presets.json\n/BuildrowsCudaArchs.cmake\n")
    r = cli("--config", str(EXAMPLE_POLICY), "render", ROW, "--project", str(tmp_path))
    assert ".gitignore" not in r.err  # nothing left to add
    if shutil.which("git"):  # and git agrees that every rendered file is ignored
        subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path,
                                capture_output=True, text=True, check=True).stdout
        assert "buildrows-presets.json" not in status and "BuildrowsCudaArchs.cmake" not in status
        assert "CMakeUserPresets.json" not in status


@pytest.mark.integration
@needs_cmake
@pytest.mark.parametrize("cmake", CMAKES)
def test_rendered_presets_still_build_after_the_project_moves(cli: Callable[..., Result], tmp_path: Path,
                                                              cmake: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Presets once named buildrows' own installation; a project moved (or a venv rebuilt) broke."""
    for var in ("CUDACXX", "CUDAARCHS", "TORCH_CUDA_ARCH_LIST", "CMAKE_ARGS", "BUILDROWS_HOST_OS"):
        monkeypatch.delenv(var, raising=False)
    project, policy = mini_project(tmp_path, "9.0 7.5")
    r = cli("--config", str(policy), "render", "linux-x86_64-cpu-py311", "--no-toolchain-check")
    assert r.code == 0, r.err
    moved = tmp_path / "moved"
    project.rename(moved)
    p = subprocess.run([cmake, "--workflow", "--preset", "linux-x86_64-cpu-py311"], cwd=moved,
                       capture_output=True, text=True, check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    cache = (moved / "build" / "linux-x86_64-cpu-py311" / "CMakeCache.txt").read_text()
    assert f"CMAKE_PROJECT_TOP_LEVEL_INCLUDES:UNINITIALIZED={moved}/BuildrowsCudaArchs.cmake" in cache

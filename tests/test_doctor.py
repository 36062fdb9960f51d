"""`buildrows doctor`: each check, fed observations, and every guard tripped with its message."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from buildrows.build.doctor import diagnose, verdict
from buildrows.build.doctor_cuda import check_generator, nvcc_install_hint
from buildrows.build.doctor_python import check_python, check_requirements
from buildrows.build.doctor_tools import check_tool, cmake_fix
from buildrows.build.findings import Finding
from buildrows.errors import Refused
from buildrows.policy.load import load_policy
from buildrows.policy.trains import Train

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "cuda-extension"
EXAMPLE_POLICY = EXAMPLE / "buildrows.toml"
EXECUTORCH = REPO / "tests" / "data" / "policies" / "executorch" / "buildrows.toml"


def _fake_nvcc(tmp_path: Path, release: str) -> dict[str, str]:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    nvcc = bindir / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.85'\n")
    nvcc.chmod(0o755)
    return {"PATH": str(bindir)}


class FakeProbe:
    def __init__(self, tools: Mapping[str, str], dists: Mapping[str, str | None]) -> None:
        self.tools, self.dists = tools, dists

    def tool(self, name: str, env: Mapping[str, str]) -> tuple[str | None, str | None]:
        return (f"/fake/{name}", self.tools[name]) if name in self.tools else (None, None)

    def distributions(self, python: str, names: Sequence[str]) -> dict[str, str | None]:
        return {n: self.dists.get(n) for n in names}

    def interpreter(self, python: str) -> tuple[str | None, str | None]:
        return None, None  # it ran; its version is not observed here


GOOD_TOOLS = {"cmake": "cmake version 3.31.6", "ninja": "1.12.1"}
GOOD_DISTS = {"build": "1.2.2", "scikit-build-core": "0.11.1"}


@pytest.mark.parametrize(("path", "output", "expected"), [
    (None, None, "no cmake on PATH"),
    ("/usr/bin/cmake", "cmake version 3.22.1", "/usr/bin/cmake is 3.22.1, older than the 3.25 buildrows needs"),
    ("/usr/bin/cmake", "garbage", "did not report a version"),
])
def test_cmake_guard(path: str | None, output: str | None, expected: str) -> None:
    f = check_tool("cmake", path, output, (3, 25), cmake_fix())
    assert f.failed and expected in f.seen and "pip install 'cmake>=3.25'" in f.fix


def test_cmake_new_enough_passes() -> None:
    f = check_tool("cmake", "/x/cmake", "cmake version 4.4.5", (3, 25), cmake_fix())
    assert not f.failed and f.seen == "4.4.5 at /x/cmake"


def test_ninja_too_old_for_multi_config() -> None:
    f = check_tool("ninja", "/x/ninja", "1.8.2", (1, 10), "pip install 'ninja>=1.10'")
    assert f.failed and "older than the 1.10" in f.seen


def test_missing_nvcc_says_how_to_get_it(tmp_path: Path) -> None:
    pol = load_policy(EXAMPLE_POLICY)
    row = pol.row("linux-x86_64-cu130-py311")
    assert row is not None
    env = {"PATH": str(tmp_path)}
    findings = diagnose(pol, row, env, EXAMPLE, driver="scikit-build-core", host="linux",
                        probe=FakeProbe(GOOD_TOOLS, GOOD_DISTS))
    (nvcc,) = [f for f in findings if f.check == "nvcc"]
    assert nvcc.status == "missing" and "needs a CUDA 13.0 compiler and none was found" in nvcc.seen
    assert "`buildrows build linux-x86_64-cu130-py311 --provision`" in nvcc.fix
    assert "`buildrows toolkit install 13.0`" in nvcc.fix and "PyPI" in nvcc.fix
    assert "pip install" not in nvcc.fix


def test_nvcc_hint_for_cuda_12_is_the_redistributable_archives() -> None:
    """No cu12 package on PyPI carries nvcc (only ptxas): the advice for 12.6 is the manifest route."""
    pol = load_policy(EXAMPLE_POLICY)
    row = pol.row("linux-x86_64-cu126-py311")
    assert row is not None and row.cuda == Train(12, 6)
    hint = nvcc_install_hint(row)
    assert "`buildrows toolkit install 12.6`" in hint and "redistributable archives" in hint
    assert "nvidia-cuda-nvcc-cu12" not in hint


def test_wrong_toolkit_train_is_refused_naming_both(tmp_path: Path) -> None:
    pol = load_policy(EXAMPLE_POLICY)
    row = pol.row("linux-x86_64-cu130-py311")
    assert row is not None
    findings = diagnose(pol, row, _fake_nvcc(tmp_path, "12.6"), EXAMPLE, driver="scikit-build-core",
                        host="linux", probe=FakeProbe(GOOD_TOOLS, GOOD_DISTS))
    (nvcc,) = [f for f in findings if f.check == "nvcc"]
    assert nvcc.status == "refused"
    assert "is CUDA 13.0, but the toolkit found is CUDA 12.6.85" in nvcc.seen
    # toolchain.check_cuda_compiler's verdict and fix (the same as the hook's), then how to get 13.0
    assert "or build the cu126 row instead" in nvcc.fix and "`buildrows toolkit install 13.0`" in nvcc.fix
    with pytest.raises(Refused, match=r"cannot be built on this machine \(1 problem: nvcc; each with its fix above\)"):
        verdict(findings, row)


def test_doctor_cli_exits_3_on_the_wrong_train(tmp_path: Path, cli: Callable[..., object],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    env = _fake_nvcc(tmp_path, "12.6")
    monkeypatch.setenv("PATH", env["PATH"] + os.pathsep + os.environ.get("PATH", ""))
    for var in ("CUDACXX", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    r = cli("--config", str(EXAMPLE_POLICY), "doctor", "linux-x86_64-cu130-py311")
    assert r.code == 3  # type: ignore[attr-defined]
    assert "toolkit found is CUDA 12.6.85" in r.out  # type: ignore[attr-defined]


def test_cpu_row_without_a_cuda_option_is_noted(tmp_path: Path) -> None:
    text = EXAMPLE_POLICY.read_text().replace('cuda-option = "CUDA_EXTENSION_BUILD_CUDA"\n', "")
    (tmp_path / "buildrows.toml").write_text(text)
    pol = load_policy(tmp_path / "buildrows.toml")
    row = pol.row("linux-x86_64-cpu-py311")
    assert row is not None
    findings = diagnose(pol, row, _fake_nvcc(tmp_path, "13.0"), EXAMPLE, driver="cmake-presets", host="linux",
                        probe=FakeProbe(GOOD_TOOLS, {}))
    (cuda,) = [f for f in findings if f.check == "cuda"]
    assert cuda.status == "note" and "policy names no cuda-option or env-switches" in cuda.seen
    assert "will put device code into this CPU wheel, which `buildrows check` refuses" in cuda.seen


def test_cpu_row_with_env_switches_only_says_they_are_off(tmp_path: Path) -> None:
    text = EXAMPLE_POLICY.read_text().replace('cuda-option = "CUDA_EXTENSION_BUILD_CUDA"\n',
                                              'env-switches = ["FORCE_CUDA"]\n')
    (tmp_path / "buildrows.toml").write_text(text)
    pol = load_policy(tmp_path / "buildrows.toml")
    row = pol.row("linux-x86_64-cpu-py311")
    assert row is not None
    findings = diagnose(pol, row, _fake_nvcc(tmp_path, "13.0"), EXAMPLE, driver="cmake-presets", host="linux",
                        probe=FakeProbe(GOOD_TOOLS, {}))
    (cuda,) = [f for f in findings if f.check == "cuda"]
    assert cuda.status == "ok" and cuda.seen.startswith("CPU row: FORCE_CUDA=0")


def test_cpu_row_with_a_toolkit_present_says_cuda_stays_off(tmp_path: Path) -> None:
    pol = load_policy(EXAMPLE_POLICY)
    row = pol.row("linux-x86_64-cpu-py311")
    assert row is not None
    findings = diagnose(pol, row, _fake_nvcc(tmp_path, "13.0"), EXAMPLE, driver="scikit-build-core",
                        host="linux", probe=FakeProbe(GOOD_TOOLS, GOOD_DISTS))
    assert not [f for f in findings if f.failed]
    (cuda,) = [f for f in findings if f.check == "cuda"]
    assert cuda.seen.startswith("CPU row: CUDA_EXTENSION_BUILD_CUDA=OFF; this builder has nvcc")


def test_missing_build_requirement_names_the_fix(tmp_path: Path) -> None:
    pol = load_policy(EXAMPLE_POLICY)
    row = pol.row("linux-x86_64-cpu-py311")
    assert row is not None
    findings = diagnose(pol, row, {"PATH": ""}, EXAMPLE, driver="scikit-build-core", host="linux",
                        probe=FakeProbe(GOOD_TOOLS, {"build": "1.2.2", "scikit-build-core": "0.9.0"}))
    (skb,) = [f for f in findings if f.check == "scikit-build-core"]
    assert skb.status == "missing" and "0.9.0 installed, the project needs >=0.10" in skb.seen
    assert "-m pip install 'scikit-build-core>=0.10'" in skb.fix and "--isolation" in skb.fix


def test_isolation_does_not_need_the_backend_locally() -> None:
    pol = load_policy(EXAMPLE_POLICY)
    row = pol.row("linux-x86_64-cpu-py311")
    assert row is not None
    findings = diagnose(pol, row, {"PATH": ""}, EXAMPLE, driver="scikit-build-core", host="linux", isolation=True,
                        probe=FakeProbe(GOOD_TOOLS, {"build": "1.2.2"}))
    assert not [f for f in findings if f.failed]


def test_requirements_missing_frontend() -> None:
    (f,) = check_requirements("python3", ["build>=1.0"], {"build": None})
    assert f.failed and f.seen == "not installed for python3"


def test_missing_python_for_the_row() -> None:
    pol = load_policy(EXAMPLE_POLICY)
    row = pol.row("linux-x86_64-cpu-py310")
    assert row is not None
    f = check_python(row, None)
    # the command depends on what this machine has (pyenv, uv, else uv from PyPI): test_provision
    assert f.failed and "no Python 3.10" in f.seen and "install 3.10`" in f.fix


def test_project_without_pyproject_for_scikit_build_core(tmp_path: Path) -> None:
    pol = load_policy(EXAMPLE_POLICY)
    row = pol.row(f"linux-x86_64-cpu-py{sys.version_info.major}{sys.version_info.minor}")
    if row is None:
        pytest.skip("this Python is not on the example's allowlist")
    findings = diagnose(pol, row, {"PATH": ""}, tmp_path, driver="scikit-build-core", host="linux",
                        probe=FakeProbe(GOOD_TOOLS, GOOD_DISTS))
    (f,) = [f for f in findings if f.check == "project"]
    assert f.failed and f"{tmp_path} has no setup.py and no pyproject.toml" in f.seen
    assert "pass --project DIR" in f.fix
    # the missing pyproject.toml is that one problem, not a second "build requirements" one
    assert not [f for f in findings if f.check == "build requirements"]
    (tmp_path / "pyproject.toml").write_text('[build-system]\nrequires = ["scikit-build-core>=0.10"]\n')
    again = diagnose(pol, row, {"PATH": ""}, tmp_path, driver="scikit-build-core", host="linux",
                     probe=FakeProbe(GOOD_TOOLS, GOOD_DISTS))
    assert not [f for f in again if f.failed]


def test_row_for_another_os_is_refused() -> None:
    pol = load_policy(EXECUTORCH)
    row = pol.row("windows-amd64-cu130-py311")
    assert row is not None
    findings = diagnose(pol, row, {"PATH": ""}, EXAMPLE, driver="setup.py", host="linux",
                        probe=FakeProbe(GOOD_TOOLS, GOOD_DISTS))
    assert findings == [Finding("host", "refused", "row windows-amd64-cu130-py311 is built on windows, and this host is linux",
                                "run it on a windows builder")]


def _fake_exes(tmp_path: Path, names: Sequence[str]) -> str:
    d = tmp_path / "winbin"
    d.mkdir()
    for n in names:
        (d / f"{n}.exe").write_text("")
    return str(d)


def test_windows_plain_shell_falls_back_to_visual_studio(tmp_path: Path) -> None:
    row = load_policy(EXECUTORCH).row("windows-amd64-cu130-py311")
    assert row is not None
    (found,) = check_generator(row, {"PATH": _fake_exes(tmp_path, ["cl"])}, "windows")
    assert found.status == "note"
    assert found.seen.startswith("Visual Studio 17 2022: not a Visual Studio developer environment (neither VSCMD_VER")
    assert "vcvars64.bat" in found.fix


def test_windows_tools_on_path_without_a_developer_environment_is_one_verdict(tmp_path: Path) -> None:
    """Tools on PATH but no VSCMD_VER: doctor once said both '[ok] ... Visual Studio developer
    environment' and '[note] ... not a Visual Studio developer environment'."""
    row = load_policy(EXECUTORCH).row("windows-amd64-cu130-py311")
    assert row is not None
    (found,) = check_generator(row, {"PATH": _fake_exes(tmp_path, ["ninja", "clang-cl", "cl"])}, "windows")
    assert found.status == "note" and found.seen.startswith("Visual Studio 17 2022: not a Visual Studio developer")
    assert "vcvars64.bat" in found.fix


def test_windows_developer_environment_uses_ninja(tmp_path: Path) -> None:
    row = load_policy(EXECUTORCH).row("windows-amd64-cu132-py311")
    assert row is not None
    env = {"PATH": _fake_exes(tmp_path, ["ninja", "clang-cl", "cl"]), "VSCMD_VER": "17.12.3"}
    (gen,) = check_generator(row, env, "windows")
    assert gen.status == "ok"
    assert gen.seen.startswith("Ninja Multi-Config: Visual Studio developer environment (17.12.3)")


def test_doctor_cli_all_good_for_the_cpu_row(cli: Callable[..., object], monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("needs cmake and ninja on PATH")
    monkeypatch.setenv("CU_VERSION", "cpu")
    r = cli("--config", str(EXAMPLE_POLICY), "doctor")
    if "has no such row" in r.err:  # type: ignore[attr-defined]
        pytest.skip("this Python is not on the example's allowlist")
    assert r.code == 0, r.err  # type: ignore[attr-defined]
    assert "everything the row needs is here" in r.out  # type: ignore[attr-defined]


# --- issue 15: a newcomer's doctor --------------------------------------------------------------


def _shim(tmp_path: Path, name: str, body: str) -> Path:
    d = tmp_path / "shims"
    d.mkdir(exist_ok=True)
    exe = d / name
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)
    return d


def test_a_python_that_does_not_run_is_not_ok(tmp_path: Path, cli: Callable[..., object],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A pyenv shim for a version that is not installed exits 127; doctor once called it ok."""
    from buildrows.plan.host import host_python

    other = "3.12" if host_python() != "3.12" else "3.13"
    shims = _shim(tmp_path, f"python{other}", f'echo "pyenv: python{other}: command not found" >&2\nexit 127\n')
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CU_VERSION", "cpu")
    # Only the shim: doctor also looks in uv's, pyenv's and manylinux's places (a real pyenv version
    # there would be found, and rightly called ok), so point those at empty directories.
    for var in ("PYENV_ROOT", "UV_PYTHON_INSTALL_DIR", "BUILDROWS_MANYLINUX_PYTHONS"):
        monkeypatch.setenv(var, str(tmp_path / "empty" / var))
    row = f"linux-x86_64-cpu-py{other.replace('.', '')}"
    r = cli("--config", str(EXAMPLE_POLICY), "doctor", row)
    assert r.code == 3, r  # type: ignore[attr-defined]
    assert f"[MISSING] python: no Python {other} that runs: " in r.out  # type: ignore[attr-defined]
    assert (f"{shims}/python{other} does not run: it exited with status 127: "
            f"pyenv: python{other}: command not found") in r.out  # type: ignore[attr-defined]
    assert "everything the row needs is here" not in r.out  # type: ignore[attr-defined]


def test_a_python_of_another_version_is_not_ok(tmp_path: Path) -> None:
    row = load_policy(EXAMPLE_POLICY).row("linux-x86_64-cpu-py312")
    assert row is not None
    f = check_python(row, "/x/python3.12", ("3.11", None))
    assert f.failed and f.seen == "/x/python3.12 is Python 3.11, not 3.12"


def test_cuda_home_without_nvcc_is_reported_and_its_fix_works(tmp_path: Path, cli: Callable[..., object],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA_HOME naming no toolkit was skipped in favour of another nvcc. Now it is a problem whose
    fix line, followed literally, makes doctor pass."""
    import re
    import shutil

    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc on PATH")
    for var in ("CUDACXX", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-cuda-here"))
    from buildrows.plan.toolchain import find_cuda_compiler

    comp = find_cuda_compiler({"PATH": os.environ["PATH"]})
    assert comp is not None and comp.train is not None
    row = f"linux-x86_64-{comp.train.cu}-py{sys.version_info[0]}{sys.version_info[1]}"
    if load_policy(EXAMPLE_POLICY).row(row) is None:
        pytest.skip(f"the example has no row {row}")
    r = cli("--config", str(EXAMPLE_POLICY), "doctor", row)
    assert r.code == 3  # type: ignore[attr-defined]
    out: str = r.out  # type: ignore[attr-defined]
    assert f"[MISSING] nvcc: CUDA_HOME={tmp_path / 'no-cuda-here'} has no bin/nvcc: that directory does not exist" in out
    assert "buildrows does not silently use another toolkit than CUDA_HOME names" in out
    m = re.search(r"`export CUDA_HOME=(\S+)`", out)
    assert m, out
    monkeypatch.setenv("CUDA_HOME", m.group(1))  # the fix, literally
    again = cli("--config", str(EXAMPLE_POLICY), "doctor", row)
    assert "[ok     ] nvcc:" in again.out and "found through CUDA_HOME" in again.out  # type: ignore[attr-defined]


def test_cmake_in_the_environments_bin_is_found_and_used_by_build(tmp_path: Path, cli: Callable[..., object],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`pip install cmake` into a venv that was never activated: doctor said cmake was missing."""
    import argparse
    import sysconfig

    from buildrows.build.prepare import setup
    from buildrows.process.runner import Command, resolve

    scripts = sysconfig.get_path("scripts")
    if not (Path(scripts) / "cmake").is_file():
        pytest.skip("cmake is not installed in this environment")
    # nothing on PATH at all, so no system cmake can answer instead
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CU_VERSION", "cpu")
    r = cli("--config", str(EXAMPLE_POLICY), "doctor")
    if "has no such row" in r.err:  # type: ignore[attr-defined]
        pytest.skip("this Python is not on the example's allowlist")
    out: str = r.out  # type: ignore[attr-defined]
    assert "[ok     ] cmake: " in out and f"at {scripts}/cmake" in out, out
    assert f"at {scripts}/ninja" in out
    assert f"[note   ] PATH: the active environment's {scripts} is not on PATH; buildrows adds it" in out
    # build resolves its steps on the same PATH: cmake (and, through PATH, ninja for cmake) from there
    _, env, _ = setup(argparse.Namespace(config=str(EXAMPLE_POLICY)))
    argv, _ = resolve(Command("configure", ("cmake", "--version")), env)
    assert argv[0] == os.path.join(scripts, "cmake")


def test_each_problem_is_printed_once_on_stdout(tmp_path: Path, cli: Callable[..., object],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The report went to stderr, and the refusal repeated every problem under it."""
    empty = tmp_path / "not-a-project"
    empty.mkdir()
    monkeypatch.setenv("CU_VERSION", "cpu")
    r = cli("--config", str(EXAMPLE_POLICY), "doctor", "--project", str(empty))
    if "has no such row" in r.err:  # type: ignore[attr-defined]
        pytest.skip("this Python is not on the example's allowlist")
    assert r.code == 3  # type: ignore[attr-defined]
    seen = f"{empty} has no setup.py and no pyproject.toml"
    assert (r.out + r.err).count(seen) == 1 and seen in r.out  # type: ignore[attr-defined]
    assert "everything the row needs is here" not in r.out + r.err  # type: ignore[attr-defined]
    assert "(1 problem: project; each with its fix above)" in r.err  # type: ignore[attr-defined]

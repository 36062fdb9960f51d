"""Issue 21, point 2: the row environment's `bin` is first on PATH during the build.

cuvec needs `swig` (a build requirement that installs a program): `--provision` installed it into
the row's environment, but the build's PATH did not have that environment's bin, so CMake's
optional `find_package(SWIG)` found nothing and the wheel silently lacked its SWIG modules. Here a
build requirement (a wheel made by this test, installed by `--provision` from a file) installs a
console program; the project's setup.py records which `tinytool` and which `python` its build
finds, and refuses to build without the program."""

from __future__ import annotations

import base64
import hashlib
import os
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.build import configure_seed, drivers
from tests.conftest import Result

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
PYT = PY.replace(".", "")
CPU = f"linux-x86_64-cpu-py{PYT}"

SETUP_PY = '''
import shutil
from setuptools import setup

tool = shutil.which("tinytool")
if tool is None:
    raise SystemExit("tinytool is not on PATH: the build requirement's program is missing")
with open("tiny/_found.py", "w") as f:
    f.write(f"TOOL = {tool!r}\\nPYTHON = {shutil.which('python')!r}\\n")
setup(name="tiny", version="0.1.0", packages=["tiny"])
'''


def tool_wheel(where: Path) -> Path:
    """A wheel whose only job is a console program, `tinytool` (as swig's wheel installs `swig`)."""
    files = {
        "tinytool/__init__.py": b"def main():\n    print('tinytool 1.0')\n",
        "tinytool-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinytool\nVersion: 1.0\n",
        "tinytool-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        "tinytool-1.0.dist-info/entry_points.txt": b"[console_scripts]\ntinytool = tinytool:main\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("tinytool-1.0.dist-info/RECORD,,")
    wheel = where / "tinytool-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr("tinytool-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return wheel


@pytest.mark.integration
def test_a_provisioned_build_finds_its_build_requirements_program_and_python(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("setuptools")
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    tool = tool_wheel(tmp_path)
    project = tmp_path / "tiny"
    (project / "tiny").mkdir(parents=True)
    (project / "tiny" / "__init__.py").write_text("", encoding="utf-8")
    (project / "setup.py").write_text(SETUP_PY, encoding="utf-8")
    (project / "pyproject.toml").write_text(
        f'[build-system]\nrequires = ["setuptools", "tinytool @ {tool.as_uri()}"]\n'
        'build-backend = "setuptools.build_meta"\n', encoding="utf-8")
    pol = project / "buildrows.toml"
    pol.write_text(f'[project]\nname = "tiny"\ndriver = "setup.py"\n[python]\nversions = ["{PY}"]\n'
                   '[cuda]\ntrains = ["13.0"]\n[platforms.linux-x86_64]\ntrains = ["13.0"]\ncpu = true\n'
                   '[[platforms.linux-x86_64.cuda]]\ntrains = ["13.0"]\narchs = "9.0"\n', encoding="utf-8")
    r = cli("--config", str(pol), "build", CPU, "--provision", "--no-check", "--wheel-dir", str(tmp_path / "dist"))
    assert r.code == 0, r.out + r.err
    # what setuptools' backend asks for beyond [build-system] requires (`wheel`, for an older
    # setuptools) is installed too: the setup.py driver's frontend checks it
    assert "the backend asks for: " in r.err
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        found = z.read("tiny/_found.py").decode()
    (env_bin,) = (tmp_path / "cache" / "envs").glob("*/bin")
    assert f"TOOL = {str(env_bin / 'tinytool')!r}" in found
    assert f"PYTHON = {str(env_bin / 'python')!r}" in found


def test_only_a_virtual_environments_bin_goes_first(tmp_path: Path) -> None:
    venv = tmp_path / "env"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n", encoding="utf-8")
    assert drivers.environment_bin(str(venv / "bin" / "python")) == venv / "bin"
    assert drivers.environment_bin("/usr/bin/python3") is None  # /usr/bin must not go before the user's PATH


def test_the_row_environments_bin_on_path_does_not_change_the_detection_key() -> None:
    argv = ("/c/envs/py3.12-a/bin/python", "-m", "build", "--wheel", "-C", "cmake.args=-GNinja", "/p")
    other = ("/c/envs/py3.13-b/bin/python", *argv[1:])
    env = {"PATH": "/c/envs/py3.12-a/bin:/usr/local/cuda/bin:/usr/bin"}
    assert configure_seed.key(argv, env) == configure_seed.key(other, {"PATH": "/c/envs/py3.13-b/bin:/usr/local/cuda/bin:/usr/bin"})
    assert configure_seed.key(argv, env) != configure_seed.key(argv, {"PATH": "/opt/cuda/bin:/usr/bin"})


def test_doctor_reads_a_row_environments_own_packages_though_its_python_is_buildrows_own(tmp_path: Path) -> None:
    """Point 3: a venv of the interpreter buildrows runs on resolves to the same binary, but holds
    other packages: doctor asked buildrows' own site-packages and refused a provisioned row
    (cuvec: setuptools_scm, swig and pybind11 "not installed", all three in the row's environment)."""
    import subprocess

    from buildrows.build.doctor_python import MachineProbe, is_running_interpreter

    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(tmp_path / "row")], check=True)
    row_python = str(tmp_path / "row" / "bin" / "python")
    assert os.path.realpath(row_python) == os.path.realpath(sys.executable)  # the case that tripped it
    assert not is_running_interpreter(row_python)
    assert is_running_interpreter(sys.executable)
    # pytest runs this test, so buildrows' own environment has it; the fresh row environment has not
    assert MachineProbe().distributions(row_python, ["pytest"]) == {"pytest": None}
    assert MachineProbe().distributions(sys.executable, ["pytest"])["pytest"] is not None

"""The CI path and `buildrows build` give a row's build the same environment (issue 35, point 1).

The CI path is what test-infra's build job does with the rendered scripts: the pre-script's
`buildrows hook` appends the row's values to BUILD_ENV_FILE, the build step sources that file and
runs `python setup.py bdist_wheel`, and the post-script runs `buildrows stamp` then `buildrows
check`. Both paths take what the build sees from `buildrows.build.rowenv`.

Cost in the default suite: about 30 s here (three tiny C-extension builds, four setup.py runs that only
record their environment).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from buildrows.plan.row import ARCHS_VAR, GENCODE_VAR

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
CPU = f"linux-x86_64-cpu-py{PY.replace('.', '')}"
CUDA = f"linux-x86_64-cu130-py{PY.replace('.', '')}"
BUILDROWS = str(Path(sys.executable).parent / "buildrows")
LIBDIR = sysconfig.get_config_var("LIBDIR") or ""

POLICY = f"""\
[project]
name = "tiny-paths"
driver = "setup.py"
source-dir = "."

[python]
versions = ["{PY}"]

[cuda]
trains = ["13.0"]

[platforms.linux-x86_64]
cpu = true
trains = ["13.0"]

[[platforms.linux-x86_64.cuda]]
trains = ["13.0"]
archs = "7.5 9.0+PTX"
"""

# The setup.py records the environment it was run with (what "the build sees"), then builds a
# plain C extension, or stops there when RECORD_ONLY is set.
SETUP_PY = """\
import json, os, sys
from setuptools import Extension, setup
seen = os.environ.get("SEEN_BY")
if seen and any(a in sys.argv for a in ("bdist_wheel", "build_ext")) or os.environ.get("RECORD_ONLY") and seen:
    with open(os.path.join(os.environ["RECORD_DIR"], seen + ".json"), "w") as f:
        json.dump(dict(os.environ), f)
    if os.environ.get("RECORD_ONLY"):
        raise SystemExit("recorded only")
setup(name="tiny-paths", version="1.0", ext_modules=[Extension("tiny_paths", ["tiny.c"])])
"""
TINY_C = """\
#include <Python.h>
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "tiny_paths", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_tiny_paths(void) { return PyModule_Create(&m); }
"""

#: What only `buildrows build` sets, and why (docs/ci.md, "What the build sees").
LOCAL_ONLY = {
    "PYTHONPATH": "buildrows' metadata provider made importable to the build",
    "DIST_EXTRA_CONFIG": "setuptools' build directory of the row's own (build/setuptools-ROW)",
    "PATH": "the row toolkit's bin first, so a setup.py finding nvcc on PATH gets the row's",
}
#: What the frontend adds: `buildrows build` runs `python -m build`, test-infra runs setup.py itself.
FRONTEND_NOISE = {"_PYPROJECT_HOOKS_BUILD_BACKEND", "_PYPROJECT_HOOKS_BACKEND_PATH"}
#: The interpreter `build` pins in CMAKE_ARGS (the CI build step's frontend picks its own).
PINS = ("-DPython_EXECUTABLE=", "-DPython3_EXECUTABLE=")
#: What a process started by bash (the CI build step) has and a process started by Python has not.
SHELL_NOISE = {"PWD", "OLDPWD", "SHLVL", "_", "BUILD_ENV_FILE", "SEEN_BY", "RECORD_ONLY", "CU_VERSION"}

pytestmark = pytest.mark.skipif(sys.platform != "linux" or shutil.which("gcc") is None,
                                reason="a Linux C compiler builds the extension")


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "buildrows.toml").write_text(POLICY, encoding="utf-8")
    (project / "setup.py").write_text(SETUP_PY, encoding="utf-8")
    (project / "tiny.c").write_text(TINY_C, encoding="utf-8")
    (project / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools"]\n'
                                            'build-backend = "setuptools.build_meta"\n', encoding="utf-8")
    return project


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "GITHUB_ENV", "BUILD_ENV_FILE",
                                                             "LDSHARED", "SOURCE_DATE_EPOCH", "CUDACXX")}
    env.update(BUILDROWS_CACHE=str(tmp_path / "cache"), RECORD_DIR=str(tmp_path), **more)
    return env


def _ci_build(project: Path, tmp_path: Path, accel: str, env_file: Path, **more: str) -> subprocess.CompletedProcess[str]:
    """The pre-script's hook, then test-infra's build step: BUILD_ENV_FILE sourced, setup.py run."""
    env = _env(tmp_path, CU_VERSION=accel, BUILD_ENV_FILE=str(env_file), **more)
    hook = subprocess.run([BUILDROWS, "hook"], cwd=project, env=env, capture_output=True, text=True, check=False)
    assert hook.returncode == 0, hook.stderr
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                           f'source "$BUILD_ENV_FILE" && {sys.executable} setup.py -q bdist_wheel -d dist'],
                          cwd=project, env=env, capture_output=True, text=True, check=False)


def _post_script(project: Path, tmp_path: Path, wheel: Path) -> subprocess.CompletedProcess[str]:
    """The post-script's `buildrows stamp` then `buildrows check` of the wheel, for the row."""
    env = _env(tmp_path)
    stamp = subprocess.run([BUILDROWS, "stamp", "--row", CPU, str(wheel)], cwd=project, env=env,
                           capture_output=True, text=True, check=False)
    assert stamp.returncode == 0, stamp.stderr
    stamped = stamp.stdout.strip().splitlines()[-1]
    return subprocess.run([BUILDROWS, "check", "--row", CPU, stamped], cwd=project, env=env,
                          capture_output=True, text=True, check=False)


@pytest.mark.skipif(f"-rpath,{LIBDIR}" not in (sysconfig.get_config_var("LDSHARED") or ""),
                    reason="this interpreter's LDSHARED writes no rpath into its own lib (pyenv's and conda's do)")
def test_point_1_the_ci_path_links_without_the_interpreters_rpath_and_passes(tmp_path: Path) -> None:
    """Issue 35 point 1: `build` passed, the CI-shaped build's post-script failed runtime-reached
    ("search path '<LIBDIR>' is absolute"). Replayed through the hook, BUILD_ENV_FILE and
    test-infra's `python setup.py bdist_wheel`; then the same without the hook's LDSHARED line
    (the CI path as it was) must fail, naming the path."""
    project = _project(tmp_path)
    env_file = tmp_path / "build_env.sh"
    build = _ci_build(project, tmp_path, "cpu", env_file)
    assert build.returncode == 0, build.stderr[-2000:]
    assert "export LDSHARED=" in env_file.read_text(encoding="utf-8")
    (wheel,) = (project / "dist").glob("*.whl")
    check = _post_script(project, tmp_path, wheel)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "search path" not in check.stdout + check.stderr

    # The guard: the same CI path without the LDSHARED line links with the interpreter's rpath.
    shutil.rmtree(project / "dist")
    shutil.rmtree(project / "build", ignore_errors=True)
    old = tmp_path / "old_env.sh"
    written = _ci_build(project, tmp_path, "cpu", old)
    assert written.returncode == 0
    shutil.rmtree(project / "dist")
    shutil.rmtree(project / "build", ignore_errors=True)
    old.write_text("".join(ln for ln in old.read_text(encoding="utf-8").splitlines(keepends=True)
                           if not ln.startswith("export LDSHARED=")), encoding="utf-8")
    env = _env(tmp_path, BUILD_ENV_FILE=str(old))
    rebuilt = subprocess.run(["bash", "--noprofile", "--norc", "-c",
                              f'source "$BUILD_ENV_FILE" && {sys.executable} setup.py -q bdist_wheel -d dist'],
                             cwd=project, env=env, capture_output=True, text=True, check=False)
    assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]
    (wheel,) = (project / "dist").glob("*.whl")
    check = _post_script(project, tmp_path, wheel)
    assert check.returncode == 5
    assert f"search path {LIBDIR!r} is absolute" in check.stdout + check.stderr


def _local_build(project: Path, tmp_path: Path, row: str, **more: str) -> subprocess.CompletedProcess[str]:
    env = _env(tmp_path, **more)
    return subprocess.run([BUILDROWS, "build", row, "--no-compiler-cache", "--wheel-dir", str(tmp_path / "local")],
                          cwd=project, env=env, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("row", [CPU, pytest.param(CUDA, marks=pytest.mark.skipif(
    shutil.which("nvcc") is None, reason="the CUDA row needs nvcc"))])
def test_the_ci_path_and_the_local_build_see_the_same_environment(tmp_path: Path, row: str) -> None:
    """The setup.py records its environment under each path (RECORD_ONLY: no compile); every
    variable either path sets has the same value in both, except LOCAL_ONLY's, each with its
    reason."""
    project = _project(tmp_path)
    # A fixed commit time, so both paths derive SOURCE_DATE_EPOCH from the same history.
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "p"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@e.invalid", *args], cwd=project, check=True,
                       capture_output=True)
    accel = "cpu" if row == CPU else "cu130"
    ci = _ci_build(project, tmp_path, accel, tmp_path / "env.sh", SEEN_BY="ci", RECORD_ONLY="1")
    assert "recorded only" in ci.stderr, ci.stderr[-2000:]
    local = _local_build(project, tmp_path, row, SEEN_BY="local", RECORD_ONLY="1")
    assert "recorded only" in local.stdout + local.stderr, (local.stdout + local.stderr)[-3000:]
    seen_ci = json.loads((tmp_path / "ci.json").read_text(encoding="utf-8"))
    seen_local = json.loads((tmp_path / "local.json").read_text(encoding="utf-8"))
    for seen in (seen_ci, seen_local):  # `build` pins its interpreter; CI's frontend picks its own
        seen["CMAKE_ARGS"] = " ".join(t for t in seen.get("CMAKE_ARGS", "").split() if not t.startswith(PINS))
    differ = {k for k in set(seen_ci) | set(seen_local)
              if seen_ci.get(k) != seen_local.get(k) and k not in SHELL_NOISE | FRONTEND_NOISE}
    assert differ <= set(LOCAL_ONLY), {k: (seen_ci.get(k), seen_local.get(k)) for k in differ - set(LOCAL_ONLY)}
    # What issue 35 named, in both: the link command, the reproducible time, the row's nvcc flags.
    for name in ("SOURCE_DATE_EPOCH", "BUILDROWS_ROW", GENCODE_VAR, ARCHS_VAR, "CMAKE_ARGS"):
        assert name in seen_ci and seen_ci[name] == seen_local[name], name
    if f"-rpath,{LIBDIR}" in (sysconfig.get_config_var("LDSHARED") or ""):
        assert seen_ci["LDSHARED"] == seen_local["LDSHARED"] and f"-rpath,{LIBDIR}" not in seen_ci["LDSHARED"]
    if row == CUDA:
        assert seen_ci[GENCODE_VAR] == ("-gencode=arch=compute_75,code=sm_75 -gencode=arch=compute_90,code=sm_90 "
                                        "-gencode=arch=compute_90,code=compute_90")
        assert seen_ci[ARCHS_VAR] == "7.5 9.0+PTX"
    else:
        assert seen_ci[GENCODE_VAR] == "" and seen_ci[ARCHS_VAR] == ""

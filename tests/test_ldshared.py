"""A setup.py row links without its interpreter's own -rpath (pyenv's LDSHARED), issue 28.

CI's python3 (pyenv 3.11.7, --enable-shared) links every extension with `-Wl,-rpath,<its lib>`;
the check's runtime-reached judge fails that absolute RUNPATH (seen on torch_spline_conv 1.2.2).
The build sets LDSHARED without it (`buildrows.build.ldshared` says why); a user's LDSHARED and any
other rpath are kept, and doctor says what the build will do.
"""

from __future__ import annotations

import json
import stat
import sys
import sysconfig
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.build.doctor_link import link_rpath_findings
from buildrows.build.ldshared import (
    InterpreterLink,
    build_ldshared,
    interpreter_link,
    without_own_rpath,
)
from buildrows.policy.load import load_policy
from tests.conftest import Result

PYENV_LIB = "/root/.pyenv/versions/3.11.7/lib"
PYENV = f"gcc -shared -L{PYENV_LIB} -Wl,-rpath,{PYENV_LIB} -L{PYENV_LIB} -Wl,-rpath,{PYENV_LIB}"
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
CPU = f"linux-x86_64-cpu-py{PY.replace('.', '')}"
POLICY = f"""\
[project]
name = "tiny-ldshared"
driver = "setup.py"
source-dir = "."

[python]
versions = ["{PY}"]

[platforms.linux-x86_64]
cpu = true
"""


def test_the_interpreters_own_rpath_is_dropped_and_everything_else_kept() -> None:
    link = InterpreterLink(PYENV, PYENV_LIB + "/", "gcc")
    assert build_ldshared(link, {}) == f"gcc -shared -L{PYENV_LIB} -L{PYENV_LIB}"
    # A CC in the environment replaces the interpreter's compiler, as setuptools does.
    assert build_ldshared(link, {"CC": "ccache gcc"}) == f"ccache gcc -shared -L{PYENV_LIB} -L{PYENV_LIB}"
    # The user's LDSHARED wins; an interpreter without its own rpath is left alone.
    assert build_ldshared(link, {"LDSHARED": "cc -shared -Wl,-rpath,/x"}) is None
    assert build_ldshared(InterpreterLink("gcc -shared", "/usr/lib", "gcc"), {}) is None
    # Another absolute rpath (a project's or a toolchain's) stays for the check to judge.
    assert without_own_rpath(f"gcc -shared -Wl,-rpath,/opt/lib -Wl,-rpath={PYENV_LIB}", PYENV_LIB) == \
        "gcc -shared -Wl,-rpath,/opt/lib"


def _fake_python(tmp_path: Path, ldshared: str, libdir: str) -> str:
    """An interpreter whose sysconfig answers `ldshared` (what `interpreter_link` asks)."""
    script = tmp_path / "python"
    line = "buildrows-link:" + json.dumps([ldshared, libdir, "gcc"])
    script.write_text(f"#!/bin/sh\necho 'noise on stdout'\necho '{line}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def test_doctor_says_the_build_drops_it_and_notes_what_it_cannot(tmp_path: Path) -> None:
    (tmp_path / "buildrows.toml").write_text(POLICY)
    pol = load_policy(tmp_path / "buildrows.toml")
    python = _fake_python(tmp_path, PYENV + " -Wl,-rpath,/opt/vendor/lib", PYENV_LIB)
    assert interpreter_link(python).libdir == PYENV_LIB
    ok, note = link_rpath_findings(pol, python, {})
    assert ok.status == "ok" and ok.seen == (
        f"the row's interpreter links extensions with -Wl,-rpath,{PYENV_LIB} (its own lib directory, in its "
        "LDSHARED): the build sets LDSHARED without it, so no extension carries that path")
    assert note.status == "note" and "absolute RUNPATH /opt/vendor/lib, which the check's runtime-reached" in note.seen
    assert PYENV_LIB not in note.seen.split("RUNPATH", 1)[1]
    # The user's own LDSHARED is what the build uses: judged as it is.
    (mine,) = link_rpath_findings(pol, python, {"LDSHARED": PYENV})
    assert mine.status == "note" and f"absolute RUNPATH {PYENV_LIB}, which" in mine.seen


def _runpaths(wheel: Path) -> list[str]:
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    found = []
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.endswith(".so"):
                import io

                elf = ELFFile(io.BytesIO(z.read(name)))
                for sec in elf.iter_sections():
                    if isinstance(sec, DynamicSection):
                        found += [str(getattr(t, "runpath", None) or getattr(t, "rpath", ""))
                                  for t in sec.iter_tags() if t.entry.d_tag in ("DT_RUNPATH", "DT_RPATH")]
    return found


@pytest.mark.skipif(sys.platform != "linux", reason="LDSHARED's -rpath is a Linux link flag")
def test_a_real_setup_py_extension_built_by_this_interpreter_carries_no_builder_path(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    if f"-rpath,{libdir}" not in (sysconfig.get_config_var("LDSHARED") or ""):
        pytest.skip("this interpreter's LDSHARED writes no rpath to its own lib (CI's pyenv Python does)")
    (tmp_path / "buildrows.toml").write_text(POLICY)
    (tmp_path / "setup.py").write_text(
        "from setuptools import Extension, setup\n"
        "setup(name='tiny-ldshared', version='1.0', ext_modules=[Extension('tiny_ldshared', ['tiny.c'])])\n")
    (tmp_path / "tiny.c").write_text(
        "#include <Python.h>\n"
        "static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, \"tiny_ldshared\", NULL, -1, NULL};\n"
        "PyMODINIT_FUNC PyInit_tiny_ldshared(void) { return PyModule_Create(&m); }\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LDSHARED", raising=False)
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    r = cli("doctor", CPU)
    assert r.code == 0, r.out + r.err
    assert f"-Wl,-rpath,{libdir} (its own lib directory, in its LDSHARED): the build sets LDSHARED without it" in r.out
    r = cli("build", CPU, "--no-compiler-cache", "--wheel-dir", str(tmp_path / "dist"))
    assert r.code == 0, r.out + r.err
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert _runpaths(wheel) == []
    assert "check PASS" in r.out
    # The user's own LDSHARED is kept as it is: the same pyenv link command puts the path back in,
    # and the check fails it, naming the entry.
    monkeypatch.setenv("LDSHARED", sysconfig.get_config_var("LDSHARED") or "")
    r = cli("build", CPU, "--no-compiler-cache", "--wheel-dir", str(tmp_path / "mine"))
    assert r.code != 0
    # (setuptools would skip relinking the extension it linked a moment ago: the row's tree starts
    # afresh because its compile and link flags changed, buildrows.build.buildtree.)
    assert f"search path {libdir!r} is absolute" in r.out + r.err
    assert not list((tmp_path / "mine").glob("*.whl"))  # kept out of the directory's top level

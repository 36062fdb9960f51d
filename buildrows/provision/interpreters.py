"""Finding a real interpreter for a row's Python (SPEC §11).

A candidate counts only when it runs and reports the row's version and GIL build: a pyenv shim
that exits 127 ("python3.12: command not found") is not an interpreter. Places, in order: the
running interpreter, uv-managed installs, pyenv versions (never its shims), manylinux's
/opt/python/cpXY-cpXY/bin, then PATH. Everything reads an environment mapping so tests can point
the places at temporary trees. Imports stay light: the plan module (and so the hook) imports this.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping

from buildrows.frozen import Frozen, frozen_dataclass

#: Prints what decides whether an interpreter is the row's: version, GIL build, real executable.
_PROBE = ("import json,sys,sysconfig;print(json.dumps([sys.version_info[0],sys.version_info[1],"
          "bool(sysconfig.get_config_var('Py_GIL_DISABLED')),sys.executable,sys.version.split()[0]]))")


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Interpreter(Frozen):
    """A Python that ran and reported the row's version."""

    path: str
    python: str  # the policy spelling: 3.12, or 3.13t when free-threaded
    version: str  # the full version it reported, e.g. 3.12.1
    source: str  # where it was found: "running", "uv", "pyenv", "manylinux", "PATH", "row environment"

    def describe(self) -> str:
        return f"Python {self.version}{' (free-threaded)' if self.python.endswith('t') else ''} at {self.path} ({self.source})"


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Rejected(Frozen):
    """A candidate that was looked at and is not the row's interpreter, and why."""

    path: str
    source: str
    why: str  # a predicate of the path: "does not run: ...", "is Python 3.11 (3.11.7), not 3.12"


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Search(Frozen):
    """The outcome of a search: the interpreter (or None) and every candidate that was turned down."""

    found: Interpreter | None
    rejected: tuple[Rejected, ...]
    looked: tuple[str, ...]  # the places searched, for the message when nothing was found


def split_python(python: str) -> tuple[int, int, bool]:
    """`3.13t` -> (3, 13, True)."""
    free = python.endswith("t")
    major, minor = python.rstrip("t").split(".")
    return int(major), int(minor), free


def _home(env: Mapping[str, str]) -> str:
    return env.get("HOME") or os.path.expanduser("~")


def uv_dir(env: Mapping[str, str]) -> str:
    """Where uv keeps the interpreters it manages (UV_PYTHON_INSTALL_DIR, else XDG data)."""
    if env.get("UV_PYTHON_INSTALL_DIR"):
        return env["UV_PYTHON_INSTALL_DIR"]
    data = env.get("XDG_DATA_HOME") or os.path.join(_home(env), ".local", "share")
    return os.path.join(data, "uv", "python")


def pyenv_dir(env: Mapping[str, str]) -> str:
    return env.get("PYENV_ROOT") or os.path.join(_home(env), ".pyenv")


def manylinux_dir(env: Mapping[str, str]) -> str:
    """/opt/python, as the manylinux images lay it out (BUILDROWS_MANYLINUX_PYTHONS moves it for tests)."""
    return env.get("BUILDROWS_MANYLINUX_PYTHONS") or "/opt/python"


def candidates(python: str, env: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    """(path, source) of every place the row's Python may live, in the order they are tried."""
    import glob  # here, not at import: the hook imports this module (through the plan) and never searches

    major, minor, free = split_python(python)
    xy, t = f"{major}.{minor}", "t" if free else ""
    exe = f"python{xy}{t}"
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == xy:
        yield sys.executable, "running"
    for d in sorted(glob.glob(os.path.join(glob.escape(uv_dir(env)), f"cpython-{xy}.*")), reverse=True):
        name = os.path.basename(d)
        if ("+freethreaded" in name) == free:
            yield (os.path.join(d, "python.exe") if os.name == "nt" else os.path.join(d, "bin", exe)), "uv"
    for d in sorted(glob.glob(os.path.join(glob.escape(pyenv_dir(env)), "versions", f"{xy}.*")), reverse=True):
        # pyenv names free-threaded builds 3.13t-dev / 3.13.0t; a plain one has no t.
        if os.path.basename(d).endswith("t") == free:
            yield os.path.join(d, "bin", exe), "pyenv"
    tag = f"cp{major}{minor}"
    yield os.path.join(manylinux_dir(env), f"{tag}-{tag}{t}", "bin", "python"), "manylinux"
    shims = os.path.join(pyenv_dir(env), "shims")
    suffix = ".exe" if os.name == "nt" else ""
    for d in env.get("PATH", "").split(os.pathsep):
        if d and os.path.abspath(d) != os.path.abspath(shims):  # a shim only forwards to a version above
            yield os.path.join(d, exe + suffix), "PATH"
            yield os.path.join(d, "python3" + suffix), "PATH"
            if os.name == "nt":  # Windows installs name every version python.exe
                yield os.path.join(d, "python.exe"), "PATH"


def probe(path: str, env: Mapping[str, str], timeout: float = 30) -> tuple[tuple[int, int, bool, str, str] | None, str]:
    """Run the candidate; ((major, minor, free-threaded, executable, version), "") or (None, why not)."""
    import json
    import subprocess

    clean = {k: v for k, v in env.items() if k not in ("PYTHONHOME", "PYTHONPATH")}
    try:
        proc = subprocess.run([path, "-I", "-c", _PROBE], capture_output=True, text=True, env=clean,
                              timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"does not run: {e}"
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[:1] or ["(no output)"]
        return None, f"does not run: it exited with status {proc.returncode}: {tail[0]}"
    try:
        major, minor, free, exe, version = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None, f"does not run as Python: it did not report its version ({proc.stdout.strip()[:80]!r})"
    return (int(major), int(minor), bool(free), str(exe), str(version)), ""


def find_interpreter(python: str, env: Mapping[str, str]) -> Search:
    """The first candidate that runs and is the row's Python (version and GIL build)."""
    want = split_python(python)
    rejected: list[Rejected] = []
    seen: set[str] = set()
    for path, source in candidates(python, env):
        if not os.path.isfile(path) or not os.access(path, os.X_OK):
            continue
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        got, why = probe(path, env)
        if got is None:
            rejected.append(Rejected(path, source, why))
            continue
        major, minor, free, _, version = got
        if (major, minor, free) != want:
            if source != "PATH" or os.path.basename(path) not in ("python3", "python3.exe", "python.exe"):
                # python3/python.exe are guesses; say nothing about them
                got_py = f"{major}.{minor}{'t' if free else ''}"
                rejected.append(Rejected(path, source, f"is Python {got_py} ({version}), not {python}"))
            continue
        return Search(Interpreter(path, python, version, source), tuple(rejected), places(python, env))
    return Search(None, tuple(rejected), places(python, env))


def places(python: str, env: Mapping[str, str]) -> tuple[str, ...]:
    major, minor, free = split_python(python)
    xy, t = f"{major}.{minor}", "t" if free else ""
    tag = f"cp{major}{minor}"
    return (f"uv ({uv_dir(env)}/cpython-{xy}.*)", f"pyenv ({pyenv_dir(env)}/versions/{xy}.*)",
            f"manylinux ({manylinux_dir(env)}/{tag}-{tag}{t}/bin/python)", f"python{xy}{t} on PATH")


def _tool(name: str, env: Mapping[str, str], *extra: str) -> str | None:
    """`name` on the environment's PATH, else at one of `extra`; None when this machine has neither."""
    import shutil

    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found:
        return found
    return next((p for p in extra if os.path.isfile(p) and os.access(p, os.X_OK)), None)


def install_hint(python: str, env: Mapping[str, str]) -> str:
    """The exact commands that give this machine the row's interpreter, using only what it has: pyenv
    (on PATH, or under PYENV_ROOT), uv (on PATH), else uv installed from PyPI into a virtual
    environment of the running Python (no system package is touched). buildrows then finds the
    result where it looks (pyenv's versions, uv's install directory)."""
    import shlex

    major, minor, free = split_python(python)
    xy = f"{major}.{minor}"
    found = "; buildrows then finds it, no shell set-up needed"
    pyenv = _tool("pyenv", env, os.path.join(pyenv_dir(env), "bin", "pyenv"))
    uv = _tool("uv", env)
    if pyenv is not None:
        name = "pyenv" if _tool("pyenv", env) == pyenv else shlex.quote(pyenv)
        first = f"`{name} install {xy}t-dev`" if free else f"`{name} install {xy}`"
        return first + (f" (or `uv python install {xy}{'t' if free else ''}`)" if uv else "") + found
    if uv is not None:
        return f"`uv python install {xy}{'t' if free else ''}`{found}"
    # Neither: uv from PyPI, in a virtual environment of its own (PEP 668 systems refuse a bare pip install).
    venv = os.path.join(_home(env), ".cache", "buildrows", "uv-tool")
    py = sys.executable if os.path.isabs(sys.executable) else "python3"
    cmd = (f"{shlex.quote(py)} -m venv {shlex.quote(venv)} && {shlex.quote(venv)}/bin/pip install -q uv && "
           f"{shlex.quote(venv)}/bin/uv python install {xy}{'t' if free else ''}")
    return f"`{cmd}` (this machine has neither pyenv nor uv: this installs uv from PyPI, then the Python){found}"


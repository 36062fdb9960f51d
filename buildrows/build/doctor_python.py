"""Doctor's findings on the row's interpreter and its build requirements, and the probe that looks at the machine.

`Probe` is the one place doctor looks at the machine (tools, interpreters, installed
distributions); `MachineProbe` is the real one.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from buildrows.build.findings import Finding
from buildrows.policy.model import Driver, Row
from buildrows.provision.interpreters import Rejected

#: What a setup.py project without [build-system] builds with (PEP 517's fallback).
SETUPTOOLS_FALLBACK = ("setuptools>=40.8.0",)
FRONTEND = "build>=1.0"


def check_python(row: Row, python: str | None, ran: tuple[str | None, str | None] = (None, None), *,
                 rejected: Sequence[Rejected] = (), env: Mapping[str, str] | None = None,
                 places: Sequence[str] = ()) -> Finding:
    """The row's interpreter exists, runs, and is the row's version; `ran` is (version it reported,
    why it did not run); `rejected` the candidates a search turned down (a failing shim is not one)."""
    from buildrows.provision.interpreters import install_hint

    fix = install_hint(row.python, env if env is not None else {})
    if python is None:
        if rejected:
            turned = "; ".join(f"{r.path} {r.why}" for r in rejected[:4])
            return Finding("python", "missing", f"no Python {row.python} that runs: {turned}", fix)
        where = f" (looked in {', '.join(places)})" if places else ""
        return Finding("python", "missing", f"no Python {row.python}{where}", fix)
    version, problem = ran
    if problem is not None:
        return Finding("python", "missing", f"{python} does not run: {problem}", fix)
    if version is not None and version != row.python:
        return Finding("python", "missing", f"{python} is Python {version}, not {row.python}", fix)
    return Finding("python", "ok", f"{row.python} at {python}")


def check_environment_bin(added: str | None) -> Finding | None:
    """A note when the active environment's bin directory was not on PATH and buildrows added it."""
    if added is None:
        return None
    return Finding("PATH", "note", f"the active environment's {added} is not on PATH; buildrows adds it (at the end) "
                   "for this run, so its cmake and ninja are found and used by the build",
                   f'put it on PATH yourself to run its tools by hand: export PATH="{added}:$PATH"')


def build_requirements(project: Path, driver: Driver) -> tuple[list[str], str | None]:
    """The project's [build-system] requires (PEP 518), or why they cannot be read; for a project
    setuptools builds, with the setup_requires its backend adds (`setup_requires`)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    path = project / "pyproject.toml"
    if not path.is_file():
        if driver == "setup.py":
            return [*SETUPTOOLS_FALLBACK, *setup_requires(project)], None
        return [], f"{path} does not exist"
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        return [], f"{path}: {e}"
    system = doc.get("build-system", {})
    reqs = system.get("requires")
    if reqs is None:
        return [*SETUPTOOLS_FALLBACK, *(setup_requires(project) if driver == "setup.py" else [])], None
    if not isinstance(reqs, list) or not all(isinstance(r, str) for r in reqs):
        return [], f"{path}: [build-system] requires is not a list of strings"
    backend = system.get("build-backend")
    if driver == "setup.py" and (backend is None or str(backend).startswith("setuptools.build_meta")):
        return [*reqs, *setup_requires(project)], None
    return list(reqs), None


def setup_requires(project: Path) -> list[str]:
    """What setuptools' PEP 517 backend adds to a wheel build's requirements (its
    get_requires_for_build_wheel), which `build --no-isolation` refuses to go without:
    setup.py's `setup(setup_requires=[...])`, a literal list or a module-level name bound to one
    (qsimcirq 0.22.0: cmake~=3.31.0 and pybind11[global]), and setup.cfg's [options]
    setup_requires. Read, never run; a list setup.py computes is left to `build --provision`,
    which asks the backend itself."""
    import ast
    import configparser

    out: list[str] = []
    cfg = project / "setup.cfg"
    if cfg.is_file():
        parser = configparser.ConfigParser(interpolation=None)
        with contextlib.suppress(configparser.Error, OSError, UnicodeDecodeError):
            parser.read(cfg, encoding="utf-8")
            if parser.has_option("options", "setup_requires"):
                text = parser.get("options", "setup_requires").strip()  # one a line, or "a; b" on one
                items = text.splitlines() if "\n" in text else text.split(";")
                out += [r.strip() for r in items if r.strip() and not r.strip().startswith("#")]
    try:
        tree = ast.parse((project / "setup.py").read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return out
    bound = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if name != "setup":
            continue
        for kw in node.keywords:
            if kw.arg != "setup_requires":
                continue
            value = bound.get(kw.value.id, kw.value) if isinstance(kw.value, ast.Name) else kw.value
            if isinstance(value, (ast.List, ast.Tuple)):
                out += [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return [r for r in out if r.strip()]


def check_requirements(python: str, requirements: Sequence[str], installed: Mapping[str, str | None], *,
                       isolation: bool = False) -> list[Finding]:
    """Each requirement satisfied by a distribution installed for `python`. With `isolation` only
    the frontend is asked for (it runs in the row's Python even then), and the fix does not offer
    the --isolation the build already has."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    out: list[Finding] = []
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement as e:
            out.append(Finding(text, "missing", f"not a valid requirement: {e}", "fix the project's [build-system] requires"))
            continue
        if req.marker is not None and not req.marker.evaluate():
            continue
        have = installed.get(canonicalize_name(req.name))
        # --isolation fetches the project's requirements, never the frontend itself (it runs in the row's Python).
        frontend = canonicalize_name(req.name) == "build"
        fix = (f"{python} -m pip install '{text}' (the PEP 517 frontend runs in the row's Python, with --isolation too)"
               if isolation or frontend else
               f"{python} -m pip install '{text}' (or build with --isolation, which fetches it from the registry)")
        if have is None:
            out.append(Finding(req.name, "missing", f"not installed for {python}", fix))
        elif req.specifier and not req.specifier.contains(have, prereleases=True):
            out.append(Finding(req.name, "missing", f"{have} installed, the project needs {req.specifier}", fix))
        else:
            out.append(Finding(req.name, "ok", f"{have}"))
    return out


class Probe(Protocol):
    """What doctor needs to look at on the machine."""

    def tool(self, name: str, env: Mapping[str, str]) -> tuple[str | None, str | None]:
        """(path, `NAME --version` output) or (None, None)."""

    def distributions(self, python: str, names: Sequence[str]) -> dict[str, str | None]:
        """Installed version of each named distribution for that interpreter (canonical names)."""

    def interpreter(self, python: str) -> tuple[str | None, str | None]:
        """(the X.Y[t] version the interpreter reports, None) or (None, why it does not run)."""


_VERSION_SCRIPT = (
    "import sys, sysconfig\n"
    "print('%d.%d%s' % (*sys.version_info[:2], 't' if sysconfig.get_config_var('Py_GIL_DISABLED') else ''))"
)
_DIST_SCRIPT = (
    "import json,sys\nfrom importlib import metadata\nout={}\n"
    "for n in sys.argv[1:]:\n    try: out[n]=metadata.version(n)\n    except Exception: out[n]=None\n"
    "print(json.dumps(out))"
)


_TOOL_VERSIONS: dict[tuple[object, ...], str] = {}


def is_running_interpreter(python: str) -> bool:
    """Whether `python` is the interpreter buildrows runs on *and* sees the same packages, so its
    distributions can be read in-process. A virtual environment's python links to its base
    interpreter: the file it resolves to says nothing about its site-packages (a row environment
    of the same base as buildrows' own venv holds other packages), so environments are compared
    by their directory, and only two plain interpreters by the file they resolve to."""
    from buildrows.build.drivers import environment_bin

    mine, theirs = environment_bin(sys.executable), environment_bin(python)
    if mine is not None or theirs is not None:
        return mine == theirs
    return Path(python).resolve() == Path(sys.executable).resolve()


@dataclass
class MachineProbe:
    """The real machine: tools through `buildrows.process.runner`, distributions in-process when possible."""

    seen: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)

    def tool(self, name: str, env: Mapping[str, str]) -> tuple[str | None, str | None]:
        from buildrows.process.runner import capture, find_tool

        path = find_tool(name, env)
        if path is None:
            return None, None
        try:  # `--version` of one file, asked once per run (doctor asks it for every row)
            st = os.stat(path)
            ident: tuple[object, ...] | None = (os.path.realpath(path), st.st_mtime_ns, st.st_size)
        except OSError:
            ident = None
        if ident is not None and ident in _TOOL_VERSIONS:
            return path, _TOOL_VERSIONS[ident]
        got = capture([path, "--version"], env, timeout=30)
        if got.error is None and got.code == 0 and ident is not None:
            _TOOL_VERSIONS[ident] = got.output
        return path, (got.output if got.error is None else got.error)

    def interpreter(self, python: str) -> tuple[str | None, str | None]:
        from buildrows.process.runner import capture

        if is_running_interpreter(python):
            from buildrows.plan.host import host_python

            return host_python(), None

        got = capture([python, "-c", _VERSION_SCRIPT], timeout=60)
        if got.error is not None:
            return None, got.error
        last = got.output.strip().splitlines()[-1:] or ["(no output)"]
        if got.code != 0:
            return None, f"it exited with status {got.code}: {last[0][:200]}"
        return last[0].strip(), None

    def distributions(self, python: str, names: Sequence[str]) -> dict[str, str | None]:
        if is_running_interpreter(python):
            from importlib import metadata

            out: dict[str, str | None] = {}
            for n in names:
                try:
                    out[n] = metadata.version(n)
                except metadata.PackageNotFoundError:
                    out[n] = None
            return out
        from buildrows.process.runner import capture

        got = capture([python, "-c", _DIST_SCRIPT, *names], timeout=60)
        try:
            data = json.loads(got.output.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return dict.fromkeys(names)
        return {n: data.get(n) for n in names}

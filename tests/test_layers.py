"""The package's layers hold: `lint-imports` keeps pyproject.toml's stage order (and breaks on an
import that runs back up), and no module imports one that imports it back."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("grimp", reason="import-linter (the test extra) brings grimp")

REPO = Path(__file__).resolve().parents[1]
LINT = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")


_CYCLES = r"""
import json, sys
import grimp
graph = grimp.build_graph(sys.argv[1], exclude_type_checking_imports=True, cache_dir=None)
edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
print(json.dumps(edges))
"""


def _cycles(package: str, path: Path) -> list[list[str]]:
    """Every strongly connected set of two or more modules (an import cycle), type-only imports
    aside. The graph is built in a child process, so a copy of the package is read, not the
    buildrows this process has imported."""
    got = subprocess.run([sys.executable, "-c", _CYCLES, package], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(path), "PATH": str(Path(sys.executable).parent)}, cwd=path, timeout=120)
    edges: dict[str, list[str]] = json.loads(got.stdout)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "buildrows", tmp_path / "buildrows", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _lint(where: Path) -> subprocess.CompletedProcess[str]:
    assert LINT, "lint-imports is not installed (pip install -e '.[test]')"
    return subprocess.run([LINT, "--no-cache"], cwd=where, capture_output=True, text=True,
                          env={"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(where)}, timeout=120)


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert _cycles("buildrows", REPO) == []


def test_a_cycle_is_found(tmp_path: Path) -> None:
    where = _copy(tmp_path)
    (where / "buildrows" / "process" / "lock.py").write_text(
        (where / "buildrows" / "process" / "lock.py").read_text() + "\nfrom buildrows.process import runner  # noqa\n")
    runner = where / "buildrows" / "process" / "runner.py"
    runner.write_text(runner.read_text() + "\nfrom buildrows.process import lock  # noqa\n")
    assert ["buildrows.process.lock", "buildrows.process.runner"] in _cycles("buildrows", where)


def test_the_stage_order_holds() -> None:
    got = _lint(REPO)
    assert got.returncode == 0, got.stdout + got.stderr
    assert "Contracts: 1 kept, 0 broken." in got.stdout


def test_an_import_that_runs_back_up_breaks_the_contract(tmp_path: Path) -> None:
    where = _copy(tmp_path)
    host = where / "buildrows" / "plan" / "host.py"
    host.write_text(host.read_text() + "\n\ndef _upward() -> None:\n    from buildrows.build import drivers  # noqa: F401\n")
    got = _lint(where)
    assert got.returncode == 1
    assert "buildrows.plan is not allowed to import buildrows.build" in got.stdout
    assert "buildrows.plan.host -> buildrows.build.drivers" in got.stdout

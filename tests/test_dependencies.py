"""The runtime dependencies are exactly what the package imports: no dependency the package never
imports (pyelftools was one: only the tests read ELF with it), and no import without its
dependency."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]

#: Where a distribution's import name differs from its normalised name.
IMPORT_NAME = {"zlib-ng": "zlib_ng", "pyelftools": "elftools"}


def _imported() -> set[str]:
    found: set[str] = set()
    for path in (REPO / "buildrows").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {name for name in found if name not in sys.stdlib_module_names and name != "buildrows"}


def _declared() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = set()
    for requirement in project["dependencies"]:
        name = re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower()
        names.add(IMPORT_NAME.get(name, name.replace("-", "_")))
    return names


def test_runtime_dependencies_are_exactly_what_the_package_imports() -> None:
    imported, declared = _imported(), _declared()
    assert not declared - imported, f"declared but never imported by buildrows/: {sorted(declared - imported)}"
    assert not imported - declared, f"imported by buildrows/ but not declared: {sorted(imported - declared)}"

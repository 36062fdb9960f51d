"""Find the policy file and read its policy table.

buildrows.toml, or [tool.buildrows] in pyproject.toml; its size and nesting are bounded before TOML
parses it (buildrows.policy.bounds).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from buildrows.errors import BadInput

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG_NAMES = ("buildrows.toml", "pyproject.toml")


def find_config(path: str | Path | None) -> Path:
    """The policy file: PATH itself, PATH/buildrows.toml, or the current directory's; without PATH,
    inside a git repository, also the nearest directory above it up to the repository's root that
    has one (as git finds its root from any subdirectory)."""
    base = Path(path) if path is not None else Path.cwd()
    if path is None:
        from buildrows.policy.discover import repository_root

        top = repository_root(base)
        if top is not None:
            here = base.resolve()
            for d in (here, *here.parents):
                found = _policy_in(d)
                if found is not None:
                    return found
                if d == top:
                    break
            raise BadInput(
                f"no buildrows policy in {base} or the directories above it up to the repository root {top}: looked "
                "for buildrows.toml and [tool.buildrows] in pyproject.toml\n"
                "    fix: pass --config PATH, or create buildrows.toml (`buildrows init` starts one)")
    if base.is_dir():
        for name in CONFIG_NAMES:
            cand = base / name
            if cand.is_file() and (name != "pyproject.toml" or "[tool.buildrows" in _read(cand)):
                return cand
        raise BadInput(
            f"no buildrows policy in {base}: looked for buildrows.toml and [tool.buildrows] in pyproject.toml\n"
            "    fix: pass --config PATH, or create buildrows.toml (see README)"
        )
    if not base.is_file():
        raise BadInput(f"{base}: no such policy file\n    fix: pass --config with an existing buildrows.toml")
    return base


def _policy_in(d: Path) -> Path | None:
    for name in CONFIG_NAMES:
        cand = d / name
        if cand.is_file() and (name != "pyproject.toml" or "[tool.buildrows" in _read(cand)):
            return cand
    return None


def _read(p: Path) -> str:
    try:
        # utf-8-sig: Windows editors often start the file with a byte-order mark
        return p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"{p}: cannot read the policy file: {e}") from e


def read_policy(cfg: Path) -> tuple[str, dict[str, Any], tuple[str, ...]]:
    """The file's text, its policy table, and where that table sits in the file (("tool", "buildrows"))."""
    text = _read(cfg)
    from buildrows.policy.bounds import check_bounds

    check_bounds(text, cfg)  # before tomllib: deep nesting and long dotted keys cost it GBs (issue 37)
    try:
        doc: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"{cfg}: not valid TOML: {e}\n    fix: correct the syntax at the position shown") from e
    prefix: tuple[str, ...] = ()
    if cfg.name == "pyproject.toml":
        tool = doc.get("tool", {})
        if not isinstance(tool, dict) or not isinstance(tool.get("buildrows"), dict):
            raise BadInput(f"{cfg}: has no [tool.buildrows] table\n    fix: add one, or pass --config buildrows.toml")
        doc = tool["buildrows"]
        prefix = ("tool", "buildrows")
    return text, doc, prefix

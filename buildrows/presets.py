"""CMake presets for rows (SPEC §5): computed as data, rendered from `presets/*.j2`, then written.

`buildrows.plan.plan_row` decides everything about one row on this host (compiler, generator,
interpreter, cache variables, environment); `presets_data` renders the JSON through jinja2;
`render_presets` writes it and links it from the project's CMakeUserPresets.json.
jinja2 is imported only when a document is rendered, so the hook and `env` never pay for it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from buildrows.errors import BadInput, Refused
from buildrows.model import Policy, Row

# The plan is decided in buildrows.plan; re-exported for callers that import it from here.
from buildrows.plan import WINDOWS_CUDA_FLAG as WINDOWS_CUDA_FLAG
from buildrows.plan import RowPlan as RowPlan
from buildrows.plan import plan_row as plan_row
from buildrows.resources import cmake_module, resource_dir
from buildrows.toolchain import HostOs

PRESETS_FILE = "buildrows-presets.json"
USER_PRESETS = "CMakeUserPresets.json"
#: Workflow presets need schema 6 (CMake 3.25).
SCHEMA_VERSION = 6


#: The hidden configure, build and test presets every row inherits from.
BASE_PRESET = "buildrows-base"
#: The CMake module, copied beside the presets so they hold no path into buildrows' installation.
MODULE_FILE = "BuildrowsCudaArchs.cmake"
MODULE_IN_PRESETS = "${sourceDir}/" + MODULE_FILE
#: Cache variables that name the row itself: always on the row's preset, never in the base.
_ROW_OWN = ("BUILDROWS_ROW",)


def presets_data(plans: Sequence[RowPlan]) -> dict[str, Any]:
    """The presets document for these rows, as data (rendered through presets/buildrows-presets.json.j2)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resource_dir("presets"))),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["tojson"] = lambda v: json.dumps(v)
    rows = [_template_row(p) for p in plans]
    common = _common(rows)
    text = env.get_template("buildrows-presets.json.j2").render(
        version=SCHEMA_VERSION, base=BASE_PRESET, common=common, rows=rows)
    data: dict[str, Any] = json.loads(text)
    return data


def _template_row(plan: RowPlan) -> dict[str, Any]:
    g = plan.generator
    cache = dict(plan.cache)
    if cache.get("CMAKE_PROJECT_TOP_LEVEL_INCLUDES") == cmake_module().as_posix():
        cache["CMAKE_PROJECT_TOP_LEVEL_INCLUDES"] = MODULE_IN_PRESETS  # the copy beside the presets
    return {
        "name": plan.row.name,
        "display": f"{plan.row.name} ({'CUDA ' + plan.row.cuda.dotted if plan.row.cuda else 'CPU'}, "
                   f"Python {plan.row.python}, {g.generator})",
        "generator": g.generator,
        "toolset": g.toolset,
        "architecture": g.architecture,
        "cache": cache,
        "environment": dict(plan.environment),
    }


def _common(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Move what every row shares into the base preset (removing it from the rows); keep the rest per row."""
    common: dict[str, Any] = {}
    for key in ("generator", "toolset", "architecture"):
        values = {r[key] for r in rows}
        common[key] = values.pop() if len(values) == 1 else None
        if common[key] is not None:
            for r in rows:
                r[key] = None
    for key in ("cache", "environment"):
        shared = dict(rows[0][key])
        for r in rows[1:]:
            shared = {k: v for k, v in shared.items() if r[key].get(k) == v}
        for k in _ROW_OWN:
            shared.pop(k, None)
        common[key] = shared
        for r in rows:
            r[key] = {k: v for k, v in r[key].items() if k not in shared}
    return common


def presets_text(plans: Sequence[RowPlan]) -> str:
    return json.dumps(presets_data(plans), indent=2) + "\n"


def gitignore_entries(project: Path) -> list[str]:
    """The rendered files (machine-specific: compiler and interpreter paths) that belong in the
    project's .gitignore and are not ignored yet, as /-anchored patterns."""
    wanted = [PRESETS_FILE, MODULE_FILE, USER_PRESETS]
    return [f"/{name}" for name in wanted if not _ignored(project, name)]


def _ignored(project: Path, name: str) -> bool:
    """Whether git ignores project/name: `git check-ignore` inside a work tree, else .gitignore's lines."""
    import shutil
    import subprocess

    git = shutil.which("git")
    if git is not None:
        try:
            proc = subprocess.run([git, "check-ignore", "-q", "--no-index", name], cwd=project, capture_output=True,
                                  timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            proc = None
        if proc is not None and proc.returncode in (0, 1):
            return proc.returncode == 0
    path = project / ".gitignore"
    try:
        lines = {ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()} if path.is_file() else set()
    except (OSError, UnicodeDecodeError):
        return False
    return name in lines or f"/{name}" in lines


def add_to_gitignore(project: Path, entries: Sequence[str]) -> Path:
    """Append the entries to project/.gitignore (created if absent): one write, never truncating."""
    from buildrows.envfile import append_file

    path = project / ".gitignore"
    append_file(path, "# rendered by buildrows (machine-specific)\n" + "".join(f"{e}\n" for e in entries))
    return path


@dataclass(frozen=True)
class Rendered:
    """What `render_presets` wrote and decided."""

    paths: tuple[Path, ...]
    plans: tuple[RowPlan, ...]


def render_presets(policy: Policy, rows: Sequence[Row], project_dir: str | Path, env: Mapping[str, str], *,
                   host: HostOs | None = None, check_toolchain: bool = True) -> Rendered:
    """Write `buildrows-presets.json` for the rows into project_dir and include it from
    CMakeUserPresets.json (created if absent; the user's own presets kept; idempotent).

    Every row is planned before anything is written, so a refusal leaves the project untouched.
    """
    project = Path(project_dir)
    if not project.is_dir():
        raise BadInput(f"the project directory {project} does not exist\n    fix: pass --project DIR")
    return render_plans([plan_row(policy, r, env, host=host, check_toolchain=check_toolchain) for r in rows], project)


def render_plans(plans: Sequence[RowPlan], project_dir: str | Path) -> Rendered:
    """Write already-decided plans (`render_presets` without the planning), as `build` does after
    choosing the row's interpreter and toolkit."""
    project = Path(project_dir)
    if not project.is_dir():
        raise BadInput(f"the project directory {project} does not exist\n    fix: pass --project DIR")
    if not plans:
        raise BadInput("no rows to render\n    fix: name at least one row")
    _refuse_name_clash(project, [p.row.name for p in plans])
    user_path = project / USER_PRESETS
    user_text = _updated_user_presets(user_path)
    out = project / PRESETS_FILE
    _refuse_foreign_file(out)
    module = project / MODULE_FILE
    module_text = cmake_module().read_text(encoding="utf-8")
    _refuse_foreign_module(module, module_text)
    _write(out, presets_text(plans))
    if not module.is_file() or module.read_text(encoding="utf-8") != module_text:
        _write(module, module_text)
    if user_text is not None:
        _write(user_path, user_text)
    return Rendered((out, module, user_path), tuple(plans))


def _refuse_foreign_module(path: Path, ours: str) -> None:
    """The module copy is ours to refresh; a file of that name with other content is the project's."""
    if not path.exists() and not path.is_symlink():
        return
    try:
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
    except (OSError, UnicodeDecodeError):
        text = ""
    if text.splitlines()[:1] != ours.splitlines()[:1]:
        raise BadInput(f"{path}: exists and is not buildrows' CMake module; it will not be overwritten\n"
                       "    fix: rename or remove that file, then render again")


def _refuse_name_clash(project: Path, names: list[str]) -> None:
    """A row named like a preset of the project's own CMakePresets.json would make cmake fail."""
    path = project / "CMakePresets.json"
    if not path.is_file():
        return
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # cmake reports its own file's problems
    theirs = {p.get("name") for key, items in data.items() if key.endswith("Presets") and isinstance(items, list)
              for p in items if isinstance(p, dict)}
    clash = sorted(set(names) & theirs)
    if clash:
        raise Refused(f"{path} already has presets named {', '.join(clash)}; cmake refuses duplicate names\n"
                      "    fix: rename those presets in CMakePresets.json")


def _refuse_foreign_file(path: Path) -> None:
    """Our presets file is ours to replace; a file of that name that buildrows did not write is not."""
    if not path.exists() and not path.is_symlink():
        return
    try:
        data = _strict_json(path)
        presets = data.get("configurePresets") if isinstance(data, dict) else None
        vendor = data.get("vendor") if isinstance(data, dict) else None
        marked = isinstance(vendor, dict) and isinstance(vendor.get("buildrows"), dict)
        # what earlier versions wrote: every configure preset carries BUILDROWS_ROW
        earlier = isinstance(presets, list) and bool(presets) and all(
            isinstance(p, dict) and isinstance(p.get("cacheVariables"), dict) and "BUILDROWS_ROW" in p["cacheVariables"]
            for p in presets)
        ours = marked or earlier
    except BadInput:
        ours = False
    if not ours:
        raise BadInput(f"{path}: exists and was not written by buildrows; it will not be overwritten\n"
                       "    fix: rename or remove that file, then render again")


def _strict_json(path: Path) -> Any:
    """Parse a JSON file that may be rewritten: refuse what a rewrite would silently change
    (duplicate keys, NaN/Infinity, numbers beyond a double)."""
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in items:
            if k in out:
                raise ValueError(f"duplicate key {k!r}; rewriting the file would drop one of them")
            out[k] = v
        return out

    def number(text: str) -> float:
        value = float(text)
        if value in (float("inf"), float("-inf")):
            raise ValueError(f"the number {text[:40]} is beyond a double")
        return value

    def constant(text: str) -> Any:
        raise ValueError(f"{text} is not JSON")

    if not path.is_file():
        raise BadInput(f"{path}: exists but is not a regular file; buildrows will not replace it\n"
                       "    fix: move it away, then render again")
    try:
        return json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=pairs, parse_float=number,
                          parse_constant=constant)
    except (ValueError, RecursionError) as e:
        raise BadInput(f"{path}: not valid JSON, or not JSON buildrows can rewrite unchanged ({e}); "
                       "buildrows will not overwrite it\n"
                       "    fix: correct or remove the file, then render again") from e
    except OSError as e:
        raise BadInput(f"{path}: cannot be read ({e}); buildrows will not overwrite it\n"
                       "    fix: check its permissions") from e


def _updated_user_presets(path: Path) -> str | None:
    """The new text of CMakeUserPresets.json, or None when it already includes our file."""
    if path.exists() or path.is_symlink():
        data = _strict_json(path)
        if not isinstance(data, dict):
            raise BadInput(f"{path}: expected a JSON object\n    fix: correct or remove the file")
    else:
        data = {"version": SCHEMA_VERSION}
    includes = data.get("include", [])
    if not isinstance(includes, list):
        raise BadInput(f"{path}: `include` must be a list\n    fix: correct the file")
    if PRESETS_FILE in includes:
        return None
    data["include"] = [*includes, PRESETS_FILE]
    version = data.get("version")
    if not isinstance(version, int) or version < 4:  # `include` needs schema 4
        data["version"] = SCHEMA_VERSION
    return json.dumps(data, indent=2) + "\n"


def _write(path: Path, text: str) -> None:
    """Replace atomically; through a symlink to its target, keeping an existing file's mode."""
    if path.is_symlink():
        path = path.resolve()
    mode = path.stat().st_mode & 0o7777 if path.is_file() else None
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    if mode is not None:
        os.chmod(tmp, mode)
    os.replace(tmp, path)

"""CMake presets for rows (SPEC §5): computed as data, rendered from `presets/*.j2`, then written.

`buildrows.plan.row.plan_row` decides everything about one row on this host (compiler, generator,
interpreter, cache variables, environment); `presets_data` renders the JSON through jinja2;
`render_presets` writes it and links it from the project's CMakeUserPresets.json.
jinja2 is imported only when a document is rendered, so the hook and `env` never pay for it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from buildrows.errors import BadInput, Refused
from buildrows.frozen import Frozen, frozen_dataclass

# The plan is decided in buildrows.plan.row; re-exported for callers that import it from here.
from buildrows.plan.row import WINDOWS_CUDA_FLAG as WINDOWS_CUDA_FLAG
from buildrows.plan.row import RowPlan as RowPlan
from buildrows.plan.row import plan_row as plan_row
from buildrows.plan.toolchain import HostOs
from buildrows.policy.model import Policy, Row
from buildrows.resources import cmake_module, resource_dir

if TYPE_CHECKING:
    from buildrows.ui import UI

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
    if not g.multi_config:
        # A single-config tree builds the configuration chosen at configure time.
        cache.setdefault("CMAKE_BUILD_TYPE", "Release")
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
    from buildrows.render.envfile import append_file

    path = project / ".gitignore"
    append_file(path, "# rendered by buildrows (machine-specific)\n" + "".join(f"{e}\n" for e in entries))
    return path


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Rendered(Frozen):
    """What `render_presets` wrote and decided."""

    paths: tuple[Path, ...]
    plans: tuple[RowPlan, ...]
    #: What the user must know about a file of theirs that was changed (a raised schema version).
    notes: tuple[str, ...] = ()


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
    user_text, notes = _updated_user_presets(user_path)
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
    return Rendered((out, module, user_path), tuple(plans), tuple(notes))


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
    """Refuse, before anything is written, a row named like a preset of the project's or the
    user's: CMakePresets.json, CMakeUserPresets.json (which implicitly includes the former) and
    every file they include, recursively. cmake would reject every preset of the project on a
    duplicate name, the user's own included."""
    clashes: list[str] = []
    seen: set[Path] = set()
    ours = (project / PRESETS_FILE).resolve()
    wanted = set(names)

    def visit(path: Path, via: str) -> None:
        real = path.resolve()
        if real in seen or real == ours or not path.is_file():
            return  # our own file is replaced; a missing include is cmake's to report
        seen.add(real)
        try:
            data = json.loads(path.read_text(encoding="utf-8-sig"))
        except (OSError, ValueError, RecursionError):
            return  # cmake reports its own file's problems
        if not isinstance(data, dict):
            return
        for key, items in data.items():
            if key.endswith("Presets") and isinstance(items, list):
                for p in items:
                    if isinstance(p, dict) and p.get("name") in wanted:
                        kind = key[: -len("Presets")]
                        clashes.append(f"{path}{via}: {kind} preset {p['name']!r}")
        includes = data.get("include", [])
        for inc in includes if isinstance(includes, list) else []:
            if isinstance(inc, str) and "$" not in inc.replace("${sourceDir}", ""):
                target = Path(inc.replace("${sourceDir}", str(project)))
                visit(target if target.is_absolute() else path.parent / target, f" (included from {path.name})")

    visit(project / "CMakePresets.json", "")
    visit(project / USER_PRESETS, "")
    if clashes:
        raise Refused("presets named like the rows to render already exist; cmake refuses duplicate names, and "
                      "every preset of the project would stop working:\n" + "\n".join(f"    {c}" for c in clashes)
                      + "\n    fix: rename those presets (or render other rows); nothing was written")


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


#: The first presets schema with `include`.
INCLUDE_VERSION = 4


def _updated_user_presets(path: Path) -> tuple[str | None, list[str]]:
    """The new text of CMakeUserPresets.json (None when it already includes our file), and what
    the output must say about it."""
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
        return None, []
    data["include"] = [*includes, PRESETS_FILE]
    notes: list[str] = []
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < INCLUDE_VERSION:
        # cmake reads `include` only from schema 4 on; an included file may be newer (ours is 6).
        data["version"] = INCLUDE_VERSION
        notes.append(f"{path}: schema version {version!r} -> {INCLUDE_VERSION}: including {PRESETS_FILE} needs "
                     f"`include`, which cmake reads from version {INCLUDE_VERSION} on (CMake 3.23); the file's "
                     "presets are otherwise unchanged")
    return json.dumps(data, indent=2) + "\n", notes


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


def decisions(plans: Sequence[RowPlan]) -> list[str]:
    """The generator and CUDA compiler chosen, each with its reason once (not once per row)."""
    lines: list[str] = []
    for what, key in (("generator", _generator), ("CUDA compiler", _compiler), ("interpreter", _interpreter)):
        groups: dict[str, list[str]] = {}
        for plan in plans:
            text = key(plan)
            if text:
                groups.setdefault(text, []).append(plan.row.name)
        for text, names in groups.items():
            who = "every row" if len(names) == len(plans) and len(plans) > 1 else ", ".join(names)
            lines.append(f"{what} for {who}: {text}")
    return lines


def _generator(plan: RowPlan) -> str:
    g = plan.generator
    return f"{g.generator}" + (f" (toolset {g.toolset})" if g.toolset else "") + f" - {g.reason}"


def _compiler(plan: RowPlan) -> str:
    return plan.compiler.describe() if plan.compiler is not None else ""


def _interpreter(plan: RowPlan) -> str:
    return plan.interpreter.describe() if plan.interpreter is not None else ""


def gitignore_advice(project: Path, write: bool, ui: UI) -> None:
    """Say which rendered files belong in .gitignore; with `write`, append them."""
    from buildrows.render.presets import add_to_gitignore, gitignore_entries

    missing = gitignore_entries(project)
    if not missing:
        return
    if write:
        path = add_to_gitignore(project, missing)
        ui.info(f"added to {path}: {' '.join(missing)}")
    else:
        ui.info(f"add to {project / '.gitignore'} (rendered, machine-specific files): {' '.join(missing)}  "
                "(`buildrows render --gitignore ...` appends them)")

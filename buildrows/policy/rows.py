"""Selecting rows by name or glob, and presenting them (rows, show)."""

from __future__ import annotations

import fnmatch
import re
from functools import cache
from typing import Any

from buildrows.errors import BadInput, Refused
from buildrows.policy.model import Policy, Row


def select(policy: Policy, selectors: list[str] | tuple[str, ...]) -> list[Row]:
    """Rows matching any selector (exact names or globs such as `linux-*-cu13*-py312`), in policy order."""
    if not selectors:
        return list(policy.rows)
    chosen: list[Row] = []
    for sel in selectors:
        hits = [r for r in policy.rows if fnmatch.fnmatchcase(r.name, sel)]
        if not hits:
            refuse_excluded_python(policy, sel)
            import difflib  # only on the error path

            close = difflib.get_close_matches(sel, [r.name for r in policy.rows], n=3)
            hint = ("did you mean " + ", ".join(close) + "?") if close else "`buildrows rows` lists the rows"
            raise BadInput(f"no row of {policy.path} matches {sel!r}\n    fix: {hint}")
        for r in hits:
            if r not in chosen:
                chosen.append(r)
    return chosen


@cache
def _py_tag() -> re.Pattern[str]:
    return re.compile(r"-py3(\d{1,2})(t?)$", re.ASCII)


def excluded_python(policy: Policy, selector: str) -> tuple[str, str] | None:
    """(version, reason) when the selector names a Python the policy excludes (`...-py314`)."""
    m = _py_tag().search(selector)
    if m is None:
        return None
    version = f"3.{m.group(1)}{m.group(2)}"
    why = dict(policy.excluded_pythons).get(version)
    return (version, why) if why is not None else None


def refuse_excluded_python(policy: Policy, selector: str) -> None:
    """A row of an excluded Python is refused with the policy's reason, not a "did you mean"."""
    hit = excluded_python(policy, selector)
    if hit is None:
        return
    version, why = hit
    built = ", ".join(policy.pythons)
    raise Refused(f"{selector}: Python {version} is excluded by {policy.path} ({policy.key('python.excluded')}): "
                  f"{why}\n    fix: choose a Python the policy builds ({built}), or move {version} from "
                  f"{policy.key('python.excluded')} to {policy.key('python.versions')}")


def select_one(policy: Policy, selector: str) -> Row:
    rows = select(policy, [selector])
    if len(rows) != 1:
        raise BadInput(
            f"{selector!r} matches {len(rows)} rows ({', '.join(r.name for r in rows[:6])}{', ...' if len(rows) > 6 else ''})\n"
            "    fix: name exactly one row"
        )
    return rows[0]


def row_json(row: Row) -> dict[str, Any]:
    """The row as the stable JSON interface other tools rely on."""
    out: dict[str, Any] = {
        "name": row.name,
        "platform": row.platform,
        "os": row.os,
        "machine": row.machine,
        "cuda": row.cuda.dotted if row.cuda else None,
        "python": row.python or None,
        "archs": row.archs.dotted if row.archs else [],
        "ptx": ([a.dotted for a in row.archs.ptx][-1] if row.archs and row.archs.ptx else None),
        "ptx_only": [a.dotted for a in row.archs.ptx_only] if row.archs else [],
        "torch_cuda_arch_list": row.archs.torch_cuda_arch_list if row.archs else None,
        "cmake_cuda_architectures": row.archs.cmake_cuda_architectures if row.archs else None,
        "local_version": row.local_tag or None,
        "image": row.image,
        "cache": dict(row.cache),
    }
    if row.runtime is not None:
        out["runtime"] = {"mode": row.runtime.mode, "requirements": list(row.runtime.requirements),
                          "library_dir": row.runtime.library_dir or None}
    if row.empty_reason is not None:
        out["empty_reason"] = row.empty_reason
    return out


def check_json(policy: Policy, row: Row) -> dict[str, Any]:
    """What `buildrows check` holds this row's wheel to beyond the defaults, each with its reason."""
    rules = [r for r in policy.check.files if r.applies_to(row.name)]
    rt = row.runtime if row.cuda is not None else None
    return {
        "runtime_mode": rt.mode if rt is not None else None,
        "runtime_reason": rt.reason or None if rt is not None else None,
        "runtime_jit": list(rt.jit) or None if rt is not None else None,  # kernels compiled at run time by these
        "rpath_exceptions": [
            {k: v for k, v in (("entry", e.entry), ("reaches", e.reaches), ("libraries", list(e.libraries) or None),
                               ("climbs_out", e.climbs_out or None), ("reason", e.reason), ("source", e.source))
             if v is not None}
            for e in policy.check.rpath_exceptions],
        "libraries": [{k: v for k, v in (("files", list(r.files)), ("archs", r.archs.tokens if r.archs else None),
                                         ("ptx", [a.dotted for a in r.archs.ptx] if r.archs else None),
                                         ("per_train", r.per_train or None), ("vendored", r.vendored or None),
                                         ("host_only", r.host_only or None), ("dlopens", list(r.dlopens) or None),
                                         ("system", list(r.system) or None),
                                         ("provided_by", dict(r.provided_by) or None),
                                         ("reason", r.reason), ("source", r.source)) if v is not None}
                      for r in policy.check.libraries if r.applies_to(row.name)],
        "required": [{"files": list(r.files), "reason": r.reason, "source": r.source}
                     for r in rules if r.kind == "required"],
        "no_cuda": [{"files": list(r.files), "allow": list(r.allow), "reason": r.reason, "source": r.source}
                    for r in rules if r.kind == "no-cuda"],
    }


def _check_lines(policy: Policy, row: Row) -> list[str]:
    data = check_json(policy, row)
    lines = []
    if data["runtime_mode"] is not None:
        mode = data["runtime_mode"] + (f" ({data['runtime_reason']})" if data["runtime_reason"] else "")
        lines.append(f"  {'check.runtime_mode':26} {mode:60}  <- {row.runtime.source if row.runtime else ''}")
    if data["runtime_jit"]:
        jit = "kernels compiled at run time by " + ", ".join(data["runtime_jit"]) + "; no device code of its own"
        lines.append(f"  {'check.runtime_jit':26} {jit:60}  <- {row.runtime.source if row.runtime else ''}")
    for e in data["rpath_exceptions"]:
        what = f"entry {e['entry']}" if "entry" in e else f"reaches {e['reaches']}"
        if "libraries" in e:
            what += f" (in {', '.join(e['libraries'])})"
        if e.get("climbs_out"):
            what += " (climbs out of site-packages)"
        lines.append(f"  {'check.rpath_exception':26} {what}: {e['reason']}  <- {e['source']}")
    for r in data["required"]:
        lines.append(f"  {'check.required':26} {', '.join(r['files'])}: {r['reason']}  <- {r['source']}")
    for r in data["no_cuda"]:
        allow = f" (may link {', '.join(r['allow'])})" if r["allow"] else ""
        lines.append(f"  {'check.no_cuda':26} {', '.join(r['files'])}{allow}: {r['reason']}  <- {r['source']}")
    for r in data["libraries"]:
        rule = ("vendored" if r.get("vendored") else "its train's list" if r.get("per_train") else
                "host-only (no device code)" if r.get("host_only") else "the row's list" if "archs" not in r else
                "archs " + " ".join(r["archs"]) + (f" (PTX {' '.join(r['ptx'])})" if r.get("ptx") else " (no PTX)"))
        if r.get("dlopens"):
            rule += f"; dlopens {', '.join(r['dlopens'])}"
        if r.get("system"):
            rule += f"; the system provides {', '.join(r['system'])}"
        if r.get("provided_by"):
            rule += "; " + ", ".join(f"{d} installs {so}" for so, d in r["provided_by"].items())
        lines.append(f"  {'check.libraries':26} {', '.join(r['files'])}: {rule}: {r['reason']}  <- {r['source']}")
    return lines


def human(value: Any) -> str:
    """A value as a person reads it: no Python reprs (None, ['7.5', ...], {'K': 'V'})."""
    if value is None or value == [] or value == {}:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return " ".join(human(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={human(v)}" for k, v in value.items())
    return str(value)


def show_lines(policy: Policy, row: Row) -> list[str]:
    """Every resolved value of a row and where it came from, as a person reads them."""
    data = row_json(row)
    runtime = data.pop("runtime", None)
    if runtime is not None:  # one line per field, not a dict
        data["runtime_requirements"] = runtime["requirements"]
        data["runtime_library_dir"] = runtime["library_dir"]
    prov = dict(row.provenance)
    lines = [f"row {row.name}  (policy {policy.path})"]
    keyed = {
        "python": "python", "cuda": "cuda", "archs": "archs", "ptx": "ptx",
        "torch_cuda_arch_list": "archs", "cmake_cuda_architectures": "archs", "image": "image",
        "runtime_requirements": "runtime", "runtime_library_dir": "runtime", "empty_reason": "empty_reason",
    }
    derived = {"os": "platform name", "machine": "platform name", "platform": "platforms." + row.platform,
               "local_version": "derived from cuda", "cache": "project.cache + platform cache + cuda-option"}
    for key, value in data.items():
        if key == "name":
            continue
        src = prov.get(keyed.get(key, ""), "") or derived.get(key, "")
        text = human(value)
        lines.append(f"  {key:26} {text:60}  <- {src}" if src else f"  {key:26} {text}")
    lines.append(f"  {'driver':26} {policy.project.driver:60}  <- {prov.get('driver', 'project.driver')}")
    lines.append(f"  {'source_dir':26} {policy.project.source_dir}")
    for py, why in policy.excluded_pythons:
        lines.append(f"  {'excluded python ' + py:26} {why}  <- {policy.key('python.excluded')}")
    if row.archs is not None:
        lines.append(f"  {'nvcc_flags':26} {' '.join(row.archs.nvcc_flags)}")
    return lines + _check_lines(policy, row)

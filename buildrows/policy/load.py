"""Load buildrows.toml (or [tool.buildrows] in pyproject.toml) into a frozen Policy.

Every problem of the file is collected and reported at once, each with file, line, row and field.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

from buildrows.errors import raise_problems
from buildrows.policy import schema
from buildrows.policy.build_rows import RowBuilder
from buildrows.policy.build_sections import SectionBuilder
from buildrows.policy.model import FileRule, LibraryRule, Policy, Row
from buildrows.policy.problems import Locator
from buildrows.policy.read import find_config, read_policy


def load_policy(path: str | Path | None = None) -> Policy:
    """Read, validate and resolve a policy; raise one error that lists every problem."""
    cfg = find_config(path)
    text, doc, prefix = read_policy(cfg)
    return policy_from_dict(doc, str(cfg), Locator(text, prefix), prefix)


def _copied(value: Any) -> Any:
    """A deep copy of parsed TOML (tables, arrays, scalars) without importing `copy` (the hook
    starts on every CI job); anything else goes through copy.deepcopy."""
    if type(value) is dict:
        return {k: _copied(v) for k, v in value.items()}
    if type(value) is list:
        return [_copied(v) for v in value]
    if value is None or type(value) in (str, int, float, bool):
        return value
    import copy

    return copy.deepcopy(value)


def policy_from_dict(doc: dict[str, Any], file: str, locate: schema.Locate | None = None,
                     prefix: tuple[str, ...] = ()) -> Policy:
    """Validate and resolve a policy table; `prefix` is where it sits in its file (("tool", "buildrows"))."""
    loc: schema.Locate = locate or (lambda _p: None)
    doc = _copied(doc)
    problems = schema.validate(doc, file, loc, prefix)
    if "python" not in doc or "platforms" not in doc:
        raise_problems(problems, f"{file}: invalid policy")
    resolver = _Resolver(doc, file, loc, prefix)
    resolver.problems = problems
    return resolver.resolve()


class _Resolver(SectionBuilder, RowBuilder):
    """The whole policy: its sections built (SectionBuilder, RowBuilder), then checked together."""

    def resolve(self) -> Policy:
        d = self.doc
        project = self._project(d.get("project", {}))
        pythons = self._pythons(d["python"])
        excluded = tuple((k, v) for k, v in d["python"].get("excluded", {}).items())
        trains = self._trains(d.get("cuda", {}).get("trains", []))
        pr_trains = self._pull_request_trains(d.get("cuda", {}).get("pull-request", []), trains)
        build_only = self._build_only(d.get("cuda", {}).get("build-only", []), trains)
        runtimes = self._runtimes(d.get("cuda", {}).get("runtime", {}))
        check = self._check(d.get("check", {}))
        rows: list[Row] = []
        for pname, pdoc in d["platforms"].items():
            rows += self._platform_rows(pname, pdoc, pythons, trains, runtimes, project)
        rows += self._empty_rows(d.get("empty", {}), trains)
        ci = self._ci(d.get("ci", {}), project)
        compiler_cache = self._compiler_cache(d.get("compiler-cache", {}))
        repair = self._repair(d.get("repair", {}))
        seen: set[str] = set()
        for r in rows:
            if r.name in seen:
                self.problem(("empty", r.name), f"row {r.name} is declared twice", hint="give the empty row its own name")
            seen.add(r.name)
        scoped: list[FileRule | LibraryRule] = [*check.files, *check.libraries]
        for rule in scoped:
            for g in rule.rows:
                if not any(fnmatch.fnmatchcase(r.name, g) for r in rows):
                    self.problem(("check",), f"rows = {g!r} ({rule.source}) matches no row of the policy",
                                 hint="`buildrows rows` lists the row names; globs such as \"linux-*-cu*\" work")
        if not self.problems and not any(r.empty_reason is None for r in rows):
            self.problem(("platforms",), "the policy publishes no row",
                         hint=f"give a platform (e.g. [{self.key('platforms', 'linux-x86_64')}]) `trains = [...]` with their "
                              "architecture lists, or `cpu = true`")
        raise_problems(self.problems, f"{self.file}: the policy cannot be used")
        return Policy(
            path=self.file,
            project=project,
            pythons=pythons,
            excluded_pythons=excluded,
            trains=trains,
            runtimes=tuple(sorted(runtimes.items())),
            platforms=tuple(d["platforms"]),
            rows=tuple(rows),
            ci=ci,
            check=check,
            compiler_cache=compiler_cache,
            repair=repair,
            pull_request_trains=pr_trains,
            build_only_trains=build_only,
            pull_request_fallback=d.get("cuda", {}).get("pull-request-fallback", "newest"),
            pull_request_python=d.get("cuda", {}).get("pull-request-python", "newest"),
            key_prefix="".join(f"{k}." for k in self.prefix),
        )

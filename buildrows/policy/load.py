"""Load buildrows.toml (or [tool.buildrows] in pyproject.toml) into a frozen Policy.

Every problem of the file is collected and reported at once, each with file, line, row and field.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from functools import cache
from pathlib import Path
from typing import Any, cast

from buildrows.errors import BadInput, Problem, raise_problems
from buildrows.policy import schema
from buildrows.policy.archs import (
    ArchError,
    ArchList,
    Train,
    beyond_data,
    check_train_supports,
    parse_arch_list,
    suggested_archs,
    train_table,
)
from buildrows.policy.model import (
    DEFAULT_WRITE_REFS,
    MODES_WITH_REASON,
    CheckPolicy,
    Ci,
    CompilerCacheSettings,
    Driver,
    FileRule,
    GpuTest,
    LibraryRule,
    Machine,
    Os,
    Policy,
    Project,
    RepairSettings,
    Row,
    RpathException,
    Runtime,
    RuntimeMode,
    Submodules,
)
from buildrows.policy.provided import provided_by_problem
from buildrows.resources import data_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG_NAMES = ("buildrows.toml", "pyproject.toml")


@cache
def _row_name_chars() -> re.Pattern[str]:
    return re.compile(r"[A-Za-z0-9._+-]+")


@cache
def _py() -> re.Pattern[str]:  # ASCII digits; fullmatch: no trailing newline
    return re.compile(r"3\.([0-9]{1,2})(t?)")


@cache
def _env_name() -> re.Pattern[str]:
    return re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


@cache
def _repair_plat() -> re.Pattern[str]:  # [repair] plat, without the machine
    return re.compile(r"manylinux_[0-9]+_[0-9]+|manylinux(?:1|2010|2014)|musllinux_[0-9]+_[0-9]+", re.ASCII)


@cache
def _soname() -> re.Pattern[str]:  # [[check.libraries]] dlopens
    return re.compile(r"lib[A-Za-z0-9_+-]+\.so\.[0-9]+(?:\.[0-9]+)*", re.ASCII)


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


class Locator:
    """Finds the line of a dotted key in TOML text (tables, arrays of tables, keys)."""

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?")
    _KEY = re.compile(r"^\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_.\-\" ]+?)\s*=")

    def __init__(self, text: str, prefix: tuple[str, ...] = ()) -> None:
        self.prefix = prefix
        self.index: dict[tuple[str | int, ...], int] = {}
        counts: dict[tuple[str, ...], int] = {}
        current: tuple[str | int, ...] = ()
        for n, line in enumerate(text.splitlines(), start=1):
            m = self._HEADER.match(line)
            if m:
                keys = tuple(_split_key(m.group(2)))
                if m.group(1) == "[[":
                    i = counts.get(keys, 0)
                    counts[keys] = i + 1
                    current = (*keys, i)
                else:
                    current = keys
                for j in range(1, len(current) + 1):
                    self.index.setdefault(current[:j], n)
                continue
            m = self._KEY.match(line)
            if m:
                keys = tuple(_split_key(m.group(1)))
                for j in range(1, len(keys) + 1):
                    self.index.setdefault((*current, *keys[:j]), n)
                # inline tables: `archs = { "13.0" = ... }` puts nested keys on this line too
                for inner in re.findall(r"[{,]\s*(\"[^\"]*\"|[A-Za-z0-9_\-]+)\s*=", line):
                    self.index.setdefault((*current, *keys, inner.strip('"')), n)

    def __call__(self, path: tuple[str | int, ...]) -> int | None:
        full: tuple[str | int, ...] = (*self.prefix, *path)
        while full:
            if full in self.index:
                return self.index[full]
            full = full[:-1]
        return None


def _split_key(text: str) -> list[str]:
    return [p.strip().strip('"').strip("'") for p in re.findall(r'"[^"]*"|\'[^\']*\'|[^.]+', text)]


def load_policy(path: str | Path | None = None) -> Policy:
    """Read, validate and resolve a policy; raise one error that lists every problem."""
    cfg = find_config(path)
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


def _defaults() -> dict[str, Any]:
    path = data_file("runtime_defaults.toml")
    return cast(dict[str, Any], tomllib.loads(path.read_text(encoding="utf-8")))


def default_runtimes() -> dict[int, Runtime]:
    """The seed runtime packages and library directories (used when no policy is given)."""
    raw = _defaults()["runtime"]
    return {
        int(k): Runtime(tuple(v["requirements"]), v["library-dir"], "default (policy.py seed values)")
        for k, v in raw.items()
    }


_PLATFORM_PARTS: dict[str, tuple[Os, Machine]] = {
    "linux-x86_64": ("linux", "x86_64"),
    "linux-aarch64": ("linux", "aarch64"),
    "windows-amd64": ("windows", "amd64"),
}


def row_name(platform: str, cuda: Train | None, python: str) -> str:
    return f"{platform}-{cuda.cu if cuda else 'cpu'}-py{python.replace('.', '')}"


class _Resolver:
    def __init__(self, doc: dict[str, Any], file: str, locate: schema.Locate, prefix: tuple[str, ...] = ()) -> None:
        self.doc = doc
        self.file = file
        self.locate = locate
        self.prefix = prefix
        self.problems: list[Problem] = []
        # Trains already reported as unknown (or unparsable) in cuda.trains: every later mention of
        # them is the same mistake, so it is not reported again (one error per mistake).
        self.bad_trains: set[str] = set()
        self.runtime_reported: set[int] = set()

    def key(self, *path: str | int) -> str:
        """A key path as the file spells it (`tool.buildrows.platforms.linux-x86_64` in pyproject.toml)."""
        return schema._dotted((*self.prefix, *path))

    def problem(self, path: tuple[str | int, ...], message: str, *, row: str | None = None,
                hint: str | None = None, refusal: bool = False) -> None:
        self.problems.append(
            Problem(message, file=self.file, line=self.locate(path), row=row,
                    field=self.key(*path), hint=hint, refusal=refusal)
        )

    def where(self, path: tuple[str | int, ...]) -> str:
        line = self.locate(path)
        return f"{self.key(*path)} ({Path(self.file).name}{f':{line}' if line else ''})"

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

    def _project(self, p: dict[str, Any]) -> Project:
        cache = tuple((k, str(v)) for k, v in p.get("cache", {}).items())
        switches: list[str] = []
        for i, entry in enumerate(p.get("env-switches", [])):
            # "!FORCE_ONLY_CPU": a switch that means CPU; "NAME=TRUE": its on-value (off: empty)
            name, _, on = entry.removeprefix("!").partition("=")
            if not _env_name().fullmatch(name):
                self.problem(("project", "env-switches", i), f"{name!r} is not an environment variable name",
                             hint="use letters, digits and underscores, e.g. FORCE_CUDA")
            elif "=" in entry and not on.strip():
                self.problem(("project", "env-switches", i), f"{entry!r} gives {name} no on-value",
                             hint=f"write the value that turns it on, e.g. \"{name}=TRUE\", or just \"{name}\" for 1/0")
            elif name in [s.removeprefix("!").partition("=")[0] for s in switches]:
                self.problem(("project", "env-switches", i), f"{name!r} is listed twice", hint="list each switch once")
            else:
                switches.append(entry)
        torch = None
        if "torch" in p:
            from buildrows.policy.requirements import torch_requirement

            try:
                torch = torch_requirement(p["torch"])
            except ValueError as e:
                self.problem(("project", "torch"), str(e), hint="a version, e.g. torch = \"2.14.1\" or \"2.14.*\", "
                             "or a specifier, e.g. \">=2.13,<2.15\"")
        return Project(
            name=p.get("name", Path(self.file).resolve().parent.name),
            driver=cast(Driver, p.get("driver", "cmake-presets")),
            source_dir=p.get("source-dir", "."),
            cuda_option=p.get("cuda-option"),
            cache=cache,
            switches=tuple(switches),
            stamp=bool(p.get("stamp", False)),
            torch=torch,
            cpu_cache=tuple((k, str(v)) for k, v in p.get("cpu-cache", {}).items()),
            cuda_cache=tuple((k, str(v)) for k, v in p.get("cuda-cache", {}).items()),
            cpu_env=self._row_env(p, "cpu-env"),
            cuda_env=self._row_env(p, "cuda-env"),
            cpu_wheel=p.get("cpu-wheel", "compiled"),
        )

    def _row_env(self, p: dict[str, Any], key: str) -> tuple[tuple[str, str], ...]:
        """[project] cpu-env / cuda-env: variable names checked, placeholders known."""
        from buildrows.policy.model import ROW_ENV_PLACEHOLDERS

        out: list[tuple[str, str]] = []
        for name, value in p.get(key, {}).items():
            if not _env_name().fullmatch(name):
                self.problem(("project", key, name), f"{name!r} is not an environment variable name",
                             hint="use letters, digits and underscores, e.g. FORCE_ONLY_CPU")
                continue
            named = re.findall(r"\{([^{}]*)\}", str(value))
            unknown = [u for u in named if u not in ROW_ENV_PLACEHOLDERS]
            if key == "cuda-env" and unknown:
                known = ", ".join("{" + k + "}" for k in ROW_ENV_PLACEHOLDERS)
                self.problem(("project", key, name), f"{value!r} names {{{unknown[0]}}}, which is not a placeholder",
                             hint=f"a cuda-env value may name {known}")
                continue
            out.append((name, str(value)))
        return tuple(out)

    def _generator(self, pname: str, os_: Os, p: dict[str, Any]) -> tuple[str | None, str]:
        """The generator the policy fixes for a platform (its own, else the project's), and where."""
        if "generator" in p:
            path: tuple[str | int, ...] = ("platforms", pname, "generator")
            value = p["generator"]
        elif "generator" in self.doc.get("project", {}):
            path, value = ("project", "generator"), self.doc["project"]["generator"]
        else:
            return None, ""
        if os_ != "windows" and value.startswith("Visual Studio"):
            self.problem(path, f"{value!r} is a Windows generator, and {pname} is not Windows",
                         hint="use Ninja or Ninja Multi-Config, or set the generator under [platforms.windows-amd64]")
            return None, ""
        if os_ == "windows" and value == "Unix Makefiles":
            self.problem(path, f"{value!r} does not build with the MSVC tools of {pname}",
                         hint="use Ninja Multi-Config or a Visual Studio generator, or leave it to the default rule")
            return None, ""
        return value, self.where(path)

    def _ci(self, c: dict[str, Any], project: Project) -> Ci:
        from buildrows.policy.pinning import classify

        install, kind = c.get("install"), None
        if install is not None:
            try:
                kind, install = classify(install)
            except ValueError as e:
                self.problem(("ci", "install"), f"{install!r}: {e}" if not str(e).startswith(repr(install.strip())) else str(e),
                             hint="pin buildrows: a released version, a VCS URL at a full commit, or a path in the repository")
                install = None
        paths: list[str] = []
        for i, g in enumerate(c.get("paths", [])):
            if not g.strip() or g.startswith("/") or "\n" in g:
                self.problem(("ci", "paths", i), f"{g!r} is not a path filter",
                             hint="a glob relative to this file, e.g. \"csrc/**\"")
            elif g.startswith("!"):
                self.problem(("ci", "paths", i), f"{g!r} excludes paths; a row's sources are only ever added",
                             hint="list what decides a row; leave exclusions out")
            else:
                paths.append(g)
        # The default is checked where it is used (`buildrows workflow`): other commands never need it.
        name = c.get("import-name", project.name.replace("-", "_").replace(".", "_"))
        if "import-name" in c and not all(p.isidentifier() for p in name.split(".")):
            self.problem(("ci", "import-name"),
                         f"{name!r} is not an importable Python package name (the smoke test runs `import {name}`)",
                         hint="write the package the wheel installs, e.g. \"my_ext\"")
        return Ci(install=install, install_kind=kind, paths=tuple(paths),
                  submodules=cast(Submodules, c.get("submodules", "recursive")),
                  smoke_test=c.get("smoke-test"), import_name=name, provision_toolkit=c.get("provision-toolkit"),
                  gpu_test=self._gpu_test(c.get("gpu-test")))

    def _gpu_test(self, g: dict[str, Any] | None) -> GpuTest | None:
        if g is None:
            return None
        script = g["script"]
        if not script.strip() or script.startswith("/") or "\n" in script or any(ch in script for ch in "'\"$`"):
            self.problem(("ci", "gpu-test", "script"), f"{script!r} is not a path in the repository",
                         hint="a file relative to this file, e.g. \"tests/gpu_test.py\"")
        if not g.get("linux-runner") and not g.get("windows-runner"):
            self.problem(("ci", "gpu-test"), "names no runner, so no GPU job would run",
                         hint="set linux-runner (e.g. \"linux.g5.4xlarge.nvidia.gpu\") and/or windows-runner")
        return GpuTest(script=script, linux_runner=g.get("linux-runner"), windows_runner=g.get("windows-runner"))

    def _compiler_cache(self, c: dict[str, Any]) -> CompilerCacheSettings:
        from buildrows.policy.store_url import url_problem

        url = c.get("remote")
        if url is not None:
            problem = url_problem(url)
            if problem is not None:
                self.problem(("compiler-cache", "remote"), problem,
                             hint='write e.g. remote = "redis://cache.example.com:6379", or '
                                  '"redis://default:${REDIS_PASSWORD}@cache.example.com:6379" with the password in '
                                  "the job's environment")
                url = None
        write_url = c.get("write-remote")
        if write_url is not None:
            from buildrows.policy.store_url import same_store

            problem = url_problem(write_url)
            if problem is not None:
                self.problem(("compiler-cache", "write-remote"), problem,
                             hint='write e.g. write-remote = "redis://writer:${CACHE_WRITER_PASSWORD}@cache.example.com:6379"'
                                  ", the password a secret only trusted jobs get")
                write_url = None
            elif c.get("remote") is None:
                self.problem(("compiler-cache", "write-remote"), "names a writer but no store to read: every job reads "
                             "with compiler-cache.remote",
                             hint='add remote = "redis://reader:${CACHE_READER_PASSWORD}@HOST:6379" (or the store '
                                  "without a credential, where it allows anonymous reads)")
                write_url = None
            elif url is not None and not same_store(url, write_url):
                self.problem(("compiler-cache", "write-remote"), "names another store than compiler-cache.remote: "
                             "trusted jobs would write where no job reads",
                             hint="use the same scheme, host, port and path as remote, with the writer's credential")
                write_url = None
        refs: dict[str, tuple[str, ...]] = {}
        for key, default in (("write-refs", DEFAULT_WRITE_REFS), ("hermetic-refs", ())):
            globs: list[str] = []
            for i, g in enumerate(c.get(key, default)):
                if not g.startswith("refs/"):
                    self.problem(("compiler-cache", key, i), f"{g!r} is not a full ref (GITHUB_REF is compared with it)",
                                 hint='write it as GITHUB_REF spells it, e.g. "refs/heads/main" or "refs/tags/v*"')
                else:
                    globs.append(g)
            refs[key] = tuple(globs)
        return CompilerCacheSettings(url=url.strip() if url else None, write_refs=refs["write-refs"],
                                     hermetic_refs=refs["hermetic-refs"],
                                     source=self.where(("compiler-cache", "remote")) if url else "",
                                     write_url=write_url.strip() if write_url else None,
                                     write_source=self.where(("compiler-cache", "write-remote")) if write_url else "")

    def _repair(self, r: dict[str, Any]) -> RepairSettings:
        plat = r.get("plat")
        if plat is not None and not _repair_plat().fullmatch(plat):
            self.problem(("repair", "plat"), f"{plat!r} is not a manylinux or musllinux policy",
                         hint='write the policy without the machine, e.g. plat = "manylinux_2_28" (or "manylinux2014", '
                              '"musllinux_1_2"); buildrows appends each row\'s machine')
            plat = None
        excludes: list[str] = []
        for i, g in enumerate(r.get("exclude", [])):
            if not g.strip() or "/" in g:
                self.problem(("repair", "exclude", i), f"{g!r} is not a soname or a glob of sonames",
                             hint='write the name a library NEEDS, e.g. "libfoo.so.1" or "libfoo.so.*"')
            else:
                excludes.append(g.strip())
        return RepairSettings(auditwheel=bool(r.get("auditwheel", False)), plat=plat, exclude=tuple(excludes),
                              source=self.where(("repair", "auditwheel")) if "auditwheel" in r else "")

    def _pythons(self, p: dict[str, Any]) -> tuple[str, ...]:
        out: list[str] = []
        for i, v in enumerate(p["versions"]):
            if not _py().fullmatch(v):
                self.problem(("python", "versions", i), f"{v!r} is not a Python version", hint="write it as '3.12' (or '3.13t' for free-threaded)")
            elif v.endswith("t") and int(v[2:-1]) < 13:
                self.problem(("python", "versions", i), f"{v!r} does not exist: free-threaded CPython starts at 3.13 "
                             "(PEP 703)", hint=f"write {v[:-1]!r}, or '3.13t' for a free-threaded build")
            elif v in out:
                self.problem(("python", "versions", i), f"{v!r} is listed twice", hint="list each version once")
            else:
                out.append(v)
        for v in p.get("excluded", {}):
            if v in out:
                self.problem(("python", "excluded", v), f"{v!r} is both built and excluded", hint="remove it from one of the lists")
        if not out and not self.problems:
            self.problem(("python", "versions"), "no Python version is built", hint="list at least one, e.g. versions = [\"3.12\"]")
        return tuple(out)

    def _trains(self, items: list[str]) -> tuple[Train, ...]:
        out: list[Train] = []
        known = train_table()
        for i, v in enumerate(items):
            try:
                t = Train.parse(v)
            except ValueError as e:
                self.problem(("cuda", "trains", i), str(e))
                self.bad_trains.add(str(v))
                continue
            if t not in known and not beyond_data(t):
                self.bad_trains.add(t.dotted)
                self.problem(("cuda", "trains", i), f"buildrows does not know which architectures CUDA {t.dotted} compiles",
                             hint="use a train buildrows knows: " + ", ".join(k.dotted for k in sorted(known)))
            elif t in out:
                self.problem(("cuda", "trains", i), f"{v!r} is listed twice")
            else:
                out.append(t)
        return tuple(out)

    def _build_only(self, items: list[str], trains: tuple[Train, ...]) -> tuple[Train, ...]:
        out: list[Train] = []
        for i, v in enumerate(items):
            try:
                t = Train.parse(v)
            except ValueError as e:
                self.problem(("cuda", "build-only", i), str(e))
                continue
            if t not in trains:
                self.problem(("cuda", "build-only", i), f"CUDA {t.dotted} is build-only but not on the train allowlist",
                             hint=f"add \"{t.dotted}\" to [cuda] trains too: build-only marks trains of that list "
                                  "that build from source but are not published")
            elif t in out:
                self.problem(("cuda", "build-only", i), f"{v!r} is listed twice")
            else:
                out.append(t)
        if trains and out and len(out) == len(trains):
            self.problem(("cuda", "build-only"), "every train is build-only, so the policy publishes no CUDA wheel",
                         hint="remove from build-only the trains the project publishes")
        return tuple(out)

    def _pull_request_trains(self, items: list[str], trains: tuple[Train, ...]) -> tuple[Train, ...]:
        out: list[Train] = []
        for i, v in enumerate(items):
            try:
                t = Train.parse(v)
            except ValueError as e:
                if str(v) not in self.bad_trains:  # else reported where cuda.trains lists it
                    self.problem(("cuda", "pull-request", i), str(e))
                continue
            if t not in trains and t.dotted in self.bad_trains:
                continue  # reported where cuda.trains lists it
            if t not in trains:
                self.problem(("cuda", "pull-request", i), f"CUDA {t.dotted} is preferred for pull requests but not on the train allowlist",
                             hint="list only trains from [cuda] trains")
            elif t in out:
                self.problem(("cuda", "pull-request", i), f"{v!r} is listed twice")
            else:
                out.append(t)
        return tuple(out)

    def _runtimes(self, raw: dict[str, Any]) -> dict[int, Runtime]:
        out = default_runtimes()
        for k, v in raw.items():
            if not k.isascii() or not k.isdigit():  # "²".isdigit() is True, int("²") fails
                self.problem(("cuda", "runtime", k), f"{k!r} is not a CUDA major version", hint="use \"12\" or \"13\"")
                continue
            base = out.get(int(k))
            mode = cast(RuntimeMode, v.get("mode", "dynamic"))
            reason = v.get("reason", "").strip()
            if not self._runtime_keys_fit(k, v, mode, reason):
                continue
            if mode != "dynamic":
                # Linked in, brought by torch or loaded by the project: nothing to declare or reach
                # unless the policy says so.
                if "library-dir" in v:
                    self.problem(("cuda", "runtime", k, "library-dir"), f"library-dir is only used when mode is \"dynamic\" (here {mode!r})",
                                 hint="remove library-dir, or set mode = \"dynamic\"")
                out[int(k)] = Runtime(tuple(v.get("requirements", ())), "", self.where(("cuda", "runtime", k)), mode,
                                      reason=reason, extra=v.get("extra"), optional=tuple(v.get("optional", ())))
                continue
            reqs = v.get("requirements", list(base.requirements) if base else None)
            libdir = v.get("library-dir", base.library_dir if base and base.library_dir else None)
            if reqs is None or libdir is None:
                self.problem(("cuda", "runtime", k), "needs both requirements and library-dir")
                continue
            out[int(k)] = Runtime(tuple(reqs), libdir, self.where(("cuda", "runtime", k)), mode)
        return out

    def _runtime_keys_fit(self, k: str, v: dict[str, Any], mode: RuntimeMode, reason: str) -> bool:
        """A mode that says the project loads CUDA itself needs its reason; extra and optional
        only mean something in preload mode. One problem per mistake."""
        path = ("cuda", "runtime", k)
        ok = True
        if mode in MODES_WITH_REASON and not reason:
            self.problem((*path, "reason"), f"mode {mode!r} needs a reason: the check trusts the project to load "
                                            "CUDA itself, so the policy says how",
                         hint=f"add reason = \"...\" under [{self.key(*path)}], e.g. "
                              + ("\"cuda-pathfinder loads the NVIDIA wheels' libraries at import\"" if mode == "preload"
                                 else "\"loaded with ctypes after `import torch`, which brings the CUDA runtime\""))
            ok = False
        for key in ("extra", "optional"):
            if key in v and mode != "preload":
                self.problem((*path, key), f"{key} is only used when mode is \"preload\" (here {mode!r})",
                             hint=f"remove {key}, or set mode = \"preload\"")
                ok = False
        if "reason" in v and not reason:
            self.problem((*path, "reason"), "reason is empty", hint="say why the project loads CUDA this way")
            ok = False
        return ok

    def _check(self, raw: dict[str, Any]) -> CheckPolicy:
        exceptions: list[RpathException] = []
        for i, e in enumerate(raw.get("rpath-exceptions", [])):
            if e is None:  # dropped by schema validation, already reported
                continue
            path = ("check", "rpath-exceptions", i)
            if ("entry" in e) == ("reaches" in e):
                self.problem(path, "an RPATH exception names either entry or reaches",
                             hint="entry = \"/lib/intel64\" (as written in the library) or reaches = \"torch/lib\" "
                                  "(where an $ORIGIN entry lands, relative to site-packages)")
                continue
            reaches = e.get("reaches")
            if reaches is not None and (reaches.startswith("/") or ".." in reaches.split("/") or "$" in reaches):
                self.problem((*path, "reaches"), f"{reaches!r} is not a directory relative to site-packages",
                             hint="write where the entry lands, e.g. \"torch/lib\"; use entry = \"...\" for a literal entry")
                continue
            if e.get("climbs-out") and "entry" not in e:
                self.problem((*path, "climbs-out"), "climbs-out accepts entries as written, so it needs entry",
                             hint="write entry = \"$ORIGIN/../../nvidia/*/lib\" (the entries that climb out), "
                                  "and drop reaches")
                continue
            if self._no_reason(e, path):
                continue
            exceptions.append(RpathException(reason=e["reason"].strip(), source=self.where(path), entry=e.get("entry"),
                                             reaches=reaches.strip("/") if reaches is not None else None,
                                             libraries=tuple(e.get("libraries", ())),
                                             climbs_out=bool(e.get("climbs-out", False))))
        rules: list[FileRule] = []
        for kind in ("required", "no-cuda"):
            for i, r in enumerate(raw.get(kind, [])):
                if r is None:
                    continue
                path = ("check", kind, i)
                if not r["files"] or any(not f.strip() for f in r["files"]):
                    self.problem((*path, "files"), "files must list at least one non-empty glob",
                                 hint="e.g. files = [\"mypkg/lib/libmypkg_cuda.so\"]")
                    continue
                if self._no_reason(r, path):
                    continue
                rules.append(FileRule(kind=cast(Any, kind), files=tuple(r["files"]), reason=r["reason"].strip(),
                                      source=self.where(path), rows=tuple(r.get("rows", ())),
                                      allow=tuple(r.get("allow", ()))))
        return CheckPolicy(tuple(exceptions), tuple(rules), self._library_rules(raw.get("libraries", [])),
                           bool(raw.get("same-members", False)))

    def _library_rules(self, raw: list[dict[str, Any] | None]) -> tuple[LibraryRule, ...]:
        """[[check.libraries]]: exactly one of archs, per-train, vendored; one problem per mistake."""
        out: list[LibraryRule] = []
        for i, r in enumerate(raw):
            if r is None:
                continue
            path = ("check", "libraries", i)
            if not r["files"] or any(not f.strip() for f in r["files"]):
                self.problem((*path, "files"), "files must list at least one non-empty glob",
                             hint="e.g. files = [\"mypkg.libs/libnvjpeg*.so*\"]")
                continue
            kinds = [k for k in ("archs", "per-train", "vendored", "host-only") if r.get(k) not in (None, False)]
            # A rule that only names what its libraries dlopen keeps the row's device-code rule for them.
            if len(kinds) > 1 or (not kinds and not {"dlopens", "system", "provided-by"} & set(r)):
                self.problem(path, "a library rule says exactly one of archs, per-train = true, vendored = true or "
                             "host-only = true (or only dlopens, system or provided-by)" + (f" (here {', '.join(kinds)})" if kinds else ""),
                             hint="archs = \"7.0 8.0\" (their own list), per-train = true (each library's train's "
                                  "list, {cu} in files), vendored = true (not the project's list), host-only = true "
                                  "(no device code: host code using CUDA)")
                continue
            bad_dlopen = [n for n in r.get("dlopens", ()) if not _soname().fullmatch(n)]
            if bad_dlopen:
                self.problem((*path, "dlopens"), f"{bad_dlopen[0]!r} is not a soname with its major version",
                             hint="name what the library passes to dlopen, e.g. dlopens = [\"libcublas.so.12\"]")
                continue
            if any(not g.strip() or "/" in g for g in r.get("system", ())):
                self.problem((*path, "system"), "system lists library file names (globs), not paths or empty names",
                             hint="e.g. system = [\"libsox.so\", \"libav*.so.*\"], as the library's NEEDED entries name them")
                continue
            bad = provided_by_problem(r["provided-by"]) if "provided-by" in r else None
            if bad is not None:
                self.problem((*path, "provided-by"), bad[0], hint=bad[1])
                continue
            if "ptx" in r and "archs" not in r:
                self.problem((*path, "ptx"), "ptx is only used with archs", hint="remove ptx, or give archs")
                continue
            if r.get("per-train") and not any("{cu}" in f for f in r["files"]):
                self.problem((*path, "files"), "per-train needs {cu} in files, where the library's name carries its train",
                             hint="e.g. files = [\"mypkg/libmypkg_cuda{cu}.so\"] (matches _cuda128.so as CUDA 12.8)")
                continue
            if not r.get("per-train") and any("{cu}" in f for f in r["files"]):
                self.problem((*path, "files"), "{cu} only means something with per-train = true",
                             hint="add per-train = true, or write the name as a glob")
                continue
            archs = None
            if "archs" in r:
                try:
                    archs = parse_arch_list(r["archs"], ptx=r.get("ptx", "newest"))
                except ArchError as e:
                    self.problem((*path, "ptx" if "ptx" in r and (e.token == r["ptx"] or "ptx =" in str(e)) else "archs"),
                                 str(e), hint=e.hint)
                    continue
            if self._no_reason(r, path):
                continue
            out.append(LibraryRule(files=tuple(r["files"]), reason=r["reason"].strip(), source=self.where(path),
                                   archs=archs, per_train=bool(r.get("per-train")), vendored=bool(r.get("vendored")),
                                   rows=tuple(r.get("rows", ())), host_only=bool(r.get("host-only")),
                                   dlopens=tuple(r.get("dlopens", ())), system=tuple(r.get("system", ())),
                                   provided_by=tuple((k, str(v)) for k, v in r.get("provided-by", {}).items())))
        return tuple(out)

    def _no_reason(self, e: dict[str, Any], path: tuple[str | int, ...]) -> bool:
        if not e["reason"].strip():
            self.problem((*path, "reason"), "an exception needs its reason", hint="say why the project intends it")
            return True
        return False

    def _platform_rows(self, pname: str, p: dict[str, Any], pythons: tuple[str, ...],
                       trains: tuple[Train, ...], runtimes: dict[int, Runtime], project: Project) -> list[Row]:
        os_, machine = _PLATFORM_PARTS[pname]
        rows: list[Row] = []
        base = ("platforms", pname)
        published: list[Train] = []
        for i, v in enumerate(p.get("trains", [])):
            try:
                t = Train.parse(v)
            except ValueError as e:
                if str(v) not in self.bad_trains:  # else reported where cuda.trains lists it
                    self.problem((*base, "trains", i), str(e))
                continue
            if t not in trains and t.dotted in self.bad_trains:
                continue  # reported where cuda.trains lists it
            if t not in trains:
                self.problem((*base, "trains", i),
                             f"CUDA {t.dotted} is not on the train allowlist",
                             hint=f"add \"{t.dotted}\" to {self.key('cuda', 'trains')}, or remove it from "
                                  f"{self.key(*base, 'trains')}", refusal=True)
                continue
            published.append(t)
        groups: dict[Train, tuple[int, dict[str, Any]]] = {}
        for gi, g in enumerate(p.get("cuda", [])):
            if g is None:  # dropped by schema validation, already reported
                continue
            for ti, v in enumerate(g["trains"]):
                try:
                    t = Train.parse(v)
                except ValueError as e:
                    if str(v) not in self.bad_trains:  # else reported where cuda.trains lists it
                        self.problem((*base, "cuda", gi, "trains", ti), str(e))
                    continue
                if t.dotted in self.bad_trains and t not in trains:
                    continue  # reported where cuda.trains lists it
                if t in groups:
                    self.problem((*base, "cuda", gi, "trains", ti), f"CUDA {t.dotted} has two architecture lists",
                                 hint="keep one list per (platform, train)")
                elif t not in published:
                    self.problem((*base, "cuda", gi, "trains", ti),
                                 f"an architecture list for CUDA {t.dotted}, which this platform does not publish",
                                 hint=f"add \"{t.dotted}\" to {self.key(*base, 'trains')}, or drop it here")
                else:
                    groups[t] = (gi, g)
        common_cache = list(project.cache) + [(k, str(v)) for k, v in p.get("cache", {}).items()]
        generator, generator_source = self._generator(pname, os_, p)
        for py in pythons:
            if p.get("cpu", False):
                name = row_name(pname, None, py)
                cache = list(common_cache) + list(project.cpu_cache)
                if project.cuda_option:
                    cache.append((project.cuda_option, "OFF"))
                rows.append(Row(name=name, platform=pname, os=os_, machine=machine, cuda=None, python=py,
                                archs=None, image=_image(p.get("image"), None), cache=tuple(cache), generator=generator,
                                generator_source=generator_source,
                                switches=project.row_switches(cuda=False),
                                provenance=(("python", self.where(("python", "versions"))),
                                            ("cpu", self.where((*base, "cpu"))),
                                            ("image", self.where((*base, "image")) if "image" in p else "default: the generator's image"))))
        parsed: dict[tuple[str, int], ArchList | None] = {}
        for t in published:
            names = [row_name(pname, t, py) for py in pythons]
            if t not in groups:
                self.problem((*base, "trains"),
                             f"CUDA {t.dotted} has no architecture list; rows {', '.join(names)} would fall back to the builder's GPU",
                             hint=self._missing_list_fix(pname, t, names), refusal=True)
                continue
            gi, g = groups[t]
            gpath = (*base, "cuda", gi)
            raw = g.get("archs")
            if raw is None or (isinstance(raw, str) and not raw.strip()) or (isinstance(raw, list) and not "".join(raw).strip()):
                self.problem((*gpath, "archs"),
                             f"CUDA {t.dotted} has {'an empty' if raw is not None else 'no'} architecture list; rows "
                             f"{', '.join(names)} would fall back to the builder's GPU",
                             hint=f"write archs = \"{suggested_archs(t, pname)}\" (PyTorch's starting list, cut to what "
                                  f"CUDA {t.dotted} compiles)\n      {_from_wheel_advice(pname, t)}", refusal=True)
                continue
            key = (pname, gi)
            if key not in parsed:
                try:
                    parsed[key] = parse_arch_list(raw, ptx=g.get("ptx", "newest"))
                except ArchError as e:
                    parsed[key] = None
                    # a problem with the PTX choice is reported where the choice is written
                    about_ptx = "ptx" in g and ("ptx =" in str(e) or e.token == g["ptx"])
                    self.problem((*gpath, "ptx" if about_ptx else "archs"), str(e), hint=e.hint)
            archs = parsed[key]
            if archs is None:
                continue
            try:
                check_train_supports(t, archs.entries)
            except ArchError as e:
                self.problem((*gpath, "archs"), str(e), row=f"{pname}-{t.cu}-py*", hint=e.hint)
                continue
            runtime = runtimes.get(t.major)
            if archs.ptx_only and ((runtime is not None and runtime.mode == "torch")
                                   or any("{torch_archs}" in v for _, v in project.cuda_env)):
                # TORCH_CUDA_ARCH_LIST cannot say PTX without a cubin; a build that reads it would change the list
                why = ("runtime mode \"torch\": PyTorch's cpp_extension and CMake build from TORCH_CUDA_ARCH_LIST"
                       if runtime is not None and runtime.mode == "torch" else "[project] cuda-env uses {torch_archs}")
                try:
                    archs.require_torch_list()
                except ArchError as e:
                    self.problem((*gpath, "archs"), f"{e} ({why})", row=f"{pname}-{t.cu}-py*", hint=e.hint, refusal=True)
                    continue
            if runtime is None and t.major in self.runtime_reported:
                continue  # one problem per CUDA major, not one per row
            if runtime is None:
                self.runtime_reported.add(t.major)
                self.problem(("cuda", "runtime"), f"no runtime requirement is known for CUDA major {t.major}",
                             hint=f"add [{self.key('cuda', 'runtime', str(t.major))}] with requirements and library-dir")
                continue
            image_src = g.get("image", p.get("image"))
            cache = list(common_cache) + list(project.cuda_cache) + [(k, str(v)) for k, v in g.get("cache", {}).items()]
            if project.cuda_option:
                cache.append((project.cuda_option, "ON"))
            prov = (
                ("python", self.where(("python", "versions"))),
                ("cuda", self.where((*gpath, "trains"))),
                ("archs", self.where((*gpath, "archs"))),
                ("ptx", self.where((*gpath, "ptx")) if "ptx" in g else "default: the newest architecture"),
                ("image", self.where((*gpath, "image")) if "image" in g else
                 (self.where((*base, "image")) if "image" in p else "default: the generator's image")),
                ("runtime", runtime.source),
                ("driver", self.where(("project", "driver")) if "driver" in self.doc.get("project", {}) else "default: cmake-presets"),
            )
            for py, name in zip(pythons, names, strict=True):
                rows.append(Row(name=name, platform=pname, os=os_, machine=machine, cuda=t, python=py,
                                archs=archs, image=_image(image_src, t), runtime=runtime,
                                cache=tuple(cache), provenance=prov, generator=generator,
                                generator_source=generator_source,
                                switches=project.row_switches(cuda=True)))
        return rows

    def _missing_list_fix(self, pname: str, t: Train, names: list[str]) -> str:
        """A TOML block valid for the train, to paste as it is; then where to read a real list."""
        return (f"add this table (PyTorch's starting list, cut to what CUDA {t.dotted} compiles):\n"
                f"        [[{self.key('platforms', pname, 'cuda')}]]\n"
                f"        trains = [\"{t.dotted}\"]\n"
                f"        archs = \"{suggested_archs(t, pname)}\"\n"
                f"      {_from_wheel_advice(pname, t)}")

    def _empty_rows(self, raw: dict[str, Any], trains: tuple[Train, ...]) -> list[Row]:
        out: list[Row] = []
        for name, e in raw.items():
            pname = e["platform"]
            os_, machine = _PLATFORM_PARTS[pname]
            if not _row_name_chars().fullmatch(name):
                self.problem(("empty", name), f"the name {name!r} has characters a row name cannot have (a newline "
                             "would print as a row of its own in `buildrows rows` and in CI's matrix)",
                             hint="use letters, digits and . _ + - only, e.g. linux-x86_64-jetpack")
            elif not name.startswith(pname + "-"):
                self.problem(("empty", name), f"the name {name!r} must start with its platform {pname!r}",
                             hint=f"rename it, e.g. {pname}-jetpack")
            cuda = None
            if "cuda" in e:
                try:
                    cuda = Train.parse(e["cuda"])
                except ValueError as err:
                    self.problem(("empty", name, "cuda"), str(err))
            if not e["reason"].strip():
                self.problem(("empty", name, "reason"), "an empty row needs its reason", hint="say why nothing is built")
            out.append(Row(name=name, platform=pname, os=os_, machine=machine, cuda=cuda,
                           python=e.get("python", ""), archs=None, empty_reason=e["reason"],
                           provenance=(("empty_reason", self.where(("empty", name, "reason"))),)))
        return out


def _from_wheel_advice(platform: str, t: Train) -> str:
    """How to replace a starting list by the one a PyTorch wheel of the train really ships."""
    return (f"then, to ship what PyTorch ships instead: `buildrows archs --from-wheel TORCH_WHEEL --write "
            f"'{platform}-{t.cu}-*'` (TORCH_WHEEL: PyTorch's {t.cu} wheel for {platform}, e.g. from "
            f"`pip download torch --no-deps --index-url https://download.pytorch.org/whl/{t.cu}`)")


def _image(template: str | None, train: Train | None) -> str | None:
    if template is None:
        return None
    if train is None:
        return template.replace("{cuda}", "cpu").replace("{cu}", "cpu")
    return template.replace("{cuda}", train.dotted).replace("{cu}", train.cu)

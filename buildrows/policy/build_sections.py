"""Build the policy's settings sections, each checked as it is built.

[project], [ci] and its GPU test, [compiler-cache], [repair], and the [check] rules.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any, cast

from buildrows.policy.archs import (
    ArchError,
    parse_arch_list,
)
from buildrows.policy.model import (
    DEFAULT_WRITE_REFS,
    CheckPolicy,
    Ci,
    CompilerCacheSettings,
    Driver,
    FileRule,
    GpuTest,
    LibraryRule,
    Project,
    RepairSettings,
    RpathException,
    Submodules,
)
from buildrows.policy.problems import PolicyProblems
from buildrows.policy.provided import provided_by_problem


@cache
def _env_name() -> re.Pattern[str]:
    return re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


@cache
def _repair_plat() -> re.Pattern[str]:  # [repair] plat, without the machine
    return re.compile(r"manylinux_[0-9]+_[0-9]+|manylinux(?:1|2010|2014)|musllinux_[0-9]+_[0-9]+", re.ASCII)


@cache
def _soname() -> re.Pattern[str]:  # [[check.libraries]] dlopens
    return re.compile(r"lib[A-Za-z0-9_+-]+\.so\.[0-9]+(?:\.[0-9]+)*", re.ASCII)


class SectionBuilder(PolicyProblems):
    """The settings sections of a policy, each checked as it is built."""

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


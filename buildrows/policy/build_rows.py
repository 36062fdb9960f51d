"""Build the policy's rows, each checked as it is built.

Python versions, CUDA trains and their runtimes, each platform's rows with their architecture
lists, and the empty rows.
"""

from __future__ import annotations

import re
import sys
from functools import cache
from typing import Any, cast

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
from buildrows.policy.jit import jit_fits
from buildrows.policy.model import (
    MODES_WITH_REASON,
    Machine,
    Os,
    Project,
    Row,
    Runtime,
    RuntimeMode,
)
from buildrows.policy.problems import PolicyProblems
from buildrows.resources import data_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@cache
def _row_name_chars() -> re.Pattern[str]:
    return re.compile(r"[A-Za-z0-9._+-]+")


@cache
def _py() -> re.Pattern[str]:  # ASCII digits; fullmatch: no trailing newline
    return re.compile(r"3\.([0-9]{1,2})(t?)")


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



class RowBuilder(PolicyProblems):
    """The rows of a policy and what they are built from, each checked as it is built."""

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
                                      reason=reason, extra=v.get("extra"), optional=tuple(v.get("optional", ())),
                                      jit=tuple(v.get("jit", ())))
                continue
            reqs = v.get("requirements", list(base.requirements) if base else None)
            libdir = v.get("library-dir", base.library_dir if base and base.library_dir else None)
            if reqs is None or libdir is None:
                self.problem(("cuda", "runtime", k), "needs both requirements and library-dir")
                continue
            out[int(k)] = Runtime(tuple(reqs), libdir, self.where(("cuda", "runtime", k)), mode, reason=reason,
                                  jit=tuple(v.get("jit", ())))
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
        if "jit" in v and not jit_fits(self, path, v["jit"], reason):
            ok = False
        if "reason" in v and not reason:
            self.problem((*path, "reason"), "reason is empty", hint="say why the project loads CUDA this way")
            ok = False
        return ok


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

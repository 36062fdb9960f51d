"""Where each NEEDED library of a shipped library comes from, as the loader would find it (the load judges' lookup).

In this order: in the wheel (where an RPATH/RUNPATH entry reaches it), in the declared torch, in a
declared NVIDIA package (``buildrows/data/nvidia_packages.toml``), in the system's base libraries
(the manylinux allowlist, the loader, the driver's libcuda), or where a ``[[check.libraries]]`` rule
says the system or a requirement provides it (``provided-by``). Shared by buildrows.check.loading
(``libraries-load``), buildrows.check.hostcode and buildrows.check.dlopens (``dlopen-libraries``:
which declared package carries a soname).
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from buildrows.binaries.symbols import DynamicSymbols

if TYPE_CHECKING:
    from buildrows.check.judging import Artifact, Expectation
    from buildrows.check.symbol_sources import LoadInputs
    from buildrows.policy.model import LibraryRule

__all__ = ["BASE_LIBRARIES", "DRIVER_LIBRARIES", "MAX_NAMED", "provided_by"]

# The system's base libraries: the manylinux allowlist (PEP 599/600, auditwheel's policy), the loader,
# and what the NVIDIA driver installs (no wheel carries them). libmvec.so.1 is glibc's vector math library
# (glibc 2.22+ on x86_64, 2.35+ on aarch64): gcc links it when -O3 -ffast-math vectorizes a call to exp or
# sin (a pyenv Python's CFLAGS carry -O3); auditwheel 6.5 allows it too.
BASE_LIBRARIES: Final = frozenset({
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libstdc++.so.6", "libgcc_s.so.1",
    "libnsl.so.1", "libutil.so.1", "libresolv.so.2", "libX11.so.6", "libXext.so.6", "libXrender.so.1",
    "libICE.so.6", "libSM.so.6", "libGL.so.1", "libgobject-2.0.so.0", "libgthread-2.0.so.0", "libglib-2.0.so.0",
    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "libcrypt.so.1", "libanl.so.1", "libmvec.so.1",
})
DRIVER_LIBRARIES: Final = frozenset({"libcuda.so.1", "libnvidia-ml.so.1", "libnvcuvid.so.1", "libnvidia-encode.so.1"})
# Base libraries that export every symbol under a version: an unversioned symbol cannot come from them.
_VERSIONED_ONLY: Final = frozenset({
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libstdc++.so.6", "libgcc_s.so.1",
    "libnsl.so.1", "libutil.so.1", "libresolv.so.2", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
    "libanl.so.1", "libcrypt.so.1", "libmvec.so.1",
})
_MUSL: Final = re.compile(r"^(?:libc\.musl-\w+\.so\.1|ld-musl-\w+\.so\.1)$")
_PYTHON: Final = re.compile(r"^libpython3\.\d+t?\.so(?:\.1\.0)?$")
_TORCH_LIB: Final = re.compile(r"^(?:libtorch\w*|libc10\w*|libshm|libcaffe2\w*)\.so$")
# What torch's wheels bundle in torch/lib besides their own libraries (loaded when torch is imported).
_TORCH_BUNDLES: Final = frozenset({"libgomp.so.1"})
MAX_NAMED: Final = 5


@dataclass(frozen=True)
class _Provider:
    kind: str  # "wheel", "torch", "nvidia", "base", "driver", "python", "optional"
    label: str  # member, torch lib name, package
    symbols: DynamicSymbols | None = None  # None: not read here
    opaque: bool = False  # not read, and may define unversioned symbols
    via_torch: bool = False  # reached only through torch's own libraries (torch's dependencies)


def _install_dir(member: str) -> str | None:
    parts = member.split("/")
    if parts[0].endswith(".data"):
        if len(parts) > 2 and parts[1] in ("purelib", "platlib"):
            return posixpath.dirname("/".join(parts[2:]))
        return None
    return posixpath.dirname(member)


def _search_dirs(member: str, rpaths: tuple[str, ...]) -> set[str]:
    origin = _install_dir(member)
    out: set[str] = set()
    if origin is None:
        return out
    for entry in rpaths:
        e = entry.replace("${ORIGIN}", "$ORIGIN")
        if not e.startswith("$ORIGIN"):
            continue
        rel = e[len("$ORIGIN"):].lstrip("/")
        d = posixpath.normpath(posixpath.join(origin, rel)) if rel else origin
        out.add("" if d == "." else d)
    return out


def _requires_torch(exp: Expectation, info: Artifact) -> bool:
    for text in info.requires_dist:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) == "torch" and "extra" not in str(req.marker or ""):
            return True
    return exp.mode in ("torch", "torch-runtime") and exp.cuda is not None


def _extras(requires: tuple[str, ...]) -> list[str]:
    out: dict[str, None] = {}  # in order, once each (a list's `in` made 10,000 extras quadratic)
    for text in requires:
        for m in re.finditer(r"""extra\s*==\s*['"]([^'"]+)['"]""", text):
            out.setdefault(m.group(1))
    return list(out)


def _nvidia_carriers(exp: Expectation, info: Artifact) -> dict[str, str]:
    """soname -> the declared NVIDIA package that carries it ("pkg [extra]"), any extra counted."""
    from buildrows.check.nvidia import declared_nvidia, packages

    major = exp.cuda.major if exp.cuda is not None else 0
    known = packages()
    out: dict[str, str] = {}
    for extra in (None, *_extras(info.requires_dist)):
        for pkg in declared_nvidia(info.requires_dist, exp.platform, extra, major):
            if pkg in known:
                for so in known[pkg].sonames:
                    out.setdefault(so, pkg if extra is None else f"{pkg} [extra {extra}]")
    if exp.cuda is not None:  # the row's runtime set: whether the wheel declares it is runtime-declared's to say
        from buildrows.policy.requirements import expected_requirements

        for text in expected_requirements(exp.platform, exp.cuda, exp.requirements):
            try:
                pkg = str(canonicalize_name(Requirement(text).name))
            except InvalidRequirement:
                continue
            for so in known[pkg].sonames if pkg in known else ():
                out.setdefault(so, f"{pkg} (the row's runtime)")
    return out


class _Resolver:
    def __init__(self, exp: Expectation, info: Artifact, inputs: LoadInputs) -> None:
        self.exp, self.info, self.inputs = exp, info, inputs
        self.by_name: dict[str, list[str]] = {}
        for member, syms in inputs.libraries.items():
            for n in {posixpath.basename(member), syms.soname or ""} - {""}:
                self.by_name.setdefault(n, []).append(member)
        self.torch_required = _requires_torch(exp, info)
        self.carriers = _nvidia_carriers(exp, info)
        # What resolved only on a condition the wheel cannot show: (library, needed) -> how.
        self.conditional: dict[tuple[str, str], str] = {}

    def needed(self, member: str, name: str, rpaths: tuple[str, ...]) -> tuple[_Provider | None, str]:
        """(where `name` comes from for `member`, or None with the problem)."""
        from buildrows.check.nvidia import nvidia_soname, optional

        exp, inputs = self.exp, self.inputs
        in_wheel = self.by_name.get(name, [])
        if in_wheel:
            dirs = _search_dirs(member, rpaths)
            reached = [m for m in in_wheel if _install_dir(m) in dirs]
            if reached:
                return _Provider("wheel", reached[0], inputs.libraries[reached[0]]), ""
            if exp.mode in ("preload", "torch-runtime"):  # the project loads its libraries itself, in order
                return _Provider("wheel", in_wheel[0], inputs.libraries[in_wheel[0]]), ""
            if nvidia_soname(name) and (name in self.carriers or (self.torch_required and exp.cuda is not None)):
                pass  # a copy the wheel keeps aside; the declared package's (or torch's) is loaded by soname first
            elif posixpath.dirname(in_wheel[0]) == posixpath.dirname(member) and name != posixpath.basename(member):
                # A sibling in the same directory, NEEDED by its soname but reached by no RPATH: the loader finds it
                # only once the package has loaded it by path (torch.ops.load_library, ctypes.CDLL), as
                # torchaudio and torchvision do. The wheel cannot show that it does: named, not failed.
                self.conditional[(member, name)] = in_wheel[0]
                return _Provider("wheel", in_wheel[0], inputs.libraries[in_wheel[0]]), ""
            else:
                return None, (f"NEEDS {name}, which the wheel ships as {in_wheel[0]}, but no RPATH/RUNPATH entry of it "
                              f"reaches {_install_dir(in_wheel[0]) or 'the wheel root'}/ (has: {list(rpaths) or 'none'}): "
                              f"`import` fails with '{name}: cannot open shared object file' unless the package loads "
                              "it first itself; fix: add an $ORIGIN-relative RPATH entry to that directory (CMake: "
                              "INSTALL_RPATH, auditwheel repair), or, if the project loads its libraries itself, say so "
                              "with mode = \"preload\" and its reason")
        if name in BASE_LIBRARIES or _MUSL.match(name):
            return _Provider("base", name, opaque=name not in _VERSIONED_ONLY), ""
        if name in DRIVER_LIBRARIES:
            return _Provider("driver", name, opaque=True), ""
        if _PYTHON.match(name):
            return _Provider("python", name, opaque=True), ""
        if exp.loose and (nvidia_soname(name) or _TORCH_LIB.match(name)):
            # loose files carry no metadata: what they would declare is not known
            return _Provider("nvidia" if nvidia_soname(name) else "torch", name, opaque=True), ""
        torch = inputs.torch
        if torch is None and name in _TORCH_BUNDLES and self.torch_required:
            return _Provider("torch", name, opaque=True), ""  # torch's wheels ship it in torch/lib, loaded first
        if (torch is not None and name in torch.names) or _TORCH_LIB.match(name):
            if not self.torch_required:
                return None, (f"NEEDS {name}, a library of torch, but the wheel does not require torch: `import` "
                              f"fails with '{name}: cannot open shared object file' where torch is not installed; "
                              "fix: declare the torch it was built against (torch==X.Y.*)")
            if torch is None:
                return _Provider("torch", name, opaque=True), ""
            if name not in torch.names:
                return None, (f"NEEDS {name}, which {torch.where} does not ship: `import` fails with '{name}: "
                              f"cannot open shared object file'; fix: rebuild it against torch {torch.version}")
            return _Provider("torch", name, inputs.torch_symbols(name)), ""
        if nvidia_soname(name):
            if name in self.carriers:
                unreached = self._unreached(member, name, rpaths)
                if unreached:
                    return None, unreached
                return self._nvidia(name, self.carriers[name]), ""
            if exp.mode == "preload" and optional(name, exp.optional_sonames):
                return _Provider("optional", name, opaque=True), ""
            if self.torch_required and exp.cuda is not None:
                return self._nvidia(name, "torch's CUDA dependencies"), ""
            offer = _offer(name, exp)
            return None, (f"NEEDS {name}, which no NVIDIA package the wheel declares carries: `import` fails with "
                          f"'{name}: cannot open shared object file' unless something else installed it; "
                          f"fix: {offer}")
        stated = self._system(member, name)
        if stated is not None:
            self.conditional[(member, name)] = f"the system's, as stated [{stated.source}]: {stated.reason}"
            return _Provider("system", name, opaque=True), ""
        provided = provided_by(exp, member, name, self.info.requires_dist)
        if provided is not None:
            if provided[1]:
                return None, provided[1]
            self.conditional[(member, name)] = (f"installed by the requirement {provided[0]!r} (Requires-Dist), whose "
                                                f"package loads it, as stated {provided[2]}")
            return _Provider("requirement", name, opaque=True), ""
        return None, (f"NEEDS {name}, which neither the wheel, the torch it declares, the NVIDIA packages it declares "
                      "nor the system's base libraries (the manylinux allowlist) provide: `import` fails with "
                      f"'{name}: cannot open shared object file' wherever it is not installed by hand; fix: bundle "
                      "it into the wheel: set [repair] auditwheel = true in the policy (`buildrows build` then runs "
                      "auditwheel repair before the check), or link it statically")

    def _unreached(self, member: str, name: str, rpaths: tuple[str, ...]) -> str:
        """The problem when `name`, carried by a declared NVIDIA package, is reached by no RPATH
        entry of `member` in a mode where nothing else loads it (dynamic, static, none, without torch):
        the loader does not look in site-packages/nvidia/*/lib, so `import` fails even where the
        package is installed (pyvkfft 2025.1.1's libnvrtc.so.13). The runtime (libcudart) is
        runtime-reached's to judge; "" when reached or not to be judged here."""
        from buildrows.check.nvidia import packages

        exp = self.exp
        if (exp.mode not in ("dynamic", "static", "none") or self.torch_required or exp.loose
                or not exp.platform.startswith("linux") or name.startswith("libcudart.so")):
            return ""
        pkg = packages().get(self.carriers[name].split(" ", 1)[0])
        if pkg is None or pkg.dir in _search_dirs(member, rpaths):
            return ""
        origin = _install_dir(member) or ""
        up = "/".join([".."] * len([p for p in origin.split("/") if p])) or "."
        entry = f"$ORIGIN/{up}/{pkg.dir}" if up != "." else f"$ORIGIN/{pkg.dir}"
        return (f"NEEDS {name}, which {self.carriers[name]} installs in site-packages/{pkg.dir}, but no RPATH/RUNPATH "
                f"entry of it reaches there (has: {list(rpaths) or 'none'}): `import` fails with '{name}: cannot open "
                "shared object file' even where the package is installed, unless something loaded it first; fix: "
                f"add the RPATH entry {entry} (CMake: INSTALL_RPATH; setup.py: runtime_library_dirs), or, if the "
                "project loads it itself, say so with mode = \"preload\" and its reason")

    def _system(self, member: str, name: str) -> LibraryRule | None:
        """The [[check.libraries]] rule that says the system provides `name` for `member`, if any."""
        for rule in self.exp.library_rules:
            if rule.system and rule.match(member)[0] and any(fnmatch.fnmatchcase(name, g) for g in rule.system):
                return rule
        return None

    def _nvidia(self, name: str, carrier: str) -> _Provider:
        """An NVIDIA library: read where it is installed beside the torch given, else not read."""
        got = self.inputs.nvidia_library(name)
        if got is None:
            return _Provider("nvidia", carrier, opaque=True)
        path, syms = got
        return _Provider("nvidia", f"{name} ({carrier}, read from {path.parent})", syms)


def _offer(soname: str, exp: Expectation) -> str:
    from buildrows.check.nvidia import carriers

    major = exp.cuda.major if exp.cuda is not None else None
    offer = [p for p in carriers(soname) if major is None or _package_major(p) in (None, major)]
    if offer:
        return f"declare {offer[0]}"
    other = carriers(soname)
    if other:
        return (f"only {other[0]} carries it, a package of another CUDA major than the row's: load the soname of "
                f"CUDA {major}")
    return "declare the NVIDIA package that carries it"


def _package_major(name: str) -> int | None:
    m = re.search(r"-cu(\d+)$", name)
    return int(m.group(1)) if m else 13


def provided_by(exp: Expectation, member: str, name: str,
                requires_dist: tuple[str, ...]) -> tuple[str, str, str] | None:
    """Where a [[check.libraries]] provided-by rule names `name` for `member`: (the requirement that installs
    it, "", the rule) when the wheel Requires-Dist it unconditionally, else (the distribution, the problem,
    the rule); None: no rule names it."""
    from buildrows.policy.provided import declared

    for rule in exp.library_rules:
        if not rule.match(member)[0]:
            continue
        for glob, dist in rule.provided_by:
            if not fnmatch.fnmatchcase(name, glob):
                continue
            text, always = declared(requires_dist, dist)
            if always:
                return text, "", f"[{rule.source}]: {rule.reason}"
            how = f"declares it only under an extra ({text!r})" if text else "does not Require-Dist it"
            return dist, (f"NEEDS {name}, stated provided by {dist!r} [{rule.source}], but the wheel {how}: pip does "
                          f"not install it with the wheel, so `import` fails with '{name}: cannot open shared object "
                          f"file'; fix: declare {dist} in the project's dependencies (unconditionally), or drop the "
                          "statement"), rule.source
    return None

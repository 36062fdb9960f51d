"""Would each library load? (SPEC §8 "would it load"; issue 28 point 2, issue 27 points 4 and 7.)

A wheel can carry the right device code, declare the right packages and still fail ``import`` with
``undefined symbol`` (an extension built against one torch, stamped for another) or ``cannot open
shared object file``. Three judges read what the dynamic linker reads (buildrows.binaries.symbols:
``.dynsym``, ``.dynamic`` and the GNU version sections, never whole files):

* ``libraries-load``: per shared library, every NEEDED library resolves, in this order: in the wheel
  (where an RPATH/RUNPATH entry reaches it), in the declared torch (a torch requirement; its
  libraries read from a torch wheel or install given with ``check --torch PATH``, or from the build
  environment of ``build``), in a declared NVIDIA package (``buildrows/data/nvidia_packages.toml``),
  or in the system's base libraries (the manylinux allowlist, the loader, the driver's libcuda).
  Every undefined non-weak symbol is then looked up as the loader does: a versioned one in the
  file its version names, an unversioned one in the library's NEEDED closure. A symbol that none of
  the libraries read defines fails, named, when every library that could define it was read; when
  one was not (an NVIDIA package's library, torch with no ``--torch``), it is counted as not
  verified and the report says which libraries were not read, never passes it silently.
* ``cuda-host-code``: a CUDA library without device code (the CUDA runtime linked in statically, or
  linked, or its entry points called) in a CPU row fails (a CPU row must not ship code that needs a
  GPU runtime); in a CUDA row it is reported, and ``[[check.libraries]] host-only = true`` states it
  (with its reason) so a wheel whose only CUDA library has no kernels passes.
* ``dlopen-libraries``: NVIDIA libraries a library loads only by ``dlopen`` are stated per library
  (``[[check.libraries]] dlopens = ["libcublas.so.12"]``): a declared NVIDIA package (or torch, in
  the torch modes) must carry each (their soname majors are held by ``cuda-soname-majors``).
  ``lib*.so.N`` strings of NVIDIA libraries that a library carries but neither NEEDS nor states are
  reported as a warning, not a failure: a string is evidence, not proof (an error message, or a list
  of fallbacks tried in turn, names sonames the library may never load).
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from buildrows.binaries.symbols import DynamicSymbols

if TYPE_CHECKING:
    from buildrows.check.judging import Artifact, CheckResult, Expectation
    from buildrows.policy.model import LibraryRule

__all__ = ["LoadInputs", "TorchLibraries", "loading_checks", "read_load_inputs", "torch_libraries"]

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
# The interpreter that imports an extension defines Python's C API.
_INTERPRETER: Final = ("Py", "_Py")
_CUDART_NEEDED: Final = re.compile(r"^libcudart(?:[-.][0-9a-f]{8})?\.so(?:\.\d+)*$|^libcuda\.so\.1$")
# What marks the CUDA runtime in a library that links it statically (its registration and entry points).
_RUNTIME_SYMBOLS: Final = frozenset({"__cudaRegisterFatBinary", "cudaGetDeviceCount", "cudaLaunchKernel"})
MAX_NAMED: Final = 5
# A soname as the string scan reads it (one version number): libnvrtc-builtins.so.13 of libnvrtc-builtins.so.13.0.
_SCANNED_AS: Final = re.compile(r"^lib[A-Za-z0-9_+-]{1,64}\.so\.[0-9]{1,4}")


@dataclass(frozen=True)
class TorchLibraries:
    """The declared torch's libraries (``torch/lib``), read on demand."""

    version: str
    where: str  # for messages: "torch 2.13.0 (torch-2.13.0+cpu-...whl)"
    names: frozenset[str]
    load: Callable[[str], DynamicSymbols | None]
    # NVIDIA packages installed beside it (site-packages/nvidia/*/lib): their libraries are read too
    nvidia_dirs: tuple[Path, ...] = ()


@dataclass
class LoadInputs:
    """What the load judges read: each shipped ELF library's symbols, and the torch if known."""

    libraries: dict[str, DynamicSymbols]
    torch: TorchLibraries | None = None
    torch_hint: str = ""  # where a torch could come from, when none is known
    _torch_cache: dict[str, DynamicSymbols | None] = field(default_factory=dict)
    _nvidia_paths: dict[str, Path | None] = field(default_factory=dict)

    def torch_symbols(self, name: str) -> DynamicSymbols | None:
        if self.torch is None:
            return None
        if name not in self._torch_cache:
            self._torch_cache[name] = self.torch.load(name)
        return self._torch_cache[name]

    def nvidia_library(self, name: str) -> tuple[Path, DynamicSymbols] | None:
        """An NVIDIA library installed beside the torch given (its path and symbols), if there is one."""
        from buildrows.binaries.symbols import library_symbols

        if self.torch is None:
            return None
        key = "nvidia:" + name
        if key not in self._torch_cache:
            found = next((d / name for d in self.torch.nvidia_dirs if (d / name).is_file()), None)
            self._torch_cache[key] = library_symbols(found) if found is not None else None
            self._nvidia_paths[name] = found
        got, path = self._torch_cache[key], self._nvidia_paths.get(name)
        return (path, got) if got is not None and path is not None else None


def torch_libraries(path: Path) -> TorchLibraries:
    """A torch given as a wheel (``torch-2.13.0+cpu-...whl``), a torch package directory, or a
    site-packages (or environment) holding one. Raises ValueError saying what is wrong."""
    from buildrows.binaries.symbols import library_symbols
    from buildrows.binaries.wheelsymbols import wheel_library_symbols

    if path.is_file() and path.suffix == ".whl":
        from buildrows.binaries.wheelread import parse_wheel_filename

        name = parse_wheel_filename(path.name)
        if canonicalize_name(name.distribution) != "torch":
            raise ValueError(f"{path.name} is not a torch wheel")
        with zipfile.ZipFile(path) as zf:
            members = {posixpath.basename(m): m for m in zf.namelist()
                       if m.startswith("torch/lib/") and m.count("/") == 2 and ".so" in m}
        if not members:
            raise ValueError(f"{path.name} has no torch/lib/*.so: not a Linux torch wheel")

        def from_wheel(lib: str) -> DynamicSymbols | None:
            member = members.get(lib)
            return wheel_library_symbols(path, [member], scan=False).get(member) if member else None

        return TorchLibraries(name.version, f"torch {name.version} ({path.name})", frozenset(members), from_wheel)
    candidates = [path, path / "torch", *sorted(path.glob("lib/python3*/site-packages/torch"))]
    root = next((c for c in candidates if (c / "lib").is_dir() and (c / "version.py").is_file()), None)
    if root is None:
        raise ValueError(f"{path}: no torch here (looked for torch/lib and torch/version.py)")
    m = re.search(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", (root / "version.py").read_text(encoding="utf-8"), re.M)
    version = m.group(1) if m else "?"
    libdir = root / "lib"
    names = frozenset(p.name for p in libdir.iterdir() if ".so" in p.name and p.is_file())

    def from_disk(lib: str) -> DynamicSymbols | None:
        p = libdir / lib
        return library_symbols(p) if p.is_file() else None

    nvidia = tuple(sorted(p for p in root.parent.glob("nvidia/*/lib") if p.is_dir()))
    return TorchLibraries(version, f"torch {version} ({root})", names, from_disk, nvidia)


def read_load_inputs(wheel: Path, info: Artifact, torch: TorchLibraries | None, *,
                     loose: bool = False) -> LoadInputs:
    """Read the shipped ELF libraries' symbols (a wheel's streamed, loose files' from disk)."""
    from buildrows.binaries.symbols import library_symbols
    from buildrows.binaries.wheelsymbols import wheel_library_symbols

    elf = [lib.path for lib in info.libraries if lib.format == "elf"]
    if loose:
        base = wheel if wheel.is_dir() else wheel.parent
        libs = {p: s for p in elf if (s := library_symbols(base / p, scan=True)) is not None}
    else:
        # the CUDA runtime's entry points matter only where there is no device code (a host-side CUDA library)
        libs = wheel_library_symbols(wheel, elf, markers={lib.path for lib in info.libraries if not lib.has_device_code})
    return LoadInputs(libs, torch,
                      torch_hint="give the torch with --torch PATH (a torch wheel, or the environment it is installed in)")


# --- where a NEEDED library comes from ------------------------------------------------------------------


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


def _demangle(names: list[str]) -> dict[str, str]:
    """Mangled C++ name -> readable, by c++filt when the machine has it (mangled is fine otherwise)."""
    tool = shutil.which("c++filt")
    mangled = [n for n in names if n.startswith("_Z")]
    if not tool or not mangled:
        return {}
    try:
        got = subprocess.run([tool], input="\n".join(mangled), capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return {}
    lines = got.stdout.splitlines()
    return {m: d for m, d in zip(mangled, lines, strict=False) if d and d != m}


def check_libraries_load(exp: Expectation, info: Artifact, inputs: LoadInputs) -> CheckResult:
    """Every NEEDED library and every undefined non-weak symbol of every shipped ELF library resolves."""
    from buildrows.check.judging import CheckResult

    name = "libraries-load"
    resolver = _Resolver(exp, info, inputs)
    libs = [lib for lib in info.libraries if lib.format == "elf" and lib.path in inputs.libraries]
    problems: list[str] = []
    missing_syms: list[tuple[str, str, str]] = []  # (library, symbol, where it was looked for)
    unverified: dict[str, int] = {}  # unread library -> symbols that may come from it
    counts: dict[str, set[str]] = {}
    checked = 0
    for lib in libs:
        syms = inputs.libraries[lib.path]
        providers: dict[str, _Provider] = {}
        closure: list[_Provider] = []
        # The loader's breadth-first closure of NEEDED: (who needs it, name, its search path, through torch)
        # NEEDED as the wheel reader has it (from the dynamic segment, which a library without a
        # section table still has); the symbol reader's copy comes from the section table.
        needs = lib.needed or syms.needed
        queue: list[tuple[str, str, tuple[str, ...], bool]] = [(lib.path, n, lib.rpaths, False) for n in needs]
        seen: set[str] = set()
        unresolved = False  # a NEEDED library of its own is missing: that is the failure, not its symbols
        while queue:
            owner, needed, rpaths, via_torch = queue.pop(0)
            if needed in seen:
                continue
            seen.add(needed)
            prov, problem = resolver.needed(owner, needed, rpaths)
            if prov is None:
                if owner == lib.path:
                    problems.append(f"{lib.path}: {problem}")
                    unresolved = True
                continue
            if via_torch:
                prov = _Provider(prov.kind, prov.label, prov.symbols, prov.opaque, via_torch=True)
            providers[needed] = prov
            closure.append(prov)
            if owner == lib.path:
                counts.setdefault(prov.kind, set()).add(prov.label)
            if prov.symbols is not None:  # follow what it needs in turn (libtorch.so -> libtorch_cpu.so)
                # torch's own dependencies are torch's business: a missing one is not this library's problem
                owner_path = prov.label if prov.kind == "wheel" else f"torch:{prov.label}" if prov.kind == "torch" else owner
                sub_rpaths = _rpaths_of(info, prov.label) if prov.kind == "wheel" else rpaths
                queue += [(owner_path, n, sub_rpaths, via_torch or prov.kind == "torch") for n in prov.symbols.needed]
        readable = [p for p in closure if p.symbols is not None]
        # torch's own dependencies (its CUDA libraries, say) do not define what an extension takes from torch
        opaque = [p for p in closure if p.symbols is None and p.opaque and not p.via_torch]
        for imp in syms.imports:
            checked += 1
            if imp.version is None and imp.name.startswith(_INTERPRETER):
                continue
            if imp.version is not None and imp.file is not None:
                prov = providers.get(imp.file)
                if prov is None or prov.kind in ("base", "driver", "python"):
                    continue  # the system's (its version is the platform tag's business), or NEEDED-missing above
                if prov.symbols is None:
                    unverified[prov.label] = unverified.get(prov.label, 0) + 1
                    continue
                if not prov.symbols.defines(imp.name, imp.version):
                    missing_syms.append((lib.path, f"{imp.name}@{imp.version}", _where(prov, inputs)))
                continue
            if any(p.symbols is not None and p.symbols.defines(imp.name, None) for p in readable):
                continue
            if opaque:  # any of the libraries not read could define it
                key = ", ".join(sorted({p.label for p in opaque}))
                unverified[key] = unverified.get(key, 0) + 1
                continue
            if unresolved:
                continue
            if imp.version is None and _LIBC_MERGED.match(imp.name):
                continue  # libc.so.6, loaded by every Python process (glibc 2.34 holds libdl, libpthread, librt)
            missing_syms.append((lib.path, imp.name, _closure_text(readable, inputs)))
    if missing_syms:
        readable_names = _demangle([s for _, s, _ in missing_syms][:200])
        by_lib: dict[tuple[str, str], list[str]] = {}
        for lib_path, sym, where in missing_syms:
            by_lib.setdefault((lib_path, where), []).append(sym)
        for (lib_path, where), symbols in by_lib.items():
            shown = ", ".join(s + (f" ({readable_names[s]})" if s in readable_names else "") for s in symbols[:MAX_NAMED])
            more = f" and {len(symbols) - MAX_NAMED} more" if len(symbols) > MAX_NAMED else ""
            problems.append(f"{lib_path}: undefined symbol {shown}{more}: not defined by {where}, so `import` "
                            f"fails with 'undefined symbol: {symbols[0]}'; {_fix(where, inputs)}")
    notes = _notes(unverified, inputs, resolver) + _torch_admitted(exp, info, inputs)
    if problems:
        return CheckResult(name, False, problems + notes)
    if not libs:
        return CheckResult(name, True, ["no ELF library to load", *notes])
    where = ", ".join(f"{_KIND[k]} {len(v)}" for k, v in sorted(counts.items()))
    head = (f"{len(libs)} {'library loads' if len(libs) == 1 else 'libraries load'}: every NEEDED library resolves ({where or 'none needed'}) and every "
            f"undefined symbol ({checked}) is defined by one of them" + (" or not read here (below)" if unverified else ""))
    return CheckResult(name, True, [head, *notes])


_KIND: Final = {"wheel": "in the wheel:", "torch": "torch:", "nvidia": "NVIDIA packages:", "base": "system:",
                "driver": "driver:", "python": "interpreter:", "optional": "optional:",
                "system": "the system's, as stated:", "requirement": "requirements, as stated:"}


def _rpaths_of(info: Artifact, member: str) -> tuple[str, ...]:
    for lib in info.libraries:
        if lib.path == member:
            return lib.rpaths
    return ()


def _where(prov: _Provider, inputs: LoadInputs) -> str:
    if prov.kind == "torch" and inputs.torch is not None:
        return f"{inputs.torch.where}'s {prov.label}"
    return prov.label


def _closure_text(readable: list[_Provider], inputs: LoadInputs) -> str:
    torch = sorted(p.label for p in readable if p.kind == "torch")
    own = sorted(p.label for p in readable if p.kind != "torch")
    parts = []
    if torch and inputs.torch is not None:
        parts.append(f"{inputs.torch.where}'s libraries ({', '.join(torch)})")
    if own:
        parts.append("the libraries it NEEDS (" + ", ".join(own) + ")")
    return " nor ".join(parts) or "any library it NEEDS"


def _fix(where: str, inputs: LoadInputs) -> str:
    if inputs.torch is not None and inputs.torch.where in where:
        v = inputs.torch.version.split("+")[0]
        minor = ".".join(v.split(".")[:2])
        return (f"the library was built against another torch; fix: rebuild it against torch {v} (its headers and "
                f"libraries) if the wheel is meant for torch {minor}, else make the wheel require the torch it was "
                "built against (torch==X.Y.*, one minor) and check it against that torch")
    return "fix: link the library that defines it, or rebuild against the version of the library it NEEDS"


def _torch_admitted(exp: Expectation, info: Artifact, inputs: LoadInputs) -> list[str]:
    """A note when the torch read is not one the wheel's torch requirement admits."""
    from packaging.version import InvalidVersion, Version

    if inputs.torch is None:
        return []
    try:
        version = Version(inputs.torch.version)
    except InvalidVersion:
        return []
    out = []
    for text in info.requires_dist:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) == "torch" and "extra" not in str(req.marker or "") \
                and not req.specifier.contains(version, prereleases=True):
            out.append(f"note: the wheel requires {req}, which does not admit {inputs.torch.where}: pip would not "
                       "install them together")
    return out


#: Functions of libdl, libpthread and librt, which glibc 2.34 moved into libc.so.6: a library that calls
#: them without NEEDing those libraries finds them in the process's global scope (every Python loads libc,
#: and on an older glibc links libdl and libpthread itself), as cuFile and CuPy's nvtx module do.
_LIBC_MERGED: Final = re.compile(r"^(?:dl(?:open|close|sym|vsym|error|addr|info|iterate_phdr|mopen)\w*|pthread_\w+|"
                                 r"__pthread_\w+|sem_\w+|shm_\w+|clock_\w+|timer_\w+|mq_\w+|aio_\w+)$")


def _conditional_notes(resolver: _Resolver) -> list[str]:
    """What loads only on a condition the wheel cannot show: a sibling reached only once the package
    has loaded it by path, a library the system provides as the policy states."""
    out = []
    for (member, name), how in sorted(resolver.conditional.items()):
        if how.startswith(("the system's", "installed by")):
            out.append(f"note: {member} NEEDS {name}: {how}")
        else:
            out.append(f"note: {member} NEEDS {name}, which the wheel ships as {how} in the same directory but no "
                       f"RPATH/RUNPATH entry reaches: it loads only once the package has loaded {name} by path "
                       "(torch.ops.load_library, ctypes.CDLL), as it must do before importing this module; an "
                       "$ORIGIN RPATH entry would make it load on its own")
    return out


def _notes(unverified: dict[str, int], inputs: LoadInputs, resolver: _Resolver) -> list[str]:
    if not unverified:
        return _conditional_notes(resolver)
    torch = {k: v for k, v in unverified.items()
             if all(_TORCH_LIB.match(n) or n in _TORCH_BUNDLES for n in k.split(", "))}
    rest = {k: v for k, v in unverified.items() if k not in torch}
    out = []
    if torch:
        names = ", ".join(sorted({n for k in torch for n in k.split(", ")}))
        out.append(f"not verified: {sum(torch.values())} symbols that torch's libraries ({names}) "
                   f"would define were not looked up, since no torch was read; {inputs.torch_hint}")
    if rest:
        out.append(f"not verified: {sum(rest.values())} symbols from libraries not read here: "
                   + ", ".join(f"{k} ({v})" for k, v in sorted(rest.items())))
    return out + _conditional_notes(resolver)


# --- a CUDA library without device code ---------------------------------------------------------------


def static_runtime_markers(syms: DynamicSymbols) -> list[str]:
    """The runtime's entry-point names a library's read-only strings hold whole, where they are evidence
    of cudart linked in: its name table holds several of them, or the library also defines or imports
    one. One name alone is a string, not a runtime: a JIT compiler that embeds Clang's CUDA code
    generator names them, and cuDNN's frontend looks cudaLaunchKernel up with dlsym in the runtime it
    dlopens; neither links CUDA."""
    markers = sorted(set(syms.cuda_markers) & _RUNTIME_SYMBOLS)
    symbols = {i.name for i in syms.imports} | {n for n in _RUNTIME_SYMBOLS if n in syms.exported}
    if symbols & _RUNTIME_SYMBOLS or len(markers) >= 2:
        return markers
    return []


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


def host_cuda_evidence(lib_needed: tuple[str, ...], syms: DynamicSymbols | None, *, dlopen: bool = False) -> str | None:
    """Why a library is CUDA host code (links the runtime or the driver, or carries the runtime's entry
    points: linked in statically; with `dlopen`, names the runtime or the driver it loads), or None."""
    links = [n for n in lib_needed if _CUDART_NEEDED.match(n)]
    if links:
        return f"links {', '.join(links)}"
    if syms is None:
        return None
    loads = sorted(n for n in syms.sonames_named if _CUDART_NEEDED.match(n)) if dlopen else []
    names = {i.name for i in syms.imports} | set(static_runtime_markers(syms))
    found = sorted(names & _RUNTIME_SYMBOLS) + sorted({n for n in _RUNTIME_SYMBOLS if n in syms.exported} - names)
    if found:
        return f"carries the CUDA runtime's entry points ({', '.join(found)}): cudart linked in statically"
    if loads:
        return f"names {', '.join(loads)}, which it loads by dlopen"
    return None


def _runtime_linked_in(exp: Expectation, info: Artifact, inputs: LoadInputs) -> list[str]:
    """Runtime mode "none" (the wheel links no CUDA runtime): each library that carries the CUDA
    runtime's entry points or its fat-binary registration (cudart linked in statically, nvcc's
    default when it links) contradicts it. runtime-reached judges a libcudart it NEEDS."""
    assert exp.cuda is not None
    out = []
    for lib in info.libraries:
        syms = inputs.libraries.get(lib.path)
        if lib.format != "elf" or syms is None:
            continue
        found = sorted((set(static_runtime_markers(syms)) & _RUNTIME_SYMBOLS) | {n for n in _RUNTIME_SYMBOLS if n in syms.exported})
        if found:
            out.append(f"{lib.path} carries the CUDA runtime's entry points ({', '.join(found)}): cudart is linked in "
                       f"statically, but [cuda.runtime.{exp.cuda.major}] mode is \"none\" (the wheel links no CUDA "
                       "runtime); fix: set mode = \"static\", or build it without the runtime (nvcc -cudart none, "
                       "CMake CUDA_RUNTIME_LIBRARY None)")
    return out


def check_host_code(exp: Expectation, info: Artifact, inputs: LoadInputs) -> CheckResult | None:
    """CPU row: no library needs a GPU runtime. CUDA row: a host-only rule names libraries that are
    CUDA host code indeed; unstated host CUDA libraries are listed. None when there is nothing to say."""
    from buildrows.check.judging import CheckResult, library_rule

    name = "cuda-host-code"
    found: list[tuple[str, str]] = []
    for lib in info.libraries:
        if lib.format != "elf" or lib.has_device_code:
            continue
        # A CUDA row's host-only rule may rest on the runtime a library dlopens; a CPU row fails only on what links.
        why = host_cuda_evidence(lib.needed, inputs.libraries.get(lib.path), dlopen=exp.cuda is not None)
        if why is not None:
            found.append((lib.path, why))
    if exp.cuda is None:
        if not found:
            return None
        return CheckResult(name, False, [
            f"{p}: a CUDA library without device code ({why}) in a CPU row: a CPU row must not ship code that needs a "
            "GPU runtime (it fails to load, or at its first CUDA call, where no CUDA is installed); fix: build the CPU "
            "row with the project's CUDA switch off, or check the wheel as the CUDA row it is (--cuda TRAIN)"
            for p, why in found])
    stated: list[str] = []
    problems: list[str] = _runtime_linked_in(exp, info, inputs) if exp.mode == "none" else []
    evidence = dict(found)
    for lib in info.libraries:
        rule, _ = library_rule(exp, lib.path)
        if rule is None or not rule.host_only:
            continue
        if lib.has_device_code:
            continue  # device-code-covers-row says it
        if lib.path not in evidence:
            problems.append(f"{lib.path}: stated host-only [{rule.source}], but it neither links the CUDA runtime "
                            "nor carries its entry points: it is not CUDA code; fix: drop the rule, or check that the "
                            "right library is built")
            continue
        stated.append(f"{lib.path} ({evidence[lib.path]}): {rule.reason} [{rule.source}]")
    if problems:
        return CheckResult(name, False, problems)
    unstated = [f"{p} ({why})" for p, why in found if not any(s.startswith(p + " ") for s in stated)]
    read = sum(1 for lib in info.libraries if lib.format == "elf" and lib.path in inputs.libraries)
    none = [f"runtime mode none: none of the {read} libraries read carries the CUDA runtime's entry points "
            "(no cudart linked in)"] if exp.mode == "none" else []
    if not stated and not unstated and not none:
        return None
    details = none + [f"host-only, as stated: {s}" for s in stated]
    if unstated:
        details.append("CUDA host code without device code (state it with [[check.libraries]] host-only = true and "
                       "its reason if it is meant): " + ", ".join(unstated))
    return CheckResult(name, True, details)


# --- libraries loaded by dlopen -----------------------------------------------------------------------


def check_dlopen(exp: Expectation, info: Artifact, inputs: LoadInputs) -> CheckResult | None:
    """Stated dlopen sonames are carried by a declared NVIDIA package (or torch's); NVIDIA sonames named
    in a library's strings but neither NEEDED nor stated are reported (a warning). None: nothing to say."""
    from buildrows.check.judging import CheckResult, library_rule
    from buildrows.check.nvidia import nvidia_soname, optional

    name = "dlopen-libraries"
    resolver = _Resolver(exp, info, inputs)
    problems: list[str] = []
    held: list[str] = []
    warnings: list[str] = []
    # What the wheel's libraries NEED, under the name the string scan reads (libnvrtc-builtins.so.13.0 is
    # read as libnvrtc-builtins.so.13): loaded, and judged, as NEEDED; never a dlopen warning.
    needed = {n for lib in info.libraries for n in lib.needed}
    needed |= {m.group() for n in needed if (m := _SCANNED_AS.match(n))}
    for lib in info.libraries:
        if lib.format != "elf":
            continue
        rule, _ = library_rule(exp, lib.path)
        stated = rule.dlopens if rule is not None else ()
        for so in stated:
            if so in resolver.carriers:
                held.append(f"{lib.path} dlopens {so} (carried by {resolver.carriers[so]}): {rule.reason if rule else ''}")
            elif exp.mode == "preload" and optional(so, exp.optional_sonames):
                held.append(f"{lib.path} dlopens {so} (loaded only when present, optional)")
            elif resolver.torch_required and exp.cuda is not None:
                held.append(f"{lib.path} dlopens {so} (torch's CUDA dependencies bring it)")
            else:
                problems.append(f"{lib.path} dlopens {so} [{rule.source if rule else ''}], which no NVIDIA package the "
                                f"wheel declares carries: the dlopen fails where it is not installed by hand; fix: "
                                f"{_offer(so, exp)} (under the extra that enables it, if any)")
        syms = inputs.libraries.get(lib.path)
        if syms is None:
            continue
        candidates = [s for s in syms.sonames_named
                      if nvidia_soname(s) and s not in needed and s not in stated
                      and posixpath.basename(lib.path) != s and s != syms.soname]
        if candidates:
            warnings.append(f"{lib.path} names {', '.join(candidates[:MAX_NAMED])}"
                            + (f" and {len(candidates) - MAX_NAMED} more" if len(candidates) > MAX_NAMED else "")
                            + " but neither NEEDS nor states them: if it dlopens them, state it ([[check.libraries]] "
                            f"files = [\"{lib.path}\"], dlopens = [...], reason) so their majors and packages are held")
    if not (problems or held or warnings):
        return None
    details = problems + [f"held: {h}" for h in held] + [f"warning: {w}" for w in warnings]
    return CheckResult(name, not problems, details)


def loading_checks(exp: Expectation, info: Artifact, inputs: LoadInputs) -> list[CheckResult]:
    """The load judges for one artifact (Linux ELF libraries only; a Windows wheel gets none)."""
    if exp.platform.startswith("windows"):
        return []
    out = [check_libraries_load(exp, info, inputs)]
    for judge in (check_host_code, check_dlopen):
        got = judge(exp, info, inputs)
        if got is not None:
            out.append(got)
    return out

"""The ``libraries-load`` judge: would each library load? (SPEC §8 "would it load"; issue 28 point 2, issue 27 points 4 and 7.)

A wheel can carry the right device code, declare the right packages and still fail ``import`` with
``undefined symbol`` (an extension built against one torch, stamped for another) or ``cannot open
shared object file``. Three judges read what the dynamic linker reads (buildrows.binaries.symbols:
``.dynsym``, ``.dynamic`` and the GNU version sections, never whole files); ``loading_checks`` runs
them in order: this one, ``cuda-host-code`` (buildrows.check.hostcode) and ``dlopen-libraries``
(buildrows.check.dlopens). What they read is buildrows.check.symbol_sources; where a NEEDED library
comes from, buildrows.check.providers.

``libraries-load``: per shared library, every NEEDED library resolves, in this order: in the wheel
(where an RPATH/RUNPATH entry reaches it), in the declared torch (a torch requirement; its
libraries read from a torch wheel or install given with ``check --torch PATH``, or from the build
environment of ``build``), in a declared NVIDIA package (``buildrows/data/nvidia_packages.toml``),
or in the system's base libraries (the manylinux allowlist, the loader, the driver's libcuda).
Every undefined non-weak symbol is then looked up as the loader does: a versioned one in the
file its version names, an unversioned one in the library's NEEDED closure. A symbol that none of
the libraries read defines fails, named, when every library that could define it was read; when
one was not (an NVIDIA package's library, torch with no ``--torch``), it is counted as not
verified and the report says which libraries were not read, never passes it silently.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from itertools import repeat
from typing import TYPE_CHECKING, Final

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from buildrows.check.dlopens import check_dlopen
from buildrows.check.hostcode import check_host_code
from buildrows.check.providers import _TORCH_BUNDLES, _TORCH_LIB, MAX_NAMED, _Provider, _Resolver

if TYPE_CHECKING:
    from buildrows.check.judging import Artifact, CheckResult, Expectation
    from buildrows.check.symbol_sources import LoadInputs

__all__ = ["check_libraries_load", "loading_checks"]

# The interpreter that imports an extension defines Python's C API.
_INTERPRETER: Final = ("Py", "_Py")


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
        # An unversioned reference binds to whichever library defines it. Every name's key is computed
        # in one C loop, and each library's export table is asked for all names still unbound at once
        # (the whole check's hot loop: 29,000 asks on PyTorch's wheel).
        keys = list(map(hash, map(str.encode, (i.name for i in syms.imports), repeat("utf-8"),
                                  repeat("surrogateescape"))))
        unbound = set(keys)
        for p in readable:
            if p.symbols is not None and unbound:
                unbound = p.symbols.exported.missing(unbound)
        for imp, name_key in zip(syms.imports, keys, strict=True):
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
            if name_key not in unbound:
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

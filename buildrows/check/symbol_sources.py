"""What the load judges read: the symbols of the wheel's libraries, of the torch given, of the NVIDIA packages beside it.

The readers are buildrows.binaries.symbols (``.dynsym``, ``.dynamic`` and the GNU version sections,
never whole files) and buildrows.binaries.wheelsymbols (a wheel's libraries, member by member). A
torch is given as a wheel, a torch package directory or the environment it is installed in
(``check --torch PATH``, or the build environment of ``build``); the NVIDIA packages installed
beside it (site-packages/nvidia/*/lib) are read on demand. The judges: buildrows.check.loading
(``libraries-load``), buildrows.check.hostcode (``cuda-host-code``), buildrows.check.dlopens
(``dlopen-libraries``).
"""

from __future__ import annotations

import posixpath
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from buildrows.binaries.symbols import DynamicSymbols

if TYPE_CHECKING:
    from buildrows.check.judging import Artifact

__all__ = ["LoadInputs", "TorchLibraries", "read_load_inputs", "torch_libraries"]


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

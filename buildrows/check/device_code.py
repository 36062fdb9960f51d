"""The device code of a wheel, a shared library or an install tree, per library and in common:
what `archs --from-wheel` prints and `init --from-wheel` starts a policy from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from buildrows.errors import BadInput

if TYPE_CHECKING:
    from buildrows.binaries.wheelread import KernelFile, WheelInfo


@dataclass(frozen=True)
class DeviceCode:
    """What `archs --from-wheel` reads: each library's cubins and PTX, and what all of them share."""

    info: WheelInfo | None  # None for a shared library or a directory
    libraries: dict[str, Any]  # library path -> {"elf": [...], "ptx": [...]}
    with_code: dict[str, Any]  # libraries with code, and all kernel files as one unit (buildrows.check.kernels)
    common_elf: set[str]
    common_ptx: set[str]
    kernels: tuple[KernelFile, ...] = ()  # device code in files of its own: cubins, fat binaries, PTX


def read_device_code(wheel: Path) -> DeviceCode:
    """Read the device code of a wheel, a shared library or a directory (refusing, with a fix, what cannot be read)."""
    from buildrows.binaries.binfmt import BinaryFormatError
    from buildrows.binaries.fatbin import FatbinError
    from buildrows.binaries.looseread import LooseError, read_loose
    from buildrows.binaries.wheelread import LibraryInfo, WheelError, read_wheel
    from buildrows.check.device import library_json
    from buildrows.check.kernels import union

    libraries: tuple[LibraryInfo, ...]
    kernels: tuple[KernelFile, ...]
    info: WheelInfo | None = None
    if wheel.is_dir() or (wheel.is_file() and wheel.suffix != ".whl"):
        try:
            loose = read_loose(wheel)
            libraries, kernels = loose.libraries, loose.kernels
        except LooseError as e:
            raise BadInput(f"{e}\n    fix: pass a .whl, a shared library, or an install directory") from e
    elif not wheel.is_file():
        raise BadInput(f"{wheel}: no such wheel\n    fix: pass the path of a .whl (pip download --no-deps NAME), "
                       "a shared library or a directory")
    else:
        try:
            info = read_wheel(wheel)
        except (WheelError, BinaryFormatError, FatbinError) as e:
            from buildrows.check.expect import unreadable_fix

            raise BadInput(f"{e}\n    fix: {unreadable_fix(e)}") from e
        libraries, kernels = info.libraries, info.kernels
    libs = library_json(libraries)
    with_code = {k: v for k, v in libs.items() if v["elf"] or v["ptx"]}
    kernels = tuple(k for k in kernels if k.has_device_code)
    if kernels:  # all kernel files together, as the check judges them without [[check.libraries]] rules
        with_code.update(library_json((union(f"{len(kernels)} kernel files", kernels),)))
    common_elf = set.intersection(*(set(v["elf"]) for v in with_code.values())) if with_code else set()
    common_ptx = set.intersection(*(set(v["ptx"]) for v in with_code.values())) if with_code else set()
    return DeviceCode(info, libs, with_code, common_elf, common_ptx, kernels)

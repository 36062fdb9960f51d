"""`buildrows archs --from-wheel WHEEL`: what device code a wheel carries, optionally written into the policy."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from buildrows.errors import BadInput, Refused
from buildrows.ui import UI

if TYPE_CHECKING:
    from buildrows.binaries.wheelread import WheelInfo


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from-wheel", required=True, metavar="WHEEL",
                   help="a wheel (PyTorch's, say), a shared library or a directory (an install tree) to read device code from")
    p.add_argument("--json", action="store_true", help="print {\"libraries\": {path: {\"elf\": [...], \"ptx\": [...]}}}")
    p.add_argument("--write", metavar="ROWSELECTOR",
                   help="write the architectures common to every library into these rows' list in the policy (--config)")


@dataclass(frozen=True)
class DeviceCode:
    """What `archs --from-wheel` reads: each library's cubins and PTX, and what all of them share."""

    info: WheelInfo | None  # None for a shared library or a directory
    libraries: dict[str, Any]  # library path -> {"elf": [...], "ptx": [...]}
    with_code: dict[str, Any]
    common_elf: set[str]
    common_ptx: set[str]


def read_device_code(wheel: Path) -> DeviceCode:
    """Read the device code of a wheel, a shared library or a directory (refusing, with a fix, what cannot be read)."""
    from buildrows.binaries.binfmt import BinaryFormatError
    from buildrows.binaries.fatbin import FatbinError
    from buildrows.binaries.looseread import LooseError, read_loose
    from buildrows.binaries.wheelread import LibraryInfo, WheelError, read_wheel
    from buildrows.check import library_json

    libraries: tuple[LibraryInfo, ...]
    info: WheelInfo | None = None
    if wheel.is_dir() or (wheel.is_file() and wheel.suffix != ".whl"):
        try:
            libraries = read_loose(wheel).libraries
        except LooseError as e:
            raise BadInput(f"{e}\n    fix: pass a .whl, a shared library, or an install directory") from e
    elif not wheel.is_file():
        raise BadInput(f"{wheel}: no such wheel\n    fix: pass the path of a .whl (pip download --no-deps NAME), "
                       "a shared library or a directory")
    else:
        try:
            info = read_wheel(wheel)
        except (WheelError, BinaryFormatError, FatbinError) as e:
            from buildrows.commands.check import unreadable_fix

            raise BadInput(f"{e}\n    fix: {unreadable_fix(e)}") from e
        libraries = info.libraries
    libs = library_json(libraries)
    with_code = {k: v for k, v in libs.items() if v["elf"] or v["ptx"]}
    common_elf = set.intersection(*(set(v["elf"]) for v in with_code.values())) if with_code else set()
    common_ptx = set.intersection(*(set(v["ptx"]) for v in with_code.values())) if with_code else set()
    return DeviceCode(info, libs, with_code, common_elf, common_ptx)


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.check import _arch_key

    wheel = Path(args.from_wheel)
    code = read_device_code(wheel)
    libs, with_code, common_elf, common_ptx = code.libraries, code.with_code, code.common_elf, code.common_ptx
    if args.json:
        ui.print(json.dumps({"libraries": libs,
                             "common": {"elf": sorted(common_elf, key=_arch_key), "ptx": sorted(common_ptx, key=_arch_key)}},
                            indent=2))
    else:
        for path, v in with_code.items():
            ui.print(f"{path}: elf {' '.join(v['elf']) or '-'}; ptx {' '.join(v['ptx']) or '-'}")
        ui.print(f"{len(with_code)} of {len(libs)} libraries carry device code")
        if with_code:
            ui.print(f"common to all: elf {' '.join(sorted(common_elf, key=_arch_key)) or '-'}; "
                     f"ptx {' '.join(sorted(common_ptx, key=_arch_key)) or '-'}")
    if args.write:
        from buildrows.policy import load_policy
        from buildrows.policy_edit import arch_text, archs_from_names, write_archs
        from buildrows.rows import select

        if not common_elf:
            raise Refused(f"{wheel.name}: no architecture is common to its libraries with device code; nothing to write")
        policy = load_policy(args.config)
        rows = select(policy, [args.write])
        archs = archs_from_names(common_elf, common_ptx)
        policy_path, edited = write_archs(policy, rows, archs)
        for field in edited:
            ui.info(f"wrote {policy_path}: {field}")
        ui.info(f"list written: {arch_text(archs)[0]}")
    return 0

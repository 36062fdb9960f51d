"""`buildrows archs --from-wheel WHEEL`: what device code a wheel carries, optionally written into the policy."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from buildrows.errors import BadInput, Refused
from buildrows.ui import UI


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from-wheel", required=True, metavar="WHEEL",
                   help="a wheel (PyTorch's, say), a shared library or a directory (an install tree) to read device code from")
    p.add_argument("--json", action="store_true", help="print {\"libraries\": {path: {\"elf\": [...], \"ptx\": [...]}}}")
    p.add_argument("--write", metavar="ROWSELECTOR",
                   help="write the architectures common to every library into these rows' list in the policy (--config)")


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.binfmt import BinaryFormatError
    from buildrows.check import _arch_key, library_json
    from buildrows.fatbin import FatbinError
    from buildrows.looseread import LooseError, read_loose
    from buildrows.wheelread import LibraryInfo, WheelError, read_wheel

    wheel = Path(args.from_wheel)
    libraries: tuple[LibraryInfo, ...]
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
            libraries = read_wheel(wheel).libraries
        except (WheelError, BinaryFormatError, FatbinError) as e:
            raise BadInput(str(e)) from e
    libs = library_json(libraries)
    with_code = {k: v for k, v in libs.items() if v["elf"] or v["ptx"]}
    common_elf = set.intersection(*(set(v["elf"]) for v in with_code.values())) if with_code else set()
    common_ptx = set.intersection(*(set(v["ptx"]) for v in with_code.values())) if with_code else set()
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

"""`buildrows archs --from-wheel WHEEL`: what device code a wheel carries, optionally written into the policy."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from buildrows.errors import BadInput, Refused
from buildrows.ui import UI

if TYPE_CHECKING:
    pass


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from-wheel", required=True, metavar="WHEEL",
                   help="a wheel (PyTorch's, say), a shared library or a directory (an install tree) to read device code from")
    p.add_argument("--json", action="store_true", help="print {\"libraries\": {path: {\"elf\": [...], \"ptx\": [...]}}}")
    p.add_argument("--write", metavar="ROWSELECTOR",
                   help="write the architectures common to every library into these rows' list in the policy (--config)")


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.check.device_code import read_device_code
    from buildrows.check.judges import _arch_key

    if not args.from_wheel.strip():
        # Path("") is ".", which would read the current directory as if it had been named
        raise BadInput("--from-wheel is empty\n    fix: pass a .whl, a shared library or a directory "
                       "(write . for the current directory)")
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
        from buildrows.policy.edit import arch_text, archs_from_names, write_archs
        from buildrows.policy.load import load_policy
        from buildrows.policy.rows import select

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

"""`buildrows check WHEEL`: hold a built wheel to its row, without a GPU and without installing it
(buildrows.check.expect builds the expectation and judges; this module prints the report)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from buildrows.errors import BuildrowsError, CheckFailed
from buildrows.ui import UI


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("wheel", metavar="WHEEL",
                   help="the built .whl file, or a shared library or directory (an install tree) with the checks "
                        "that apply to loose files")
    p.add_argument("--row", help="the row the wheel was built for (default: inferred from the wheel's tags); its "
                                 "local version, Python and platform tags must then match the row")
    p.add_argument("--archs", metavar="LIST",
                   help="check against this architecture list instead of the row's, e.g. '9.0' (in the row's train "
                        "with --row)")
    p.add_argument("--ptx", metavar="WHICH",
                   help="which architecture also ships as PTX, as the policy's ptx key: \"newest\" (default), "
                        "\"none\" or one of the list; applies to --archs or the row's list")
    p.add_argument("--cuda", metavar="TRAIN",
                   help="the wheel's CUDA train (13.0 or cu130) when its name carries no +cuXYZ tag")
    p.add_argument("--json", action="store_true", help="print a machine-readable report")
    p.add_argument("--torch", metavar="VERSION|PATH",
                   help="the torch a PyTorch extension was compiled against (e.g. 2.8.0), for a wheel with no "
                        "buildrows build record; or a torch wheel, torch package or environment (a PATH): the "
                        "libraries are then also loaded against its libraries (libraries-load)")


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.check.device import library_json
    from buildrows.check.expect import CheckRequest, check_wheel, policy_for
    from buildrows.check.judging import _arch_key
    from buildrows.check.kernels import kernel_json, kernels_of
    from buildrows.check.runtime import unused_exceptions

    req = CheckRequest(args.wheel, args.row, args.archs, args.cuda, getattr(args, "config", None), args.json,
                       ptx=args.ptx, torch=args.torch)
    wheel = Path(args.wheel)
    try:
        exp, info, results = check_wheel(req, wheel, policy_for(req))
    except BuildrowsError as e:
        if args.json:  # a machine reads stdout: it gets JSON there too; the person, the error on stderr
            ui.print(json.dumps({"ok": False, "wheel": str(wheel), "error": _error_json(e)}, indent=2))
        raise

    if exp.cuda is not None:  # a train newer than the data: say what was assumed, as every other command does
        from buildrows.policy.trains import beyond_data_note

        note = beyond_data_note(exp.cuda)
        if note is not None:
            ui.info(f"note: {note}")
    ok = all(r.ok for r in results)
    unused = unused_exceptions(exp, info)
    if args.json:
        ui.print(json.dumps({
            "ok": ok,
            "wheel": str(wheel),
            "row": exp.row,
            "runtime_mode": exp.mode if exp.cuda else None,
            "expected": {"elf": exp.archs.cubin_names if exp.archs else [], "ptx": exp.archs.ptx_names if exp.archs else []},
            "checks": [r.json() for r in results],
            "libraries": library_json(info.libraries),
            "kernels": kernel_json(kernels_of(info), _arch_key),
            "unused_exceptions": unused,
        }, indent=2))
    else:
        ui.print(f"{wheel.name}: row {exp.row}")
        for r in results:
            ui.print(f"  [{'PASS' if r.ok else 'FAIL'}] {r.name}")
            for d in r.details:
                ui.print(f"         {d}")
        if unused:
            ui.print(f"  [NOTE] {len(unused)} {'exception' if len(unused) == 1 else 'exceptions'} of the policy matched "
                     "nothing in this wheel (stale or mistyped?)")
            for u in unused:
                ui.print(f"         {u['rule']}: {u['reason']} [{u['source']}]")
        ui.print(f"verdict: {'PASS' if ok else 'FAIL'}")
    if not ok:
        failed = ", ".join(r.name for r in results if not r.ok)
        if args.json:
            return CheckFailed.exit_code
        raise CheckFailed(f"{wheel.name} fails {failed}")
    return 0


def _error_json(e: BuildrowsError) -> dict[str, object]:
    """An input error as `--json` gives it: kind, exit code, what is wrong and each fix line."""
    lines = str(e).splitlines()
    fixes = [line.strip()[len("fix:"):].strip() for line in lines if line.strip().startswith("fix:")]
    message = "\n".join(line for line in lines if not line.strip().startswith("fix:"))
    return {"kind": e.title, "exit_code": e.exit_code, "message": message, "fix": fixes}

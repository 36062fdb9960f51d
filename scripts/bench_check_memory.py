"""Peak memory of the wheel check on real wheels, and its answer against reading each library whole
(issue 20, point 1: `.nv_fatbin` in a read+execute segment must stream too).

    python scripts/bench_check_memory.py WHEEL [WHEEL ...] [--workers N] [--json]

For each wheel, in a fresh child process each (so ``ru_maxrss`` is that run's own peak, imports
included):

  stream   buildrows' reader as `check` runs it (read_wheel: every library streamed, on up to
           --workers threads); peak resident memory, wall time, and how many ranges it had to inflate
           a second time (a fat binary not recognised in passing is read again whole)
  whole    each library read whole into memory and handed to the in-memory reader
           (describe_library): the answer the streaming reader must equal
  init     `buildrows init --from-wheel WHEEL --driver setup.py [--cuda TRAIN]` in an empty
           directory, as a user runs it (issue 27: it peaked at 1.95 GB on NVIDIA's cuDNN wheel
           when it read each library whole for its symbols); skipped with --skip-init

Exit status 1 when a streamed answer differs from the whole one or a peak exceeds --limit-mb
(default 160, the issue's target).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _listing(libs: list[Any]) -> dict[str, list[Any]]:
    return {lib.path: [list(lib.cubins), list(lib.ptx), list(lib.needed), list(lib.rpaths), lib.machine]
            for lib in libs}


def child_stream(wheel: str, workers: int) -> dict[str, Any]:
    import buildrows.binaries.kernelread as kr
    import buildrows.binaries.libraries as lr
    import buildrows.binaries.wheelread as wr

    fetches = 0
    original = getattr(lr, "read_streamed")  # noqa: B009  (not in libraries.__all__)

    def counting(stream: Any) -> Any:
        nonlocal fetches
        lib = original(stream)
        fetches += lib.fetches
        return lib

    for module in (lr, kr):  # where the library and kernel readers look it up
        setattr(module, "read_streamed", counting)  # noqa: B010  (counts the ranges each library inflates again)
    start = time.perf_counter()
    cpu = _cpu()
    info = wr.read_wheel(wheel, workers=workers)
    seconds = time.perf_counter() - start
    return {"libraries": _listing(list(info.libraries)), "seconds": seconds, "cpu_seconds": _cpu() - cpu,
            "refetches": fetches,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child_whole(wheel: str) -> dict[str, Any]:
    from buildrows.binaries.wheelread import describe_library, is_shared_library

    libs = []
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if is_shared_library(info.filename):
                libs.append(describe_library(info.filename, zf.read(info)))
    return {"libraries": _listing(libs), "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def child_init(wheel: str, cuda: str | None) -> dict[str, Any]:
    import io
    import os
    import tempfile

    from buildrows.cli import main as cli_main
    from buildrows.ui import UI

    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        out, err = io.StringIO(), io.StringIO()
        start = time.perf_counter()
        code = cli_main(["init", "--from-wheel", wheel, "--driver", "setup.py", *(["--cuda", cuda] if cuda else [])],
                        UI(out=out, err=err))
        seconds = time.perf_counter() - start
    return {"exit": code, "error": err.getvalue()[-400:] if code else "", "seconds": seconds,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run_child(mode: str, wheel: Path, workers: int, cuda: str | None = None) -> dict[str, Any]:
    extra = ["--cuda", cuda] if cuda else []
    out = subprocess.run([sys.executable, __file__, "--child", mode, "--workers", str(workers), *extra, str(wheel)],
                         capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("wheels", nargs="+", type=Path)
    ap.add_argument("--workers", type=int, default=4, help="reader threads (read_wheel's default is 4)")
    ap.add_argument("--limit-mb", type=float, default=160.0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--skip-whole", action="store_true",
                    help="do not read each library whole (PyTorch's needs GBs): no comparison")
    ap.add_argument("--skip-init", action="store_true", help="do not run init --from-wheel on each wheel")
    ap.add_argument("--cuda", help="the train for init when a wheel's name and requirements do not say it")
    ap.add_argument("--child", choices=["stream", "whole", "init"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        wheel = str(args.wheels[0])
        result = (child_stream(wheel, args.workers) if args.child == "stream" else
                  child_init(wheel, args.cuda) if args.child == "init" else child_whole(wheel))
        print(json.dumps(result))
        return 0
    rows = []
    failed = False
    for wheel in args.wheels:
        stream = run_child("stream", wheel, args.workers)
        whole = run_child("whole", wheel, args.workers) if not args.skip_whole else None
        init = run_child("init", wheel, args.workers, args.cuda) if not args.skip_init else None
        same = whole is None or stream["libraries"] == whole["libraries"]
        ok = same and stream["peak_mb"] <= args.limit_mb and (init is None or init["peak_mb"] <= args.limit_mb)
        failed |= not ok
        rows.append({"wheel": wheel.name, "size_mb": wheel.stat().st_size / 2**20,
                     "libraries": len(stream["libraries"]),
                     "with_device_code": sum(1 for v in stream["libraries"].values() if v[0] or v[1]),
                     "stream_peak_mb": stream["peak_mb"], "stream_seconds": stream["seconds"],
                     "stream_cpu_seconds": stream["cpu_seconds"], "refetches": stream["refetches"],
                     "whole_peak_mb": whole["peak_mb"] if whole else None, "same_as_whole": same if whole else None,
                     "init_peak_mb": init["peak_mb"] if init else None, "init_seconds": init["seconds"] if init else None,
                     "init_exit": init["exit"] if init else None, "init_error": init["error"] if init else "",
                     "ok": ok})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{'wheel':64} {'MB':>6} {'libs':>5} {'peak MB':>8} {'wall s':>7} {'cpu s':>6} {'re-reads':>8} "
              f"{'whole MB':>9} {'init MB':>8} {'init s':>7}  same")
        for r in rows:
            whole_mb = f"{r['whole_peak_mb']:9.1f}" if r["whole_peak_mb"] is not None else f"{'-':>9}"
            same_text = {True: "yes", False: "NO", None: "-"}[r["same_as_whole"]]
            init_mb = f"{r['init_peak_mb']:8.1f}" if r["init_peak_mb"] is not None else f"{'-':>8}"
            init_s = f"{r['init_seconds']:7.2f}" if r["init_seconds"] is not None else f"{'-':>7}"
            print(f"{r['wheel'][:64]:64} {r['size_mb']:6.1f} {r['libraries']:5d} {r['stream_peak_mb']:8.1f} "
                  f"{r['stream_seconds']:7.2f} {r['stream_cpu_seconds']:6.2f} {r['refetches']:8d} {whole_mb} "
                  f"{init_mb} {init_s}  {same_text}{'' if r['ok'] else '  <- FAIL'}")
            if r["init_exit"]:  # init refused the wheel: its peak still counts, the reason is shown
                print(f"    init exit {r['init_exit']}: {r['init_error'].strip()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

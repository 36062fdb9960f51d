"""Run buildrows commands read from stdin (one JSON job a line), each in a forked child, and print one
JSON line per job: exit code, wall seconds, peak RSS (MB, the child's own `ru_maxrss` from wait4).

Used by tests/hostile_wheels.py: buildrows is imported once here, so a case costs a fork, not a
Python start; the child's peak includes the ~40 MB this process holds, as a `buildrows` process would.
A child past its `timeout` (plus a second) is ended by SIGALRM and reported with rc -14. Each child runs under a 3 GB
address-space limit, so a memory bomb cannot take the shared machine down (it ends in MemoryError,
which buildrows reports as exit 1: a failure of the case, not of the machine)."""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time


def main() -> int:
    import importlib
    import pkgutil

    import buildrows.cli as cli

    # What a check or a policy load imports, paid once here rather than in every child.
    for package in ("buildrows.binaries", "buildrows.check", "buildrows.policy", "buildrows.commands"):
        for module in pkgutil.iter_modules(importlib.import_module(package).__path__):
            importlib.import_module(f"{package}.{module.name}")
    import pefile  # noqa: F401

    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the child: one case
            try:
                os.chdir(job["cwd"])
                fd = os.open(job["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
                signal.alarm(int(job["timeout"]) + 1)  # default action: the child ends
                rc = cli.main(job["argv"])
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else 1
            except BaseException:
                import traceback

                traceback.print_exc()
                rc = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(rc)
        _, status, usage = os.wait4(pid, 0)
        seconds = time.monotonic() - start
        rc = os.waitstatus_to_exitcode(status)
        print(json.dumps({"rc": rc, "seconds": round(seconds, 3), "cpu": round(usage.ru_utime + usage.ru_stime, 3),
                          "rss_mb": round(usage.ru_maxrss / 1024, 1)}),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

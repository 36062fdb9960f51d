#!/usr/bin/env python3
"""Run the rendered Linux wheel workflow through pytorch/test-infra's build job, on this machine.

    python scripts/ci_flow.py                       # the bundled CUDA example, the full 13.0 list
    python scripts/ci_flow.py --archs "7.5"          # one architecture (what the test suite runs)
    python scripts/ci_flow.py --hard-code 80-real    # the project's CMake overrides the list: the
                                                     # post-script fails the job, naming the step

It builds buildrows (this checkout) into a wheel the example repository carries under tools/, keeps
the example's policy in packaging/ (a subdirectory), renders the workflows and scripts with
`buildrows workflow`, commits, and runs tests/ci_harness.py's LinuxRun: the filter job on the
generator fixture, then test-infra's build job from its own files (pkg-helpers -> pre-script/hook ->
build -> post-script `buildrows check` -> upload gate). Needs nvcc 13.0, git and PyPI. Exit 0 when
the job would upload only checked wheels, 1 with the harness's message otherwise.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests import ci_harness  # noqa: E402

FULL_130 = "7.5 8.0 8.6 8.9 9.0 10.0 12.0"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--archs", default=FULL_130, help=f"the cu130 row's list (default: {FULL_130})")
    ap.add_argument("--hard-code", metavar="ARCHS",
                    help="make the example's CMake set CMAKE_CUDA_ARCHITECTURES itself (e.g. 80-real)")
    ap.add_argument("--work", type=Path, help="work directory (default: a new temporary one)")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="buildrows-ci-flow-"))
    work.mkdir(parents=True, exist_ok=True)
    python = f"{sys.version_info.major}.{sys.version_info.minor}"

    def edit(repo: Path) -> None:
        cm = repo / "CMakeLists.txt"
        cm.write_text(cm.read_text(encoding="utf-8").replace(
            "  enable_language(CUDA)\n",
            f"  set(CMAKE_CUDA_ARCHITECTURES {args.hard_code})  # a project that hard-codes its GPUs\n"
            "  enable_language(CUDA)\n"), encoding="utf-8")

    start = time.monotonic()
    try:
        wheel = ci_harness.buildrows_wheel(REPO, work / "buildrows-wheel")
        repo = ci_harness.example_repository(work, wheel, args.archs, edit if args.hard_code else None)
        print(f"repository: {repo} (policy packaging/buildrows.toml, archs {args.archs!r})")
        run = ci_harness.LinuxRun(
            caller=repo / ".github" / "workflows" / "build-wheels-cuda-linux-x86_64.yml", repository=repo,
            work=work / "job", python=python, accel="cu130",
            generator=REPO / "tests" / "data" / "generator" / "linux-release-prfalse.json")
        job = run.run()
    except ci_harness.HarnessError as e:
        print(f"\nHARNESS: {e}\n({time.monotonic() - start:.0f} s; work directory {work})")
        return 1
    print("\nsteps:")
    for s in job.log:
        print(f"  {s.status:13} {s.name}" + (f"  ({s.detail})" if s.detail else ""))
    print(f"\nOK in {time.monotonic() - start:.0f} s; work directory {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

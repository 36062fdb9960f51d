#!/usr/bin/env python3
"""One row of a project built three ways, and the three wheels compared side by side.

    python scripts/compare_paths.py                     # the bundled example's cu130 row, the policy's full list
    python scripts/compare_paths.py --archs 7.5         # a short list (minutes less)
    python scripts/compare_paths.py --accel cpu         # the CPU row
    python scripts/compare_paths.py --project torch-extension   # the setup.py torch extension (tests/data)

The projects: `example` (examples/cuda-extension, scikit-build-core) and `torch-extension`
(tests/data/torch-extension: a setup.py PyTorch C++/CUDA extension in pytorch/extension-cpp's
shape, built against torch 2.14.1). For the torch extension the row's torch comes from a wheelhouse
downloaded once (tests/torch_extension.py: torch 2.14.1 and NVIDIA's wheels it requires, ~4 GB):
the host builds with this environment's torch; the CI path runs test-infra's "Install torch
dependency" step and the container job its copy of that step, both with PIP_NO_INDEX=1 and
PIP_FIND_LINKS naming the wheelhouses (no registry is reachable from the container).

(a) host: `buildrows build ROW` on this machine;
(b) CI: the rendered workflow through test-infra's build job (tests/ci_harness.py: pkg-helpers, the
    pre-script and its hook writing BUILD_ENV_FILE, the workflow's build command, the post-script's
    stamp and check, the upload gate), as scripts/ci_flow.py runs it;
(c) container: `buildrows build ROW --container` in the test builder image (tests/container_image.py:
    the host's gcc and Python 3.X, nvcc 13.0 from NVIDIA's PyPI wheels; root, podman and runc needed).

Each wheel's device code (`buildrows archs --from-wheel`), METADATA (version, Requires-Dist), WHEEL
tag, its members' zip times (SOURCE_DATE_EPOCH), and `buildrows check --row ROW --json` verdicts are
printed side by side; a difference is marked.
The row's Python is the image's (Debian's python3.X); this Python must be the same X.Y.
Exit 0 when the three agree, 1 otherwise (or when a path failed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests import ci_harness, container_image, torch_extension  # noqa: E402

BUILDROWS = str(Path(sys.executable).parent / "buildrows")


def _run(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> None:
    start = time.monotonic()
    with log.open("w", encoding="utf-8") as f:
        res = subprocess.run(cmd, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT, check=False)
    print(f"   {time.monotonic() - start:.0f} s, exit {res.returncode} (log {log})")
    if res.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}; see {log}")


def facts(wheel: Path, row: str, config: Path) -> dict[str, str]:
    """What the comparison shows of one wheel."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
        tag = z.read(meta.replace("METADATA", "WHEEL")).decode()
        times = sorted({"{:04d}-{:02d}-{:02d} {:02d}:{:02d}:{:02d}".format(*i.date_time) for i in z.infolist()})
    archs = " | ".join(subprocess.run([BUILDROWS, "archs", "--from-wheel", str(wheel)], capture_output=True, text=True,
                                      check=False).stdout.strip().splitlines())
    check = subprocess.run([BUILDROWS, "--config", str(config), "check", str(wheel), "--row", row, "--json"],
                           capture_output=True, text=True, check=False)
    doc = json.loads(check.stdout) if check.stdout.strip().startswith("{") else {}
    verdicts = "; ".join(f"{c['name']} {'PASS' if c['ok'] else 'FAIL'}" for c in doc.get("checks", []))
    return {
        "file": wheel.name,
        "Version": next((ln.split(": ", 1)[1] for ln in text.splitlines() if ln.startswith("Version: ")), "?"),
        "Requires-Dist": "; ".join(ln.split(": ", 1)[1] for ln in text.splitlines() if ln.startswith("Requires-Dist: ")),
        "Tag": " ".join(ln.split(": ", 1)[1] for ln in tag.splitlines() if ln.startswith("Tag: ")),
        "device code": archs,
        "member times": ", ".join(times),
        "check": ("PASS" if doc.get("ok") else "FAIL") + f" ({verdicts})",
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--accel", default="cu130", help="cu130 (default) or cpu")
    ap.add_argument("--archs", help="replace the policy's 13.0 list (default: the policy's own)")
    ap.add_argument("--work", type=Path, help="work directory (default: a new temporary one)")
    ap.add_argument("--reuse", action="store_true",
                    help="with --work: a path whose wheel an earlier run left there is not built again")
    ap.add_argument("--project", choices=("example", "torch-extension"), default="example",
                    help="the bundled example (default) or the setup.py torch extension")
    args = ap.parse_args()
    why = container_image.unavailable()
    if why is not None:
        print(f"cannot run the container path here: {why}")
        return 1
    work = args.work or Path(tempfile.mkdtemp(prefix="buildrows-compare-"))
    work.mkdir(parents=True, exist_ok=True)
    python = container_image.python_version()
    if f"{sys.version_info.major}.{sys.version_info.minor}" != python:
        print(f"run this with a Python {python} (the image's), not {sys.version}")
        return 1
    row = f"linux-x86_64-{args.accel}-py{python.replace('.', '')}"
    # Each path builds from its own copy of the repository: committed at one time, so all three get
    # the same SOURCE_DATE_EPOCH (the project's last commit time), as CI and a local checkout of
    # one commit do.
    for var in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"):
        os.environ.setdefault(var, "1780000000 +0000")
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_ACTIONS"}
    env["BUILDROWS_CACHE"] = str(work / "cache")
    wheels: dict[str, Path] = {}
    kept = Path(os.environ.get("BUILDROWS_TEST_CACHE") or Path.home() / ".cache" / "buildrows-test-container")
    torch = args.project == "torch-extension"
    if torch:
        config = torch_extension.CONFIG

        def repository(where: Path) -> Path:
            return torch_extension.repository(where, REPO, archs=args.archs)
    else:
        config = ci_harness.BUNDLED_CONFIG

        def repository(where: Path) -> Path:
            return ci_harness.bundled_example_repository(where, REPO, archs=args.archs)
    # Where pip finds what the CI path and the container install, without a registry.
    links: dict[str, str] = {}
    if torch:
        start = time.monotonic()
        house = container_image.wheelhouse(kept / "wheelhouse", python)
        torch_house = torch_extension.torch_wheelhouse(kept / "torch-wheelhouse", python)
        links = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": f"{house} {torch_house}"}
        print(f"== wheelhouses: {house}, {torch_house} ({time.monotonic() - start:.0f} s)")

    def earlier(pattern: str) -> Path | None:
        found = sorted(work.glob(pattern)) if args.reuse else []
        if found:
            print(f"   reused: {found[0]} (--reuse)")
        return found[0] if found else None

    print(f"== (a) host: buildrows build {row}")
    repo_a = work / "a" / "repo"
    if earlier("a-dist/*.whl") is None:
        repo_a = repository(work / "a")
        _run([BUILDROWS, "--config", config, "build", row, "--wheel-dir", str(work / "a-dist")],
             repo_a, env, work / "a.log")
    wheels["host"] = next((work / "a-dist").glob("*.whl"))

    print("== (b) CI: the rendered workflow through test-infra's build job (tests/ci_harness.py)")
    reused_b = earlier("b-job/**/dist/*.whl")
    repo_b = work / "b" / "repo" if reused_b else repository(work / "b")
    start = time.monotonic()
    run = ci_harness.LinuxRun(
        caller=torch_extension.caller(repo_b) if torch else
        repo_b / ".github" / "workflows" / "build-wheels-cuda-linux-x86_64.yml", repository=repo_b,
        work=work / "b-job", python=python, accel=args.accel,
        generator=REPO / "tests" / "data" / "generator" / "linux-release-prfalse.json",
        echo=lambda s: None, runner_env={"BUILDROWS_CACHE": env["BUILDROWS_CACHE"], **links}, install_torch=torch)
    try:
        job = run.run() if reused_b is None else None
    except ci_harness.HarnessError as e:
        print(f"   CI path failed: {e}")
        return 1
    if job is not None:
        print(f"   {time.monotonic() - start:.0f} s: " + ", ".join(f"{s.name} {s.status}" for s in job.log
                                                          if s.status in ("ran", "checked"))[-300:])
    wheels["CI"] = next((work / "b-job").rglob("dist/*.whl"))

    print(f"== (c) container: buildrows build {row} --container (test image)")
    conf = container_image.containers_conf(work / "containers")
    cenv = {**container_image.runtime_environment(conf), **env}
    log: list[str] = []
    image = container_image.ensure_image({**cenv, "BUILDROWS_CACHE": str(kept / "cache")}, work / "image", log)
    print("   " + "; ".join(log))
    house = container_image.wheelhouse(kept / "wheelhouse", python)
    cenv.update({"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(house), **links})
    repo_c = repository(work / "c")
    _run([BUILDROWS, "--config", config, "build", row, "--container", "--image", image,
          "--wheel-dir", str(work / "c-dist")], repo_c, cenv, work / "c.log")
    wheels["container"] = next((work / "c-dist").glob("*.whl"))

    table = {k: facts(w, row, repo_a / config) for k, w in wheels.items()}
    same = True
    print(f"\n== {row}, three ways")
    for field in next(iter(table.values())):
        values = [table[k][field] for k in table]
        differ = len(set(values)) > 1
        same = same and (not differ or field == "file")
        print(f"{field}{'   <-- differs' if differ else ''}")
        for k in table:
            print(f"  {k:10} {table[k][field]}")
    print(f"\ncontainer wheel's tag: {table['container']['Tag']} (image {image})")
    print(f"work directory: {work}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())

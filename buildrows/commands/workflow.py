"""`buildrows workflow`: render the GitHub workflows that generate, narrow and build the policy's rows."""

from __future__ import annotations

import argparse
from pathlib import Path

from buildrows.commands.policy_arg import policy
from buildrows.errors import Refused
from buildrows.ui import UI


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", metavar="DIR", help="where to write the workflows (default: ROOT/.github/workflows)")
    p.add_argument("--root", metavar="DIR",
                   help="the repository root the workflows run in; paths in them are relative to it (default: the "
                        "git repository holding the current directory, found as git finds it; else .)")
    p.add_argument("--platform", action="append", default=[], metavar="PLATFORM",
                   help="render only this platform (repeatable; default: every platform with rows)")
    p.add_argument("--generator-input", action="append", default=[], metavar="NAME=VALUE",
                   help="override an input of the matrix generator, e.g. with-rocm=disable (switches: enable|disable)")
    p.add_argument("--scripts-dir", default=".github/scripts", metavar="DIR",
                   help="where to write the scripts the workflows run (pre-script, wheel check, smoke test), "
                        "relative to ROOT (default: .github/scripts)")
    p.add_argument("--path", action="append", default=[], metavar="GLOB",
                   help="another pull-request path filter (the project's build files; repeatable)")
    p.add_argument("--check", action="store_true",
                   help="write nothing; fail (exit 3) if a workflow on disk differs from its render")


def run(args: argparse.Namespace, ui: UI) -> int:
    from buildrows.ci import workflow

    pol = policy(args)
    root = Path(args.root) if args.root else _root(ui)
    out_dir = Path(args.out) if args.out else root / ".github" / "workflows"
    plans = workflow.plan(
        pol, root=root, out_dir=out_dir, platforms=args.platform,
        overrides=workflow.parse_overrides(args.generator_input),
        scripts_dir=args.scripts_dir, extra_paths=args.path,
    )
    scripts = workflow.render_scripts(workflow.scripts_plan(pol, root=root, scripts_dir=args.scripts_dir))
    files = [(out_dir / p.file_name, workflow.render(p), False) for p in plans]
    files += [(root / f.path, f.text, f.executable) for f in scripts]
    stale: list[str] = []
    for dest, text, executable in files:
        if args.check:
            current = dest.read_bytes().decode("utf-8", "replace") if dest.is_file() else None
            if current != text:
                stale.append(f"{dest} ({'missing' if current is None else 'differs'})")
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(dest, "w", encoding="utf-8", newline="") as fh:  # the .bat keeps its CRLF
            fh.write(text)
        if executable:
            dest.chmod(dest.stat().st_mode | 0o111)
        ui.print(str(dest))
    if stale:
        raise Refused("workflows out of date with the policy:\n    " + "\n    ".join(stale)
                      + "\n    fix: run `buildrows workflow` with the same options and commit the result")
    if args.check:
        ui.ok(f"{len(plans)} workflow(s) and {len(scripts)} script(s) up to date")
    return 0


def _root(ui: UI) -> Path:
    """The repository root from any directory inside it, as git finds it; else the current directory."""
    from buildrows.policy.discover import repository_root

    found = repository_root(Path.cwd())
    if found is None:
        ui.warn(f"no git repository holds {Path.cwd()}: taking it as the repository root (pass --root DIR to name "
                "another)")
        return Path.cwd()
    if found != Path.cwd().resolve():
        ui.info(f"repository root: {found} (the git repository holding the current directory)")
    return found

"""`buildrows cache [list|prune]`: what buildrows keeps on disk, its sizes, and pruning by age or
kind (buildrows.provision.store)."""

from __future__ import annotations

import argparse

from buildrows.ui import UI


def add_arguments(p: argparse.ArgumentParser) -> None:
    from buildrows.provision.store import KINDS

    p.add_argument("cache_action", nargs="?", choices=("list", "prune"), default="list", metavar="ACTION",
                   help="list (default): every entry by kind, with its size and age; prune: remove entries")
    p.add_argument("--kind", action="append", choices=KINDS, metavar="KIND",
                   help=f"only this kind (repeatable): {', '.join(KINDS)}; prune needs --kind or --older-than, and "
                        "never removes a project's build trees, logs or earlier wheels unless --kind names them")
    p.add_argument("--older-than", metavar="AGE",
                   help="only entries unchanged for AGE: 90m, 12h, 30d, 2w (the compiler cache: its files that old)")
    p.add_argument("--project", metavar="DIR",
                   help="also the project's build trees, logs and earlier-* wheels (default: the policy's project, "
                        "when a policy is found)")
    p.add_argument("--dry-run", action="store_true", help="prune: say what would be removed, remove nothing")
    p.add_argument("--json", action="store_true", help="list: one JSON document on stdout")


def _project(args: argparse.Namespace) -> object:
    from pathlib import Path

    if args.project:
        return Path(args.project).resolve()
    try:
        from buildrows.build.drivers import project_dir
        from buildrows.policy.load import load_policy

        pol = load_policy(args.config)
        return project_dir(pol.path, pol.project.source_dir, None)
    except Exception:  # no policy here: the cache alone
        return None


def run(args: argparse.Namespace, ui: UI) -> int:
    import json
    import os
    from pathlib import Path

    from buildrows.errors import BadInput
    from buildrows.provision import store

    root = store.cache_root_of(os.environ)
    now = store.now()
    project = _project(args)
    entries = store.cache_entries(root)
    if isinstance(project, Path):
        entries += store.project_entries(project)
    if args.kind:
        entries = [e for e in entries if e.kind in args.kind]
    older = store.parse_age(args.older_than) if args.older_than else None
    if args.cache_action == "list":
        if older is not None:
            entries = [e for e in entries if now - e.modified >= older]
        if args.json:
            ui.print(json.dumps({"command": "cache", "cache": str(root), "project": str(project) if project else None,
                                 "entries": [{"kind": e.kind, "path": str(e.path), "bytes": e.size,
                                              "age_days": round(e.age_days(now), 3)} for e in entries]}, indent=2))
            return 0
        if not entries:
            ui.print(f"cache {root}: empty" + (" (of what was asked)" if args.kind or older else ""))
            return 0
        for line in store.render(entries, now, root):
            ui.print(line)
        ui.info("  (`buildrows cache prune --older-than 30d` removes what has not changed for 30 days; "
                "--kind KIND one kind)")
        return 0
    if not args.kind and older is None:
        raise BadInput("`buildrows cache prune` needs --kind KIND or --older-than AGE (or both)\n"
                       "    fix: e.g. `buildrows cache prune --older-than 30d` or `buildrows cache prune --kind downloads`")
    kinds = args.kind or list(store.CACHE_KINDS)  # a project's trees, logs and wheels only when named
    pruned = store.prune(entries, kinds, older, now, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for p in pruned:
        ui.print(f"{verb} {p.entry.kind}: {p.entry.path} ({store.human_size(p.freed)})")
    ui.print(f"{verb} {len(pruned)} entr{'y' if len(pruned) == 1 else 'ies'}, {store.human_size(sum(p.freed for p in pruned))}")
    return 0

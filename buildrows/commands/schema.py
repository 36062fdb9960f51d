from __future__ import annotations

import argparse
import json

from buildrows.ui import UI


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--write", action="store_true", help="regenerate buildrows/data/buildrows.schema.json")


def render() -> str:
    from buildrows.schema import json_schema

    return json.dumps(json_schema(), indent=2) + "\n"


def run(args: argparse.Namespace, ui: UI) -> int:
    from pathlib import Path

    text = render()
    if args.write:
        path = Path(__file__).resolve().parent.parent / "data" / "buildrows.schema.json"
        path.write_text(text, encoding="utf-8")
        ui.info(f"wrote {path}")
    else:
        ui.print(text.rstrip("\n"))
    return 0

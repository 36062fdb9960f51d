"""Placeholder: the issue that owns `buildrows hook` replaces this module."""

from __future__ import annotations

import argparse

from buildrows.commands._common import policy
from buildrows.errors import BuildrowsError
from buildrows.ui import UI


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("rest", nargs=argparse.REMAINDER)


def run(args: argparse.Namespace, ui: UI) -> int:
    policy(args)
    raise BuildrowsError("buildrows hook is not built yet")

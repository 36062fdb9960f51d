"""Helpers shared by the command modules."""

from __future__ import annotations

import argparse

from buildrows.policy.model import Policy


def policy(args: argparse.Namespace) -> Policy:
    from buildrows.policy.load import load_policy

    return load_policy(getattr(args, "config", None))

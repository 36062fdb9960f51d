"""Helpers shared by the command modules."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from buildrows.policy.model import Policy

if TYPE_CHECKING:
    from buildrows.ui import UI


def policy(args: argparse.Namespace, ui: UI | None = None) -> Policy:
    """Load the policy; with `ui`, say what was assumed of a train newer than buildrows' CUDA data."""
    from buildrows.policy.load import load_policy

    pol = load_policy(getattr(args, "config", None))
    if ui is not None:
        for note in train_notes(pol):
            ui.info(f"note: {note}")
    return pol


def train_notes(pol: Policy) -> list[str]:
    """One note per train of the policy newer than buildrows' CUDA data (buildrows.policy.trains.beyond_data_note)."""
    from buildrows.policy.trains import beyond_data_note

    return [n for t in pol.trains if (n := beyond_data_note(t)) is not None]

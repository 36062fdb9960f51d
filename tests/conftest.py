from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from buildrows.cli import main
from buildrows.ui import UI

REPO = Path(__file__).resolve().parent.parent

# A private, empty buildrows cache for every test: a toolkit someone provisioned into
# ~/.cache/buildrows must not turn a "missing nvcc" test into a pass (tests that provision set
# BUILDROWS_CACHE themselves; tests/test_provision_integration.py honours BUILDROWS_TEST_CACHE).
os.environ["BUILDROWS_CACHE"] = tempfile.mkdtemp(prefix="buildrows-test-cache-")
EXAMPLE_POLICY = REPO / "tests" / "data" / "policies" / "executorch" / "buildrows.toml"


@dataclass
class Result:
    code: int
    out: str
    err: str


def run_cli(*argv: str) -> Result:
    """Run the CLI in-process, capturing what a user would see."""
    out, err = io.StringIO(), io.StringIO()
    try:
        code = main(list(argv), UI(out=out, err=err))
    except SystemExit as e:  # argparse usage errors
        code = int(e.code or 0)
    return Result(code, out.getvalue(), err.getvalue())


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    return run_cli


@pytest.fixture
def example_text() -> str:
    return EXAMPLE_POLICY.read_text(encoding="utf-8")


@pytest.fixture
def policy_copy(tmp_path: Path, example_text: str) -> Callable[..., Path]:
    """Write a modified copy of the example policy: policy_copy(old, new, old2, new2, ...)."""

    def make(*edits: str) -> Path:
        text = example_text
        assert len(edits) % 2 == 0
        for old, new in zip(edits[::2], edits[1::2], strict=True):
            assert old in text, f"test edit target not found: {old!r}"
            text = text.replace(old, new, 1)
        p = tmp_path / "buildrows.toml"
        p.write_text(text, encoding="utf-8")
        return p

    return make

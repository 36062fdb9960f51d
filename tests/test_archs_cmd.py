"""`buildrows archs --from-wheel`, and `--write` keeping the policy byte-identical elsewhere."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_POLICY, REPO, Result

sys.path.insert(0, str(REPO / "scripts"))
import make_check_fixtures as mcf

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return mcf.build_all(tmp_path_factory.mktemp("archs-fixtures"))


def test_lists_every_library(wheels: dict[str, Path], cli: Callable[..., Result]) -> None:
    r = cli("archs", "--from-wheel", str(wheels["split-across-libraries"]), "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["libraries"] == {"fx/_core.so": {"elf": ["sm_75"], "ptx": []},
                                 "fx/_kernels.so": {"elf": ["sm_90"], "ptx": ["sm_90"]}}
    assert data["common"] == {"elf": [], "ptx": []}


def test_write_keeps_everything_else_byte_identical(wheels: dict[str, Path], tmp_path: Path, cli: Callable[..., Result]) -> None:
    policy = tmp_path / "buildrows.toml"
    original = EXAMPLE_POLICY.read_text()
    policy.write_text(original)
    r = cli("--config", str(policy), "archs", "--from-wheel", str(wheels["good"]), "--write", "linux-x86_64-cu13*")
    assert r.code == 0, r.err
    after = policy.read_text()
    assert after == original.replace('archs = "7.5 8.0 8.6 8.9 9.0 10.0 12.0"', 'archs = "7.5 9.0"', 1)
    r = cli("--config", str(policy), "rows", "linux-x86_64-cu132-py312", "--json")
    assert json.loads(r.out)[0]["torch_cuda_arch_list"] == "7.5;9.0+PTX"


def test_write_without_ptx_sets_ptx_none(wheels: dict[str, Path], tmp_path: Path, cli: Callable[..., Result]) -> None:
    policy = tmp_path / "buildrows.toml"
    policy.write_text(EXAMPLE_POLICY.read_text())
    r = cli("--config", str(policy), "archs", "--from-wheel", str(wheels["ptx-missing"]), "--write", "linux-x86_64-cu126-*")
    assert r.code == 0, r.err
    assert 'trains = ["12.6"]\narchs = "7.5 9.0"\nptx = "none"\n' in policy.read_text()


@pytest.mark.parametrize(
    ("selector", "fixture", "message"),
    [
        ("linux-x86_64-cu130-*", "good", "platforms.linux-x86_64.cuda[0] is shared with CUDA 13.2, which the selection leaves out"),
        ("linux-aarch64-cu126-*", "extra-arch", "'7.5': CUDA 12.6"),  # placeholder replaced below
        ("linux-x86_64-cu13*", "split-across-libraries", "no architecture is common to its libraries"),
    ],
)
def test_refused_write_leaves_the_file_untouched(selector: str, fixture: str, message: str, wheels: dict[str, Path],
                                                 tmp_path: Path, cli: Callable[..., Result]) -> None:
    policy = tmp_path / "buildrows.toml"
    original = EXAMPLE_POLICY.read_bytes()
    policy.write_bytes(original)
    r = cli("--config", str(policy), "archs", "--from-wheel", str(wheels[fixture]), "--write", selector)
    if fixture == "extra-arch":
        # 7.5 8.0 9.0 is compilable by 12.6: this write succeeds; assert it changed only that list
        assert r.code == 0, r.err
        assert policy.read_text() == original.decode().replace('archs = "8.0 9.0"', 'archs = "7.5 8.0 9.0"', 1)
        return
    assert r.code in (2, 3)
    assert message in r.err
    assert policy.read_bytes() == original
    assert [p.name for p in tmp_path.iterdir()] == ["buildrows.toml"]


def test_write_keeps_a_byte_order_mark(wheels: dict[str, Path], tmp_path: Path, cli: Callable[..., Result]) -> None:
    policy = tmp_path / "buildrows.toml"
    original = EXAMPLE_POLICY.read_text()
    policy.write_bytes(b"\xef\xbb\xbf" + original.encode())
    r = cli("--config", str(policy), "archs", "--from-wheel", str(wheels["good"]), "--write", "linux-x86_64-cu13*")
    assert r.code == 0, r.err
    expected = original.replace('archs = "7.5 8.0 8.6 8.9 9.0 10.0 12.0"', 'archs = "7.5 9.0"', 1)
    assert policy.read_bytes() == b"\xef\xbb\xbf" + expected.encode()

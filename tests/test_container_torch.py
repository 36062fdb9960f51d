"""`build --container` for a PyTorch extension (issue 35): the job installs the row's torch as
test-infra's "Install torch dependency" step does, from the index of the row's train, or from a
local wheelhouse (PIP_FIND_LINKS, mounted; PIP_NO_INDEX=1) where no registry is reachable.

Default: the job script and the command line (under a second). Opt-in, BUILDROWS_TEST_CONTAINER=1:
scripts/compare_paths.py --project torch-extension replayed (the setup.py extension's cu130 row built
on the host, through the CI path and in the test image, the three wheels compared; a torch
wheelhouse of about 3 GB downloaded once; about 12 minutes here, 706 s measured).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from buildrows.ci import container
from buildrows.policy.load import load_policy
from tests import container_image, torch_extension
from tests.conftest import REPO
from tests.test_container import BUNDLED, _job


def test_a_torch_extensions_job_installs_the_rows_torch_before_the_pre_script(tmp_path: Path) -> None:
    pol = load_policy(str(torch_extension.PROJECT / "buildrows.toml"))
    cuda, cpu = pol.row("linux-x86_64-cu130-py311"), pol.row("linux-x86_64-cpu-py311")
    assert cuda is not None and cpu is not None
    args = container.torch_arguments(pol, cuda, {})
    assert args == ("--index-url", "https://download.pytorch.org/whl/cu130", "torch==2.14.1")
    assert container.torch_arguments(pol, cpu, {})[1] == "https://download.pytorch.org/whl/cpu"
    assert container.torch_arguments(pol, cuda, {"BUILDROWS_TORCH_INDEX": "pypi"}) == ("torch==2.14.1",)
    script = container.job_script(_job(tmp_path, torch=args))
    step = "python -m pip install --quiet --index-url https://download.pytorch.org/whl/cu130 torch==2.14.1"
    assert script.index('"$PY" -m venv') < script.index(step) < script.index("python -m pip install --quiet " +
                                                                               str(_job(tmp_path).buildrows_wheel))
    assert subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True, check=False).returncode == 0
    # A project that does not build against torch gets none (test-infra installs it anyway; nothing uses it).
    example = load_policy(str(BUNDLED))
    row = example.row("linux-x86_64-cu130-py311")
    assert row is not None and container.torch_arguments(example, row, {}) == ()
    assert "Install torch dependency" not in container.job_script(_job(tmp_path))


def test_every_local_wheelhouse_is_mounted(tmp_path: Path) -> None:
    """PIP_FIND_LINKS with two directories (buildrows' requirements, torch's): both are mounted, a
    URL and a missing directory are passed to pip as they are."""
    one, two = tmp_path / "house", tmp_path / "torch-house"
    one.mkdir()
    two.mkdir()
    links = f"{one} https://example.invalid/links {two} {tmp_path / 'missing'}"
    argv = container.command(container.Runtime("podman", "/usr/bin/podman"), _job(tmp_path),
                             {"PIP_FIND_LINKS": links, "PIP_NO_INDEX": "1"})
    assert f"{one}:{one}" in argv and f"{two}:{two}" in argv
    assert not any("missing" in a and a.startswith("/") and ":" in a and "PIP" not in a for a in argv)
    assert f"PIP_FIND_LINKS={links}" in argv and "PIP_NO_INDEX=1" in argv


@pytest.mark.integration
@pytest.mark.skipif(os.environ.get("BUILDROWS_TEST_CONTAINER") != "1",
                    reason="set BUILDROWS_TEST_CONTAINER=1: the torch extension built three ways (a 4 GB torch "
                           "wheelhouse, the test image, about 12 minutes)")
def test_the_torch_extensions_row_three_ways(tmp_path: Path) -> None:
    why = container_image.unavailable()
    if why is not None:
        pytest.fail(f"BUILDROWS_TEST_CONTAINER=1 but the container cannot run here: {why}")
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "compare_paths.py"), "--project", "torch-extension",
                          "--archs", "8.0", "--work", str(tmp_path / "work")], capture_output=True, text=True,
                         check=False)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "== linux-x86_64-cu130-py311, three ways" in out
    assert "container wheel's tag: cp311-cp311-linux_x86_64" in out
    assert "device code   <-- differs" not in out and "check   <-- differs" not in out

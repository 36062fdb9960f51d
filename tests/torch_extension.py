"""The small PyTorch extension of issue 35's three-way comparison (tests/data/torch-extension), as a
repository CI would check out, and the torch wheels a build without a registry installs.

`repository` lays out what the CI path and `build --container` need: buildrows' project at the
root (what the policy's `[ci] install = ".."` installs), the extension under torch-extension/, and
what `buildrows workflow` renders from its policy, committed. `torch_wheelhouse` downloads the
row's torch and everything it requires (torch 2.14.1 for Linux x86_64, a CUDA 13.0 build, about
4 GB with NVIDIA's library wheels) once, into a kept directory; the container and the CI path's
"Install torch dependency" step then install from it with PIP_NO_INDEX=1 and PIP_FIND_LINKS, as a
machine without a registry would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.ci_harness import BUILDROWS_FILES, HarnessError, _git

PROJECT = Path(__file__).resolve().parent / "data" / "torch-extension"
CONFIG = "torch-extension/buildrows.toml"
#: The torch the policy names (`[project] torch`), as PyPI serves it for Linux (a CUDA 13.0 build).
TORCH = "torch==2.14.1"
ARCHS = 'archs = "8.0 9.0"\n'


def repository(root: Path, buildrows_root: Path, archs: str | None = None) -> Path:
    """The extension's repository with buildrows at its root and its workflows rendered, committed."""
    repo = root / "repo"
    repo.mkdir(parents=True)
    for name in BUILDROWS_FILES:
        src = buildrows_root / name
        if src.is_dir():
            shutil.copytree(src, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, repo / name)
    shutil.copytree(PROJECT, repo / "torch-extension", ignore=shutil.ignore_patterns(
        "build", "dist", "*.egg-info", "__pycache__", "*.so"))
    if archs is not None:
        cfg = repo / CONFIG
        text = cfg.read_text(encoding="utf-8")
        if ARCHS not in text:
            raise HarnessError(f"{CONFIG}: no architecture list to replace")
        cfg.write_text(text.replace(ARCHS, f'archs = "{archs}"\n'), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_ACTIONS"}
    res = subprocess.run([str(Path(sys.executable).parent / "buildrows"), "--config", CONFIG, "workflow"],
                         cwd=repo, env=env, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise HarnessError(f"buildrows workflow failed: {res.stderr.strip()}")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "project")
    return repo


def caller(repo: Path) -> Path:
    """The rendered workflow that builds the Linux x86_64 rows."""
    found = sorted(p for p in (repo / ".github" / "workflows").glob("*.yml") if "linux-x86_64" in p.name)
    if not found:
        raise HarnessError(f"{repo}: `buildrows workflow` rendered no linux-x86_64 workflow")
    return found[0]


def torch_wheelhouse(directory: Path, python: str) -> Path:
    """torch and what it requires, for `python` on Linux x86_64, downloaded once (pip download
    skips what the directory holds), and poetry-core. pip's own configuration says where from
    (PyPI, or a mirror)."""
    directory.mkdir(parents=True, exist_ok=True)
    if f"{sys.version_info.major}.{sys.version_info.minor}" != python:
        raise HarnessError(f"the torch wheelhouse is for Python {python}: run this with that Python")
    # This machine's own tags (the test image is made of its files: the same glibc, the same Python).
    # poetry-core: the CI path's runner builds test-infra's pkg-helpers (its build backend) from here too.
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(directory), TORCH,
           "poetry-core>=1.0.0"]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise HarnessError(f"pip download {TORCH} failed: {res.stderr.strip()[-600:]}")
    return directory

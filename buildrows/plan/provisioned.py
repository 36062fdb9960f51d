"""What buildrows provisioned on this host, read only: where its cache is ($BUILDROWS_CACHE, else
$XDG_CACHE_HOME/buildrows, else ~/.cache/buildrows; toolkits, downloads and per-row build
environments live below it) and which toolkits the cache holds, each complete with its receipt.

The plan reads it (a row's toolkit is part of this host's toolchain); `buildrows.provision` writes
what it describes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from buildrows.errors import BadInput
from buildrows.frozen import Frozen, frozen_dataclass
from buildrows.policy.trains import Train

CACHE_VARIABLE = "BUILDROWS_CACHE"


def cache_root(env: Mapping[str, str]) -> Path:
    """The cache directory: BUILDROWS_CACHE, else $XDG_CACHE_HOME/buildrows, else
    $HOME/.cache/buildrows, all read from `env`. A reduced mapping that says nothing about home
    (no HOME, no XDG_CACHE_HOME) gets the process's own cache: BUILDROWS_CACHE from the process
    environment, else the user's home."""
    if env.get(CACHE_VARIABLE, "").strip():
        return Path(env[CACHE_VARIABLE]).expanduser()
    xdg, home = env.get("XDG_CACHE_HOME", "").strip(), env.get("HOME", "").strip()
    if not xdg and not home and os.environ.get(CACHE_VARIABLE, "").strip():
        return Path(os.environ[CACHE_VARIABLE]).expanduser()
    base = xdg or os.path.join(home or os.path.expanduser("~"), ".cache")
    return Path(base) / "buildrows"


def toolkits_dir(env: Mapping[str, str]) -> Path:
    return cache_root(env) / "toolkits"


def downloads_dir(env: Mapping[str, str]) -> Path:
    return cache_root(env) / "downloads"


def envs_dir(env: Mapping[str, str]) -> Path:
    return cache_root(env) / "envs"


RECEIPT = "buildrows-toolkit.json"
def nvcc_name(platform: str) -> str:
    return "nvcc.exe" if platform.startswith("windows") else "nvcc"


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Toolkit(Frozen):
    """A complete toolkit in the cache."""

    train: Train
    platform: str
    root: Path
    source: str
    release: str
    nvcc_version: str
    libraries: bool

    @property
    def nvcc(self) -> Path:
        return self.root / "bin" / nvcc_name(self.platform)

    def describe(self) -> str:
        libs = ", with library headers" if self.libraries else ""
        return f"CUDA {self.nvcc_version} ({self.source} {self.release}{libs}) at {self.root}"


def toolkit_root(train: Train, platform: str, env: Mapping[str, str]) -> Path:
    return toolkits_dir(env) / platform / train.dotted


def installed(train: Train, platform: str, env: Mapping[str, str]) -> Toolkit | None:
    """The cached toolkit of the train, or None. Reads the receipt only: the toolkit was verified
    when it was assembled, and nothing renames a directory without a receipt into place."""
    root = toolkit_root(train, platform, env)
    try:
        data = json.loads((root / RECEIPT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (root / "bin" / nvcc_name(platform)).is_file():
        return None
    return Toolkit(train, platform, root, str(data.get("source")), str(data.get("release")),
                   str(data.get("nvcc_version")), bool(data.get("libraries")))


def list_installed(env: Mapping[str, str]) -> list[Toolkit]:
    out: list[Toolkit] = []
    base = toolkits_dir(env)
    if not base.is_dir():
        return out
    for plat in sorted(p for p in base.iterdir() if p.is_dir()):
        for d in sorted(plat.iterdir()):
            try:
                train = Train.parse(d.name)
            except (BadInput, ValueError):
                continue
            tk = installed(train, plat.name, env)
            if tk is not None:
                out.append(tk)
    return out

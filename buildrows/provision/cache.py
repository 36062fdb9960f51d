"""Where buildrows keeps what it provisions: $BUILDROWS_CACHE, else $XDG_CACHE_HOME/buildrows,
else ~/.cache/buildrows. Toolkits, downloads and per-row build environments live below it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

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

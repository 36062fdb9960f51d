"""Where buildrows keeps what it provisions: $BUILDROWS_CACHE, else $XDG_CACHE_HOME/buildrows,
else ~/.cache/buildrows. Toolkits, downloads and per-row build environments live below it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

CACHE_VARIABLE = "BUILDROWS_CACHE"


def cache_root(env: Mapping[str, str]) -> Path:
    """The cache directory; BUILDROWS_CACHE in `env`, else in the process environment (the cache is
    the process's, even where a caller passes a reduced mapping), else the XDG default."""
    chosen = env.get(CACHE_VARIABLE, "").strip() or os.environ.get(CACHE_VARIABLE, "").strip()
    if chosen:
        return Path(chosen).expanduser()
    base = env.get("XDG_CACHE_HOME", "").strip() or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache")
    return Path(base) / "buildrows"


def toolkits_dir(env: Mapping[str, str]) -> Path:
    return cache_root(env) / "toolkits"


def downloads_dir(env: Mapping[str, str]) -> Path:
    return cache_root(env) / "downloads"


def envs_dir(env: Mapping[str, str]) -> Path:
    return cache_root(env) / "envs"

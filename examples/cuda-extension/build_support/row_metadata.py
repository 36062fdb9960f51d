"""scikit-build-core metadata provider: the per-row parts of this project's metadata.

A row's wheel differs from its siblings in two metadata fields, and both come from the
environment the build runs in, so the project file stays the same for every row:

- ``version``: ``base`` plus the local version label in ``BUILDROWS_LOCAL_VERSION``
  (``cu130`` or ``+cu130`` gives ``0.1.0+cu130``; empty or unset gives ``0.1.0``).
- ``dependencies``: one requirement per line of ``BUILDROWS_REQUIRES_DIST`` (a CUDA row's
  runtime, e.g. ``nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'``; none for CPU).

`buildrows build` sets both from the row; `buildrows env` writes them for CI.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

_LOCAL = re.compile(r"^[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*$")


def dynamic_metadata(field: str, settings: Mapping[str, Any] | None = None) -> str | list[str]:
    settings = settings or {}
    if field == "version":
        base = str(settings.get("base", "0.0.0"))
        local = os.environ.get("BUILDROWS_LOCAL_VERSION", "").strip().lstrip("+")
        if not local:
            return base
        if not _LOCAL.match(local):
            msg = f"BUILDROWS_LOCAL_VERSION={local!r} is not a PEP 440 local version label"
            raise ValueError(msg)
        return f"{base}+{local}"
    if field == "dependencies":
        text = os.environ.get("BUILDROWS_REQUIRES_DIST", "")
        return [line.strip() for line in text.splitlines() if line.strip()]
    msg = f"row_metadata provides version and dependencies, not {field}"
    raise ValueError(msg)

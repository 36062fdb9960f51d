"""scikit-build-core metadata provider of this example: buildrows' own, `buildrows.metadata`.

The row's wheel differs from its siblings in its version's local label (``+cu130``) and its
runtime requirement; `buildrows.metadata` reads both from the environment `buildrows build` (or
the hook) sets, and adds the requirement to the project's own dependencies (``requires`` in the
provider's settings) rather than replacing them. This file makes it reachable through
``provider-path``. Where buildrows is not importable by the build (a CI wheel job's isolated
``python -m build``, where only the hook ran buildrows), the same two rules apply from the small
fallback below; tests/test_metadata_provider.py holds the two to identical results.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

try:
    from buildrows.metadata import dynamic_metadata
except ImportError:  # buildrows is not installed where this build runs

    def dynamic_metadata(field: Any, settings: Mapping[str, Any] | None = None,  # type: ignore[misc]
                         project: Mapping[str, Any] | None = None) -> Any:
        conf = settings or {}
        if field == "version":
            local = os.environ.get("BUILDROWS_LOCAL_VERSION", "").strip().lstrip("+")
            return f"{conf['base']}+{local}" if local else str(conf["base"])
        if field == "dependencies":
            def name(req: str) -> str:
                m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
                return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else req.strip().lower()

            own = list(conf.get("requires", []))
            names = {name(r) for r in own}
            for line in os.environ.get("BUILDROWS_REQUIRES_DIST", "").splitlines():
                if line.strip() and name(line) not in names:
                    own.append(line.strip())
                    names.add(name(line))
            return own
        msg = f"row_metadata provides version and dependencies, not {field}"
        raise ValueError(msg)

__all__ = ["dynamic_metadata"]

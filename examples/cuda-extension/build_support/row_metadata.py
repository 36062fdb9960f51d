"""scikit-build-core metadata provider of this example: buildrows' own, `buildrows.metadata`.

The row's wheel differs from its siblings in its version's local label (``+cu130``) and its
runtime requirement; `buildrows.metadata` reads both from the environment `buildrows build` (or
the hook) sets, and adds the requirement to the project's own dependencies rather than replacing
them. This file only makes it reachable through ``provider-path``, so the example also builds with
scikit-build-core versions that load providers from the project tree only.
"""

from __future__ import annotations

from buildrows.metadata import dynamic_metadata

__all__ = ["dynamic_metadata"]

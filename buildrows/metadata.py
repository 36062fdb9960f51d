"""A scikit-build-core metadata provider: the per-row parts of a project's metadata.

A row's wheel differs from its siblings in two fields, and both come from the environment the
build runs in (`buildrows build` sets them; `buildrows env` and the hook write them for CI):

- ``version``: the base version plus the local label in ``BUILDROWS_LOCAL_VERSION``
  (``+cu130`` gives ``0.1.0+cu130``; empty or unset leaves the base as it is);
- ``dependencies``: the project's own dependencies **plus** the row's runtime requirements, one
  per line of ``BUILDROWS_REQUIRES_DIST`` (none for CPU and Windows rows). A requirement the
  project already declares for the same distribution is kept as the project wrote it.

Both of scikit-build-core's provider interfaces are served by the one function:

``[[tool.dynamic-metadata]]`` (scikit-build-core 1.x, PEP 808 add-only merging)::

    [project]
    dependencies = ["numpy>=1.24"]          # the project's own, static
    dynamic = ["version", "dependencies"]
    [[tool.dynamic-metadata]]
    provider = "buildrows"                   # the entry point naming this module
    base = "0.1.0"                           # the version before the row's label

``[tool.scikit-build.metadata.FIELD]`` (0.10 and later; a dynamic field cannot also be static,
so the project's own dependencies are given to the provider as ``requires``)::

    [tool.scikit-build.metadata.version]
    provider = "buildrows.metadata"
    base = "0.1.0"
    [tool.scikit-build.metadata.dependencies]
    provider = "buildrows.metadata"
    requires = ["numpy>=1.24"]

buildrows must be importable by the build: `buildrows build` puts this package (and nothing
installed beside it) on the build's PYTHONPATH (drivers.provider_path), which serves buildrows'
own environment and `--provision`, but not `--isolation` nor CI's isolated build. Projects
therefore name the in-tree copy `buildrows init` writes (buildrows/data/buildrows_version.py as
build_support/buildrows_version.py, provider "buildrows_version"), which gives the same results
(tests/test_metadata_provider.py) and needs nothing but the standard library.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

__all__ = ["dynamic_metadata", "row_dependencies", "row_version"]

LOCAL_VERSION_VAR = "BUILDROWS_LOCAL_VERSION"
REQUIRES_DIST_VAR = "BUILDROWS_REQUIRES_DIST"


@cache
def _local() -> re.Pattern[str]:
    return re.compile(r"[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*")


@cache
def _name_re() -> re.Pattern[str]:
    return re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def row_version(base: str, environ: Mapping[str, str] | None = None) -> str:
    """`base` with the row's local label (BUILDROWS_LOCAL_VERSION), if any."""
    environ = os.environ if environ is None else environ
    local = environ.get(LOCAL_VERSION_VAR, "").strip().lstrip("+")
    if not local:
        return base
    if not _local().fullmatch(local):
        msg = f"{LOCAL_VERSION_VAR}={local!r} is not a PEP 440 local version label (e.g. cu130)"
        raise ValueError(msg)
    if "+" in base:
        msg = f"the base version {base!r} already has a local label; buildrows adds the row's (+{local})"
        raise ValueError(msg)
    return f"{base}+{local}"


def _name(requirement: str) -> str:
    m = _name_re().match(requirement)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else requirement.strip().lower()


def row_dependencies(own: Sequence[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """The project's own dependencies followed by the row's requirements (BUILDROWS_REQUIRES_DIST)
    that name a distribution the project does not already depend on. Never drops one of `own`."""
    environ = os.environ if environ is None else environ
    out = list(own)
    names = {_name(r) for r in own}
    for line in environ.get(REQUIRES_DIST_VAR, "").splitlines():
        req = line.strip()
        if req and _name(req) not in names:
            out.append(req)
            names.add(_name(req))
    return out


def dynamic_metadata(field: str | Mapping[str, Any], settings: Mapping[str, Any] | None = None,
                     project: Mapping[str, Any] | None = None) -> Any:
    """The provider hook, for either interface (see the module docstring).

    ``dynamic_metadata(settings, project)`` (``[[tool.dynamic-metadata]]``) returns a fragment of
    ``[project]`` for the fields the project lists as dynamic; scikit-build-core merges the
    dependencies into the static ones. ``dynamic_metadata(field, settings[, project])``
    (``[tool.scikit-build.metadata.FIELD]``) returns the one field's value.
    """
    if not isinstance(field, str):
        conf, proj = field, settings or {}
        dynamic = set(proj.get("dynamic", ()))
        fragment: dict[str, Any] = {}
        if "version" in dynamic:
            fragment["version"] = row_version(_base(conf))
        if "dependencies" in dynamic:
            # Add-only: scikit-build-core appends these to the static [project] dependencies.
            static = proj.get("dependencies", []) if isinstance(proj.get("dependencies"), list) else []
            fragment["dependencies"] = row_dependencies(static)[len(static):]
        return fragment
    conf = settings or {}
    if field == "version":
        return row_version(_base(conf))
    if field == "dependencies":
        own = conf.get("requires", [])
        if not isinstance(own, list) or not all(isinstance(r, str) for r in own):
            msg = "buildrows.metadata: `requires` must be a list of requirement strings"
            raise TypeError(msg)
        return row_dependencies(own)
    msg = f"buildrows.metadata provides version and dependencies, not {field}"
    raise ValueError(msg)


def _base(conf: Mapping[str, Any]) -> str:
    base = conf.get("base")
    if not isinstance(base, str) or not base:
        msg = "buildrows.metadata: set `base` to the version before the row's local label, e.g. base = \"0.1.0\""
        raise ValueError(msg)
    return base

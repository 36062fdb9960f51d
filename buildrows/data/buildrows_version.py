"""The row's version and runtime requirement for this project's wheel: a scikit-build-core
metadata provider kept in the project (written by `buildrows init`; buildrows is not needed to build).

A buildrows row's wheel differs from its siblings in two fields, which `buildrows build`, and in CI
the pre-build hook, set in the build's environment:

- ``version``: the base version plus ``BUILDROWS_LOCAL_VERSION`` (``+cu130`` gives ``0.1.0+cu130``;
  empty or unset, as for CPU rows and any other build, leaves the base as it is);
- ``dependencies``: the project's own dependencies **plus** each line of ``BUILDROWS_REQUIRES_DIST``
  (the CUDA runtime, e.g. ``nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'``) that names a
  distribution the project does not already depend on.

pyproject.toml names it (scikit-build-core 0.10 and later; ``experimental = true`` lets it load a
provider from the project, and ``minimum-version = "0.10"`` keeps 1.x from warning)::

    [project]
    dynamic = ["version", "dependencies"]
    [tool.scikit-build]
    minimum-version = "0.10"
    experimental = true
    [tool.scikit-build.metadata.version]
    provider = "buildrows_version"
    provider-path = "build_support"
    base = "0.1.0"
    [tool.scikit-build.metadata.dependencies]
    provider = "buildrows_version"
    provider-path = "build_support"
    requires = ["numpy>=1.24"]       # the project's own dependencies

A setup.py build can call the same functions: ``version=row_version("0.1.0")`` and
``install_requires=row_dependencies(["numpy>=1.24"])``. buildrows' tests hold this file to the
results of `buildrows.metadata`, the same rules inside buildrows.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

LOCAL_VERSION_VAR = "BUILDROWS_LOCAL_VERSION"
REQUIRES_DIST_VAR = "BUILDROWS_REQUIRES_DIST"
_LOCAL = re.compile(r"[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*")
_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")

__all__ = ["dynamic_metadata", "row_dependencies", "row_version"]


def row_version(base: str, environ: Mapping[str, str] | None = None) -> str:
    """`base` with the row's local label (BUILDROWS_LOCAL_VERSION), if any."""
    env = os.environ if environ is None else environ
    local = env.get(LOCAL_VERSION_VAR, "").strip().lstrip("+")
    if not local:
        return base
    if not _LOCAL.fullmatch(local):
        raise ValueError(f"{LOCAL_VERSION_VAR}={local!r} is not a PEP 440 local version label (e.g. cu130)")
    if "+" in base:
        raise ValueError(f"the base version {base!r} already has a local label; buildrows adds the row's (+{local})")
    return f"{base}+{local}"


def _name(requirement: str) -> str:
    m = _NAME.match(requirement)
    return re.sub(r"[-_.]+", "-", m.group(1)).lower() if m else requirement.strip().lower()


def row_dependencies(own: Sequence[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """The project's own dependencies, then the row's (BUILDROWS_REQUIRES_DIST) that name a
    distribution the project does not already depend on. Never drops one of `own`."""
    env = os.environ if environ is None else environ
    out = list(own)
    names = {_name(r) for r in own}
    for line in env.get(REQUIRES_DIST_VAR, "").splitlines():
        req = line.strip()
        if req and _name(req) not in names:
            out.append(req)
            names.add(_name(req))
    return out


def dynamic_metadata(field: Any, settings: Mapping[str, Any] | None = None,
                     project: Mapping[str, Any] | None = None) -> Any:
    """scikit-build-core's hook: ``dynamic_metadata(field, settings)`` for
    ``[tool.scikit-build.metadata.FIELD]``; ``dynamic_metadata(settings, project)`` (a fragment of
    ``[project]``, dependencies added to the static ones) for ``[[tool.dynamic-metadata]]``."""
    if not isinstance(field, str):
        conf, proj = field, settings or {}
        dynamic = set(proj.get("dynamic", ()))
        fragment: dict[str, Any] = {}
        if "version" in dynamic:
            fragment["version"] = row_version(_base(conf))
        if "dependencies" in dynamic:
            static = proj.get("dependencies", []) if isinstance(proj.get("dependencies"), list) else []
            fragment["dependencies"] = row_dependencies(static)[len(static):]
        return fragment
    conf = settings or {}
    if field == "version":
        return row_version(_base(conf))
    if field == "dependencies":
        own = conf.get("requires", [])
        if not isinstance(own, list) or not all(isinstance(r, str) for r in own):
            raise TypeError("buildrows_version: `requires` must be a list of requirement strings")
        return row_dependencies(own)
    raise ValueError(f"buildrows_version provides version and dependencies, not {field}")


def _base(conf: Mapping[str, Any]) -> str:
    base = conf.get("base")
    if not isinstance(base, str) or not base:
        raise ValueError('buildrows_version: set `base` to the version before the row\'s local label, e.g. base = "0.1.0"')
    return base

"""Doctor's prediction of the wheel check from the project's files: what `init` knew is missing.

Issue 35 point 5: a scikit-build-core project after `init`, before the pyproject.toml edits init
printed, passed doctor ("everything the row needs is here"), and the wheel failed
local-version-tag, runtime-declared and runtime-reached after the whole compile, all of which
init had said. The same rules init prints from (`buildrows.build.provider`) are read here, before
any compile, and each check they foretell is a failed finding carrying init's fix:

- the row's local version (+cu130) and runtime requirement reach the wheel through the in-tree
  metadata provider named in pyproject.toml, or through stamping ([project] stamp = true): with
  neither, local-version-tag (and, where the row declares a runtime, runtime-declared) fails;
- in `dynamic` runtime mode a library that links the shared CUDA runtime (the build files say
  so: CMAKE_CUDA_RUNTIME_LIBRARY Shared, CUDA::cudart, a setup.py's "cudart") must find the
  runtime wheel's directory through its RPATH: build files that set none (and a policy that sets
  none either) fail runtime-reached.

A project naming `buildrows.metadata` builds only where buildrows can be imported (not under
--isolation, not in CI's isolated build step): under --isolation that is predicted too, with the
in-tree provider as the fix.
"""

from __future__ import annotations

import re
from pathlib import Path

from buildrows.build.findings import Finding
from buildrows.policy.model import Driver, Policy, Row

CHECK = "predicted check"


def predict(policy: Policy, row: Row, project: Path, driver: Driver, *, isolation: bool = False) -> list[Finding]:
    """Failed findings for the checks the wheel of `row` will fail, from what the project's files
    and the policy say; none for a CPU row or where the project already does what init asks."""
    if not row.is_cuda or driver == "cmake-presets":
        return []
    out: list[Finding] = []
    metadata = _metadata(policy, row, project, driver, isolation)
    if metadata is not None:
        out.append(metadata)
    rpath = _rpath(policy, row, project, driver)
    if rpath is not None:
        out.append(rpath)
    return out


def _metadata(policy: Policy, row: Row, project: Path, driver: Driver, isolation: bool) -> Finding | None:
    """local-version-tag and runtime-declared, for a scikit-build-core project that names no
    provider giving them (or names buildrows.metadata under --isolation) without stamping."""
    if driver != "scikit-build-core" or policy.project.stamp or not row.local_tag:
        return None
    from buildrows.build import provider as adopt

    named = adopt.version_provider(project)
    if named == adopt.PROVIDER:
        return None
    checks = "local-version-tag" + (", runtime-declared" if row.requires_dist else "")
    if named in ("buildrows.metadata", "buildrows"):
        if not isolation:
            return None
        return Finding(CHECK, "refused",
                       f"pyproject.toml names the provider {named!r}, which an isolated build cannot import "
                       f"(buildrows is not installed there): the wheel of {row.name} would fail {checks}",
                       f"name the in-tree provider init writes ({adopt.PROVIDER_DIR}/{adopt.PROVIDER}.py: "
                       f"provider = \"{adopt.PROVIDER}\", provider-path = \"{adopt.PROVIDER_DIR}\" in pyproject.toml, "
                       "as `buildrows init` prints), or set [project] stamp = true in the policy")
    advice = adopt.scikit_build_core(project, row.local_tag).advice
    what = (f"pyproject.toml takes its version from the provider {named!r}" if named is not None
            else "pyproject.toml names no metadata provider")
    needs = f"its local version ({row.local_tag})" + (
        f" and runtime requirement ({', '.join(row.requires_dist)})" if row.requires_dist else "")
    return Finding(CHECK, "refused",
                   f"{what} and the policy does not stamp: the wheel of {row.name} would lack {needs} and fail "
                   f"{checks} after the compile",
                   "\n          ".join((*advice, "or set [project] stamp = true in the policy")))


def _rpath(policy: Policy, row: Row, project: Path, driver: Driver) -> Finding | None:
    """runtime-reached, for a dynamic-mode CUDA row whose build files and policy set no RPATH."""
    runtime = row.runtime
    if runtime is None or runtime.mode != "dynamic" or not runtime.library_dir:
        return None
    given = [*(k for k, _ in row.cache), *(v for _, v in row.switches)]
    if any("RPATH" in k.upper() or "-rpath" in k for k in given):
        return None  # the policy sets one (CMAKE_INSTALL_RPATH, LDFLAGS=-Wl,-rpath,...): the check judges it
    if not _links_shared_cudart(project, driver):
        return None  # a static runtime (CMake's default) or none: nothing to reach, nothing foretold
    from buildrows.build import provider as adopt

    advice = adopt.rpath_advice(project, driver, runtime.library_dir)
    if not advice:
        return None
    return Finding(CHECK, "refused",
                   f"the wheel of {row.name} would fail runtime-reached: {advice[0].split(': ', 1)[0]}, so its "
                   f"extension cannot find libcudart in site-packages/{runtime.library_dir}",
                   advice[0].split(". ", 1)[1] if ". " in advice[0] else advice[0])


#: What in a project's build files says it links the shared CUDA runtime: CMake's
#: CMAKE_CUDA_RUNTIME_LIBRARY Shared (or the target property), CUDA::cudart (not _static), a
#: setup.py's libraries=["cudart"].
_SHARED_CUDART = re.compile(r"CUDA_RUNTIME_LIBRARY\s+\"?Shared|CUDA::cudart\b(?!_static)|['\"]cudart['\"]", re.I)


def _links_shared_cudart(project: Path, driver: Driver) -> bool:
    """Whether the build files say the library links libcudart.so (only then does the check's
    runtime-reached judge an RPATH into the runtime wheel)."""
    if driver == "setup.py":
        files = [project / "setup.py"]
    else:
        files = [p for p in project.rglob("CMakeLists.txt") if "build" not in p.relative_to(project).parts[:1]]
    for f in files:
        try:
            if _SHARED_CUDART.search(f.read_text(encoding="utf-8", errors="replace")):
                return True
        except OSError:
            continue
    return False

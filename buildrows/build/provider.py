"""What `buildrows init` adds beside the policy, so that the project's wheels carry their row's
local version (``+cu130``) and runtime requirement wherever they are built (issue 29).

One way per driver, each working in buildrows' own environment, under ``build --provision`` and
``--isolation``, and in test-infra's isolated build step, where buildrows is not importable:

- **scikit-build-core**: the small metadata provider `buildrows/data/buildrows_version.py`,
  written into the project as ``build_support/buildrows_version.py`` (only when absent). It reads
  ``BUILDROWS_LOCAL_VERSION``/``BUILDROWS_REQUIRES_DIST``, which `build` and the hook set, and
  imports nothing but the standard library. pyproject.toml is the user's file: init prints the
  lines that name the provider instead of editing it.
- **setup.py**: stamping (``[project] stamp = true``, which the starter writes): after the build,
  `build` (and the CI post-script, with `buildrows stamp`) rewrites the wheel; setup.py stays as it is.
- **cmake-presets**: no wheel is built; the presets' environment carries both variables for a
  packaging step of the project's own.

For CUDA rows in ``dynamic`` runtime mode the built library must also reach the runtime wheel's
directory through its RPATH; when the build files set none, init says which property or option to set.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from buildrows.resources import data_file

PROVIDER = "buildrows_version"
PROVIDER_DIR = "build_support"


@dataclass(frozen=True)
class Adoption:
    """Files init writes into the project (each only where absent), and what it tells the user."""

    files: tuple[tuple[Path, str], ...]
    advice: tuple[str, ...]


def provider_text() -> str:
    """The in-tree provider, as init writes it (the bundled example carries the same file)."""
    return data_file(f"{PROVIDER}.py").read_text(encoding="utf-8")


def _pyproject(project: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        doc: dict[str, Any] = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}
    return doc


def _q(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _version_provider(doc: dict[str, Any]) -> str | None:
    """The provider pyproject.toml already gives the version through, if any."""
    tool = doc.get("tool", {})
    meta = tool.get("scikit-build", {}).get("metadata", {}) if isinstance(tool.get("scikit-build"), dict) else {}
    if isinstance(meta, dict) and isinstance(meta.get("version"), dict):
        return str(meta["version"].get("provider", "?"))
    for entry in tool.get("dynamic-metadata", []) if isinstance(tool.get("dynamic-metadata"), list) else []:
        if isinstance(entry, dict):
            return str(entry.get("provider", "?"))
    return None


def version_provider(project: Path) -> str | None:
    """The metadata provider the project's pyproject.toml gives its version through, if any."""
    return _version_provider(_pyproject(project))


def scikit_build_core(project: Path, local_tag: str) -> Adoption:
    """The provider file and the pyproject.toml lines that name it."""
    doc = _pyproject(project)
    target = project / PROVIDER_DIR / f"{PROVIDER}.py"
    text = provider_text()
    files: list[tuple[Path, str]] = []
    advice: list[str] = []
    if target.exists():
        if target.read_text(encoding="utf-8", errors="replace") != text:
            advice.append(f"{target} is there already and differs from buildrows' provider: kept as it is "
                          f"(buildrows' own is {data_file(PROVIDER + '.py')})")
    else:
        files.append((target, text))
    provider = _version_provider(doc)
    if provider == PROVIDER:
        advice.append(f"pyproject.toml already names {PROVIDER} for the version and dependencies: nothing to add")
        return Adoption(tuple(files), tuple(advice))
    if provider is not None:
        advice.append(f"pyproject.toml takes the version from the provider {provider!r}: a CUDA row's wheel needs "
                      f"its local version ({local_tag or '+cu130'}) and runtime requirement too; either replace that "
                      f"provider by {PROVIDER} (see docs/policy.md) or set [project] stamp = true in the policy")
        return Adoption(tuple(files), tuple(advice))
    proj = doc.get("project", {}) if isinstance(doc.get("project"), dict) else {}
    version = proj.get("version")
    base = version if isinstance(version, str) else "0.1.0"
    deps = [d for d in proj.get("dependencies", []) if isinstance(d, str)] if isinstance(
        proj.get("dependencies"), list) else []
    skb = doc.get("tool", {}).get("scikit-build") if isinstance(doc.get("tool"), dict) else None
    dynamic = [d for d in proj.get("dynamic", []) if isinstance(d, str) and d not in ("version", "dependencies")]
    dyn_line = "dynamic = [" + ", ".join(_q(d) for d in (*dynamic, "version", "dependencies")) + "]"
    made = "init wrote it" if files else "it is there already"
    advice.append(f"pyproject.toml: each row's wheel gets its local version ({local_tag or '+cu130'}) and runtime "
                  f"requirement from {PROVIDER_DIR}/{PROVIDER}.py ({made}; buildrows need not be installed where "
                  "the wheel is built). init never edits pyproject.toml; make these changes:")
    step = 1
    old = []
    if isinstance(proj.get("version"), str):
        old.append(f"version = {_q(base)}")
    if "dynamic" in proj:
        old.append("dynamic = [" + ", ".join(_q(d) for d in proj.get("dynamic", [])) + "]")
    if old:
        advice += [f"  {step}. in [project], replace these lines", *(f"         {line}" for line in old), "     with",
                   f"         {dyn_line}"]
    else:
        advice += [f"  {step}. in [project], add", f"         {dyn_line}"]
    if deps:
        advice.append("     and delete its dependencies = [...]: `requires` below carries them")
    step += 1
    settings = [('minimum-version = "0.10"', "minimum-version"), ("experimental = true", "experimental")]
    tables: list[str] = []
    if isinstance(skb, dict):
        keep = [line for line, key in settings if not (key == "experimental" and skb.get(key) is True)]
        current = skb.get("minimum-version")
        if isinstance(current, str) and _below_one(current):
            keep = [line for line in keep if not line.startswith("minimum-version")]
        if keep:
            verb = "set" if "minimum-version" in skb else "add"
            advice += [f"  {step}. in [tool.scikit-build], {verb}", *(f"         {line}" for line in keep)]
            step += 1
    else:
        tables += ["[tool.scikit-build]", *(line for line, _key in settings), ""]
    tables += ["[tool.scikit-build.metadata.version]", f"provider = {_q(PROVIDER)}",
               f"provider-path = {_q(PROVIDER_DIR)}", f"base = {_q(base)}", "",
               "[tool.scikit-build.metadata.dependencies]", f"provider = {_q(PROVIDER)}",
               f"provider-path = {_q(PROVIDER_DIR)}", "requires = [" + ", ".join(_q(d) for d in deps) + "]"]
    advice += [f"  {step}. add at the end of the file", *(f"         {line}" if line else "" for line in tables)]
    advice.append("  (experimental = true lets scikit-build-core load a provider from the project; "
                  "minimum-version 0.10 keeps 1.x from warning that these tables are deprecated)")
    return Adoption(tuple(files), tuple(advice))


def _below_one(version: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version) < Version("1.0") and Version(version) >= Version("0.10")
    except InvalidVersion:
        return False


def rpath_advice(project: Path, driver: str, library_dir: str, what: str = "libcudart",
                 by: str = "the runtime requirement") -> list[str]:
    """What to set so a CUDA row's library reaches the runtime wheel's directory (or, `what` and
    `by`, the directory of the NVIDIA packages carrying the CUDA libraries it links), when the build
    files set no RPATH at all (one printed hint; `buildrows check` names the entry per library)."""
    entry = f"$ORIGIN/../{library_dir}"
    if driver in ("scikit-build-core", "cmake-presets"):
        texts = [p.read_text(encoding="utf-8", errors="replace") for p in project.rglob("CMakeLists.txt")
                 if "build" not in p.relative_to(project).parts[:1]]
        if any("INSTALL_RPATH" in t for t in texts):
            return []
        return [f"CMakeLists.txt sets no INSTALL_RPATH: a CUDA row's extension must find {what} in "
                f"site-packages/{library_dir}, where {by} installs it. For a module installed one "
                f"directory below site-packages, add set_target_properties(TARGET PROPERTIES INSTALL_RPATH "
                f"\"{entry}\") (`buildrows check` names the entry each library needs)"]
    if driver == "setup.py":
        try:
            text = (project / "setup.py").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        if "$ORIGIN" in text or "runtime_library_dirs" in text:
            return []
        return [f"setup.py sets no RPATH: a CUDA row's extension must find {what} in site-packages/{library_dir}, "
                f"where {by} installs it. For an extension one directory below site-packages, pass "
                f"Extension(..., runtime_library_dirs=[\"{entry}\"]), or, leaving setup.py as it is, give the policy "
                f"[project.cuda-env] LDFLAGS = \"-Wl,-rpath,{entry}\" (`buildrows check` names the entry each library "
                "needs)"]
    return []


def library_rpath_advice(project: Path, driver: str, requirements: tuple[str, ...]) -> list[str]:
    """Runtime mode "none" with NVIDIA library packages declared (pycuda's nvidia-curand): the RPATH
    hint for the directory each installs its libraries in."""
    from packaging.requirements import InvalidRequirement, Requirement

    from buildrows.check.nvidia import packages

    known = packages()
    by_dir: dict[str, list[str]] = {}
    for text in requirements:
        try:
            name = Requirement(text).name
        except InvalidRequirement:
            continue
        if name in known:
            by_dir.setdefault(known[name].dir, []).append(name)
    out: list[str] = []
    for directory, names in sorted(by_dir.items()):
        sonames = ", ".join(so for n in names for so in known[n].sonames)
        out += rpath_advice(project, driver, directory, what=sonames, by=" and ".join(names))
    return out

"""Where a train's toolkit comes from, as a list of verified artifacts:

- ``pypi``: NVIDIA's wheels on PyPI, pinned by URL and sha256 in `buildrows/data/toolkits.toml`
  (13.x: nvidia-cuda-nvcc, -crt, nvidia-nvvm, -runtime, -cccl, nvidia-nvtx at one release, and with
  the libraries nvidia-cublas, -cusparse, -cusolver, -curand, -cufft and nvidia-cuda-profiler-api;
  no 12.x package carries nvcc);
- ``redist``: NVIDIA's redistributable archives, described by `redistrib_X.Y.Z.json` manifests
  (per component and platform: relative_path, sha256, size) under a mirror URL (default NVIDIA's
  own, `BUILDROWS_CUDA_MIRROR` or `--mirror` to change it), for any train.
"""

from __future__ import annotations

import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from buildrows.errors import BadInput, ExternalFailure, Refused
from buildrows.policy.trains import Train
from buildrows.provision.archives import Artifact
from buildrows.resources import data_file

Source = Literal["pypi", "redist"]
DEFAULT_MIRROR = "https://developer.download.nvidia.com/compute/cuda/redist/"
MIRROR_VARIABLE = "BUILDROWS_CUDA_MIRROR"
#: A directory (or URL) holding the pinned wheels under their own file names, used instead of PyPI
#: (an offline machine, a wheelhouse); the pinned sha256 is checked all the same.
WHEELS_VARIABLE = "BUILDROWS_TOOLKIT_WHEELS"
#: The manifests' platform keys for buildrows' platforms.
REDIST_PLATFORMS = {"linux-x86_64": "linux-x86_64", "linux-aarch64": "linux-sbsa", "windows-amd64": "windows-x86_64"}
#: (component, required): what makes a working nvcc and runtime. cuda_crt and libnvvm are separate
#: components from 12.8/13.0 on (inside cuda_nvcc before); nvtx is a header-only library.
COMPILER_COMPONENTS = (("cuda_nvcc", True), ("cuda_crt", False), ("libnvvm", False), ("cuda_cudart", True),
                       ("cuda_cccl", True), ("cuda_nvtx", False))
#: The libraries whose headers a PyTorch extension includes (torch/cuda headers pull them in).
LIBRARY_COMPONENTS = ("libcublas", "libcusparse", "libcusolver", "libcurand", "libcufft")
#: With the libraries when a release ships them: the driver API's profiler header (cudaProfiler.h,
#: beside cuda.h in the full installer; pycuda 2026.1 includes it).
OPTIONAL_LIBRARY_COMPONENTS = ("cuda_profiler_api",)
_RELEASE = re.compile(r"redistrib_(\d+)\.(\d+)\.(\d+)\.json")


@dataclass(frozen=True)
class Release:
    """What one source offers for a train on a platform: the release and its artifacts."""

    source: Source
    train: Train
    platform: str
    release: str
    origin: str  # the pins file or the manifest URL
    artifacts: tuple[Artifact, ...]
    layout: Literal["flat", "targets"]


def mirror_url(env: Mapping[str, str], override: str | None = None) -> str:
    url = (override or env.get(MIRROR_VARIABLE, "") or DEFAULT_MIRROR).strip()
    return url if url.endswith("/") else url + "/"


def _pins() -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    path = data_file("toolkits.toml")
    data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    return data


def pypi_trains(platform: str) -> list[Train]:
    return sorted(Train.parse(t) for t, plats in _pins().get("pypi", {}).items() if platform in plats)


def pypi_release(train: Train, platform: str, libraries: bool, wheels_from: str | None = None) -> Release:
    """The pinned PyPI wheels of a train, or refused naming what was looked for. `wheels_from` (a
    directory or URL) replaces PyPI as the place the pinned files are fetched from."""
    entry = _pins().get("pypi", {}).get(train.dotted, {}).get(platform)
    if entry is None:
        have = ", ".join(t.dotted for t in pypi_trains(platform)) or "none"
        why = " (NVIDIA publishes no 12.x wheel that contains nvcc)" if train.major < 13 else ""
        raise Refused(f"CUDA {train.dotted} for {platform} has no pinned PyPI wheels in buildrows/data/toolkits.toml"
                      f"{why}; pinned trains: {have}\n"
                      f"    fix: use `--source redist` (NVIDIA's redistributable archives, or a mirror of them), or pin "
                      f"the train with scripts/pin_toolkits.py")
    def where(w: dict[str, Any]) -> str:
        if not wheels_from:
            return str(w["url"])
        if "://" in wheels_from:
            return urllib.parse.urljoin(wheels_from.rstrip("/") + "/", str(w["filename"]))
        return (Path(wheels_from).expanduser().resolve() / str(w["filename"])).as_uri()

    arts = tuple(
        Artifact(where(w), w["filename"], w["sha256"], int(w["size"]), strip=f"nvidia/cu{train.major}",
                 component=w["package"])
        for w in entry["wheels"] if libraries or not w.get("libraries", False))
    origin = "buildrows/data/toolkits.toml" + (f" (files from {wheels_from})" if wheels_from else "")
    return Release("pypi", train, platform, entry["release"], origin, arts, "flat")


def _get(url: str, what: str, timeout: float = 30) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            data: bytes = r.read()
            return data
    except urllib.error.HTTPError as e:
        if e.code == 404:
            raise FileNotFoundError(url) from e
        raise ExternalFailure(f"cannot read {what} at {url}: HTTP {e.code} {e.reason}\n"
                              f"    fix: check the mirror ({MIRROR_VARIABLE} or --mirror)") from e
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise ExternalFailure(f"cannot reach the CUDA mirror for {what} at {url}: {getattr(e, 'reason', e)}\n"
                              f"    fix: make the mirror reachable, or point {MIRROR_VARIABLE} (or --mirror) at a "
                              "reachable copy of NVIDIA's redist directory") from e


def redist_releases(mirror: str) -> list[tuple[int, int, int]]:
    """The releases the mirror's index lists (redistrib_X.Y.Z.json links), oldest first."""
    try:
        text = _get(mirror, "the release index").decode("utf-8", "replace")
    except FileNotFoundError as e:
        raise ExternalFailure(f"the CUDA mirror {mirror} has no index page (HTTP 404)\n"
                              f"    fix: point {MIRROR_VARIABLE} (or --mirror) at the directory holding "
                              "redistrib_X.Y.Z.json, or pass --release X.Y.Z") from e
    found = {(int(a), int(b), int(c)) for a, b, c in _RELEASE.findall(text)}
    return sorted(found)


def redist_release(train: Train, platform: str, libraries: bool, mirror: str, release: str | None = None) -> Release:
    """The train's newest release on the mirror (or `release`), as archives to fetch."""
    if release is None:
        offered = redist_releases(mirror)
        mine = [r for r in offered if (r[0], r[1]) == (train.major, train.minor)]
        if not mine:
            have = ", ".join(".".join(map(str, r)) for r in offered) or "none"
            raise Refused(f"CUDA {train.dotted} has no release at {mirror}: looked for redistrib_{train.dotted}.*.json "
                          f"in its index (releases there: {have})\n"
                          f"    fix: choose a train the mirror has, or point {MIRROR_VARIABLE} at a mirror that has it")
        release = ".".join(map(str, mine[-1]))
    elif not re.fullmatch(rf"{train.major}\.{train.minor}\.\d+", release):
        raise BadInput(f"--release {release!r} is not a CUDA {train.dotted} release (expected {train.dotted}.N)\n"
                       f"    fix: pass a release of the train, e.g. {train.dotted}.0")
    url = urllib.parse.urljoin(mirror, f"redistrib_{release}.json")
    try:
        raw = _get(url, f"the CUDA {release} manifest")
    except FileNotFoundError as e:
        raise Refused(f"CUDA {release} has no manifest at {url} (HTTP 404)\n"
                      f"    fix: choose a release the mirror has") from e
    try:
        manifest = json.loads(raw)
        if not isinstance(manifest, dict):
            raise ValueError("not a JSON object")
    except ValueError as e:
        raise BadInput(f"{url}: not a redistrib manifest ({e})\n    fix: re-sync the mirror") from e
    return Release("redist", train, platform, release, url,
                   tuple(_manifest_artifacts(manifest, url, mirror, platform, libraries)), "targets")


def _manifest_artifacts(manifest: dict[str, Any], url: str, mirror: str, platform: str, libraries: bool) -> list[Artifact]:
    key = REDIST_PLATFORMS.get(platform)
    if key is None:
        raise BadInput(f"buildrows does not know NVIDIA's name for platform {platform}")
    wanted = list(COMPILER_COMPONENTS) + ([(c, True) for c in LIBRARY_COMPONENTS] if libraries else [])
    wanted += [(c, False) for c in OPTIONAL_LIBRARY_COMPONENTS] if libraries else []
    out: list[Artifact] = []
    for name, required in wanted:
        entry = manifest.get(name)
        item = entry.get(key) if isinstance(entry, dict) else None
        if not isinstance(item, dict):
            if required:
                raise Refused(f"{url}: component {name} has no {key} archive\n"
                              "    fix: choose a release (or mirror) that ships it for this platform")
            continue
        try:
            rel, sha, size = str(item["relative_path"]), str(item["sha256"]), int(item["size"])
        except (KeyError, ValueError, TypeError) as e:
            raise BadInput(f"{url}: {name}.{key} lacks relative_path, sha256 or size ({e})\n"
                           "    fix: re-sync the mirror") from e
        if not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise BadInput(f"{url}: {name}.{key}.sha256 is not a sha256 ({sha!r})\n    fix: re-sync the mirror")
        if rel.startswith("/") or ".." in rel.split("/") or "://" in rel:
            raise Refused(f"{url}: {name}.{key}.relative_path {rel!r} leaves the mirror\n    fix: re-sync the mirror")
        filename = rel.rsplit("/", 1)[-1]
        top = re.sub(r"\.(tar\.xz|tar\.gz|tar\.bz2|tar|zip)$", "", filename)
        out.append(Artifact(urllib.parse.urljoin(mirror, rel), filename, sha, size, strip=top, component=name))
    return out

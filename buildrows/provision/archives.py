"""Fetching and unpacking toolkit archives safely: every file is checked against its sha256 (read
once: hashed while it downloads, or in one pass when it is already in the cache), and no archive
member may land outside its target (`..`, absolute paths, links that point out, devices).
Archives are unpacked, never run."""

from __future__ import annotations

import hashlib
import lzma
import os
import posixpath
import shutil
import stat
import tarfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from buildrows.errors import BadInput, ExternalFailure, Refused

CHUNK = 1 << 20


@dataclass(frozen=True)
class Artifact:
    """One file to fetch: where from, what it must hash to, and which part of it is the toolkit."""

    url: str
    filename: str
    sha256: str
    size: int | None = None
    #: Members under this prefix are unpacked (with the prefix removed); others are skipped.
    strip: str = ""
    #: Where below the toolkit root the stripped members go ("" = the root itself).
    into: str = ""
    component: str = ""
    #: First path components renamed after stripping (("include", "targets/x86_64-linux/include"), ...).
    remap: tuple[tuple[str, str], ...] = ()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def fetch(art: Artifact, downloads: Path, progress: Callable[[str], None] | None = None, timeout: float = 60) -> Path:
    """The verified file of `art` in `downloads`: reused when already there and it hashes right,
    else downloaded (hashed while it is written). A mismatch is refused and the file removed."""
    downloads.mkdir(parents=True, exist_ok=True)
    dest = downloads / f"{art.sha256[:16]}-{art.filename}"
    if dest.is_file():
        if sha256_file(dest) == art.sha256:
            return dest
        dest.unlink()
    if progress:
        progress(f"download {art.url}" + (f" ({art.size / 1e6:.1f} MB)" if art.size else ""))
    tmp = dest.with_name(dest.name + f".part{os.getpid()}")
    h = hashlib.sha256()
    size = 0
    try:
        with urllib.request.urlopen(art.url, timeout=timeout) as resp, open(tmp, "wb") as out:
            while chunk := resp.read(CHUNK):
                h.update(chunk)
                out.write(chunk)
                size += len(chunk)
    except (urllib.error.URLError, OSError, ValueError) as e:
        tmp.unlink(missing_ok=True)
        raise ExternalFailure(f"cannot download {art.url}: {getattr(e, 'reason', e)}\n"
                              "    fix: check the network (or the mirror URL), then run the command again") from e
    got = h.hexdigest()
    if got != art.sha256 or (art.size is not None and size != art.size):
        tmp.unlink(missing_ok=True)
        raise Refused(f"{art.url}: the download does not match its pinned checksum (sha256 {got}, {size} bytes; "
                      f"expected {art.sha256}" + (f", {art.size} bytes" if art.size is not None else "") + ")\n"
                      "    fix: nothing was unpacked; if the mirror is yours, re-sync it from NVIDIA's server")
    os.replace(tmp, dest)
    return dest


def _safe_name(name: str, where: str) -> str:
    """The member's path relative to the target, or refused when it would land outside it."""
    norm = name.replace("\\", "/")
    if norm.startswith("/") or (len(norm) > 1 and norm[1] == ":"):
        raise Refused(f"{where}: member {name!r} is an absolute path; the archive is refused and nothing of it "
                      "was installed\n    fix: use an archive from NVIDIA's server (or re-sync the mirror)")
    parts = [p for p in norm.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise Refused(f"{where}: member {name!r} climbs out of the target with '..'; the archive is refused and "
                      "nothing of it was installed\n    fix: use an archive from NVIDIA's server (or re-sync the mirror)")
    return "/".join(parts)


def _link_stays_inside(rel: str, target: str) -> bool:
    """A symlink at `rel` (relative to the root) pointing at `target` resolves inside the root."""
    if target.startswith("/") or "\\" in target:
        return False
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
    return not (joined == ".." or joined.startswith("../"))


def _strip(rel: str, art: Artifact) -> str | None:
    prefix = art.strip.rstrip("/") + "/" if art.strip else ""
    if not rel.startswith(prefix):
        return None
    rest = rel[len(prefix):]
    if not rest:
        return None
    head, _, tail = rest.partition("/")
    for old, new in art.remap:
        if head == old:
            rest = posixpath.join(new, tail) if tail else new
            break
    return posixpath.join(art.into, rest) if art.into else rest


def unpack(path: Path, art: Artifact, root: Path) -> int:
    """Unpack the archive's members below `root`; returns how many files were written. Every member
    is checked before anything is written, so a hostile archive leaves `root` untouched."""
    where = art.filename
    if path.name.endswith((".whl", ".zip")):
        return _unpack_zip(path, art, root, where)
    try:
        with tarfile.open(path) as tar:
            return _unpack_tar(tar, art, root, where)
    except (tarfile.TarError, EOFError, lzma.LZMAError) as e:
        raise BadInput(f"{where}: not a readable archive: {e}\n    fix: re-sync the mirror") from e


def _unpack_tar(tar: tarfile.TarFile, art: Artifact, root: Path, where: str) -> int:
    """Check every member (names, links, kinds), then write the ones under the artifact's prefix."""
    members = tar.getmembers()
    plan: list[tuple[tarfile.TarInfo, str]] = []
    for m in members:
        rel = _safe_name(m.name, where)
        if not rel:
            continue
        if m.islnk():
            _safe_name(m.linkname, where)
        if not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
            raise Refused(f"{where}: member {m.name!r} is a device or fifo; the archive is refused\n"
                          "    fix: use an archive from NVIDIA's server (or re-sync the mirror)")
        out = _strip(rel, art)
        # Where the link lands in the toolkit decides where it points (the archive's top directory
        # is stripped): judged on the output path, not the member's name.
        if m.issym() and not _link_stays_inside(out or rel, m.linkname):
            raise _link_out(where, m.name, m.linkname)
        if out is not None:
            plan.append((m, out))
    written = 0
    real_root = os.path.realpath(root)
    for m, out in plan:
        dest = root / out
        # Links the archive made earlier may chain (`s -> .`, then `s/t -> ../x`): what each member
        # really resolves to must still be inside the toolkit.
        _stays_in(real_root, os.path.realpath(dest.parent), where, m.name)
        if m.issym():
            target = os.path.realpath(os.path.join(os.path.realpath(dest.parent), m.linkname))
            if not _within(real_root, target):
                raise _link_out(where, m.name, m.linkname)
        if m.isdir():
            dest.mkdir(parents=True, exist_ok=True)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.is_symlink() or dest.exists():
            dest.unlink()
        if m.issym():
            os.symlink(m.linkname, dest)
        elif m.islnk():
            src = _strip(_safe_name(m.linkname, where), art)
            if src is None or not (root / src).is_file():
                raise Refused(f"{where}: hard link {m.name!r} points at {m.linkname!r}, which is not part of the "
                              "toolkit\n    fix: use an archive from NVIDIA's server (or re-sync the mirror)")
            shutil.copy2(root / src, dest)
        else:
            f = tar.extractfile(m)
            assert f is not None
            with f, open(dest, "wb") as o:
                shutil.copyfileobj(f, o, CHUNK)
            os.chmod(dest, 0o755 if m.mode & 0o111 else 0o644)
        written += 1
    return written


def _within(real_root: str, path: str) -> bool:
    return path == real_root or path.startswith(real_root.rstrip(os.sep) + os.sep)


def _stays_in(real_root: str, real_parent: str, where: str, name: str) -> None:
    if not _within(real_root, real_parent):
        raise Refused(f"{where}: member {name!r} would be written through a link to {real_parent}, outside the "
                      "toolkit; the archive is refused\n"
                      "    fix: use an archive from NVIDIA's server (or re-sync the mirror)")


def _link_out(where: str, name: str, target: str) -> Refused:
    return Refused(f"{where}: member {name!r} is a symlink to {target!r}, outside the toolkit; "
                   "the archive is refused and nothing of it was installed\n"
                   "    fix: use an archive from NVIDIA's server (or re-sync the mirror)")


def _unpack_zip(path: Path, art: Artifact, root: Path, where: str) -> int:
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise BadInput(f"{where}: not a readable wheel: {e}\n    fix: delete it from the cache and run again") from e
    with zf:
        plan: list[tuple[zipfile.ZipInfo, str]] = []
        for info in zf.infolist():
            rel = _safe_name(info.filename, where)
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise Refused(f"{where}: member {info.filename!r} is a symlink; wheels carry none, so the wheel is "
                              "refused\n    fix: use the wheel from PyPI")
            out = _strip(rel, art) if rel else None
            if out is not None and not info.is_dir():
                plan.append((info, out))
        real_root = os.path.realpath(root)
        for info, out in plan:
            dest = root / out
            dest.parent.mkdir(parents=True, exist_ok=True)
            _stays_in(real_root, os.path.realpath(dest.parent), where, info.filename)
            with zf.open(info) as f, open(dest, "wb") as o:
                shutil.copyfileobj(f, o, CHUNK)
            mode = info.external_attr >> 16
            os.chmod(dest, 0o755 if mode & 0o111 else 0o644)
        return len(plan)

"""Unpacking an sdist in the tests on every supported Python.

``TarFile.extractall(filter="data")`` exists from Python 3.12 and in the security backports of
3.10.12 / 3.11.4 onward; Debian 12's Python 3.11.2 has neither the argument nor
``tarfile.data_filter``. `extract_sdist` uses the filter where there is one, and otherwise refuses
what that filter refuses for an sdist (absolute names, ``..``, links leading out, devices) before
extracting, so the tests behave alike on all of them.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path


def extract_sdist(tar: tarfile.TarFile, dest: Path) -> None:
    """Extract every member of `tar` under `dest`, refusing members that would land outside it."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
        return
    root = os.path.realpath(dest)
    members = tar.getmembers()
    for m in members:
        target = os.path.realpath(os.path.join(root, m.name))
        if os.path.isabs(m.name) or os.path.commonpath([root, target]) != root:
            raise tarfile.TarError(f"{m.name!r} would be extracted outside {dest}")
        if m.islnk() or m.issym():
            link = os.path.realpath(os.path.join(root, os.path.dirname(m.name), m.linkname)
                                    if m.issym() else os.path.join(root, m.linkname))
            if os.path.isabs(m.linkname) or os.path.commonpath([root, link]) != root:
                raise tarfile.TarError(f"{m.name!r} links outside {dest} ({m.linkname!r})")
        elif not (m.isfile() or m.isdir()):
            raise tarfile.TarError(f"{m.name!r} is neither a file, a directory nor a link")
    tar.extractall(dest, members=members)

#!/usr/bin/env python3
"""Regenerate entries of buildrows/data/nvidia_packages.toml from NVIDIA's wheels themselves.

For each package named (default: every package the table holds, and the ones in EXTRA), read the
newest Linux x86_64 wheel of each major version on PyPI: only its zip central directory (an HTTP range read of
the file's last bytes, a few hundred KB, never the wheel) names every member; the shared libraries
named by their soname (``nvidia/cudnn/lib/libcudnn.so.9``) give the package's `sonames` and their
directory its `dir`. Each entry written records its `source`: the wheel file and the date it was read.

    python scripts/nvidia_packages.py nvidia-cudnn-cu11      # rewrite those entries
    python scripts/nvidia_packages.py --check [NAME ...]     # exit 1 where the table differs

PyPI's JSON API gives the newest release and its files; one request per package.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import struct
import sys
import urllib.request
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
TABLE = REPO / "buildrows" / "data" / "nvidia_packages.toml"
# Packages the table should know that it did not before this script (CUDA 11's cuDNN, which
# TensorFlow 2.x and PyTorch 1.13 wheels declared).
EXTRA = ("nvidia-cudnn-cu11",)
# A library file named by its soname: lib<name>.so.<major>[.<minor>], as NVIDIA's wheels ship them.
_SONAME = re.compile(r"^(?P<dir>(?:.*/)?lib)/(?P<name>lib[A-Za-z0-9_+-]+\.so\.\d+(?:\.\d+)?)$")
_EOCD = b"PK\x05\x06"
_CDH = b"PK\x01\x02"


def _get(url: str, headers: dict[str, str] | None = None) -> bytes:
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return bytes(resp.read())


def newest_wheels(name: str) -> list[tuple[str, str, str]]:
    """(version, file name, URL) of the newest manylinux x86_64 wheel of each major version (cuDNN 8 and 9
    for nvidia-cudnn-cu11: a wheel built years ago NEEDS libcudnn.so.8), newest first."""
    from packaging.version import InvalidVersion, Version

    data = json.loads(_get(f"https://pypi.org/pypi/{name}/json"))
    by_major: dict[int, tuple[Version, str, str]] = {}
    for text, files in data["releases"].items():
        try:
            v = Version(text)
        except InvalidVersion:
            continue
        wheels = [f for f in files if f["filename"].endswith(".whl") and "x86_64" in f["filename"]
                  and "manylinux" in f["filename"] and not f.get("yanked")]
        if v.is_prerelease or not wheels or (v.major in by_major and by_major[v.major][0] >= v):
            continue
        f = wheels[0]
        url = f["url"] if f["url"].startswith("https://") else \
            "https://files.pythonhosted.org/" + f["url"].split("packages/", 1)[1]
        by_major[v.major] = (v, f["filename"], url)
    if not by_major:
        raise SystemExit(f"{name}: no manylinux x86_64 wheel on PyPI")
    return [(str(v), fn, url) for v, fn, url in sorted(by_major.values(), reverse=True)]


def member_names(url: str, tail: int = 1 << 20) -> list[str]:
    """The wheel's member names, from its zip central directory (read by HTTP range, not downloaded)."""
    data = _get(url, {"Range": f"bytes=-{tail}"})
    at = data.rfind(_EOCD)
    if at < 0:
        raise SystemExit(f"{url}: no zip end record in its last {tail} bytes")
    entries, size = struct.unpack_from("<HI", data, at + 10)
    if size > at:
        return member_names(url, size + (1 << 16)) if tail < size + (1 << 16) else []
    pos, names = at - size, []
    for _ in range(entries):
        if data[pos:pos + 4] != _CDH:
            break
        n, m, k = struct.unpack_from("<HHH", data, pos + 28)
        names.append(data[pos + 46:pos + 46 + n].decode("utf-8"))
        pos += 46 + n + m + k
    return names


def entry(name: str, today: str) -> tuple[list[str], str, str]:
    """(sonames, dir, source) of one package, read from the newest wheel of each of its major versions."""
    sonames: set[str] = set()
    dirs: set[str] = set()
    sources = []
    for _version, filename, url in newest_wheels(name):
        libs = [m for m in (_SONAME.match(n) for n in member_names(url)) if m]
        sonames |= {m.group("name") for m in libs}
        dirs |= {m.group("dir") for m in libs}
        sources.append(filename)
    return sorted(sonames), (dirs.pop() if len(dirs) == 1 else ""), f"{', '.join(sources)} (PyPI, {today})"


def render(name: str, sonames: list[str], directory: str, source: str) -> str:
    return (f"[packages.{name}]\nsonames = [{', '.join(json.dumps(s) for s in sonames)}]\n"
            f"dir = {json.dumps(directory)}\nsource = {json.dumps(source)}\n")


def rewrite(text: str, name: str, block: str) -> str:
    """The table's text with `name`'s entry replaced by `block` (or added after the last package)."""
    pat = re.compile(rf"^\[packages\.{re.escape(name)}\]\n(?:(?!\[|#|\n).*\n)*", re.MULTILINE)
    if pat.search(text):
        return pat.sub(lambda _m: block, text, count=1)
    last = list(re.finditer(r"^\[packages\.[^\]]+\]\n(?:(?!\[|#|\n).*\n)*", text, re.MULTILINE))[-1]
    return text[:last.end()] + block + text[last.end():]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 where the table differs")
    ap.add_argument("names", nargs="*", help="packages (default: the table's and EXTRA)")
    a = ap.parse_args(argv)
    text = TABLE.read_text(encoding="utf-8")
    known = tomllib.loads(text)["packages"]
    names = a.names or [*known, *(n for n in EXTRA if n not in known)]
    today = datetime.date.today().isoformat()
    differ = 0
    for name in names:
        sonames, directory, source = entry(name, today)
        if not directory:
            print(f"{name}: its libraries lie in several directories or none ({source}); left as it is")
            continue
        old = known.get(name)
        # The table keeps the soname a library NEEDS; a wheel may name its file more precisely (libcudart.so.11.0).
        union = sorted(set(old["sonames"] if old else ()) | set(sonames))
        same = old is not None and old["dir"] == directory and set(old["sonames"]) == set(union)
        print(f"{name}: {'same' if same else 'differs'}: {union} in {directory} ({source})")
        if not same:
            differ += 1
        if not a.check and (not same or "source" not in old):
            text = rewrite(text, name, render(name, union, directory, source))
    if not a.check:
        TABLE.write_text(text, encoding="utf-8")
    return 1 if a.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())

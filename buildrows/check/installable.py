"""What pip refuses in a wheel, or installs otherwise than its name says, found before any library is read.

pip's own rules, run with `packaging` (which pip vendors): the file name is parsed by
`packaging.utils.parse_wheel_filename` (wheelread), then:

- exactly one top-level `.dist-info` directory (pip: "multiple .dist-info directories found");
- it is `<name>-<version>.dist-info` for the file name's project and version, names compared as
  PEP 503 normalises them and versions as PEP 440 does (pip checks only that it starts with the
  name; installer, and pip's own resolver through METADATA, hold the whole of it);
- METADATA's `Name` and `Version` are the file name's (pip's resolver: "inconsistent name",
  "inconsistent version"): a wheel named `+cu130` whose METADATA says `0.1.0` installs as 0.1.0;
- no path is both a file and a directory (unpacking fails half-way);
- a pure wheel (`any`) carries no native library: it would install on every platform and load on one.

Each problem is one line with its fix; `buildrows check` fails (exit 5) before judging the row.
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

if TYPE_CHECKING:
    from buildrows.binaries.wheelread import WheelName

__all__ = ["pip_refusals"]


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def pip_refusals(wheel: Path, name: WheelName, members: tuple[str, ...], *, row_given: bool) -> list[str]:
    """Each reason pip would refuse `wheel` (or install it as another project or version), with its fix."""
    from buildrows.binaries.wheelread import metadata_headers, read_dist_info_member

    problems: list[str] = []
    expected = f"{name.distribution}-{name.version}.dist-info"
    dist_infos = sorted({m.split("/", 1)[0] for m in members if m.split("/", 1)[0].endswith(".dist-info")})
    if len(dist_infos) > 1:
        problems.append(f"the wheel has more than one .dist-info directory ({', '.join(dist_infos)}): pip refuses it "
                        "(\"multiple .dist-info directories found\")\n"
                        f"    fix: ship only {expected}; remove the others from the package data")
    for d in dist_infos:
        stem = d[: -len(".dist-info")]
        project, _, version = stem.rpartition("-")
        if not project or canonicalize_name(project) != canonicalize_name(name.distribution) \
                or not _same_version(version, name.version):
            problems.append(f"{d} does not match the wheel's name ({name.distribution} {name.version}): installers "
                            f"read {expected} (project names compared as PEP 503 normalises them, versions as PEP 440)\n"
                            "    fix: build the wheel again; rename neither the file nor the directory by hand")
    problems += _clashes(members)
    if len(dist_infos) == 1:
        data = read_dist_info_member(wheel, "METADATA")
        if data is not None:
            member = f"{dist_infos[0]}/METADATA"
            headers = metadata_headers(data, str(wheel), member)
            meta_name, meta_version = (headers.get("Name") or "").strip(), (headers.get("Version") or "").strip()
            if canonicalize_name(meta_name) != canonicalize_name(name.distribution):
                problems.append(f"{member}: METADATA says Name {meta_name or '(none)'}, the file name "
                                f"{name.distribution}: pip refuses it (\"inconsistent name\")\n"
                                "    fix: build the wheel again; its name comes from the project's metadata")
            if not _same_version(meta_version, name.version):
                problems.append(f"{member}: METADATA says Version {meta_version or '(none)'}, the file name "
                                f"{name.version}: pip refuses it (\"inconsistent version\"), and judging the file name "
                                "would judge a version that is not installed\n"
                                "    fix: build the wheel again with the version in the project's metadata (a local "
                                "tag such as +cu130 goes into the version, not only the file name)")
    if not row_given and name.platform_tags == ("any",):
        from buildrows.check.tags import native_libraries

        try:
            natives = native_libraries(wheel)
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, OSError):
            natives = []  # a member zipfile cannot open: the reader refuses the archive next, naming it
        if natives:
            shown = ", ".join(f"{m} ({what})" for m, what in natives[:5]) + (
                f" and {len(natives) - 5} more" if len(natives) > 5 else "")
            problems.append(f"{wheel.name} is tagged {'.'.join(name.python_tags)}-{'.'.join(name.abi_tags)}-any, a "
                            "pure wheel pip installs on every platform, but it carries native libraries that load on "
                            f"one only: {shown}\n"
                            "    fix: build it as a platform wheel (setuptools: a Distribution whose has_ext_modules() "
                            "returns True; scikit-build-core does unless wheel.py-api says otherwise)")
    return problems


def _clashes(members: tuple[str, ...]) -> list[str]:
    """Paths that are a file and, through another member, a directory too."""
    files = {m for m in members if not m.endswith("/")}
    dirs: set[str] = set()
    for m in members:
        d, sep, _ = m.rstrip("/").rpartition("/")
        while sep and d not in dirs:  # a directory seen already brought its parents (13,000 members: 3 ms, not 26)
            dirs.add(d)
            d, sep, _ = d.rpartition("/")
    both = sorted(files & dirs)
    if not both:
        return []
    shown = ", ".join(both[:5]) + (f" and {len(both) - 5} more" if len(both) > 5 else "")
    return [f"{shown}: both a file and a directory in the wheel: installing it fails half-way (pip cannot create "
            "the directory where the file is)\n"
            "    fix: rename the file or the package directory in the project, then build again"]

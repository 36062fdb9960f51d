"""Stamping (SPEC §8): give a built wheel what its project's own build did not put in its metadata.

A project that does not read ``BUILDROWS_LOCAL_VERSION``/``BUILDROWS_REQUIRES_DIST`` builds a wheel
without the row's local version (``+cu130``) and without its runtime requirement. When the policy
opts in (``[project] stamp = true``), buildrows rewrites that wheel: the version gets the row's
local tag, the missing requirements are added to ``Requires-Dist`` (the project's own are kept),
the ``.dist-info`` (and ``.data``) directory takes the new version's name, and ``RECORD`` is
written anew. Every wheel ``buildrows build`` makes also gets its build record
(``<dist-info>/buildrows.json``, `buildrows.check.record`), opt-in or not.

The rewrite goes through ``wheel.wheelfile.WheelFile`` (PyPA's ``wheel``, the library that writes
the wheels setuptools builds): reading it checks every member against the original ``RECORD``, so
a damaged wheel is refused rather than re-signed, and writing it computes ``RECORD`` from what is
written, so the hashes cannot drift from the content. packaging parses the version and the
requirements. Nothing here edits a member other than ``METADATA``; libraries are copied byte for byte.

Reproducible wheels: a rewritten wheel keeps every member's timestamp, and the members it writes
(the build record, ``RECORD``) take the timestamp the build gave ``METADATA`` (the build's
``SOURCE_DATE_EPOCH``, which `buildrows build` sets: `source_date_epoch`), never the time of the
stamping. So the same build stamped twice is the same bytes. `same_wheel` is the compare a rebuild
is judged by: the same members with the same content and modes, whatever their zip timestamps.
"""

from __future__ import annotations

import os
import shutil
import stat
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from buildrows.build.wheeldir import STAMP_PREFIX, Owned, owned_dir
from buildrows.build.wheeldir import same_wheel as same_wheel
from buildrows.check.record import RECORD_NAME, BuildRecord, record_bytes
from buildrows.errors import BadInput
from buildrows.process.diskfull import disk_full, is_disk_full

if TYPE_CHECKING:
    from packaging.requirements import Requirement


@dataclass(frozen=True)
class Stamped:
    """What stamping did: the wheel it wrote (the input's path when the name did not change)."""

    wheel: Path
    version: str
    added_requirements: tuple[str, ...]
    changes: tuple[str, ...]


@dataclass(frozen=True)
class MetadataPlan:
    """What stamping changes in METADATA: the version, requirements added, requirements tightened
    (old text -> new text), and a line per change for the output."""

    version: str
    add: tuple[str, ...]
    tighten: tuple[tuple[str, str], ...]
    changes: tuple[str, ...]


def torch_pin(version: str) -> str:
    """The requirement a PyTorch extension built against torch `version` declares: its minor version
    (the C++ ABI changes between minors), e.g. ``torch==2.14.*``."""
    from packaging.version import Version

    major, minor = (*Version(version).release, 0)[:2]
    return f"torch (=={major}.{minor}.*)"


def pin_text(req: Requirement) -> str:
    """A pinned requirement as METADATA writes it here: PEP 508's parenthesised form with the `==`
    first (``torch (==2.14.*,>=1.7.1)``). test-infra's Linux smoke test greps the unpacked wheel for
    `Requires-Dist: torch (==.*)` under `set -e`; pip, packaging and the check read both forms alike."""
    specs = sorted(req.specifier, key=lambda sp: (sp.operator != "==", str(sp)))
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    marker = f"; {req.marker}" if req.marker is not None else ""
    return f"{req.name}{extras} ({','.join(str(sp) for sp in specs)}){marker}"


def plan_metadata(version: str, requires: Sequence[str], local_tag: str, wanted: Sequence[str],
                  pins: Sequence[str] = ()) -> MetadataPlan:
    """What to change for a wheel of `version` that declares `requires`, built for a row whose local
    tag is `local_tag` (``+cu130``; empty for CPU) and whose wheel must declare `wanted` (added when
    the wheel names no such distribution; the project's own requirement is kept as written) and
    `pins` (a torch pin: its specifier is joined to the project's requirement of that name, which
    keeps the project's bounds and adds the pin, or added when there is none). A wheel that already
    carries a different local version is not relabelled (the check reports the mismatch)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version

    changes: list[str] = []
    new_version = version
    try:
        parsed = Version(version)
    except InvalidVersion as e:
        raise BadInput(f"the wheel's version {version!r} is not a PEP 440 version: {e}") from e
    want = local_tag.lstrip("+")
    if want and parsed.local is None:
        new_version = f"{version}+{want}"
        changes.append(f"version {version} -> {new_version} (the row's local tag)")
    declared: dict[str, list[tuple[str, Requirement]]] = {}
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if "extra" not in str(req.marker or ""):
            declared.setdefault(canonicalize_name(req.name), []).append((text, req))
    add: list[str] = []
    tighten: list[tuple[str, str]] = []
    for text in wanted:
        name = canonicalize_name(Requirement(text).name)
        if name not in declared:
            add.append(text)
            declared[name] = [(text, Requirement(text))]
            changes.append(f"Requires-Dist: {text} (the row's requirement)")
    for text in pins:
        pin = Requirement(text)
        name = canonicalize_name(pin.name)
        if name not in declared:
            add.append(text)
            changes.append(f"Requires-Dist: {text} (the torch the extension was built against)")
            continue
        for old_text, req in declared[name]:
            joined = Requirement(old_text)
            joined.specifier &= pin.specifier
            if (pin.specifier & req.specifier) == req.specifier:
                if old_text == pin_text(req):
                    continue  # already pinned at least that tightly, in the form test-infra's smoke test reads
                tighten.append((old_text, pin_text(req)))
                changes.append(f"Requires-Dist: {old_text} -> {pin_text(req)} (written as test-infra's smoke test reads a pin)")
                continue
            tighten.append((old_text, pin_text(joined)))
            changes.append(f"Requires-Dist: {old_text} -> {pin_text(joined)} (pinned to the torch the extension was built against)")
    return MetadataPlan(new_version, tuple(add), tuple(tighten), tuple(changes))


def edit_metadata(text: str, version: str, add: Sequence[str], tighten: Sequence[tuple[str, str]] = ()) -> str:
    """METADATA with its Version replaced, the `tighten` requirements rewritten (old -> new) and
    `add` appended to Requires-Dist; the header's other fields, their order and the description
    are kept byte for byte."""
    rewrite = dict(tighten)
    nl = "\r\n" if "\r\n" in text.split("\n\n", 1)[0] else "\n"
    head, sep, body = text.partition(nl + nl)
    lines = head.split(nl)
    out: list[str] = []
    last_requires = version_at = -1
    for line in lines:
        if line.startswith("Version:"):
            line = f"Version: {version}"
            version_at = len(out)
        elif line.startswith("Requires-Dist:"):
            value = line.split(":", 1)[1].strip()
            if value in rewrite:
                line = f"Requires-Dist: {rewrite[value]}"
            last_requires = len(out)
        out.append(line)
    if version_at < 0:
        raise BadInput("the wheel's METADATA has no Version field")
    at = (last_requires if last_requires >= 0 else version_at) + 1
    out[at:at] = [f"Requires-Dist: {r}" for r in add]
    return nl.join(out) + (sep or nl) + body


def _metadata_fields(text: str) -> tuple[str, list[str]]:
    import email.parser
    import email.policy

    msg = email.parser.HeaderParser(policy=email.policy.compat32).parsestr(text)
    return str(msg.get("Version", "")), [str(v) for v in msg.get_all("Requires-Dist") or []]


def stamp_wheel(wheel: str | os.PathLike[str], *, local_tag: str, requirements: Sequence[str],
                record: BuildRecord | None, metadata: bool, pins: Sequence[str] = ()) -> Stamped:
    """Rewrite `wheel` in place (under its new name when the version changes): with `metadata`,
    the row's local tag, the missing `requirements` and the `pins` (plan_metadata); with `record`,
    the build record. The old file is removed only once the new one is complete."""
    from wheel.wheelfile import WheelError, WheelFile

    from buildrows.binaries.wheelread import parse_wheel_filename

    class FixedTimeWheel(WheelFile):  # type: ignore[misc]  # wheel ships no type information
        """A WheelFile whose members written by name (the build record, RECORD) carry `date_time`,
        not the clock's time (wheel takes SOURCE_DATE_EPOCH from this process's environment, which
        is not the build's)."""

        date_time: tuple[int, int, int, int, int, int] = (1980, 1, 1, 0, 0, 0)

        def writestr(self, zinfo_or_arcname: str | zipfile.ZipInfo, data: bytes | str,
                     compress_type: int | None = None) -> None:
            if isinstance(zinfo_or_arcname, str):
                info = zipfile.ZipInfo(zinfo_or_arcname, date_time=self.date_time)
                info.compress_type = self.compression
                info.external_attr = (0o664 | stat.S_IFREG) << 16
                zinfo_or_arcname = info
            super().writestr(zinfo_or_arcname, data, compress_type)

    src = Path(wheel)
    name = parse_wheel_filename(src.name)
    scratch: Owned | None = None
    try:
        with WheelFile(src) as zin:
            old_info = zin.dist_info_path
            meta_name = f"{old_info}/METADATA"
            meta_text = zin.read(meta_name).decode("utf-8")
            version, requires = _metadata_fields(meta_text)
            mp = (plan_metadata(version, requires, local_tag, requirements, pins) if metadata
                  else MetadataPlan(version, (), (), ()))
            new_version, changes = mp.version, list(mp.changes)
            if record is not None:
                changes.append(f"{RECORD_NAME}: row {record.row}, CUDA {record.cuda or '-'}, torch {record.torch or '-'}")
            if not changes:
                return Stamped(src, version, (), ())
            tags = src.name[: -len(".whl")].split("-", 2)[2]  # [build-]python-abi-platform
            dest = src.with_name(f"{name.distribution}-{new_version.replace('-', '_')}-{tags}.whl")
            # WheelFile wants a wheel's name: write it in a scratch directory beside the result.
            # Held by this process (buildrows.build.wheeldir): a killed stamp's scratch goes at the next build.
            scratch = owned_dir(dest.parent, STAMP_PREFIX)
            tmp = scratch.path / dest.name
            old_data = f"{old_info[: -len('.dist-info')]}.data"
            FixedTimeWheel.date_time = zin.getinfo(meta_name).date_time
            with FixedTimeWheel(tmp, "w") as zout:
                new_info = zout.dist_info_path
                new_data = f"{new_info[: -len('.dist-info')]}.data"
                for info in zin.infolist():
                    if info.filename == zin.record_path or info.filename.startswith(zin.record_path + "."):
                        continue  # RECORD is written anew; a signature of the old RECORD no longer holds
                    if info.filename == f"{old_info}/{RECORD_NAME}" and record is not None:
                        continue  # replaced below
                    data = zin.read(info)  # checked against the old RECORD as it is read
                    if info.filename == meta_name:
                        data = edit_metadata(meta_text, new_version, mp.add, mp.tighten).encode("utf-8")
                    target = _renamed(info.filename, old_info, new_info, old_data, new_data)
                    out = zipfile.ZipInfo(target, date_time=info.date_time)
                    out.external_attr = info.external_attr
                    out.compress_type = info.compress_type
                    zout.writestr(out, data)
                if record is not None:
                    zout.writestr(f"{new_info}/{RECORD_NAME}", record_bytes(record))
    except (WheelError, zipfile.BadZipFile, KeyError, UnicodeDecodeError) as e:
        _drop(scratch)
        raise BadInput(f"{src}: cannot stamp this wheel: {e}\n"
                       "    fix: rebuild it; stamping refuses a wheel whose RECORD does not match its content") from e
    except BaseException as e:  # a full disk, SIGTERM: no half-written wheel stays beside the result
        _drop(scratch)
        if is_disk_full(e):
            raise disk_full(e, f"while stamping {src.name}", (src.parent,)) from e
        raise
    os.replace(tmp, dest)
    _drop(scratch)
    if dest != src:
        src.unlink()
    return Stamped(dest, new_version, mp.add, tuple(changes))


def _drop(scratch: Owned | None) -> None:
    if scratch is not None:
        scratch.release()
        shutil.rmtree(scratch.path, ignore_errors=True)


def _renamed(path: str, old_info: str, new_info: str, old_data: str, new_data: str) -> str:
    head, sep, rest = path.partition("/")
    if sep and head == old_info:
        return f"{new_info}/{rest}"
    if sep and head == old_data:
        return f"{new_data}/{rest}"
    return path


# SOURCE_DATE_EPOCH's rule lives in buildrows.build.epoch (light: the hook and `env` read it too).
from buildrows.build.epoch import ZIP_EPOCH as ZIP_EPOCH  # noqa: E402
from buildrows.build.epoch import source_date_epoch as source_date_epoch  # noqa: E402

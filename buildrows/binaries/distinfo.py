"""The wheel's name (PEP 427, as pip reads it) and its `.dist-info` members: METADATA, its Requires-Dist, the build record."""

from __future__ import annotations

import email.message
import email.parser
import email.policy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from buildrows.binaries.zipdir import WheelError, _directory, _Member, _read_member

# METADATA is read whole, then its headers parsed: bounded so a hostile one costs at most this much
# (issue 37: 60 MB took 57 s and 815 MB, 2.2 GB folded). The largest METADATA on PyPI we know of is
# well under 1 MB (a long README); docs/wheel-check.md states the budget.
MAX_METADATA_SIZE: Final = 16 * 2**20
MAX_METADATA_HEADERS: Final = 2**20

#: The build record's member in `.dist-info/` (written by buildrows.check.record, read here).
RECORD_NAME: Final = "buildrows.json"


@dataclass(frozen=True, slots=True)
class WheelName:
    """The parts of a wheel's file name (PEP 427), tags split on ``.``."""

    distribution: str
    version: str
    build: str | None
    python_tags: tuple[str, ...]
    abi_tags: tuple[str, ...]
    platform_tags: tuple[str, ...]

    @property
    def local_version(self) -> str | None:
        """The local version label (``cu130`` in ``2.9.0+cu130``), if any."""
        _, plus, local = self.version.partition("+")
        return local if plus else None


def parse_wheel_filename(filename: str) -> WheelName:
    """Split ``dist-version[-build]-python-abi-platform.whl``; a bad name raises :class:`WheelError`."""
    if not filename.endswith(".whl"):
        raise WheelError(filename, "not a wheel file name (no .whl suffix)")
    parts = filename[: -len(".whl")].split("-")
    if len(parts) not in (5, 6) or not all(parts):
        raise WheelError(
            filename,
            "not a wheel file name: expected 'name-version[-build]-python-abi-platform.whl'",
        )
    build = parts[2] if len(parts) == 6 else None
    if build is not None and not build[0].isdigit():
        raise WheelError(filename, f"build tag {build!r} must start with a digit")
    python, abi, platform = parts[-3:]
    _pip_accepts(filename)
    return WheelName(
        distribution=parts[0],
        version=parts[1],
        build=build,
        python_tags=tuple(python.split(".")),
        abi_tags=tuple(abi.split(".")),
        platform_tags=tuple(platform.split(".")),
    )


def _pip_accepts(filename: str) -> None:
    """Refuse a name pip refuses (packaging's own rules: a PEP 503 name, a PEP 440 version in ASCII
    digits, a build tag of digits first), so that nothing downstream meets a version in Arabic-Indic digits."""
    from packaging.utils import InvalidWheelFilename
    from packaging.utils import parse_wheel_filename as pip_rules

    try:
        pip_rules(filename)
    except InvalidWheelFilename as e:
        raise WheelError(filename, f"not a valid wheel file name, so pip refuses it: {e}") from None


def read_dist_info_member(path: str | os.PathLike[str], filename: str) -> bytes | None:
    """One small file of the wheel's ``.dist-info`` (``buildrows.json``, say), or None if absent."""
    wheel = Path(path)
    name = parse_wheel_filename(wheel.name)
    return _dist_info_member(wheel, _directory(wheel).infos, name, filename)


def _dist_info_member(wheel: Path, infos: list[_Member], name: WheelName, filename: str) -> bytes | None:
    """``<dist>-<version>.dist-info/FILENAME`` (the one beside the wheel's METADATA), if present."""
    metadata = [i.filename for i in infos if i.filename.count("/") == 1 and i.filename.endswith(".dist-info/METADATA")]
    expected = f"{name.distribution}-{name.version}.dist-info/METADATA"
    chosen = expected if expected in metadata else (metadata[0] if len(metadata) == 1 else None)
    if chosen is None:
        return None
    target = chosen.rsplit("/", 1)[0] + "/" + filename
    for info in infos:
        if info.filename == target:
            return _read_metadata(wheel, info)
    return None


def _requires_dist(wheel: Path, infos: list[_Member], name: WheelName) -> tuple[str, ...]:
    """``Requires-Dist`` values of the wheel's ``.dist-info/METADATA``."""
    candidates = [
        i
        for i in infos
        if i.filename.count("/") == 1 and i.filename.endswith(".dist-info/METADATA")
    ]
    if not candidates:
        raise WheelError(str(wheel), "no .dist-info/METADATA")
    if len(candidates) > 1:
        expected = f"{name.distribution}-{name.version}.dist-info/METADATA"
        candidates = [i for i in candidates if i.filename == expected]
        if len(candidates) != 1:
            raise WheelError(str(wheel), f"several .dist-info/METADATA and none is {expected}")
    info = candidates[0]
    data = _read_metadata(wheel, info)
    message = metadata_headers(data, str(wheel), info.filename)
    return tuple(str(value).strip() for value in message.get_all("Requires-Dist") or ())


def _read_metadata(wheel: Path, info: _Member) -> bytes:
    """A small `.dist-info` file whole (METADATA, the build record), refused past :data:`MAX_METADATA_SIZE`."""
    if info.file_size > MAX_METADATA_SIZE:
        raise WheelError(str(wheel), f"{info.filename.rsplit('/', 1)[-1]} is {info.file_size} bytes, more than the "
                         f"{MAX_METADATA_SIZE >> 20} MiB a wheel's metadata may take here", info.filename)
    return _read_member(wheel, info, MAX_METADATA_SIZE)


def metadata_headers(data: bytes, wheel: str, member: str) -> email.message.Message:
    """The header section of a METADATA file (up to its first blank line: the description after it is
    never parsed), at most :data:`MAX_METADATA_HEADERS` bytes of it."""
    end = min((i for i in (data.find(b"\n\n"), data.find(b"\r\n\r\n")) if i >= 0), default=len(data))
    if end > MAX_METADATA_HEADERS:
        raise WheelError(wheel, f"METADATA is {end} bytes of headers, more than the {MAX_METADATA_HEADERS >> 20} MiB "
                         "its fields may take here", member)
    parser = email.parser.BytesHeaderParser(policy=_UTF8_FIELDS)
    return parser.parsebytes(data[:end + 1])


class _Utf8Fields(email.policy.Compat32):
    """compat32, except that a field with non-ASCII bytes is read as UTF-8 text (what the core metadata
    specification says METADATA is), not handed back as an ``email.header.Header`` object, which no
    caller expects (a mutated or merely non-English METADATA made ``check`` fail with an internal error)."""

    def header_fetch_parse(self, name: str, value: str) -> str:
        if value.isascii():
            return str(super().header_fetch_parse(name, value))
        return value.encode("ascii", "surrogateescape").decode("utf-8", "replace")


_UTF8_FIELDS = _Utf8Fields()

"""The build record: what a wheel was built for and against, kept inside the wheel.

``<name>-<version>.dist-info/buildrows.json`` is a small JSON object::

    {"row": "linux-x86_64-cu130-py312", "cuda": "13.0", "torch": "2.14.1",
     "torch_cuda": "13.0", "buildrows": "0.1.0"}

``buildrows build`` writes it (stamping, buildrows.build.stamp); ``buildrows check`` reads it, so a
PyTorch extension's ``torch`` requirement is compared with the torch it was really compiled
against, not with what the metadata claims. ``cuda`` is the toolkit the build used, ``torch_cuda``
the CUDA of the torch it compiled against (``torch.version.cuda``); both null on a CPU build.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Any

from buildrows.binaries.wheelread import RECORD_NAME
from buildrows.policy.trains import Train

__all__ = ["RECORD_NAME", "BuildRecord", "BuildRecordError", "member_name", "parse_record", "read_record",
           "record_bytes"]



class BuildRecordError(ValueError):
    """The record is present but malformed; the message names what is wrong."""


@dataclass(frozen=True)
class BuildRecord:
    """What one wheel was built for (its row) and against (toolkit, torch)."""

    row: str
    cuda: str | None = None  # "13.0": the toolkit that compiled the wheel
    torch: str | None = None  # "2.14.1": the torch whose headers and libraries it compiled against
    torch_cuda: str | None = None  # "13.0": that torch's CUDA (torch.version.cuda)
    buildrows: str = ""


def member_name(distribution: str, version: str) -> str:
    """Where the record lives in a wheel of this name and version."""
    return f"{distribution}-{version}.dist-info/{RECORD_NAME}"


def record_bytes(record: BuildRecord) -> bytes:
    """The record as the wheel stores it: sorted keys, one line, UTF-8."""
    data = asdict(record)
    if not data["buildrows"]:
        data["buildrows"] = own_version()
    return (json.dumps(data, sort_keys=True) + "\n").encode("utf-8")


def parse_record(data: bytes, where: str) -> BuildRecord:
    """Read a record's bytes; `where` names the wheel and member in errors."""
    try:
        raw: Any = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BuildRecordError(f"{where}: not a JSON object: {e}") from None
    except RecursionError:  # issue 37: `{"a":{"a":...` 100,000 deep
        raise BuildRecordError(f"{where}: nested too deeply to be a build record") from None
    if not isinstance(raw, dict):
        raise BuildRecordError(f"{where}: not a JSON object")
    if not isinstance(raw.get("row"), str) or not raw["row"]:
        raise BuildRecordError(f"{where}: 'row' must be the row's name")
    for key in ("cuda", "torch", "torch_cuda", "buildrows"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise BuildRecordError(f"{where}: {key!r} must be a string or null, got {raw[key]!r}")
    for key in ("cuda", "torch_cuda"):
        if raw.get(key) is not None:
            try:
                Train.parse(raw[key])
            except ValueError as e:
                raise BuildRecordError(f"{where}: {key!r}: {e}") from None
    return BuildRecord(row=raw["row"], cuda=raw.get("cuda"), torch=raw.get("torch"),
                       torch_cuda=raw.get("torch_cuda"), buildrows=raw.get("buildrows") or "")


def read_record(wheel: str | os.PathLike[str]) -> BuildRecord | None:
    """The record of a wheel file, or None when it has none."""
    from buildrows.binaries.wheelread import read_dist_info_member

    data = read_dist_info_member(wheel, RECORD_NAME)
    return None if data is None else parse_record(data, f"{os.fspath(wheel)}: {RECORD_NAME}")


def own_version() -> str:
    """This buildrows' version ("unknown" for a checkout that is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("buildrows")
    except PackageNotFoundError:  # running from a checkout that is not installed
        return "unknown"

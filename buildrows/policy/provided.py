"""Libraries a wheel NEEDS that a declared non-NVIDIA requirement installs ([[check.libraries]] provided-by)."""

from __future__ import annotations

import re
from typing import Final

# A distribution name as PEP 508 spells one (no version, extras or markers: the wheel's Requires-Dist says those).
_DISTRIBUTION: Final = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")


def provided_by_problem(table: object) -> tuple[str, str] | None:
    """(what is wrong, the fix) for a provided-by table the policy cannot mean, or None."""
    if not isinstance(table, dict) or not table:
        return "provided-by maps NEEDED library names to the distributions that install them", \
            "e.g. provided-by = { \"librapids_logger.so\" = \"rapids-logger\" }"
    for soname, dist in table.items():
        if not soname.strip() or "/" in soname:
            return (f"{soname!r} is not a library file name (a glob, as the NEEDED entry names it)",
                    "e.g. provided-by = { \"librmm.so\" = \"librmm-cu13\" }")
        if not isinstance(dist, str) or not _DISTRIBUTION.fullmatch(dist.strip()):
            return (f"{soname} = {dist!r}: name the distribution alone (the wheel's Requires-Dist pins it)",
                    f"e.g. {{ \"{soname}\" = \"rapids-logger\" }}")
    return None


def declared(requires_dist: tuple[str, ...], distribution: str) -> tuple[str, bool]:
    """The wheel's Requires-Dist entry for `distribution` ("" if none) and whether it is unconditional
    (an entry under an extra is installed only with that extra)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    want = canonicalize_name(distribution)
    found = ""
    for text in requires_dist:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue  # runtime-declared reports it
        if canonicalize_name(req.name) != want:
            continue
        if "extra" not in str(req.marker or ""):
            return text, True
        found = found or text
    return found, False


def distribution_for(soname: str, requires_dist: tuple[str, ...]) -> str | None:
    """The non-NVIDIA requirement whose name is the library's (librapids_logger.so: rapids-logger;
    librmm.so: librmm-cu13, a CUDA suffix aside), for `init` to state; None when no name matches."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    m = re.match(r"^(?:lib)?(?P<stem>[A-Za-z0-9_+-]+?)\.so(?:\.\d+)*$", soname)
    if m is None:
        return None
    stem = canonicalize_name(m.group("stem"))
    for text in requires_dist:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        name = canonicalize_name(req.name)
        if name.startswith("nvidia-") or "extra" in str(req.marker or ""):
            continue
        base = re.sub(r"-cu\d+$", "", name)
        if stem in (base, base.removeprefix("lib")):
            return req.name
    return None

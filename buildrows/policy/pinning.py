"""How CI installs buildrows: one explicit, pinned spec ([ci] install), classified and checked.

Accepted: a released version (`buildrows==0.1.0`), a VCS URL at a full commit
(`git+https://github.com/ORG/buildrows@<40 hex digits>`, optionally as `buildrows @ git+...`), or a
path in the repository (`./tools/buildrows`, a project directory or a `.whl`). Everything else - a
bare name, a range, a branch or a short commit, an absolute path - could install a different
buildrows tomorrow than today, so it is refused with the three forms that are accepted.
"""

from __future__ import annotations

import re
from functools import cache

from buildrows.policy.model import InstallKind


@cache
def _version() -> re.Pattern[str]:
    return re.compile(r"buildrows\s*==\s*(?P<v>[0-9]+(?:\.[0-9]+)*(?:(?:a|b|rc|\.post|\.dev)[0-9]+)*)", re.ASCII)


@cache
def _vcs() -> re.Pattern[str]:
    return re.compile(r"(?:buildrows\s*@\s*)?git\+(?:https|ssh|file)://[^\s@]+(?:@[^\s@/]+)*?@(?P<ref>[^\s@#]+)(?:#\S*)?", re.ASCII)


@cache
def _sha() -> re.Pattern[str]:
    return re.compile(r"[0-9a-f]{40}", re.ASCII)


@cache
def _name_like() -> re.Pattern[str]:
    return re.compile(r"buildrows\b", re.ASCII | re.IGNORECASE)


# What works today leads: buildrows is on no package index yet, so a released version installs
# nothing until it is published.
FORMS = ("a path in the repository such as './tools/buildrows' (its source directory or a .whl), "
         "'git+https://github.com/ORG/buildrows@<full 40-hex commit>', "
         "or, once buildrows is published on an index, 'buildrows==0.1.0'")


def classify(spec: str) -> tuple[InstallKind, str]:
    """(kind, spec) for a pinned spec; ValueError saying why it is not pinned and what is accepted."""
    s = spec.strip()
    if not s:
        raise ValueError(f"is empty; write {FORMS}")
    if _version().fullmatch(s):
        return "version", s
    if s.startswith(("git+", "buildrows @", "buildrows@")):
        m = _vcs().fullmatch(s)
        if m is None:
            raise ValueError(f"{s!r} names no commit; a VCS URL must end in @<full 40-hex commit>, e.g. {FORMS}")
        if not _sha().fullmatch(m.group("ref")):
            raise ValueError(f"{s!r} is at {m.group('ref')!r}, which is not a full commit (a branch, tag or short "
                             "hash can move or become ambiguous); pin the 40-hex commit")
        return "vcs", s
    if "://" in s:
        raise ValueError(f"{s!r} is a URL buildrows cannot tell is pinned; write {FORMS}")
    if s.startswith("/") or re.match(r"[A-Za-z]:[\\/]", s) or s.startswith("~"):
        raise ValueError(f"{s!r} is an absolute path, which exists on one machine only; "
                         "write a path in the repository, relative to the policy file")
    if s.startswith(".") or "/" in s or "\\" in s or s.endswith(".whl"):
        return "path", s
    if _name_like().match(s):
        raise ValueError(f"{s!r} is not pinned: CI would install whatever the index serves that day; write {FORMS}")
    raise ValueError(f"{s!r} is not a way to install buildrows; write {FORMS}")

"""One examined fact of doctor's, as a finding: what was seen, whether it is ready, and the fix.

Doctor's examiners and the repair step's own checks (auditwheel, patchelf) return these; the
command prints them and refuses when any failed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "note", "missing", "refused"]

_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class Finding:
    """One check's verdict: `seen` says what was found, `fix` how to get what is missing."""

    check: str
    status: Status
    seen: str
    fix: str = ""

    @property
    def failed(self) -> bool:
        return self.status in ("missing", "refused")

    def render(self) -> str:
        mark = {"ok": "ok", "note": "note", "missing": "MISSING", "refused": "REFUSED"}[self.status]
        text = f"[{mark:7}] {self.check}: {self.seen}"
        return text + (f"\n          fix: {self.fix}" if self.fix else "")


def parse_version(text: str) -> tuple[int, ...] | None:
    m = _VERSION.search(text)
    if m is None:
        return None
    return tuple(int(g) for g in m.groups() if g is not None)

"""Edit a policy file in place with tomlkit: only the edited list changes, comments and layout stay.

The edited text is loaded and validated before it replaces the file, and the replacement is
atomic, so a refusal or a crash leaves the file exactly as it was.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from buildrows.errors import BadInput, BuildrowsError, Refused
from buildrows.policy.archs import Arch, ArchError, ArchList, newest_portable
from buildrows.policy.model import Policy, Row


def arch_text(archs: ArchList) -> tuple[str, bool]:
    """The list as the policy writes it, and whether the group needs `ptx = "none"`."""
    if not archs.ptx:
        return " ".join(a.dotted for a in archs.archs), True
    if not archs.archs:  # PTX only, no cubin at all
        return archs.text, False
    try:
        default: tuple[Arch, ...] | None = (newest_portable(archs.archs),)  # what ptx = "newest" picks
    except ArchError:
        default = None
    if archs.ptx == default:
        return " ".join(a.dotted for a in archs.archs), False
    return archs.text, False  # 8.0+PTX 12.0, PTX without a cubin as 12.0-virtual


def write_archs(policy: Policy, rows: list[Row], archs: ArchList) -> tuple[Path, list[str]]:
    """Write `archs` into the list of every (platform, train) the rows use. Returns the edited fields."""
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    from buildrows.policy.load import load_policy
    from buildrows.policy.trains import Train

    path = Path(policy.path)
    original = path.read_bytes()
    try:
        bom = original.startswith(b"\xef\xbb\xbf")
        doc = tomlkit.parse(original.decode("utf-8-sig"))
    except (TOMLKitError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: cannot be edited: {e}") from e
    root: Any = doc
    prefix = ""
    if path.name == "pyproject.toml":
        root = doc["tool"]["buildrows"]
        prefix = "tool.buildrows."
    cuda_rows = [r for r in rows if r.cuda is not None and r.empty_reason is None]
    if not cuda_rows:
        raise BadInput("--write selects no CUDA row\n    fix: select rows such as 'linux-x86_64-cu130-*'")
    wanted = {(r.platform, r.cuda) for r in cuda_rows}
    edited: list[str] = []
    for platform in sorted({p for p, _ in wanted}):
        groups = root["platforms"][platform]["cuda"]
        for gi, group in enumerate(groups):
            trains = {Train.parse(str(t)) for t in group["trains"]}
            hit = {t for t in trains if (platform, t) in wanted}
            if not hit:
                continue
            if hit != trains:
                missing = ", ".join(t.dotted for t in sorted(trains - hit))
                raise Refused(
                    f"{path}: {prefix}platforms.{platform}.cuda[{gi}] is shared with CUDA {missing}, which the selection leaves out\n"
                    f"    fix: select every train of that list (e.g. '{platform}-cu*'), or split the table so each has its own list"
                )
            text, ptx_none = arch_text(archs)
            group["archs"] = _same_style(group.get("archs"), text)
            if ptx_none:
                group["ptx"] = "none"
            elif "ptx" in group:
                del group["ptx"]
            edited.append(f"{prefix}platforms.{platform}.cuda[{gi}].archs = {text!r}")
    new_text = ("\ufeff" if bom else "") + tomlkit.dumps(doc)  # keep a byte-order mark the user had
    # validate before replacing: a list the train cannot compile is refused and nothing is written
    fd, tmp = tempfile.mkstemp(prefix=".buildrows-", suffix=path.suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(new_text)
        if path.name == "pyproject.toml":
            staged = Path(tmp).with_name("pyproject.toml.buildrows-check")
            os.replace(tmp, staged)
            tmp = str(staged)
        try:
            load_policy(tmp) if path.name != "pyproject.toml" else _load_pyproject(tmp)
        except BuildrowsError as e:  # name the user's file, not the staged copy
            raise type(e)(str(e).replace(tmp, str(path)) + f"\n    {path} was left as it was") from None
        os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path, edited


def _same_style(old: object, text: str) -> object:
    """`text` as a TOML string quoted as the user quoted the old list: a literal 'x' stays literal.

    Decided here rather than left to tomlkit, whose choice changed between releases (0.15.3 keeps
    the old style on assignment, earlier ones wrote a basic string), so the file is the same with each.
    """
    import tomlkit
    from tomlkit.items import String, StringType

    literal = isinstance(old, String) and old.type in (StringType.SLL, StringType.MLL)
    return tomlkit.string(text, literal=literal)


def _load_pyproject(tmp: str) -> None:
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    from buildrows.policy.load import policy_from_dict
    from buildrows.policy.problems import Locator

    text = Path(tmp).read_text(encoding="utf-8-sig")
    policy_from_dict(tomllib.loads(text)["tool"]["buildrows"], tmp, Locator(text, ("tool", "buildrows")))


def archs_from_names(cubins: set[str], ptx: set[str]) -> ArchList:
    elf = sorted((Arch.parse(n) for n in cubins), key=lambda a: (a.number, a.suffix))
    marked = sorted((Arch.parse(n) for n in ptx), key=lambda a: (a.number, a.suffix))  # PTX-only entries included
    return ArchList(tuple(elf), tuple(marked))

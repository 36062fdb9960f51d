"""Whether a ``torch`` requirement pins the torch a PyTorch extension was compiled against.

An extension built with torch.utils.cpp_extension links libtorch's C++ ABI, which changes between
minor versions: the wheel must require a torch that admits the recorded version (``2.14.1``) and
no other minor version. ``torch==2.14.*``, ``torch>=2.14.1,<2.15`` and ``torch~=2.14.1`` do;
``torch>=2.14`` and ``torch`` do not. The answer comes from the specifiers' bounds, not from
probing versions, so it holds for every version, pre-releases included.
"""

from __future__ import annotations

from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet
from packaging.version import InvalidVersion, Version

__all__ = ["pin_problem"]


def pin_problem(specifier: SpecifierSet, built: str) -> str | None:
    """None when `specifier` admits `built` and only its minor version, else what is wrong."""
    try:
        version = Version(built)
    except InvalidVersion:
        return f"the recorded torch {built!r} is not a version"
    text = str(specifier) or "(any version)"
    if not specifier.contains(version, prereleases=True):
        return f"{text} does not admit the torch the wheel was built against ({built})"
    major, minor = (*version.release, 0)[:2]
    floor = Version(f"{major}.{minor}.dev0")  # the lowest version of this minor
    ceiling = Version(f"{major}.{minor + 1}.dev0")  # the lowest version of the next
    low_ok = high_ok = False
    for spec in specifier:
        low, high = _bounds(spec)
        low_ok = low_ok or (low is not None and low >= floor)
        high_ok = high_ok or (high is not None and high <= ceiling)
    if not (low_ok and high_ok):
        return (f"{text} admits torch other than {major}.{minor} (the wheel was built against {built}; "
                "an extension is tied to the minor version's C++ ABI)")
    return None


def _bounds(spec: Specifier) -> tuple[Version | None, Version | None]:
    """(lowest admitted, a version above everything admitted) for one clause; None if unbounded."""
    op, text = spec.operator, spec.version
    try:
        if op == "==" and text.endswith(".*"):
            base = Version(text[:-2])
            rel = base.release
            nxt = (*rel[:-1], rel[-1] + 1)
            return Version(".".join(map(str, rel)) + ".dev0"), Version(".".join(map(str, nxt)) + ".dev0")
        v = Version(text.split("+", 1)[0])
    except (InvalidVersion, InvalidSpecifier):
        return None, None
    if op in ("==", "==="):
        return v, v
    if op == "~=":
        rel = v.release[:-1]
        nxt = (*rel[:-1], rel[-1] + 1)
        return v, Version(".".join(map(str, nxt)) + ".dev0")
    if op == ">=":
        return v, None
    if op == ">":
        return v, None
    if op == "<=":
        return None, v
    if op == "<":
        # PEP 440: `<2.15` admits no 2.15 pre-release either, so it ends below 2.15.dev0.
        if v.is_prerelease or v.is_devrelease:
            return None, v
        return None, Version(f"{v.base_version}.dev0")
    return None, None  # != excludes, it never bounds

"""What a wheel's file name says about its row, read from every tag pip accepts.

The platform, the Python and the CUDA train come from the file name alone (PEP 427 tags, expanded by
`packaging.tags.parse_tag`, so compressed tag sets count in any order), before any library is
inflated. Legacy manylinux aliases name the same platforms as their PEP 600 spellings
(`manylinux2014` = `manylinux_2_17`), `pyX-none` and `cpXY-abi3` wheels serve every Python from
their tag on, and `cpXYt` is free-threaded. With `--row`, the same reading holds the wheel's tags to
the row (`local_tag_problem`, `python_tag_problem`, `platform_tag_problem`), for `check` and for
`build` alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Final

from packaging.tags import Tag, parse_tag

from buildrows.policy.trains import Train

if TYPE_CHECKING:
    from buildrows.binaries.wheelread import WheelName
    from buildrows.policy.model import Row

__all__ = [
    "WheelPython",
    "local_tag_problem",
    "platform_of_name",
    "platform_tag_problem",
    "platforms_of_name",
    "python_of_name",
    "python_tag_problem",
    "serves",
    "tags_of_name",
    "train_of_name",
]

# PEP 600 spellings of the legacy manylinux tags (what pip itself treats them as).
LEGACY_MANYLINUX: Final = {"manylinux1": "manylinux_2_5", "manylinux2010": "manylinux_2_12",
                           "manylinux2014": "manylinux_2_17"}
_LEGACY = re.compile(r"^(manylinux1|manylinux2010|manylinux2014)_(.+)$")
_PLATFORM_OF_TAG: Final = (
    (re.compile(r"^(manylinux_\d+_\d+|musllinux_\d+_\d+|linux)_x86_64$"), "linux-x86_64"),
    (re.compile(r"^(manylinux_\d+_\d+|musllinux_\d+_\d+|linux)_aarch64$"), "linux-aarch64"),
    (re.compile(r"^win_amd64$"), "windows-amd64"),
)
_CP = re.compile(r"^cp3(\d+)$")
_PY = re.compile(r"^py3(\d*)$")


def tags_of_name(name: WheelName) -> frozenset[Tag]:
    """Every (python, abi, platform) tag the name's compressed tag sets expand to."""
    return parse_tag(f"{'.'.join(name.python_tags)}-{'.'.join(name.abi_tags)}-{'.'.join(name.platform_tags)}")


def canonical_platform_tag(tag: str) -> str:
    """`manylinux2014_x86_64` -> `manylinux_2_17_x86_64`; other tags unchanged."""
    m = _LEGACY.match(tag)
    return f"{LEGACY_MANYLINUX[m.group(1)]}_{m.group(2)}" if m else tag


def platform_of_tag(tag: str) -> str | None:
    """The buildrows platform one platform tag names (`linux-x86_64`), or None."""
    tag = canonical_platform_tag(tag)
    for pattern, platform in _PLATFORM_OF_TAG:
        if pattern.match(tag):
            return platform
    return None


def platforms_of_name(name: WheelName) -> set[str]:
    """Every buildrows platform the name's platform tags name."""
    return {p for p in map(platform_of_tag, name.platform_tags) if p}


def platform_of_name(name: WheelName) -> str | None:
    """The one buildrows platform the wheel is for; None when its tags name none or several."""
    found = platforms_of_name(name)
    return found.pop() if len(found) == 1 else None


def train_of_name(name: WheelName) -> Train | None:
    """The CUDA train of the local version label (`+cu130`, `+cu130.post1`), if it carries one."""
    local = name.local_version
    if local is None:
        return None
    for part in re.split(r"[._]", local):
        if re.fullmatch(r"cu[0-9]{2,3}", part):  # ASCII digits: `\d` took Arabic-Indic digits, which Train.parse refused
            return Train.parse(part)
    return None


def _version(python: str) -> tuple[int, int]:
    """`3.12` -> (3, 12); `3.13t` -> (3, 13); `3` -> (3, 0)."""
    major, _, minor = python.rstrip("t").partition(".")
    return int(major), int(minor or 0)


def _tag_serves(tag: Tag, python: str) -> bool:
    """Whether pip on CPython `python` (`3.12`, `3.13t`) accepts the tag's interpreter and ABI."""
    free = python.endswith("t")
    minor = _version(python)[1]
    cp = _CP.match(tag.interpreter)
    if cp:
        tag_minor = int(cp.group(1))
        if tag.abi == f"cp3{tag_minor}":
            return not free and tag_minor == minor
        if tag.abi == f"cp3{tag_minor}t":
            return free and tag_minor == minor
        if tag.abi == "abi3":  # the limited API of 3.X and newer; free-threaded builds have no abi3
            return not free and tag_minor <= minor
        if tag.abi == "none":
            return tag_minor == minor
        return False
    py = _PY.match(tag.interpreter)
    if py and tag.abi == "none":  # pure Python 3 (py3) or 3.X and newer (py39)
        return not py.group(1) or int(py.group(1)) <= minor
    return False


def serves(tags: frozenset[Tag], python: str) -> bool:
    """Whether a wheel with these tags installs on CPython `python` (`3.12`, `3.13t`)."""
    return any(_tag_serves(t, python) for t in tags)


@dataclass(frozen=True)
class WheelPython:
    """The Python a wheel's tags name: `3.12`, `3.13t` (free-threaded), or, with `abi3` true, the
    oldest of every Python from the tag on (`cp39-abi3`, `py39-none`; `3` for `py3-none`)."""

    version: str
    abi3: bool = False  # serves this version and newer (abi3, or a pure pyX tag with no ABI)
    tags: frozenset[Tag] = frozenset()

    def serves(self, python: str) -> bool:
        """Whether the wheel installs on CPython `python` (a row's `3.12`, `3.13t`)."""
        return serves(self.tags, python)

    @property
    def described(self) -> str:
        """How a message names it: `Python 3.12`, `abi3 (Python 3.9 and newer)`, `py3-none (any Python 3)`."""
        if not self.abi3:
            return f"Python {self.version}"
        kinds = sorted({"abi3" if t.abi == "abi3" else f"{t.interpreter}-none" for t in self.tags
                        if t.abi == "abi3" or (t.abi == "none" and _PY.match(t.interpreter))})
        what = kinds[0] if len(kinds) == 1 else "/".join(kinds)
        return f"{what} (any Python 3)" if self.version == "3" else f"{what} (Python {self.version} and newer)"


def python_of_name(name: WheelName) -> WheelPython | None:
    """From the python and ABI tags: `cp312-cp312`, `cp313-cp313t` (free-threaded), `cp39-abi3`,
    `py39-none`, `py3-none` (compressed sets in any order). None when no tag names CPython 3."""
    tags = tags_of_name(name)
    exact: list[str] = []
    open_from: list[tuple[int, int]] = []
    for t in tags:
        cp = _CP.match(t.interpreter)
        py = _PY.match(t.interpreter)
        if cp and t.abi in (t.interpreter, "none"):
            exact.append(f"3.{cp.group(1)}")
        elif cp and t.abi == f"{t.interpreter}t":
            exact.append(f"3.{cp.group(1)}t")
        elif cp and t.abi == "abi3":
            open_from.append((3, int(cp.group(1))))
        elif py and t.abi == "none":
            open_from.append((3, int(py.group(1))) if py.group(1) else (3, -1))
    if open_from:  # serves every Python from the oldest open tag on: stand for them with that one
        oldest = min(open_from)
        return WheelPython("3" if oldest[1] < 0 else f"3.{oldest[1]}", abi3=True, tags=tags)
    if exact:
        return WheelPython(min(exact, key=lambda v: (_version(v), v)), tags=tags)
    return None


# --- the wheel's tags held to a given row (check --row, and build's check of what it built) ---------


def local_tag_problem(row: Row, wheel_path: str | PurePath, *, train_given: bool = False) -> str | None:
    """Why the wheel's version does not carry the row's local tag (+cu130; none for CPU), or None.
    `train_given`: the command line named the train (`--cuda`) for a wheel whose name carries none
    (a wheel published without local tags, as PyPI's are), so a missing tag is not a problem."""
    from buildrows.binaries.wheelread import parse_wheel_filename

    wheel = PurePath(wheel_path).name
    version = parse_wheel_filename(wheel).version
    _, plus, local = version.partition("+")
    want = row.local_tag.lstrip("+")
    if want and not local and train_given:
        return None
    if want and local != want:
        return (f"{wheel} is version {version}, not tagged +{want} for row {row.name}: the project must take "
                "its local version from BUILDROWS_LOCAL_VERSION (the in-tree provider `buildrows init` writes, "
                "build_support/buildrows_version.py, does for scikit-build-core, wherever the wheel is built; "
                "`buildrows init` prints the pyproject.toml lines), or the policy must opt in to stamping "
                "([project] stamp = true); a wheel published without "
                f"local tags is checked with --cuda {row.cuda.dotted if row.cuda else 'TRAIN'} beside --row")
    if not want and plus and local.startswith("cu"):
        return f"{wheel} is a CPU row's wheel ({row.name}) but carries the CUDA tag +{local}"
    return None


def python_tag_problem(row: Row, wheel_path: str | PurePath) -> str | None:
    """Why the wheel is not for the row's Python (a cp311 module under a py312 row's name), or None.
    Every tag pip accepts counts: cp312-cp312, cp313-cp313t for a free-threaded row, cpXY-abi3 and
    pyXY-none from their version on, py3-none for any Python 3."""
    from buildrows.binaries.wheelread import parse_wheel_filename

    wheel = PurePath(wheel_path).name
    name = parse_wheel_filename(wheel)
    if serves(tags_of_name(name), row.python):
        return None
    free = row.python.endswith("t")
    want = "cp" + row.python.rstrip("t").replace(".", "")
    abi_want = want + ("t" if free else "")
    tags = f"{'.'.join(name.python_tags)}-{'.'.join(name.abi_tags)}"
    return (f"{wheel} is tagged {tags}, not {want}-{abi_want} for row {row.name}: it was built by another "
            f"Python than the row's {row.python} (pin the interpreter: `buildrows build {row.name}` finds it)")


def platform_tag_problem(row: Row, wheel_path: str | PurePath, *, archive: str | PurePath | None = None) -> str | None:
    """Why the wheel's platform tags do not name the row's platform, or None. A pure `any` wheel
    installs on every platform, so it passes unless it carries a native library (read from
    `archive`, the wheel file, when given): that loads on one platform only."""
    from buildrows.binaries.wheelread import parse_wheel_filename

    wheel = PurePath(wheel_path).name
    name = parse_wheel_filename(wheel)
    if name.platform_tags == ("any",):
        natives = native_libraries(archive) if archive is not None else []
        if not natives:
            return None
        shown = ", ".join(f"{m} ({what})" for m, what in natives[:5]) + (f" and {len(natives) - 5} more"
                                                                            if len(natives) > 5 else "")
        tags = f"{'.'.join(name.python_tags)}-{'.'.join(name.abi_tags)}-any"
        return (f"{wheel} is tagged {tags}, a pure wheel pip installs on every platform and Python, but it carries "
                f"native libraries that load on one only: {shown}\n"
                "fix: build it as a platform wheel: setuptools tags a wheel by its ext_modules (a library built "
                "another way needs a Distribution whose has_ext_modules() returns True); scikit-build-core does "
                "unless wheel.py-api or wheel.platlib says otherwise")
    found = platforms_of_name(name)
    if found == {row.platform}:
        return None
    tags = ".".join(name.platform_tags)
    named = ", ".join(sorted(found)) or "no platform buildrows builds"
    return (f"{wheel} is tagged {tags} ({named}), not for row {row.name}'s platform {row.platform}: "
            "check it against a row of the platform it was built for")


# A native library in a wheel, known by its first bytes: ELF (shared objects), PE (DLLs), Mach-O
# (dylibs and bundles). Executables and relocatable objects are not libraries a wheel loads (pip's
# own pure wheel carries Windows launcher .exe files as data).
_ELF_MACHINES: Final = {3: "x86", 62: "x86_64", 183: "aarch64", 40: "arm", 21: "ppc64", 22: "s390x"}
_PE_MACHINES: Final = {0x8664: "amd64", 0xAA64: "arm64", 0x14C: "x86"}
_MACHO_CPUS: Final = {0x01000007: "x86_64", 0x0100000C: "arm64", 7: "x86"}
_TEXT_SUFFIXES: Final = (".py", ".pyi", ".txt", ".md", ".json", ".toml", ".cfg", ".h", ".hpp", ".cu", ".c", ".cpp")


def native_kind(head: bytes) -> str | None:
    """What a file starting with `head` (its first 4 KiB) is, when it is a native library:
    `ELF x86_64`, `PE DLL amd64`, `Mach-O arm64`; None otherwise."""
    import struct

    if head[:4] == b"\x7fELF" and len(head) >= 20:
        order = "<" if head[5] == 1 else ">"
        e_type, machine = struct.unpack_from(order + "HH", head, 16)
        return f"ELF {_ELF_MACHINES.get(machine, f'machine {machine}')}" if e_type == 3 else None
    if head[:2] == b"MZ" and len(head) >= 0x40:
        pe = struct.unpack_from("<I", head, 0x3C)[0]
        if pe + 24 <= len(head) and head[pe:pe + 4] == b"PE\0\0":
            machine, characteristics = struct.unpack_from("<H", head, pe + 4)[0], struct.unpack_from("<H", head, pe + 22)[0]
            return f"PE DLL {_PE_MACHINES.get(machine, hex(machine))}" if characteristics & 0x2000 else None
        return None
    if len(head) >= 16 and head[:4] in (b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xfe\xed\xfa\xcf", b"\xfe\xed\xfa\xce"):
        order = "<" if head[:2] in (b"\xcf\xfa", b"\xce\xfa") else ">"
        cpu, _, filetype = struct.unpack_from(order + "IiI", head, 4)
        return f"Mach-O {_MACHO_CPUS.get(cpu, hex(cpu))}" if filetype in (6, 8) else None  # MH_DYLIB, MH_BUNDLE
    if head[:4] == b"\xca\xfe\xba\xbe" and len(head) >= 8:
        count = struct.unpack_from(">I", head, 4)[0]
        return "Mach-O universal" if 0 < count < 20 else None  # a Java class has its version (45+) there
    return None


def native_libraries(wheel: str | PurePath) -> list[tuple[str, str]]:
    """(member, what it is) for each native library in the wheel, read from the first 4 KiB of
    each member outside .dist-info (a wheel `check` has already opened safely)."""
    import zipfile

    found: list[tuple[str, str]] = []
    with zipfile.ZipFile(str(wheel)) as z:
        for info in z.infolist():
            top = info.filename.split("/", 1)[0]
            if info.is_dir() or top.endswith(".dist-info") or info.filename.lower().endswith(_TEXT_SUFFIXES):
                continue
            with z.open(info) as f:
                kind = native_kind(f.read(4096))
            if kind is not None:
                found.append((info.filename, kind))
    return found

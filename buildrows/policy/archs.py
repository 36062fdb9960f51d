"""GPU architecture lists: one canonical type, parsed strictly, rendered three ways (SPEC §4)."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import cache

from buildrows.resources import data_file

# re.ASCII: \d would otherwise accept other scripts' digits (Arabic-Indic, fullwidth), which int() then converts.
_TOKEN = re.compile(r"^(?P<major>[1-9]\d?)\.?(?P<minor>\d)(?P<suffix>[af]?)(?P<ptx>\+PTX)?$", re.ASCII)
_SM = re.compile(r"^(?:sm|compute)_(?P<major>[1-9]\d?)(?P<minor>\d)(?P<suffix>[af]?)$", re.ASCII)
_SEPARATORS = re.compile(r"[\s;,]+")


class ArchError(ValueError):
    """An architecture list could not be parsed; `token` names the offending entry."""

    def __init__(self, message: str, token: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.token = token
        self.hint = hint


@dataclass(frozen=True, order=True)
class Train:
    """A CUDA toolkit train such as 13.0."""

    major: int
    minor: int

    @property
    def dotted(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def cu(self) -> str:
        """The tag used by PyTorch and the wheel's local version (`cu130`)."""
        return f"cu{self.major}{self.minor}"

    def __str__(self) -> str:
        return self.dotted

    @classmethod
    def parse(cls, text: str) -> Train:
        """Accept `13.0` or `cu130`; refuse anything else (`cu13.0`, `13`)."""
        if not isinstance(text, str):
            raise ValueError(f"{text!r} is not a CUDA train: write it as a string, '13.0' or 'cu130'")
        s = text.strip()
        m = re.fullmatch(r"(\d{1,2})\.(\d)", s, re.ASCII)
        if m:
            return cls(int(m.group(1)), int(m.group(2)))
        m = re.fullmatch(r"cu(\d{1,2})(\d)", s, re.ASCII)
        if m:
            return cls(int(m.group(1)), int(m.group(2)))
        raise ValueError(
            f"{text!r} is not a CUDA train: write it as '13.0' or 'cu130'"
        )


@dataclass(frozen=True, order=True)
class Arch:
    """One GPU architecture: compute capability major.minor and an optional a/f suffix."""

    major: int
    minor: int
    suffix: str = ""

    @property
    def number(self) -> int:
        return self.major * 10 + self.minor

    @property
    def dotted(self) -> str:
        return f"{self.major}.{self.minor}{self.suffix}"

    @property
    def sm(self) -> str:
        """The name cuobjdump gives a cubin of this architecture (`sm_90a`)."""
        return f"sm_{self.number}{self.suffix}"

    @property
    def compute(self) -> str:
        return f"compute_{self.number}{self.suffix}"

    def __str__(self) -> str:
        return self.dotted

    @classmethod
    def parse(cls, token: str) -> Arch:
        arch, ptx = _parse_token(token)
        if ptx:
            raise ArchError(f"{token!r}: +PTX is not allowed here", token)
        return arch


@dataclass(frozen=True)
class ArchList:
    """A canonical architecture list: sorted, unique, with the PTX entries marked."""

    archs: tuple[Arch, ...]
    ptx: tuple[Arch, ...]

    def __post_init__(self) -> None:
        if not set(self.ptx) <= set(self.archs):
            raise ValueError("every PTX architecture must be in the list")

    @property
    def newest(self) -> Arch:
        return max(self.archs, key=lambda a: (a.number, a.suffix))

    @property
    def dotted(self) -> list[str]:
        return [a.dotted for a in self.archs]

    @property
    def torch_cuda_arch_list(self) -> str:
        """`7.5;8.0;...;12.0+PTX` - the variable PyTorch's CMake reads."""
        return ";".join(a.dotted + ("+PTX" if a in self.ptx else "") for a in self.archs)

    @property
    def cmake_cuda_architectures(self) -> str:
        """`75-real;...;120-real;120-virtual` - never a bare number (it embeds both forms)."""
        real = [f"{a.number}{a.suffix}-real" for a in self.archs]
        virtual = [f"{a.number}{a.suffix}-virtual" for a in self.archs if a in self.ptx]
        return ";".join(real + virtual)

    @property
    def nvcc_flags(self) -> list[str]:
        flags = [f"-gencode=arch={a.compute},code={a.sm}" for a in self.archs]
        flags += [f"-gencode=arch={a.compute},code={a.compute}" for a in self.archs if a in self.ptx]
        return flags

    @property
    def cubin_names(self) -> list[str]:
        """Cubin names as cuobjdump lists them: a family cubin (`10.0f`) is listed as `sm_100`."""
        return [a.sm.rstrip("f") if a.suffix == "f" else a.sm for a in self.archs]

    @property
    def ptx_names(self) -> list[str]:
        return [a.sm for a in self.ptx]


def _parse_token(token: str) -> tuple[Arch, bool]:
    t = token.strip()
    if t.lower().endswith("+ptx") and not t.endswith("+PTX"):
        raise ArchError(
            f"{token!r}: PTX must be written '+PTX' in capitals; PyTorch ignores {t[-4:]!r} and would ship no PTX",
            token,
            hint=f"write {t[:-4]}+PTX",
        )
    m = _TOKEN.match(t)
    if m:
        arch = Arch(int(m.group("major")), int(m.group("minor")), m.group("suffix"))
        return arch, bool(m.group("ptx"))
    m = _SM.match(t)
    if m:
        return Arch(int(m.group("major")), int(m.group("minor")), m.group("suffix")), False
    if t.lower() in {"native", "all", "all-major", "auto"}:
        raise ArchError(
            f"{token!r} asks CMake or PyTorch to choose the architectures; a row must name them",
            token,
            hint="list the architectures explicitly, e.g. '8.0 9.0 12.0'",
        )
    guess = _guess(t)
    raise ArchError(
        f"{token!r} is not a GPU architecture",
        token,
        hint=f"did you mean {guess}?" if guess else "write compute capabilities such as 8.0, 9.0a or 10.0f",
    )


def _guess(token: str) -> str | None:
    fixed = token.replace("O", "0").replace("o", "0")
    fixed = re.sub(r"^(?:sm|compute)_?", "", fixed, flags=re.IGNORECASE)
    if fixed != token and (_TOKEN.match(fixed)):
        arch, ptx = _parse_token(fixed)
        return arch.dotted + ("+PTX" if ptx else "")
    return None


def parse_arch_list(
    text: str | list[str],
    *,
    ptx: str | None = "newest",
    train: Train | None = None,
) -> ArchList:
    """Parse a list given as a string (`9.0;10.0+PTX`, `75 80 90`) or a list of tokens.

    `ptx` is the row's PTX choice when no token carries `+PTX`: "newest" (default),
    "none", or one architecture. Raises ArchError naming the offending token.
    """
    tokens: list[str] = []
    if not isinstance(text, (str, list)) or (isinstance(text, list) and not all(isinstance(t, str) for t in text)):
        raise ArchError(f"{text!r}: an architecture list is a string or a list of strings", repr(text))
    if isinstance(text, str):
        tokens = [t for t in _SEPARATORS.split(text) if t]
    else:
        for item in text:
            tokens += [t for t in _SEPARATORS.split(item) if t]
    if not tokens:
        raise ArchError("the architecture list is empty", "")
    seen: dict[Arch, str] = {}
    marked: list[Arch] = []
    for tok in tokens:
        arch, is_ptx = _parse_token(tok)
        if arch in seen:
            raise ArchError(
                f"{tok!r} duplicates {seen[arch]!r}",
                tok,
                hint="list each architecture once",
            )
        seen[arch] = tok
        if is_ptx:
            marked.append(arch)
    archs = tuple(sorted(seen, key=lambda a: (a.number, a.suffix)))
    if train is not None:  # what the train cannot compile is the first thing to fix
        check_train_supports(train, archs)
    if marked:
        if ptx not in (None, "newest"):
            raise ArchError(
                f"{'+PTX' !r} on {marked[0].dotted} conflicts with ptx = {ptx!r}",
                marked[0].dotted + "+PTX",
                hint="mark PTX in one place only",
            )
        ptx_archs = tuple(sorted(set(marked), key=lambda a: (a.number, a.suffix)))
    elif ptx in (None, "none"):
        ptx_archs = ()
    elif ptx == "newest":
        ptx_archs = (newest_portable(archs),)
    else:
        chosen = Arch.parse(ptx)
        if chosen not in seen:
            raise ArchError(
                f"ptx = {ptx!r} is not in the row's list",
                ptx,
                hint="name an architecture of the list, 'newest' or 'none'",
            )
        ptx_archs = (chosen,)
    for a in ptx_archs:
        if a.suffix:
            plain = [b for b in archs if not b.suffix]
            raise ArchError(
                f"{a.dotted}+PTX: PTX of an architecture-specific or family target (compute_{a.number}{a.suffix}) "
                "runs only on that architecture, so newer GPUs could not JIT-compile it",
                a.dotted + "+PTX",
                hint=_portable_ptx_hint(a, plain, inline=bool(marked)),
            )
    return ArchList(archs, ptx_archs)


def _portable_ptx_hint(a: Arch, plain: list[Arch], *, inline: bool) -> str:
    if not plain and inline:
        return f"write {a.major}.{a.minor}+PTX {a.dotted} instead of {a.dotted}+PTX (the plain {a.major}.{a.minor} ships the PTX)"
    if not plain:
        return f"add the plain {a.major}.{a.minor} to the list and ship its PTX instead, or ship none (ptx = \"none\")"
    if inline:
        return f"write {a.dotted} without +PTX and mark a plain architecture instead ({plain[-1].dotted}+PTX)"
    return f"ship PTX of a plain architecture (ptx = \"{plain[-1].dotted}\", or ptx = \"newest\"), or ship none (ptx = \"none\")"


def newest_portable(archs: tuple[Arch, ...]) -> Arch:
    """The PTX target for ptx = "newest": the numerically newest plain architecture.

    An `a` or `f` entry (9.0a, 10.0f) never is: its PTX runs only on that architecture or family,
    so newer GPUs could not JIT-compile it. A list of only such entries is refused.
    """
    plain = [a for a in archs if not a.suffix]
    if not plain:
        written = " ".join(a.dotted for a in archs)
        newest = max(archs, key=lambda a: (a.number, a.suffix))
        raise ArchError(
            f"{written!r}: every entry is architecture-specific or family-specific, so none can ship the PTX "
            "that newer GPUs JIT-compile (ptx defaults to the newest plain architecture)",
            newest.dotted,
            hint=f"add the plain {newest.major}.{newest.minor} to the list, or set ptx = \"none\"",
        )
    return max(plain, key=lambda a: a.number)


#: Starting lists: what PyTorch's wheels ship per platform, cut to what a train compiles (see
#: `suggested_archs`). A suggestion only; `buildrows archs --from-wheel` reads the real ones.
STARTING_ARCHS = {
    "aarch64": ("8.0", "9.0", "10.0", "11.0", "12.0"),
    "other": ("7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0"),
}


def suggested_archs(train: Train, platform: str = "") -> str:
    """A list valid for the train, for advice and `buildrows init` ("7.5 8.0 8.6 8.9 9.0" for 12.6)."""
    start = STARTING_ARCHS["aarch64" if platform.endswith("aarch64") else "other"]
    support = train_table().get(train)
    chosen = [t for t in start if support is None or support.supports(Arch.parse(t))]
    return " ".join(chosen)


@dataclass(frozen=True)
class TrainSupport:
    archs: frozenset[tuple[int, int]]
    a: frozenset[tuple[int, int]]
    f: frozenset[tuple[int, int]]

    def supports(self, arch: Arch) -> bool:
        key = (arch.major, arch.minor)
        if arch.suffix == "a":
            return key in self.a
        if arch.suffix == "f":
            return key in self.f
        return key in self.archs


def _pairs(items: list[str]) -> frozenset[tuple[int, int]]:
    out = set()
    for s in items:
        major, minor = s.split(".")
        out.add((int(major), int(minor)))
    return frozenset(out)


@cache
def train_table() -> dict[Train, TrainSupport]:
    """The data table of what each known CUDA train compiles (buildrows/data/cuda_trains.toml)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib

    path = data_file("cuda_trains.toml")
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    return {
        Train.parse(name): TrainSupport(_pairs(v["archs"]), _pairs(v["a"]), _pairs(v["f"]))
        for name, v in raw["trains"].items()
    }


def check_train_supports(train: Train, archs: tuple[Arch, ...] | list[Arch]) -> None:
    table = train_table()
    support = table.get(train)
    if support is None:
        known = ", ".join(t.dotted for t in sorted(table))
        raise ArchError(
            f"buildrows does not know which architectures CUDA {train.dotted} compiles (known: {known})",
            train.dotted,
            hint="add the train to buildrows/data/cuda_trains.toml",
        )
    for a in archs:
        if not support.supports(a):
            lowest = min(support.archs)
            why = ""
            if (a.major, a.minor) < lowest:
                why = f"; CUDA {train.dotted} compiles nothing below {lowest[0]}.{lowest[1]}"
            raise ArchError(
                f"{a.dotted!r}: CUDA {train.dotted} cannot compile this architecture{why}",
                a.dotted,
                hint=f"drop {a.dotted} from this train's list, or build it with a train that supports it",
            )

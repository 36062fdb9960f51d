"""GPU architecture lists: one canonical type, parsed strictly, rendered three ways (SPEC §4).

The CUDA trains and what each compiles are data in buildrows.policy.trains (re-exported here)."""

from __future__ import annotations

import re
from functools import cache

from buildrows.frozen import Frozen, OrderedFrozen, frozen_dataclass
from buildrows.policy.trains import Train as Train
from buildrows.policy.trains import TrainSupport as TrainSupport
from buildrows.policy.trains import beyond_data as beyond_data
from buildrows.policy.trains import beyond_data_note as beyond_data_note
from buildrows.policy.trains import driver_floor as driver_floor
from buildrows.policy.trains import newest_ptx_isa as newest_ptx_isa
from buildrows.policy.trains import newest_train as newest_train
from buildrows.policy.trains import ptx_isa_train as ptx_isa_train
from buildrows.policy.trains import train_driver as train_driver
from buildrows.policy.trains import train_support as train_support
from buildrows.policy.trains import train_table as train_table


# re.ASCII: \d would otherwise accept other scripts' digits (Arabic-Indic, fullwidth), which int() then converts.
# A cubin: `9.0`, `90a`, `10.0f+PTX` (PyTorch's mark: cubin and PTX), `120-real` (CMake's: cubin only).
@cache
def _token() -> re.Pattern[str]:
    return re.compile(
        r"^(?P<major>[1-9]\d?)\.?(?P<minor>\d)(?P<suffix>[af]?)(?:(?P<ptx>\+PTX)|(?P<real>-real))?$", re.ASCII
    )


# PTX without a cubin: CMake's `12.0-virtual` / `120-virtual` (the canonical spelling), or nvcc's `compute_120`.
@cache
def _virtual() -> re.Pattern[str]:
    return re.compile(r"^(?P<major>[1-9]\d?)\.?(?P<minor>\d)(?P<suffix>[af]?)-virtual$", re.ASCII)


@cache
def _sm() -> re.Pattern[str]:
    return re.compile(r"^sm_(?P<major>[1-9]\d?)(?P<minor>\d)(?P<suffix>[af]?)$", re.ASCII)


@cache
def _compute() -> re.Pattern[str]:
    return re.compile(r"^compute_(?P<major>[1-9]\d?)(?P<minor>\d)(?P<suffix>[af]?)$", re.ASCII)


@cache
def _separators() -> re.Pattern[str]:
    return re.compile(r"[\s;,]+")


class ArchError(ValueError):
    """An architecture list could not be parsed; `token` names the offending entry."""

    def __init__(self, message: str, token: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.token = token
        self.hint = hint


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Arch(OrderedFrozen):
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
        arch, kind = _parse_token(token)
        if kind != CUBIN:
            raise ArchError(f"{token!r}: name one architecture here (8.0, 9.0a), without +PTX or -virtual", token)
        return arch


#: What a list entry asks for: a cubin, a cubin and its PTX (`+PTX`), or PTX alone (`-virtual`, `compute_`).
CUBIN, CUBIN_PTX, PTX_ONLY = "cubin", "cubin+ptx", "ptx"


def _sorted(archs: set[Arch] | list[Arch] | tuple[Arch, ...]) -> tuple[Arch, ...]:
    """Numerically (7.5 before 10.0), an entry's plain form before its a/f variants."""
    return tuple(sorted(set(archs), key=lambda a: (a.number, a.suffix)))


@frozen_dataclass(frozen=True, eq=False, repr=False)
class ArchList(Frozen):
    """A canonical architecture list: the cubins, and the architectures that ship PTX.

    `ptx` may name architectures that have no cubin (`12.0-virtual`): PTX-only entries, which real
    wheels ship for forward compatibility.
    """

    archs: tuple[Arch, ...]
    ptx: tuple[Arch, ...]

    @property
    def ptx_only(self) -> tuple[Arch, ...]:
        """PTX entries without a cubin of the same architecture (`12.0-virtual`)."""
        return tuple(a for a in self.ptx if a not in self.archs)

    @property
    def entries(self) -> tuple[Arch, ...]:
        """Every architecture the list names, cubin or PTX."""
        return _sorted((*self.archs, *self.ptx))

    @property
    def newest(self) -> Arch:
        return max(self.entries, key=lambda a: (a.number, a.suffix))

    @property
    def dotted(self) -> list[str]:
        """The cubins' architectures (`9.0a`); see `tokens` for the whole list."""
        return [a.dotted for a in self.archs]

    @property
    def tokens(self) -> list[str]:
        """The list as a policy writes it: `8.0 12.0+PTX`, a PTX-only entry as `12.0-virtual`."""
        # an arch-specific cubin with its PTX is written `9.0a 9.0a-virtual` (parse refuses 9.0a+PTX)
        out = {a: a.dotted + ("" if a not in self.ptx else f" {a.dotted}-virtual" if a.suffix == "a" else "+PTX")
               for a in self.archs}
        out.update({a: f"{a.dotted}-virtual" for a in self.ptx_only})
        return [out[a] for a in self.entries]

    @property
    def text(self) -> str:
        return " ".join(self.tokens)

    @property
    def torch_cuda_arch_list(self) -> str | None:
        """`7.5;8.0;...;12.0+PTX` - the variable PyTorch's CMake reads; None when the list has a
        PTX-only entry, which it cannot say (`X.Y+PTX` is always a cubin and its PTX)."""
        if self.ptx_only:
            return None
        return ";".join(a.dotted + ("+PTX" if a in self.ptx else "") for a in self.archs)

    def require_torch_list(self) -> str:
        """`torch_cuda_arch_list`, or an ArchError saying why it cannot be written."""
        value = self.torch_cuda_arch_list
        if value is None:
            only = " ".join(f"{a.dotted}-virtual" for a in self.ptx_only)
            raise ArchError(
                f"{only!r}: TORCH_CUDA_ARCH_LIST cannot say PTX without a cubin (its X.Y+PTX always builds the "
                "cubin too), and PyTorch builds from that variable, not from CMAKE_CUDA_ARCHITECTURES",
                only,
                hint=f"write {' '.join(a.dotted + '+PTX' for a in self.ptx_only)} (the cubin and its PTX) or drop "
                     "the PTX-only entry for rows PyTorch builds",
            )
        return value

    @property
    def cmake_cuda_architectures(self) -> str:
        """`75-real;...;120-real;120-virtual` - never a bare number (it embeds both forms)."""
        real = [f"{a.number}{a.suffix}-real" for a in self.archs]
        virtual = [f"{a.number}{a.suffix}-virtual" for a in self.ptx]
        return ";".join(real + virtual)

    @property
    def nvcc_flags(self) -> list[str]:
        flags = [f"-gencode=arch={a.compute},code={a.sm}" for a in self.archs]
        flags += [f"-gencode=arch={a.compute},code={a.compute}" for a in self.ptx]
        return flags

    @property
    def cubin_names(self) -> list[str]:
        """Cubin names as the reader reports them (`sm_90a`, `sm_100f`; cuobjdump --list-elf drops the f)."""
        return [a.sm for a in self.archs]

    @property
    def ptx_names(self) -> list[str]:
        return [a.sm for a in self.ptx]


def _parse_token(token: str) -> tuple[Arch, str]:
    t = token.strip()
    if t.lower().endswith("+ptx") and not t.endswith("+PTX"):
        raise ArchError(
            f"{token!r}: PTX must be written '+PTX' in capitals; PyTorch ignores {t[-4:]!r} and would ship no PTX",
            token,
            hint=f"write {t[:-4]}+PTX",
        )
    low = t.lower()
    if (low.endswith(("-virtual", "-real")) and not t.endswith(("-virtual", "-real"))):
        word = "virtual" if low.endswith("-virtual") else "real"
        raise ArchError(f"{token!r}: CMake's suffix is written '-{word}' in lower case", token,
                        hint=f"write {t[: -len(word) - 1]}-{word}")
    m = _token().match(t)
    if m:
        arch = Arch(int(m.group("major")), int(m.group("minor")), m.group("suffix"))
        return arch, CUBIN_PTX if m.group("ptx") else CUBIN
    m = _virtual().match(t) or _compute().match(t)
    if m:
        return Arch(int(m.group("major")), int(m.group("minor")), m.group("suffix")), PTX_ONLY
    m = _sm().match(t)
    if m:
        return Arch(int(m.group("major")), int(m.group("minor")), m.group("suffix")), CUBIN
    if low in {"native", "all", "all-major", "auto"}:
        raise ArchError(
            f"{token!r} asks CMake or PyTorch to choose the architectures; a row must name them",
            token,
            hint="list the architectures explicitly, e.g. '8.0 9.0 12.0'",
        )
    mixed = re.fullmatch(r"(?:sm|compute)_\d+[af]?\+PTX|\d+\.?\d[af]?\+PTX-(?:virtual|real)|\d+\.?\d[af]?-(?:virtual|real)\+PTX",
                         t, re.ASCII)
    if mixed:
        digits = re.sub(r"\D", "", t.split("+")[0].split("-")[0])
        arch_hint = f"{digits[:-1]}.{digits[-1]}"
        raise ArchError(
            f"{token!r} mixes two spellings of one entry",
            token,
            hint=f"write {arch_hint} (a cubin), {arch_hint}+PTX (a cubin and its PTX) or {arch_hint}-virtual (PTX without a cubin)",
        )
    guess = _guess(t)
    raise ArchError(
        f"{token!r} is not a GPU architecture",
        token,
        hint=f"did you mean {guess}?" if guess else
        "write compute capabilities such as 8.0, 9.0a, 10.0f, 12.0+PTX or 12.0-virtual (PTX without a cubin)",
    )


def _guess(token: str) -> str | None:
    virtual = bool(re.match(r"^compute_?", token, flags=re.IGNORECASE))
    fixed = re.sub(r"^(?:sm|compute)_?", "", token, flags=re.IGNORECASE).replace("O", "0").replace("o", "0")
    if fixed != token and (_token().match(fixed)):
        arch, kind = _parse_token(fixed)
        if virtual and kind == CUBIN:
            return f"{arch.dotted}-virtual (PTX without a cubin)"
        return arch.dotted + ("+PTX" if kind == CUBIN_PTX else "")
    return None


def parse_arch_list(
    text: str | list[str],
    *,
    ptx: str | None = "newest",
    train: Train | None = None,
) -> ArchList:
    """Parse a list given as a string (`9.0;10.0+PTX`, `75 80 90`, `8.0 12.0-virtual`) or a list of tokens.

    `ptx` is the row's PTX choice when no token marks PTX (`+PTX`, `-virtual`, `compute_`):
    "newest" (default), "none", or one architecture. Raises ArchError naming the offending token.
    """
    tokens: list[str] = []
    if not isinstance(text, (str, list)) or (isinstance(text, list) and not all(isinstance(t, str) for t in text)):
        raise ArchError(f"{text!r}: an architecture list is a string or a list of strings", repr(text))
    if isinstance(text, str):
        tokens = [t for t in _separators().split(text) if t]
    else:
        for item in text:
            tokens += [t for t in _separators().split(item) if t]
    if not tokens:
        raise ArchError("the architecture list is empty", "")
    cubins: dict[Arch, str] = {}
    marks: dict[Arch, str] = {}  # architectures whose PTX a token asks for, and that token
    for tok in tokens:
        arch, kind = _parse_token(tok)
        if kind in (CUBIN, CUBIN_PTX):
            if arch in cubins:
                raise ArchError(f"{tok!r} duplicates {cubins[arch]!r}", tok, hint="list each architecture once")
            cubins[arch] = tok
        if kind in (CUBIN_PTX, PTX_ONLY):
            if arch in marks:
                raise ArchError(f"{tok!r} duplicates {marks[arch]!r} (both ship {arch.compute} PTX)", tok,
                                hint="list each architecture's PTX once")
            marks[arch] = tok
    archs = _sorted(list(cubins))
    if train is not None:  # what the train cannot compile is the first thing to fix
        check_train_supports(train, _sorted([*cubins, *marks]))
    if marks:
        if ptx not in (None, "newest"):
            first = next(iter(marks.values()))
            raise ArchError(
                f"{first!r} conflicts with ptx = {ptx!r}",
                first,
                hint="mark PTX in one place only: in the list (+PTX, -virtual) or with the ptx key",
            )
        ptx_archs = _sorted(list(marks))
    elif ptx in (None, "none"):
        ptx_archs = ()
    elif ptx == "newest":
        ptx_archs = (newest_portable(archs),)
    else:
        chosen = Arch.parse(ptx)
        if chosen not in cubins:
            raise ArchError(
                f"ptx = {ptx!r} is not in the row's list",
                ptx,
                hint="name an architecture of the list, 'newest' or 'none' (or write X.Y-virtual in the list for "
                     "PTX without a cubin)",
            )
        ptx_archs = (chosen,)
    # PTX of an a/f target JIT-compiles only on that architecture or family. The `ptx` key never
    # picks one (newer GPUs could not use it), and `9.0a+PTX` is refused: arch-specific PTX serves no GPU
    # its cubin does not, so +PTX there is the mistake of someone who wanted forward compatibility.
    # Family PTX (10.0f+PTX) JIT-compiles on later members of the family, and NVIDIA's own wheels ship
    # it; and PTX-only spellings (9.0a-virtual, compute_90a) are deliberate: both are accepted, and the
    # check holds the wheel to them.
    for tok in marks.values():
        arch, kind = _parse_token(tok)
        if kind == CUBIN_PTX and arch.suffix == "a":
            plain = [b for b in archs if not b.suffix]
            raise ArchError(
                f"{tok}: PTX of an architecture-specific target (compute_{arch.number}a) runs only on CC "
                f"{arch.major}.{arch.minor} GPUs, which run its cubin anyway, so newer GPUs could not JIT-compile it",
                tok,
                hint=_portable_ptx_hint(arch, plain, inline=True)
                + f" (if the wheel ships that PTX on purpose, write {arch.dotted} {arch.dotted}-virtual)",
            )
    for a in ptx_archs:
        if a.suffix and not marks:
            plain = [b for b in archs if not b.suffix]
            raise ArchError(
                f"ptx = {a.dotted!r}: PTX of an architecture-specific or family target (compute_{a.number}{a.suffix}) "
                "runs only on that architecture or family, so newer GPUs could not JIT-compile it",
                a.dotted,
                hint=_portable_ptx_hint(a, plain, inline=False),
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
    support = train_support(train)
    chosen = [t for t in start if support is None or support.supports(Arch.parse(t))]
    return " ".join(chosen)


def check_train_supports(train: Train, archs: tuple[Arch, ...] | list[Arch]) -> None:
    table = train_table()
    support = train_support(train)
    if support is None:
        known = ", ".join(t.dotted for t in sorted(table))
        raise ArchError(
            f"buildrows does not know which architectures CUDA {train.dotted} compiles (known: {known})",
            train.dotted,
            hint="add the train to buildrows/data/cuda_trains.toml",
        )
    lowest, highest = min(support.archs), max(support.archs)
    for a in archs:
        if beyond_data(train) and (a.major, a.minor) > highest:
            continue  # a newer train may compile newer GPUs: its own nvcc decides at build time
        if not support.supports(a):
            why = ""
            if (a.major, a.minor) < lowest:
                why = f"; CUDA {train.dotted} compiles nothing below {lowest[0]}.{lowest[1]}"
            if beyond_data(train):
                why += f" (assumed: CUDA {train} is newer than buildrows' data, taken to compile what {newest_train()} does)"
            raise ArchError(
                f"{a.dotted!r}: CUDA {train.dotted} cannot compile this architecture{why}",
                a.dotted,
                hint=f"drop {a.dotted} from this train's list, or build it with a train that supports it",
            )

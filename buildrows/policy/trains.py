"""The CUDA trains as data: what each train compiles, the PTX ISA it writes, its first driver.

Read from buildrows/data/cuda_trains.toml; a train newer than the data is taken to compile what the
newest one does (`beyond_data`). `Train`, a train's name, lives here too.
"""

from __future__ import annotations

import re
import sys
from functools import cache
from typing import TYPE_CHECKING, Any

from buildrows.frozen import Frozen, OrderedFrozen, frozen_dataclass
from buildrows.resources import data_file

if TYPE_CHECKING:
    from buildrows.policy.archs import Arch


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Train(OrderedFrozen):
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


@frozen_dataclass(frozen=True, eq=False, repr=False)
class TrainSupport(Frozen):
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
def _trains_data() -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib

    data: dict[str, Any] = tomllib.loads(data_file("cuda_trains.toml").read_text(encoding="utf-8"))
    return data


@cache
def train_table() -> dict[Train, TrainSupport]:
    """The data table of what each known CUDA train compiles (buildrows/data/cuda_trains.toml)."""
    raw = _trains_data()
    return {
        Train.parse(name): TrainSupport(_pairs(v["archs"]), _pairs(v["a"]), _pairs(v["f"]))
        for name, v in raw["trains"].items()
    }


def newest_train() -> Train:
    """The newest train in buildrows' data."""
    return max(train_table())


def beyond_data(train: Train) -> bool:
    """Whether `train` is newer than every train in buildrows' data (a CUDA released after it): of the
    newest major or the next one (14.0 after 13.5; not 99.9, which is what `cu999` parses as)."""
    newest = newest_train()
    return train not in train_table() and train > newest and train.major <= newest.major + 1


def train_support(train: Train) -> TrainSupport | None:
    """What `train` compiles: its entry in the data; for a train newer than the data, the newest
    train's set (see `beyond_data_note`); None for an unknown train older than the newest."""
    table = train_table()
    if train in table:
        return table[train]
    return table[newest_train()] if beyond_data(train) else None


def train_source(train: Train) -> str:
    """Where the data's entry of `train` (or, beyond the data, of the newest train) was read, without its date."""
    entry = _trains_data()["trains"].get((newest_train() if beyond_data(train) else train).dotted, {})
    return str(entry.get("source", "")).split(":")[0]


def beyond_data_note(train: Train) -> str | None:
    """What buildrows assumes of a train newer than its data, and how to know instead; None otherwise."""
    if not beyond_data(train):
        return None
    newest = newest_train()
    entry = _trains_data()["trains"][newest.dotted]
    archs = " ".join(entry["archs"])
    return (f"CUDA {train} is newer than buildrows' CUDA data (its newest train is CUDA {newest}, read "
            f"{entry.get('date', '?')} from {entry.get('source', 'NVIDIA').split(':')[0]}): it is taken to compile what "
            f"CUDA {newest} does ({archs}, and architectures newer than {entry['archs'][-1]}) and to write any PTX ISA "
            f"from {'.'.join(str(x) for x in newest_ptx_isa(newest))} on; a build asks the train's own nvcc "
            "(`nvcc --list-gpu-code`) and refuses an architecture it does not list; to have it in the data, upgrade "
            "buildrows, or run `python scripts/refresh_cuda_data.py` in a checkout of it")



def _value(entry: Any, key: str) -> str:
    """An entry of the data's [ptx-isa]/[driver] tables: `{ train = "13.3", date, source }` (or a bare string)."""
    return str(entry[key]) if isinstance(entry, dict) else str(entry)


def ptx_isa_train(isa: tuple[int, int]) -> Train | None:
    """The train that introduced PTX ISA `isa` (8.7 -> CUDA 12.8); None when newer than the table."""
    found = _trains_data()["ptx-isa"].get(f"{isa[0]}.{isa[1]}")
    return Train.parse(_value(found, "train")) if found is not None else None


def newest_ptx_isa(train: Train) -> tuple[int, int]:
    """The newest PTX ISA a train writes (and its driver JIT-compiles): CUDA 12.6 -> 8.5."""
    known = [(tuple(int(x) for x in isa.split(".")), Train.parse(_value(t, "train")))
             for isa, t in _trains_data()["ptx-isa"].items()]
    fits = [isa for isa, t in known if t <= train]
    return max(fits) if fits else (0, 0)  # type: ignore[return-value]


def train_driver(train: Train) -> tuple[Train, str] | None:
    """The oldest Linux driver of `train`'s GA release, or of the first listed train after it (12.7 -> 12.8's).

    None when the data has no driver number for it: no listed train at or after it, or a released
    train of the data ([trains]) at or after it lacks its number (13.3 must not be told 13.0's, nor 13.5's)."""
    table = sorted((Train.parse(t), _value(d, "driver")) for t, d in _trains_data()["driver"].items())
    released = set(train_table())
    for t, d in table:
        if t >= train:
            if any(train <= r < t for r in released):
                return None  # a released train between has no number in the data
            return t, d
    return None


def driver_floor(major: int) -> str | None:
    """The first driver of a CUDA major: what any of its trains' cubins load on (minor-version compatibility)."""
    found = _trains_data()["driver-floor"].get(str(major))
    return _value(found, "driver") if found is not None else None

"""What a published wheel says about how it is built and loaded, as policy text (`init --from-wheel`).

The aim is a starting policy under which `buildrows check` passes on the wheel it was read from:
the runtime mode (a PyTorch extension, a ctypes kernel library on torch's runtime, a project that
loads NVIDIA's wheels itself, a statically linked runtime), the row's list (the list most of the
project's libraries carry, PTX included), a rule for each library that carries another list or is
a bundled NVIDIA library, and an exception for each RPATH entry the check would otherwise reject.
Every mode that needs a reason gets one that says what init saw; the user is told to review it.
"""


from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from buildrows.adopt.wheel_lists import ListGroup as ListGroup
from buildrows.adopt.wheel_lists import WheelFacts as WheelFacts
from buildrows.adopt.wheel_lists import _fixtures, _groups, _kernel_unit, _per_train
from buildrows.adopt.wheel_lists import list_text as list_text
from buildrows.adopt.wheel_lists import ptx_only_token as ptx_only_token
from buildrows.adopt.wheel_lists import train_lists as train_lists
from buildrows.adopt.wheel_lists import trains_of as trains_of
from buildrows.adopt.wheel_rules import _bundled_nvidia, _dlopened, _host_code, _provided
from buildrows.adopt.wheel_rules import check_toml as check_toml
from buildrows.adopt.wheel_rules import host_only_supported as host_only_supported
from buildrows.adopt.wheel_runtime import _jit, _mode, _rpath_entries
from buildrows.adopt.wheel_runtime import runtime_toml as runtime_toml

if TYPE_CHECKING:
    from buildrows.binaries.wheelread import WheelInfo
    from buildrows.policy.archs import Train

__all__ = ["WheelFacts", "infer"]


def infer(info: WheelInfo, wheel: Path, train: Train, platform: str) -> WheelFacts:
    """Read what `check` will judge, and describe it so that the check passes."""
    facts = WheelFacts()
    libs = list(info.libraries)
    facts.vendored = sorted(lib.path for lib in libs if lib.has_device_code and _bundled_nvidia(lib.path))
    coded = [lib for lib in libs if lib.has_device_code and lib.path not in facts.vendored]
    facts.per_train_glob, per_train = _per_train(coded, train)
    if per_train:  # the row's train's library gives the row's list; the others are held to theirs
        facts.per_train = {t: _groups([lib])[0] for t, lib in per_train.items()}
        facts.row = facts.per_train[train]
        coded = [lib for lib in coded if lib not in per_train.values()]
    groups = _groups(coded)
    if groups and facts.row is None:
        facts.row = max(groups, key=lambda g: (len(g.paths), len(g.elf)))
    facts.fixtures = _fixtures(info)
    unit = _kernel_unit(info, set(facts.fixtures))
    if unit is not None:  # kernel files (.cubin, .fatbin, .ptx) are judged together, as one unit
        if facts.row is None:
            facts.row = unit
        elif (unit.elf, unit.ptx) != (facts.row.elf, facts.row.ptx):
            groups.append(unit)
    facts.own_lists = [g for g in groups if g is not facts.row]
    if facts.row is None and not facts.vendored:
        facts.host_only = _host_code(info, wheel)
    if facts.row is None and not facts.host_only and not facts.vendored:
        facts.no_code = True
    _mode(facts, info, wheel, train, platform)
    if facts.row is None and not facts.host_only:  # nothing of its own carries device code: compiled at run time?
        _jit(facts, info, train, platform)
    facts.rpath_entries = _rpath_entries(facts, info, train, platform)
    # Libraries another rule covers (the first matching rule wins, so a dlopens rule would shadow it);
    # host-only ones name their bundled copies' sonames, which check reports as a warning.
    ruled = {*facts.vendored, *facts.host_only, *(p for g in facts.own_lists for p in g.paths),
             *(lib.path for lib in per_train.values())}
    facts.dlopens = _dlopened(info, wheel, ruled, train)
    facts.provided = _provided(info)
    return facts

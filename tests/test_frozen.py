"""buildrows.frozen: the frozen dataclasses `env` and `hook` load behave as `dataclass(frozen=True)`
does (compared here with a real one declared alike), and refuse what they do not support."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import subprocess
import sys

import pytest

from buildrows.frozen import Frozen, OrderedFrozen, field, frozen_dataclass


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Base(Frozen):
    doc: str
    default: str = field(default="", kw_only=True)


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Point(Base):
    x: int = 0
    tags: tuple[str, ...] = field(default=())
    table: dict[str, int] = field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class RealBase:
    doc: str
    default: str = dataclasses.field(default="", kw_only=True)


@dataclasses.dataclass(frozen=True)
class RealPoint(RealBase):
    x: int = 0
    tags: tuple[str, ...] = dataclasses.field(default=())
    table: dict[str, int] = dataclasses.field(default_factory=dict)


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Version(OrderedFrozen):
    major: int
    minor: int


CALLS = [(("d",), {}), (("d", 3), {"default": "x"}), (("d",), {"x": 2, "tags": ("a",)}), ((), {"doc": "d", "x": 1})]


@pytest.mark.parametrize(("args", "kwargs"), CALLS)
def test_construction_repr_and_fields_match_a_real_frozen_dataclass(args: tuple[object, ...],
                                                                     kwargs: dict[str, object]) -> None:
    mine, real = Point(*args, **kwargs), RealPoint(*args, **kwargs)  # type: ignore[arg-type]
    assert repr(mine).removeprefix("Point") == repr(real).removeprefix("RealPoint")
    assert dataclasses.asdict(mine) == dataclasses.asdict(real)
    assert [f.name for f in dataclasses.fields(mine)] == [f.name for f in dataclasses.fields(real)]
    assert dataclasses.is_dataclass(mine) and Point.__match_args__ == RealPoint.__match_args__


def test_equality_hash_order_and_copies() -> None:
    a, b = Point("d", 1, ("t",)), Point("d", 1, ("t",))
    assert a == b and hash(Version(1, 2)) == hash(Version(1, 2)) and a != Point("d", 2)
    assert a != RealPoint("d", 1, ("t",)) and a != ("d", 1)  # another class is never equal
    assert Point("d").table is not Point("d").table  # a factory per instance
    assert sorted([Version(13, 0), Version(12, 8), Version(12, 6)]) == [Version(12, 6), Version(12, 8), Version(13, 0)]
    assert Version(1, 2) < Version(1, 3) <= Version(1, 3) and Version(2, 0) > Version(1, 9) >= Version(1, 9)
    with pytest.raises(TypeError):
        assert Version(1, 2) < (1, 3)  # type: ignore[operator]
    assert dataclasses.replace(a, x=5) == Point("d", 5, ("t",))
    assert copy.deepcopy(a) == a and pickle.loads(pickle.dumps(Version(1, 2))) == Version(1, 2)


def test_assigning_or_deleting_a_field_is_refused() -> None:
    p = Point("d")
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'x'"):
        p.x = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'other'"):
        p.other = 3  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'x'"):
        del p.x  # type: ignore[misc]
    assert p.x == 0


@pytest.mark.parametrize(("call", "message"), [
    (lambda: Point("d", 1, (), {}, 5), r"takes 5 positional arguments but 6 were given"),  # type: ignore[call-arg]
    (lambda: Point(), r"missing 1 required argument\(s\): 'doc'"),  # type: ignore[call-arg]
    (lambda: Point("d", doc="e"), r"got multiple values for argument 'doc'"),  # type: ignore[misc]
    (lambda: Point("d", y=1), r"got an unexpected keyword argument 'y'"),  # type: ignore[call-arg]
    (lambda: Point("d", 1, (), {}, default="k", x=2), r"got multiple values for argument 'x'"),  # type: ignore[misc]
])
def test_wrong_arguments_are_refused_as_python_refuses_them(call: object, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        call()  # type: ignore[operator]


def test_what_it_does_not_support_is_refused_where_declared() -> None:
    with pytest.raises(TypeError, match="frozen=True, eq=False, repr=False and nothing else"):
        frozen_dataclass(frozen=True, eq=True, repr=False)
    with pytest.raises(TypeError, match="frozen=True, eq=False, repr=False and nothing else"):
        frozen_dataclass(frozen=True, eq=False, repr=False, order=True)
    with pytest.raises(TypeError, match="must derive from buildrows.frozen.Frozen"):
        @frozen_dataclass(frozen=True, eq=False, repr=False)
        class Plain:  # not a Frozen
            a: int
    with pytest.raises(TypeError, match="has no ClassVar"):
        @frozen_dataclass(frozen=True, eq=False, repr=False)
        class WithClassVar(Frozen):
            a: ClassVar[int]  # type: ignore[name-defined] # noqa: F821
    with pytest.raises(ValueError, match="mutable default"):
        @frozen_dataclass(frozen=True, eq=False, repr=False)
        class Mutable(Frozen):
            a: list[int] = []  # noqa: RUF012
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        @frozen_dataclass(frozen=True, eq=False, repr=False)
        class Order(Frozen):
            a: int = 0
            b: int  # type: ignore[misc]
    with pytest.raises(ValueError, match="both default and default_factory"):
        field(default=1, default_factory=int)


def test_env_and_hooks_modules_import_neither_dataclasses_nor_inspect() -> None:
    """What the start-up target rests on (scripts/bench_startup.py measures the time itself)."""
    code = ("import sys, buildrows.cli, buildrows.commands.env, buildrows.commands.hook, buildrows.ci.hook, "
            "buildrows.policy.load, buildrows.policy.rows, buildrows.render.envfile, buildrows.plan.row; "
            "print(sorted(m for m in ('dataclasses', 'inspect', 'subprocess', 'shutil', 'copy', 'threading', 'json') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_only_short_commands_run_without_the_cyclic_collector(capsys: pytest.CaptureFixture[str]) -> None:
    """entry() (and `python -m buildrows`) turn the collector off for start-up; main() turns it
    back on for every command but env and hook (and a hook that provisions a toolkit)."""
    import gc
    from pathlib import Path

    from buildrows.cli import main

    config = str(Path(__file__).resolve().parent.parent / "examples" / "cuda-extension" / "buildrows.toml")
    try:
        for argv, enabled in ((["rows"], True), (["env", "linux-x86_64-cpu-py311"], False)):
            gc.disable()
            assert main(["--config", config, *argv]) == 0
            assert gc.isenabled() is enabled, argv
    finally:
        gc.enable()
    capsys.readouterr()

"""Frozen dataclasses that cost less to define: the hook starts on every CI job.

`@dataclass(frozen=True)` compiles six methods per class with `exec` when its module is imported
(ten with order=True), a compile of generated source each: about a millisecond a class, and
`buildrows env` and `hook` import some thirty of them. The classes on that path are declared as

    @frozen_dataclass(frozen=True, eq=False, repr=False)
    class Row(Frozen): ...

which mypy reads as the `dataclasses.dataclass` it is (frozen: an assignment is a type error),
and which at run time generates only `__init__`; `==`, `hash`, `repr`, the ordering of
OrderedFrozen and the refusal to assign or delete a field are written once, here, and behave as
the generated ones do (fields' compare/hash/repr honoured; another class is never equal;
assigning raises dataclasses.FrozenInstanceError). `replace`, `fields` and `asdict` work as on
any dataclass.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from dataclasses import dataclass as frozen_dataclass
else:
    _T = TypeVar("_T", bound=type)

    def frozen_dataclass(*, frozen: bool, eq: bool, repr: bool, **options: Any) -> Any:
        """`dataclasses.dataclass` for a Frozen subclass, without the per-class __setattr__,
        __delattr__, __eq__, __hash__ and __repr__ (Frozen has them)."""
        if not frozen or eq or repr:
            raise TypeError("frozen_dataclass is for frozen=True, eq=False, repr=False")

        def wrap(cls: _T) -> _T:
            if not issubclass(cls, Frozen):
                raise TypeError(f"{cls.__qualname__} must derive from buildrows.frozen.Frozen")
            from dataclasses import dataclass

            return dataclass(cls, frozen=False, eq=False, repr=False, **options)  # type: ignore[no-any-return]
        return wrap

#: Per class: the names compared, hashed and shown, in field order.
_NAMES: dict[type, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {}


def _names(cls: type) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    names = _NAMES.get(cls)
    if names is None:
        fs = fields(cls)
        names = _NAMES[cls] = (tuple(f.name for f in fs if f.compare),
                               tuple(f.name for f in fs if (f.compare if f.hash is None else f.hash)),
                               tuple(f.name for f in fs if f.repr))
    return names


class Frozen:
    """Base of a `@frozen_dataclass(frozen=True, eq=False, repr=False)`: the dataclass methods, shared."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        # Only the generated __init__ sets a field, once; nothing else is ever assigned.
        if name in self.__dict__ or name not in self.__dataclass_fields__:  # type: ignore[attr-defined]
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def _frozen_key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, n) for n in _names(self.__class__)[0])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._frozen_key() == other._frozen_key()  # type: ignore[attr-defined, no-any-return]
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, n) for n in _names(self.__class__)[1]))

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in _names(self.__class__)[2])
        return f"{self.__class__.__qualname__}({shown})"


class OrderedFrozen(Frozen):
    """Frozen, and ordered as `order=True` orders: by the compared fields, within one class."""

    __slots__ = ()

    def __lt__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._frozen_key() < other._frozen_key()  # type: ignore[attr-defined, no-any-return]
        return NotImplemented

    def __le__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._frozen_key() <= other._frozen_key()  # type: ignore[attr-defined, no-any-return]
        return NotImplemented

    def __gt__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._frozen_key() > other._frozen_key()  # type: ignore[attr-defined, no-any-return]
        return NotImplemented

    def __ge__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._frozen_key() >= other._frozen_key()  # type: ignore[attr-defined, no-any-return]
        return NotImplemented

"""Frozen dataclasses that cost nothing to define: `buildrows env` and `hook` start on every CI job.

`@dataclass(frozen=True)` compiles six methods per class with `exec` when its module is imported
(ten with order=True), and importing `dataclasses` imports `inspect` (with ast, dis, tokenize):
about 20 ms of the 30 classes `env` and `hook` load, a third of their start-up. The classes on
that path are declared as

    @frozen_dataclass(frozen=True, eq=False, repr=False)
    class Row(Frozen):
        name: str
        rows: tuple[str, ...] = field(default=())

which mypy reads as the `dataclasses.dataclass` (and `dataclasses.field`) it names: a frozen
dataclass, an assignment to it a type error. At run time the class gets one shared `__init__`
(positional and keyword arguments, defaults, default factories, keyword-only fields, inherited
fields, as dataclasses orders them) and Frozen's `==`, `hash`, `repr`, ordering (OrderedFrozen)
and the refusal to assign or delete (dataclasses.FrozenInstanceError). `dataclasses.fields`,
`replace`, `asdict` and `is_dataclass` work: `__dataclass_fields__` is built, by dataclasses
itself, on first use. Not supported (refused where declared): `field()` options other than
default, default_factory and kw_only; ClassVar and InitVar annotations; dataclass options.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

__all__ = ["Frozen", "OrderedFrozen", "field", "frozen_dataclass"]

_MISSING: Any = object()


class _Spec:
    """One field: its name, annotation (a string), default or factory, and whether keyword-only."""

    __slots__ = ("annotation", "default", "factory", "kw_only", "name")

    def __init__(self, name: str, annotation: str, default: Any, factory: Any, kw_only: bool) -> None:
        self.name, self.annotation, self.default, self.factory, self.kw_only = name, annotation, default, factory, kw_only


class _FieldArgs:
    __slots__ = ("default", "factory", "kw_only")

    def __init__(self, default: Any, factory: Any, kw_only: bool) -> None:
        self.default, self.factory, self.kw_only = default, factory, kw_only


class _LazyFields:
    """`__dataclass_fields__`, built by dataclasses from the class's fields when first asked for
    (dataclasses.fields, replace, asdict), then kept on the class."""

    def __get__(self, obj: object, owner: type) -> dict[str, Any]:
        import dataclasses

        specs: tuple[_Spec, ...] = owner.__dict__["__frozen_fields__"]
        made = dataclasses.make_dataclass(
            owner.__name__,
            [(s.name, s.annotation, dataclasses.field(
                default=s.default if s.default is not _MISSING else dataclasses.MISSING,
                default_factory=s.factory if s.factory is not _MISSING else dataclasses.MISSING,
                kw_only=s.kw_only)) for s in specs],
            frozen=True, eq=False, repr=False)
        fields: dict[str, Any] = made.__dataclass_fields__  # type: ignore[attr-defined]
        type.__setattr__(owner, "__dataclass_fields__", fields)
        return fields


def _make_init(cls: type, specs: tuple[_Spec, ...]) -> Any:
    positional = tuple(s.name for s in specs if not s.kw_only)
    known = frozenset(s.name for s in specs)
    qual = cls.__qualname__
    post_init = getattr(cls, "__post_init__", None)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(positional):
            raise TypeError(f"{qual}.__init__() takes {len(positional) + 1} positional arguments but "
                            f"{len(args) + 1} were given")
        given = dict(zip(positional, args, strict=False))
        for name, value in kwargs.items():
            if name not in known:
                raise TypeError(f"{qual}.__init__() got an unexpected keyword argument {name!r}")
            if name in given:
                raise TypeError(f"{qual}.__init__() got multiple values for argument {name!r}")
            given[name] = value
        values = self.__dict__
        missing = []
        for s in specs:
            if s.name in given:
                values[s.name] = given[s.name]
            elif s.factory is not _MISSING:
                values[s.name] = s.factory()
            elif s.default is not _MISSING:
                values[s.name] = s.default
            else:
                missing.append(repr(s.name))
        if missing:
            raise TypeError(f"{qual}.__init__() missing {len(missing)} required argument(s): {', '.join(missing)}")
        if post_init is not None:
            post_init(self)

    __init__.__qualname__ = f"{qual}.__init__"
    return __init__


def _own_annotations(cls: type) -> dict[str, Any]:
    """The class's own annotations (strings: `from __future__ import annotations`), without
    importing inspect; Python 3.14 may keep them behind `__annotate__`."""
    own = cls.__dict__.get("__annotations__")  # noqa: RUF063 (inspect is what this module avoids)
    if own is None and ("__annotate__" in cls.__dict__ or "__annotate_func__" in cls.__dict__):
        own = cls.__annotations__
    return dict(own or {})


_T = TypeVar("_T", bound=type)

if TYPE_CHECKING:
    from dataclasses import dataclass as frozen_dataclass
    from dataclasses import field as field
else:
    def field(*, default: Any = _MISSING, default_factory: Any = _MISSING, kw_only: bool = False) -> Any:
        """dataclasses.field's default, default_factory and kw_only, for a frozen_dataclass."""
        if default is not _MISSING and default_factory is not _MISSING:
            raise ValueError("cannot specify both default and default_factory")
        return _FieldArgs(default, default_factory, kw_only)

    def frozen_dataclass(*, frozen: bool, eq: bool, repr: bool, **options: Any) -> Any:
        """`dataclasses.dataclass(frozen=True, eq=False, repr=False)` for a Frozen subclass."""
        if not frozen or eq or repr or options:
            raise TypeError("frozen_dataclass takes frozen=True, eq=False, repr=False and nothing else")

        def wrap(cls: _T) -> _T:
            if not issubclass(cls, Frozen):
                raise TypeError(f"{cls.__qualname__} must derive from buildrows.frozen.Frozen")
            specs: dict[str, _Spec] = {}
            for base in reversed(cls.__mro__[1:]):
                for s in base.__dict__.get("__frozen_fields__", ()):
                    specs[s.name] = s
            for name, annotation in _own_annotations(cls).items():
                text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
                if text.split("[")[0].rsplit(".", 1)[-1] in ("ClassVar", "InitVar", "KW_ONLY"):
                    raise TypeError(f"{cls.__qualname__}.{name}: frozen_dataclass has no {text}")
                value = cls.__dict__.get(name, _MISSING)
                default, factory, kw_only = value, _MISSING, False
                if isinstance(value, _FieldArgs):
                    default, factory, kw_only = value.default, value.factory, value.kw_only
                    if default is _MISSING:
                        delattr(cls, name)
                    else:
                        setattr(cls, name, default)
                elif isinstance(value, (list, dict, set)):
                    raise ValueError(f"mutable default {type(value)} for field {name} is not allowed: use default_factory")
                specs[name] = _Spec(name, str(annotation), default, factory, kw_only)
            ordered = tuple(specs.values())
            positional = [s for s in ordered if not s.kw_only]
            seen_default = False
            for s in positional:
                if s.default is not _MISSING or s.factory is not _MISSING:
                    seen_default = True
                elif seen_default:
                    raise TypeError(f"non-default argument {s.name!r} follows default argument")
            cls.__frozen_fields__ = ordered  # type: ignore[attr-defined]
            cls.__frozen_names__ = tuple(s.name for s in ordered)  # type: ignore[attr-defined]
            cls.__init__ = _make_init(cls, ordered)  # type: ignore[misc]
            cls.__match_args__ = tuple(s.name for s in positional)  # type: ignore[attr-defined]
            cls.__dataclass_fields__ = _LazyFields()  # type: ignore[attr-defined]
            return cls
        return wrap


def _frozen_error(message: str) -> Exception:
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(message)


class Frozen:
    """Base of a `@frozen_dataclass(frozen=True, eq=False, repr=False)`: the dataclass methods, shared."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise _frozen_error(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise _frozen_error(f"cannot delete field {name!r}")

    def _frozen_key(self) -> tuple[Any, ...]:
        values = self.__dict__
        return tuple(values[n] for n in self.__frozen_names__)  # type: ignore[attr-defined]

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._frozen_key() == other._frozen_key()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._frozen_key())

    def __repr__(self) -> str:
        values = self.__dict__
        shown = ", ".join(f"{n}={values[n]!r}" for n in self.__frozen_names__)  # type: ignore[attr-defined]
        return f"{self.__class__.__qualname__}({shown})"


class OrderedFrozen(Frozen):
    """Frozen, and ordered as `order=True` orders: by the fields, within one class."""

    __slots__ = ()

    def __lt__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._frozen_key() < other._frozen_key()
        return NotImplemented

    def __le__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._frozen_key() <= other._frozen_key()
        return NotImplemented

    def __gt__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._frozen_key() > other._frozen_key()
        return NotImplemented

    def __ge__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._frozen_key() >= other._frozen_key()
        return NotImplemented

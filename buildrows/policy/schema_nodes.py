"""The node types of the policy file's schema (a string, a list, a table, a map, an array of tables):
what each accepts, how it is named in messages and its JSON Schema; `schema` builds the keys from them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from buildrows.frozen import Frozen, field, frozen_dataclass

__all__ = ["ArrayOf", "Bool", "MapOf", "Node", "Str", "StrList", "StrOrList", "Table"]

@frozen_dataclass(frozen=True, eq=False, repr=False)
class Node(Frozen):
    doc: str
    #: What applies when the key is absent, as the reference (docs/reference/policy.md) shows it;
    #: "" when there is none. Keyword-only so that every node type keeps its positional arguments.
    default: str = field(default="", kw_only=True)

    def json_schema(self) -> dict[str, Any]:
        raise NotImplementedError

    def type_name(self) -> str:
        raise NotImplementedError

    def accepts(self, value: object) -> bool:
        raise NotImplementedError


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Str(Node):
    enum: tuple[str, ...] = ()

    def json_schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "string", "description": self.doc}
        if self.enum:
            out["enum"] = list(self.enum)
        return out

    def type_name(self) -> str:
        return "one of " + ", ".join(repr(e) for e in self.enum) if self.enum else "a string"

    def accepts(self, value: object) -> bool:
        return isinstance(value, str) and (not self.enum or value in self.enum)


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Bool(Node):
    def json_schema(self) -> dict[str, Any]:
        return {"type": "boolean", "description": self.doc}

    def type_name(self) -> str:
        return "true or false"

    def accepts(self, value: object) -> bool:
        return isinstance(value, bool)


@frozen_dataclass(frozen=True, eq=False, repr=False)
class StrList(Node):
    def json_schema(self) -> dict[str, Any]:
        return {"type": "array", "items": {"type": "string"}, "description": self.doc}

    def type_name(self) -> str:
        return "a list of strings"

    def accepts(self, value: object) -> bool:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)


@frozen_dataclass(frozen=True, eq=False, repr=False)
class StrOrList(Node):
    def json_schema(self) -> dict[str, Any]:
        return {
            "description": self.doc,
            "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
        }

    def type_name(self) -> str:
        return "a string or a list of strings"

    def accepts(self, value: object) -> bool:
        return isinstance(value, str) or StrList("").accepts(value)


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Table(Node):
    fields: Mapping[str, Node] = field(default_factory=dict)
    required: tuple[str, ...] = ()

    def json_schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "object",
            "description": self.doc,
            "additionalProperties": False,
            "properties": {k: v.json_schema() for k, v in self.fields.items()},
        }
        if self.required:
            out["required"] = list(self.required)
        return out

    def type_name(self) -> str:
        return "a table"

    def accepts(self, value: object) -> bool:
        return isinstance(value, dict)


@frozen_dataclass(frozen=True, eq=False, repr=False)
class MapOf(Node):
    """A table whose keys are chosen by the user (platform names, trains, variables)."""

    value: Node = field(default_factory=lambda: Str(""))
    keys: tuple[str, ...] = ()  # closed set of allowed keys, when there is one

    def json_schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "object", "description": self.doc}
        if self.keys:
            out["properties"] = {k: self.value.json_schema() for k in self.keys}
            out["additionalProperties"] = False
        else:
            out["additionalProperties"] = self.value.json_schema()
        return out

    def type_name(self) -> str:
        return "a table"

    def accepts(self, value: object) -> bool:
        return isinstance(value, dict)


@frozen_dataclass(frozen=True, eq=False, repr=False)
class ArrayOf(Node):
    item: Node = field(default_factory=lambda: Str(""))

    def json_schema(self) -> dict[str, Any]:
        return {"type": "array", "description": self.doc, "items": self.item.json_schema()}

    def type_name(self) -> str:
        return "an array of tables ([[...]])"

    def accepts(self, value: object) -> bool:
        return isinstance(value, list)

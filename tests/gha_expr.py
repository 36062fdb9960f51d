"""A small evaluator of GitHub Actions expressions (`${{ ... }}` and `if:`), enough for the
workflows and actions the CI harness runs: contexts, property and index access, `.*` filters,
literals, `! == != < <= > >= && ||`, and the functions those files call.

Semantics follow GitHub's documentation: loose equality (strings compared case-insensitively,
mixed types compared as numbers), `&&`/`||` returning an operand, and string conversion of
null/booleans/numbers as the runner does.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?[0-9]+(?:\.[0-9]+)?)|(?P<op>==|!=|<=|>=|&&|\|\||[!<>().\[\],*])"
    r"|(?P<id>[A-Za-z_][A-Za-z0-9_-]*))"
)


class ExpressionError(ValueError):
    pass


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ExpressionError(f"cannot read expression {text!r} at {text[pos:]!r}")
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def to_string(v: Any) -> str:
    """A value as the runner substitutes it into text."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (dict, list)):
        return json.dumps(v)
    return str(v)


def truthy(v: Any) -> bool:
    if v is None or v is False:
        return False
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v != 0 and not math.isnan(v)
    if isinstance(v, str):
        return v != ""
    return True


def _number(v: Any) -> float:
    if v is None:
        return 0.0
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        s = v.strip()
        if s == "":
            return 0.0
        try:
            return float(int(s, 0)) if s.lower().startswith("0x") else float(s)
        except ValueError:
            return math.nan
    return math.nan


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    if type(a) is type(b) and not isinstance(a, (int, float)):
        return bool(a == b)
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return a is b
    x, y = _number(a), _number(b)
    return not (math.isnan(x) or math.isnan(y)) and x == y


def _compare(a: Any, b: Any, op: str) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        x: Any = a.lower()
        y: Any = b.lower()
    else:
        x, y = _number(a), _number(b)
        if math.isnan(x) or math.isnan(y):
            return False
    return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]


def _contains(hay: Any, needle: Any) -> bool:
    if isinstance(hay, list):
        return any(_equal(h, needle) for h in hay)
    return to_string(needle).lower() in to_string(hay).lower()


def _format(fmt: Any, *args: Any) -> str:
    out = to_string(fmt)
    for i, a in enumerate(args):
        out = out.replace("{" + str(i) + "}", to_string(a))
    return out.replace("{{", "{").replace("}}", "}")


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "startswith": lambda a, b: to_string(a).lower().startswith(to_string(b).lower()),
    "endswith": lambda a, b: to_string(a).lower().endswith(to_string(b).lower()),
    "contains": _contains,
    "fromjson": lambda a: json.loads(to_string(a)),
    "tojson": lambda a: json.dumps(a, indent=2),
    "format": _format,
    "join": lambda a, sep=",": to_string(sep).join(to_string(x) for x in a) if isinstance(a, list) else to_string(a),
    "always": lambda: True,
    "success": lambda: True,
    "failure": lambda: False,
    "cancelled": lambda: False,
}


class _Parser:
    def __init__(self, text: str, context: Mapping[str, Any]) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.ctx = {k.lower(): v for k, v in context.items()}

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            raise ExpressionError(f"expected {value or 'more'} in {self.text!r}")
        self.i += 1
        return tok

    def parse(self) -> Any:
        v = self.or_()
        if self.peek() is not None:
            raise ExpressionError(f"unexpected {self.peek()[1]!r} in {self.text!r}")  # type: ignore[index]
        return v

    def or_(self) -> Any:
        v = self.and_()
        while self.peek() == ("op", "||"):
            self.take()
            rhs = self.and_()
            v = v if truthy(v) else rhs
        return v

    def and_(self) -> Any:
        v = self.cmp()
        while self.peek() == ("op", "&&"):
            self.take()
            rhs = self.cmp()
            v = rhs if truthy(v) else v
        return v

    def cmp(self) -> Any:
        v = self.unary()
        while self.peek() in (("op", "=="), ("op", "!="), ("op", "<"), ("op", "<="), ("op", ">"), ("op", ">=")):
            op = self.take()[1]
            rhs = self.unary()
            if op == "==":
                v = _equal(v, rhs)
            elif op == "!=":
                v = not _equal(v, rhs)
            else:
                v = _compare(v, rhs, op)
        return v

    def unary(self) -> Any:
        if self.peek() == ("op", "!"):
            self.take()
            return not truthy(self.unary())
        return self.postfix()

    def postfix(self) -> Any:
        v = self.primary()
        while True:
            tok = self.peek()
            if tok == ("op", "."):
                self.take()
                nxt = self.take()
                if nxt == ("op", "*"):
                    v = list(v.values()) if isinstance(v, dict) else (v if isinstance(v, list) else [])
                    v = _Filtered(v)
                else:
                    v = _member(v, nxt[1])
            elif tok == ("op", "["):
                self.take()
                key = self.or_()
                self.take("]")
                v = _member(v, key)
            else:
                return v.items if isinstance(v, _Filtered) else v

    def primary(self) -> Any:
        kind, value = self.take()
        if kind == "str":
            return value[1:-1].replace("''", "'")
        if kind == "num":
            return float(value)
        if kind == "op" and value == "(":
            v = self.or_()
            self.take(")")
            return v
        if kind == "id":
            low = value.lower()
            if self.peek() == ("op", "("):
                self.take()
                args: list[Any] = []
                if self.peek() != ("op", ")"):
                    args.append(self.or_())
                    while self.peek() == ("op", ","):
                        self.take()
                        args.append(self.or_())
                self.take(")")
                fn = _FUNCTIONS.get(low)
                if fn is None:
                    raise ExpressionError(f"unknown function {value}() in {self.text!r}")
                return fn(*args)
            if low in ("true", "false"):
                return low == "true"
            if low == "null":
                return None
            if low not in self.ctx:
                raise ExpressionError(f"unknown context {value!r} in {self.text!r}")
            return self.ctx[low]
        raise ExpressionError(f"unexpected {value!r} in {self.text!r}")


class _Filtered:
    """The result of `.*`: member access maps over the items."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items


def _member(v: Any, key: Any) -> Any:
    if isinstance(v, _Filtered):
        return _Filtered([_member(x, key) for x in v.items])
    if isinstance(v, dict):
        if key in v:
            return v[key]
        low = to_string(key).lower()
        for k, x in v.items():
            if str(k).lower() == low:
                return x
        return None
    if isinstance(v, list) and isinstance(key, (int, float)) and not isinstance(key, bool):
        i = int(key)
        return v[i] if 0 <= i < len(v) else None
    return None


def evaluate(expr: str, context: Mapping[str, Any]) -> Any:
    """The value of one expression (the text inside `${{ }}`)."""
    return _Parser(expr, context).parse()


_EMBEDDED = re.compile(r"\$\{\{(.*?)\}\}", re.S)


def interpolate(text: str, context: Mapping[str, Any]) -> str:
    """TEXT with every `${{ expr }}` replaced by its value as a string."""
    return _EMBEDDED.sub(lambda m: to_string(evaluate(m.group(1), context)), text)


def value(raw: Any, context: Mapping[str, Any]) -> Any:
    """A `with:`/`env:` value: a lone `${{ expr }}` keeps its type; text is interpolated."""
    if not isinstance(raw, str):
        return raw
    m = _EMBEDDED.fullmatch(raw.strip())
    if m is not None:
        return evaluate(m.group(1), context)
    return interpolate(raw, context)


def condition(raw: Any, context: Mapping[str, Any]) -> bool:
    """An `if:` (with or without `${{ }}`); absent means success()."""
    if raw is None:
        return True
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip()
    m = _EMBEDDED.fullmatch(text)
    return truthy(evaluate(m.group(1) if m else text, context))

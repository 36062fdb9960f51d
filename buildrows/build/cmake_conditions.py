"""Which parts of a project's CMake a row's configure can reach, read without running CMake.

Doctor reads a project's CMake for what it links (`CUDA::cublas`) and fetches (FetchContent). A
block a row's configure never enters must not count: LightGBM 4.7.0 bundles nanoarrow, whose
`CUDA::cuda_driver` sits under `if(NANOARROW_DEVICE_WITH_CUDA)`, an `option(... OFF)` nothing
turns on, and its only FetchContent under `if(BUILD_CPP_TEST)`, another; doctor refused its
CUDA row for a driver stub CMake never asks for, and warned an offline builder would fail.

One rule, kept small and on the safe side: a branch `if(A AND B ...)` is dead when one of its
conjuncts (`NOT MSVC` may be another) is a bare name declared `option(NAME "..." OFF)` (or with no default) in the project's
CMake and turned on by nothing the row gives (its cache, the cuda-option, pyproject's
`[tool.scikit-build.cmake.define]`, `-D` in CMAKE_ARGS) nor by a `set(NAME ON ...)` the live text
reaches. Issue 40 adds: a name no CMake file of the project sets or declares, sharing the prefix of
its options (`never_set`: llama.cpp's LLAMA_BUILD_BORINGSSL), is off too, and an `elseif()`
whose own condition is dead is. Everything else (`OR`, a parenthesised group, a `NOT NAME` alone,
other variables, `else()` branches) is taken as reachable, as before.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping

_OPTION = re.compile(r"^[ \t]*option\s*\(\s*([A-Za-z0-9_]+)\s+(?:\"[^\"]*\"|[^\s)]+)\s*([^\s)]*)\s*\)",
                     re.MULTILINE | re.IGNORECASE)
_SET_ON = re.compile(r"^[ \t]*set\s*\(\s*([A-Za-z0-9_]+)\s+(?:ON|TRUE|YES|Y|1)\b", re.MULTILINE | re.IGNORECASE)
_BLOCK = re.compile(r"^[ \t]*(if|elseif|else|endif)[ \t]*\(", re.MULTILINE | re.IGNORECASE)
_DEFINE = re.compile(r"-D([A-Za-z0-9_]+)(?::[A-Za-z]+)?=(\S*)")
_FALSE = frozenset({"", "OFF", "FALSE", "NO", "N", "0", "IGNORE", "NOTFOUND"})


def truthy(value: str) -> bool:
    v = value.strip().strip('"').upper()
    return v not in _FALSE and not v.endswith("-NOTFOUND")


def turned_on(cache: Iterable[tuple[str, str]], env: Mapping[str, str],
              defines: Mapping[str, object] | None = None) -> set[str]:
    """The CMake variables a row's configure turns on: its cache entries, pyproject's
    `[tool.scikit-build.cmake.define]`, and `-DNAME=ON` in CMAKE_ARGS / SKBUILD_CMAKE_ARGS /
    SKBUILD_CMAKE_DEFINE."""
    on = {name for name, value in cache if truthy(value)}
    for name, value in (defines or {}).items():
        if (isinstance(value, bool) and value) or (isinstance(value, str) and truthy(value)):
            on.add(name)
    for var in ("CMAKE_ARGS", "SKBUILD_CMAKE_ARGS"):
        on |= {m.group(1) for m in _DEFINE.finditer(env.get(var, "")) if truthy(m.group(2))}
    for item in env.get("SKBUILD_CMAKE_DEFINE", "").split(";"):
        name, _, value = item.partition("=")
        if name.strip() and truthy(value):
            on.add(name.strip().split(":")[0])
    return on


def declared_off(text: str) -> set[str]:
    """The options `text` declares off by default: option(NAME "help") or option(NAME "help" OFF)."""
    return {m.group(1) for m in _OPTION.finditer(text) if not truthy(m.group(2) or "OFF")}


def _args(text: str, open_at: int) -> tuple[str, int]:
    """The text inside the parenthesis opening at `open_at`, and where it closes."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[open_at + 1:i], i + 1
    return text[open_at + 1:], len(text)


def _dead(condition: str, off: Collection[str]) -> bool:
    words = condition.split()
    if not words or "OR" in words or "(" in condition:  # one conjunct off makes an AND false, nothing else
        return False
    conjuncts = " ".join(words).split(" AND ")
    return any(c.strip() in off for c in conjuncts)


def _blank(text: str, off: Collection[str]) -> str:
    dead_regions: list[tuple[int, int]] = []
    stack: list[bool] = []  # whether the enclosing branch was dead
    dead, since = False, 0
    for m in _BLOCK.finditer(text):
        word = m.group(1).lower()
        condition, end = _args(text, m.end() - 1)
        if word == "if":
            stack.append(dead)
            now = dead or _dead(condition, off)
        elif word == "elseif":  # another branch: as reachable as the if() itself, unless its own condition is dead
            now = (stack[-1] if stack else False) or _dead(condition, off)
        elif word == "else":
            now = stack[-1] if stack else False
        else:
            now = stack.pop() if stack else False
        if now and not dead:
            since = end
        elif dead and not now:
            dead_regions.append((since, m.start()))
        dead = now
    if dead:
        dead_regions.append((since, len(text)))
    if not dead_regions:
        return text
    out, at = [], 0
    for start, stop in dead_regions:
        out += [text[at:start], re.sub(r"[^\n]", " ", text[start:stop])]
        at = stop
    out.append(text[at:])
    return "".join(out)


_ANY_SET = re.compile(r"^[ \t]*(?:set|option|cmake_dependent_option)\s*\(\s*([A-Za-z0-9_]+)\b",
                      re.MULTILINE | re.IGNORECASE)
_NAME = re.compile(r"^[A-Z][A-Z0-9]*_[A-Z0-9_]+$")


def never_set(texts: Iterable[str], on: Collection[str]) -> set[str]:
    """Names a condition may test that no file of the project ever sets, declares as an option or
    the row turns on, and whose prefix is the prefix of the project's own options (LLAMA_BUILD_BORINGSSL
    beside option(LLAMA_BUILD_COMMON ...)): false in every configure of the row. Names that CMake or a
    find_package sets (WIN32, OpenMP_FOUND) have no such prefix, or end in _FOUND, and are left alone."""
    set_names: set[str] = set()
    tested: set[str] = set()
    prefixes: set[str] = set()
    for text in texts:
        for m in _ANY_SET.finditer(text):
            set_names.add(m.group(1))
        for m in _OPTION.finditer(text):
            prefixes.add(m.group(1).split("_", 1)[0])
        for m in _BLOCK.finditer(text):
            if m.group(1).lower() in ("if", "elseif"):
                condition, _ = _args(text, m.end() - 1)
                tested |= {w for w in condition.split() if _NAME.match(w)}
    return {n for n in tested - set_names - set(on)
            if n.split("_", 1)[0] in prefixes and not n.endswith("_FOUND")}


class Reach:
    """The options seen so far, as the files of one configure are read in order. `unset`: names no
    file ever sets (`never_set`), dead wherever they are a conjunct."""

    def __init__(self, on: Collection[str], unset: Collection[str] = ()) -> None:
        self.on = set(on)
        self.off: set[str] = set(unset) - self.on

    def live(self, text: str) -> str:
        """`text` with every branch no configure of the row enters blanked (newlines kept, so
        line numbers stay), learning the options it declares and the ones it sets on."""
        self.off |= declared_off(text) - self.on
        first = _blank(text, self.off)
        switched = {m.group(1) for m in _SET_ON.finditer(first)}
        if switched & self.off:
            self.off -= switched
            self.on |= switched
            return _blank(text, self.off)
        return first

"""The link command a setup.py row's extensions are linked with, without the interpreter's own RPATH.

setuptools links every extension with the row's interpreter's sysconfig `LDSHARED`. A Python built
with `--enable-shared` and an rpath to its own `lib` (pyenv's, seen on CI's 3.11.7: `gcc -shared
-L/root/.pyenv/versions/3.11.7/lib -Wl,-rpath,/root/.pyenv/versions/3.11.7/lib`) thereby writes an
absolute RUNPATH into the builder's home into every extension of the wheel. No extension needs it
(a Linux extension does not link libpython: the interpreter that imports it provides the symbols),
and a published wheel must not carry the build machine's paths: the check's runtime-reached judge
fails such an entry, and manylinux's and uv's interpreters never write one.

The choice (issue 28): the build, not the check, deals with it. When the user has not set
`LDSHARED` themselves, a Linux setup.py row is built with the interpreter's `LDSHARED` less each
`-Wl,-rpath,DIR` whose DIR is that interpreter's own `LIBDIR`; every other flag, and any other
rpath, is kept (the check still judges those). The wheel equals what a manylinux interpreter
builds, and the check stays strict for every absolute entry a project writes on purpose.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from buildrows.frozen import Frozen, frozen_dataclass

#: One linker option that sets a run-time search path: -Wl,-rpath,DIR, -Wl,-rpath=DIR, -Wl,-R,DIR.
_RPATH_FLAG = re.compile(r"-Wl,-(?:rpath|R)[,=](\S+)")
_MARK = "buildrows-link:"
_PROBE = ("import json, sysconfig; v = sysconfig.get_config_var; "
          f"print({_MARK!r} + json.dumps([v(k) or '' for k in ('LDSHARED', 'LIBDIR', 'CC')]))")


@frozen_dataclass(frozen=True, eq=False, repr=False)
class InterpreterLink(Frozen):
    """What the interpreter's sysconfig gives setuptools' linker."""

    ldshared: str
    libdir: str
    cc: str


def interpreter_link(python: str) -> InterpreterLink:
    """The row's interpreter's LDSHARED, LIBDIR and CC (all "" when it cannot be asked). The
    running interpreter (`env` and the CI hook run in the row's Python) answers in this process:
    the same sysconfig, without a second interpreter's start-up."""
    import sys

    if python == sys.executable:
        import sysconfig

        v = sysconfig.get_config_var
        return InterpreterLink(*(str(v(k) or "") for k in ("LDSHARED", "LIBDIR", "CC")))
    import json

    from buildrows.process.runner import capture

    got = capture([python, "-c", _PROBE], timeout=60)
    for line in got.output.splitlines() if got.error is None and got.code == 0 else []:
        if line.startswith(_MARK):
            try:
                values = json.loads(line[len(_MARK):])
            except ValueError:
                break
            if isinstance(values, list) and len(values) == 3 and all(isinstance(v, str) for v in values):
                return InterpreterLink(values[0], values[1], values[2])
    return InterpreterLink("", "", "")


def _same_dir(a: str, b: str) -> bool:
    return bool(a) and bool(b) and os.path.normpath(a) == os.path.normpath(b)


def own_rpaths(ldshared: str, libdir: str) -> list[str]:
    """The -rpath entries of `ldshared` that are the interpreter's own `libdir`."""
    return list(dict.fromkeys(d for d in _RPATH_FLAG.findall(ldshared) if _same_dir(d, libdir)))


def without_own_rpath(ldshared: str, libdir: str) -> str:
    """`ldshared` less each -Wl,-rpath option into `libdir`; every other word kept in order."""
    words = [w for w in ldshared.split() if not ((m := _RPATH_FLAG.fullmatch(w)) and _same_dir(m.group(1), libdir))]
    return " ".join(words)


def build_ldshared(link: InterpreterLink, env: Mapping[str, str]) -> str | None:
    """The LDSHARED a Linux setup.py row builds with, or None to leave setuptools' own: None when
    the user set LDSHARED (theirs wins) or the interpreter's writes no rpath into its own lib. A CC
    in the environment replaces the interpreter's compiler at the front, as setuptools does when
    LDSHARED is not set (a compiler cache's or a cross compiler's CC keeps linking)."""
    if "LDSHARED" in env or not own_rpaths(link.ldshared, link.libdir):
        return None
    ldshared = without_own_rpath(link.ldshared, link.libdir)
    cc = env.get("CC", "").strip()
    if cc and link.cc and ldshared.startswith(link.cc):
        ldshared = cc + ldshared[len(link.cc):]
    return ldshared

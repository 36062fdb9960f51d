"""A setup.py row's C and C++ compiles through the compiler cache: ccache's masquerade directory.

setuptools compiles a plain ``Extension`` with the compiler sysconfig (or ``CC``/``CXX``) names,
by its bare name (``gcc``, ``g++``), and runs it itself: no launcher variable reaches it. ccache
serves such a build from a *masquerade directory*: links named like the compilers, pointing at
ccache, first on PATH. ccache, run as ``gcc``, runs the next ``gcc`` on PATH after its own
directory and caches the result under the same key as ever (``compiler_check = content`` hashes
the real compiler). Setting ``CC="ccache gcc"`` instead would change what a project that reads
``CC`` sees, would make setuptools derive ``LDSHARED = "ccache gcc -shared ..."``, and would break
torch's ninja path, which reads ``CXX`` as one word (``ccache 'ccache g++'``).

What must not go through it:

- *The link.* ``LDSHARED``/``LDCXXSHARED`` start with the same bare ``gcc``/``g++``: they are given
  by full path (the interpreter's own link command, the compiler resolved on the PATH without the
  masquerade), so a link never runs ccache (ccache would only pass it through).
- *nvcc's own host compiles.* nvcc runs ``gcc`` from PATH for its preprocessing and the host half of
  every ``.cu`` file (temporary ``tmpxft_*.cpp`` files that never hit, and would be counted as the
  project's C++): ``NVCC_CCBIN`` names the real ``gcc`` (the one nvcc would have found), unless the
  user set one. A ``-ccbin`` on nvcc's command line still wins, as always.

torch's cpp_extension already wraps its compilers in the ``ccache`` it finds on PATH
(``_wrap_compiler``, torch 2.13 and 2.14): ``ccache c++`` then finds the masquerade link, which
ccache recognises as itself and skips; one compile, one entry in the stats log.
Not on Windows: MSVC is found through the developer environment, not by these names.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Final

__all__ = ["COMPILER_NAMES", "masquerade_environment", "masquerade_links", "resolve_link_command"]

#: The names setuptools, CMake and torch run C and C++ compilers by (sysconfig's CC/CXX, CMake's
#: defaults, Debian's interpreters' triplet names): linked to ccache where PATH has a real one.
COMPILER_NAMES: Final = ("gcc", "g++", "cc", "c++", "clang", "clang++",
                         "x86_64-linux-gnu-gcc", "x86_64-linux-gnu-g++",
                         "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-g++")
_PROBE: Final = ("import json, sysconfig; v = sysconfig.get_config_var; "
                 "print('buildrows-ld:' + json.dumps([v(k) or '' for k in ('LDSHARED', 'LDCXXSHARED')]))")


def _is_ccache(path: str, ccache: str) -> bool:
    return os.path.basename(os.path.realpath(path)).startswith("ccache") or \
        os.path.realpath(path) == os.path.realpath(ccache)


def masquerade_links(where: Path, ccache: str, path: str) -> tuple[str, ...]:
    """Make ``where`` hold a link to ``ccache`` for each of :data:`COMPILER_NAMES` that ``path``
    finds as a real compiler (a name with none stays unlinked: its "not found" stays the same),
    and no other; the names linked."""
    target = os.path.realpath(ccache)
    wanted = [n for n in COMPILER_NAMES if (found := shutil.which(n, path=path)) and not _is_ccache(found, ccache)]
    where.mkdir(parents=True, exist_ok=True)
    for entry in where.iterdir():
        if entry.name not in wanted:
            with contextlib.suppress(OSError):
                entry.unlink()
    for name in wanted:
        link = where / name
        if link.is_symlink() and os.path.realpath(link) == target:
            continue
        link.unlink(missing_ok=True)
        with contextlib.suppress(FileExistsError):  # another row made it meanwhile
            link.symlink_to(target)
    return tuple(wanted)


def resolve_link_command(command: str, path: str) -> str:
    """``command`` (``gcc -shared ...``) with its first word given by full path when it is a bare
    compiler name that ``path`` (without the masquerade) finds; otherwise unchanged."""
    words = command.split(maxsplit=1)
    if not words or os.sep in words[0] or words[0] not in COMPILER_NAMES:
        return command
    found = shutil.which(words[0], path=path)
    if found is None:
        return command
    return shlex.quote(found) + (" " + words[1] if len(words) > 1 else "")


def interpreter_link_commands(python: str | None) -> tuple[str, str]:
    """The row's interpreter's sysconfig LDSHARED and LDCXXSHARED ("" when it cannot be asked)."""
    import json

    from buildrows.process.runner import capture

    if python is None:
        return "", ""
    got = capture([python, "-c", _PROBE], timeout=60)
    for line in got.output.splitlines() if got.error is None and got.code == 0 else []:
        if line.startswith("buildrows-ld:"):
            with contextlib.suppress(ValueError):
                values = json.loads(line[len("buildrows-ld:"):])
                if isinstance(values, list) and len(values) == 2 and all(isinstance(v, str) for v in values):
                    return values[0], values[1]
    return "", ""


def masquerade_environment(where: Path, ccache: str, env: Mapping[str, str],
                           link_commands: tuple[str, str] = ("", "")) -> dict[str, str]:
    """What a setup.py command's environment gets so that its C and C++ compiles go through ccache:
    PATH with the masquerade directory first, NVCC_CCBIN naming the real ``gcc`` (unless set), and
    the link commands by full path (the command's own LDSHARED, else the interpreter's
    ``link_commands``, unless the user set CC, from which setuptools derives its own). ``env`` is the
    command's environment as it would be without the cache. Nothing on Windows."""
    if os.name == "nt":
        return {}
    path = env.get("PATH", os.defpath)
    names = masquerade_links(where, ccache, path)
    if not names:
        return {}
    out = {"PATH": os.pathsep.join(p for p in (str(where), path) if p)}
    if "NVCC_CCBIN" not in env and (gcc := shutil.which("gcc", path=path)):
        out["NVCC_CCBIN"] = gcc
    if "CC" not in env:
        for var, theirs in zip(("LDSHARED", "LDCXXSHARED"), link_commands, strict=True):
            command = env.get(var) or theirs
            if command:
                resolved = resolve_link_command(command, path)
                if resolved != command or var not in env:
                    out[var] = resolved
    return out

"""What a GPU really does when a library lacks the code a row lists (the device-code check's messages).

The promise is the row's list, and a library that lacks an entry breaks it whatever happens next;
but the consequence a message states must be true. A cubin runs on GPUs of its major with the same
or a higher minor (sm_80 code runs on an sm_86 GPU), except architecture-specific `a` cubins, which
run only on their own architecture; plain PTX is JIT-compiled by the driver for any GPU at or above
its architecture. Only when neither applies does the GPU get "no kernel image is available".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

__all__ = ["compatible_cubin", "jit_ptx", "missing_code", "missing_ptx"]

_SM = re.compile(r"^sm_(\d+?)(\d)([af]?)$")


def _parts(name: str) -> tuple[int, int, str] | None:
    """`sm_86` -> (8, 6, ""); `sm_100a` -> (10, 0, "a"); `sm_120f` -> (12, 0, "f")."""
    m = _SM.match(name)
    return (int(m.group(1)), int(m.group(2)), m.group(3)) if m else None


def _key(name: str) -> tuple[int, int, str]:
    return _parts(name) or (0, 0, name)


def compatible_cubin(gpu: str, cubins: Iterable[str]) -> str | None:
    """The newest cubin a GPU of architecture `gpu` runs: same major, minor at most the GPU's, not
    architecture-specific (`a`). None if it runs none."""
    want = _parts(gpu)
    if want is None:
        return None
    fits = [c for c in set(cubins) if (p := _parts(c)) and p[2] != "a" and p[0] == want[0] and p[1] <= want[1]]
    return max(fits, key=_key) if fits else None


def jit_ptx(gpu: str, ptx: Iterable[str]) -> str | None:
    """The newest PTX the driver can JIT-compile for a GPU of architecture `gpu`: plain PTX of an
    architecture at most the GPU's. None if there is none."""
    want = _parts(gpu)
    if want is None:
        return None
    fits = [p for p in set(ptx) if (q := _parts(p)) and q[2] == "" and (q[0], q[1]) <= (want[0], want[1])]
    return max(fits, key=_key) if fits else None


def missing_code(path: str, missing: Sequence[str], cubins: Iterable[str], ptx: Iterable[str]) -> str:
    """The line for a library that lacks cubins the row lists, each with what its GPU does instead."""
    cubins, ptx = tuple(cubins), tuple(ptx)
    fallback: list[str] = []
    none: list[str] = []
    for gpu in missing:
        cubin = compatible_cubin(gpu, cubins)
        jit = jit_ptx(gpu, ptx)
        if cubin is not None:
            fallback.append(f"{gpu} GPUs run its {cubin} cubin (binary-compatible within a major), not code built "
                            f"for {gpu}")
        elif jit is not None:
            fallback.append(f"{gpu} GPUs JIT-compile its {jit} PTX when it first loads (a slower start, and no "
                            f"{gpu}-specific code)")
        else:
            none.append(gpu)
    head = f"{path}: missing device code for {', '.join(missing)}"
    if not fallback:
        return f"{head} (a GPU of that architecture gets 'no kernel image is available')"
    said = list(fallback)
    if none:
        said.append(f"{', '.join(none)} GPUs get 'no kernel image is available'")
    return f"{head}, which the row lists: " + "; ".join(said)


def missing_ptx(path: str, missing: Sequence[str], cubins: Iterable[str], ptx: Iterable[str]) -> str:
    """The line for a library that lacks PTX the row marks: what a newer GPU does without it."""
    plain = sorted((p for p in set(ptx) if (q := _parts(p)) and q[2] == ""), key=_key)
    head = f"{path}: missing PTX for {', '.join(missing)}"
    if plain:
        return (f"{head} (GPUs newer than its cubins JIT-compile the {plain[-1]} PTX it carries instead, without "
                f"what {', '.join(missing)} code would use)")
    newest = max((c for c in set(cubins) if _parts(c)), key=_key, default=None)
    if newest is None:
        return f"{head} (it carries no PTX: a GPU it has no cubin for gets 'no kernel image is available')"
    return f"{head} (it carries no PTX: a GPU of a newer major than its newest cubin, {newest}, gets 'no kernel image is available')"

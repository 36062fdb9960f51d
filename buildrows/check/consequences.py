"""What a GPU really does when a library lacks the code a row lists (the device-code check's messages).

The promise is the row's list, and a library that lacks an entry breaks it whatever happens next;
but the consequence a message states must be true. A plain cubin runs on GPUs of its major with the
same or a higher minor (sm_80 code runs on an sm_86 GPU); a family `f` cubin runs on the same GPUs
(sm_100f on 10.0 and 10.3: its family); an architecture-specific `a` cubin runs only on GPUs of
exactly its compute capability (sm_120a on 12.0, not 12.1). Plain PTX is JIT-compiled by the driver
for any GPU at or above its architecture, `f` PTX within its family, `a` PTX on its own architecture.
Only when neither applies does the GPU get "no kernel image is available".
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


def _runs_on(code: tuple[int, int, str], gpu: tuple[int, int, str]) -> bool:
    """Whether code of architecture `code` runs on (cubin) or JIT-compiles for (PTX) a GPU of `gpu`'s CC."""
    if code[2] == "a":
        return code[:2] == gpu[:2]
    return code[0] == gpu[0] and code[1] <= gpu[1]


def compatible_cubin(gpu: str, cubins: Iterable[str]) -> str | None:
    """The newest cubin a GPU of compute capability `gpu` (`sm_120`; a suffix is ignored) runs: same
    major, minor at most the GPU's; an architecture-specific (`a`) one only on exactly its CC. None if none."""
    want = _parts(gpu)
    if want is None:
        return None
    fits = [c for c in set(cubins) if (p := _parts(c)) and _runs_on(p, want)]
    return max(fits, key=_key) if fits else None


def jit_ptx(gpu: str, ptx: Iterable[str]) -> str | None:
    """The newest PTX the driver can JIT-compile for a GPU of compute capability `gpu`: plain PTX of an
    architecture at most the GPU's, `f` PTX of its family, `a` PTX of exactly its CC. None if there is none."""
    want = _parts(gpu)
    if want is None:
        return None
    fits = [p for p in set(ptx) if (q := _parts(p)) and (_runs_on(q, want) if q[2] else q[:2] <= want[:2])]
    return max(fits, key=_key) if fits else None


def _later_gpus(major: int, minor: int) -> list[str]:
    """GPUs of the same major and a higher minor that CUDA knows (12.0 -> sm_121): what a plain cubin also serves."""
    from buildrows.policy.trains import train_table

    known = {cc for support in train_table().values() for cc in support.archs}
    return [f"sm_{a}{b}" for a, b in sorted(known) if a == major and b > minor]


def _instead(gpu: str, cubins: tuple[str, ...], ptx: tuple[str, ...]) -> str | None:
    """What a GPU of `gpu`'s CC does with this library, None for 'no kernel image'."""
    cubin = compatible_cubin(gpu, cubins)
    if cubin is not None:
        return f"run its {cubin} cubin"
    jit = jit_ptx(gpu, ptx)
    if jit is not None:
        return f"JIT-compile its {jit} PTX when it first loads (a slower start)"
    return None


def _one(entry: str, cubins: tuple[str, ...], ptx: tuple[str, ...]) -> tuple[str | None, list[str]]:
    """The consequence of lacking one list entry: a sentence (None: 'no kernel image') and the GPUs left with none."""
    parts = _parts(entry)
    if parts is None:
        return None, [entry]
    major, minor, suffix = parts
    gpu = f"sm_{major}{minor}"
    cubin = compatible_cubin(gpu, cubins)
    if cubin is not None and (_parts(cubin) or (0, 0, ""))[:2] == (major, minor):
        # the same GPU's code in another variant (sm_120a for a listed 12.0, sm_100 for a listed 10.0f)
        variant = (_parts(cubin) or (0, 0, ""))[2]
        if suffix == "a":
            said = f"{gpu} GPUs run its {cubin} cubin, without the architecture-specific features {entry} code would use"
        elif suffix == "f":
            said = f"{gpu} GPUs run its {cubin} cubin, without the family-specific features {entry} code would use"
        else:
            said = f"{gpu} GPUs run its {cubin} cubin"
        if variant == "a" and suffix != "a":
            later = []
            none = []
            for other in _later_gpus(major, minor):
                what = _instead(other, cubins, ptx)
                if what is None:
                    none.append(other)
                else:
                    later.append(f"{other} GPUs {what}")
            runs_only = f" (architecture-specific: it runs on CC {major}.{minor} only)"
            said += runs_only
            if later:
                said += "; " + "; ".join(later)
            if none:
                said += f"; {', '.join(none)} GPUs, which {entry} code would serve, get 'no kernel image is available'"
        return said, []
    if cubin is not None:
        return f"{gpu} GPUs run its {cubin} cubin (binary-compatible within a major), not code built for {gpu}", []
    jit = jit_ptx(gpu, ptx)
    if jit is not None:
        return (f"{gpu} GPUs JIT-compile its {jit} PTX when it first loads (a slower start, and no "
                f"{gpu}-specific code)"), []
    return None, [gpu]


def missing_code(path: str, missing: Sequence[str], cubins: Iterable[str], ptx: Iterable[str]) -> str:
    """The line for a library that lacks cubins the row lists, each with what its GPU does instead."""
    cubins, ptx = tuple(cubins), tuple(ptx)
    fallback: list[str] = []
    none: list[str] = []
    for entry in missing:
        sentence, left = _one(entry, cubins, ptx)
        if sentence is not None:
            fallback.append(sentence)
        none += left
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

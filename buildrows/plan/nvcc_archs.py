"""A row's CUDA compiler checked (`check_cuda_compiler`: found, of the row's train) and what it
compiles, asked of it and kept like its version (issue 36).

buildrows' data (buildrows/data/cuda_trains.toml) says what each train it knows compiles, and a
train newer than the data is taken to compile what the newest train there does. The nvcc that
builds a row knows for sure: `nvcc --list-gpu-code` lists its cubin targets (sm_75 ... sm_121) and
`nvcc -arch=sm_XYa --dryrun` accepts or refuses an `a`/`f` variant without compiling anything. The
answers are kept in memory and on disk (the cache's `nvcc/` folder, beside read_train's), keyed by
the same nvcc identity, so a build of many rows and the hook on every CI job ask each nvcc once.
An nvcc that lists nothing (a wrapper or an old one that does not know the option) is not judged.
A train the data knows was measured from its own nvcc on PyPI (scripts/refresh_cuda_data.py), so
only a train newer than the data asks its nvcc at build time.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

from buildrows.errors import Problem, Refused
from buildrows.plan.toolchain import (
    NO_CUDA_COMPILER,
    CudaCompiler,
    HostOs,
    _answer_file,
    _identity,
    locate_cuda_compiler,
    read_train,
)
from buildrows.policy.archs import Arch, beyond_data
from buildrows.policy.model import Row

__all__ = ["check_row_archs", "gpu_code", "probe_variant"]

#: The format of what is kept on disk (`<crc>-gpu-code.json`); another format is a miss.
FORMAT = 1
_KNOWN: dict[tuple[object, ...], dict[str, object]] = {}


def _path(ident: tuple[object, ...], env: Mapping[str, str]) -> tuple[Path, str]:
    path, key = _answer_file(ident, env)
    return path.with_name(path.stem + "-gpu-code.json"), key


def _load(ident: tuple[object, ...], env: Mapping[str, str]) -> dict[str, object]:
    if ident in _KNOWN:
        return _KNOWN[ident]
    path, key = _path(ident, env)
    found: dict[str, object] = {}
    with contextlib.suppress(OSError, ValueError, UnicodeError):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and data.get("format") == FORMAT and data.get("key") == key:
            found = {k: v for k, v in data.items() if k not in ("format", "key")}
    _KNOWN[ident] = found
    return found


def _store(ident: tuple[object, ...], env: Mapping[str, str], answers: dict[str, object]) -> None:
    _KNOWN[ident] = answers
    path, key = _path(ident, env)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"format": FORMAT, "key": key, **answers}), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _run(argv: list[str], env: Mapping[str, str]) -> tuple[int, str]:
    import subprocess  # here: a kept answer (the hook's usual case) runs nothing

    try:
        proc = subprocess.run(argv, capture_output=True, text=True, errors="replace", env=dict(env), timeout=60,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return -1, ""
    return proc.returncode, proc.stdout + proc.stderr


def gpu_code(compiler: CudaCompiler, env: Mapping[str, str]) -> tuple[str, ...] | None:
    """The architectures (`7.5`, `12.1`) nvcc lists with --list-gpu-code; None when it lists none."""
    ident = _identity(compiler, env)
    answers = _load(ident, env) if ident is not None else {}
    listed = answers.get("list-gpu-code")
    if not isinstance(listed, list):
        code, text = _run([*compiler.argv, "--list-gpu-code"], env)
        numbers = sorted(set(re.findall(r"\bsm_(\d+)\b", text)), key=int) if code == 0 else []
        listed = [f"{n[:-1]}.{n[-1]}" for n in numbers]
        if ident is not None:
            _store(ident, env, {**answers, "list-gpu-code": listed})
    return tuple(str(x) for x in listed) or None


def probe_variant(compiler: CudaCompiler, env: Mapping[str, str], arch: Arch) -> bool:
    """Whether nvcc accepts an `a`/`f` target (`-arch=sm_100a --dryrun`: nothing is compiled)."""
    ident = _identity(compiler, env)
    answers = _load(ident, env) if ident is not None else {}
    variants = answers.get("variants")
    known = dict(variants) if isinstance(variants, dict) else {}
    if arch.sm not in known:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="buildrows-probe-") as tmp:
            src = Path(tmp) / "probe.cu"
            src.write_text("__global__ void buildrows_probe() {}\n", encoding="utf-8")
            code, _ = _run([*compiler.argv, "--dryrun", f"-arch={arch.sm}", "-c", str(src), "-o",
                            str(Path(tmp) / "probe.o")], env)
        known[arch.sm] = code == 0
        if ident is not None:
            _store(ident, env, {**answers, "variants": known})
    return bool(known[arch.sm])


def check_row_archs(row: Row, compiler: CudaCompiler, env: Mapping[str, str], *,
                    always: bool = False) -> tuple[str, ...] | None:
    """Refuse a row whose list names an architecture its nvcc does not compile; the nvcc's list, or None
    when it lists nothing (not judged) or was not asked. The data judged the list at load, from the
    same releases' nvcc on PyPI: nvcc is asked only for a train newer than the data (or `always`),
    so the hook on every CI job runs no more nvcc than it did."""
    if row.archs is None or row.cuda is None or not (always or beyond_data(row.cuda)):
        return None
    listed = gpu_code(compiler, env)
    if listed is None:
        return None
    have = set(listed)
    for a in row.archs.entries:
        missing = f"{a.major}.{a.minor}" not in have or (a.suffix and not probe_variant(compiler, env, a))
        if missing:
            assumed = (f"; buildrows' data does not know CUDA {row.cuda} and took it to compile what its newest "
                       "train does" if beyond_data(row.cuda) else "")
            raise Refused(
                f"row {row.name}: {a.dotted!r} is not an architecture CUDA {compiler.version or row.cuda}'s nvcc "
                f"compiles ({compiler.path}: `nvcc --list-gpu-code` lists {' '.join(listed)}"
                f"{'' if not a.suffix else f', and it refuses -arch={a.sm}'}){assumed}\n"
                f"    fix: drop {a.dotted} from the row's architecture list, or build the row with a toolkit that "
                "compiles it")
    return listed


def check_cuda_compiler(row: Row, env: Mapping[str, str], host: HostOs | None = None) -> CudaCompiler:
    """The row's nvcc: it must exist, run, and be the row's train (major and minor), else Refused."""
    if row.cuda is None:
        raise ValueError(f"{row.name} is a CPU row; it has no CUDA compiler to check")
    found = locate_cuda_compiler(env, host)
    if found is None:
        raise Refused(
            f"row {row.name} needs a CUDA {row.cuda.dotted} compiler and none was found "
            "(looked at CUDACXX, CUDA_HOME/bin, CUDA_PATH/bin and nvcc on PATH)",
            [Problem(NO_CUDA_COMPILER, row=row.name, field="cuda", refusal=True,
                     hint=f"install CUDA {row.cuda.dotted} and set CUDA_HOME to it (or put its nvcc on PATH)")],
        )
    comp = read_train(found, env)
    if comp.train != row.cuda:
        raise Refused(
            f"row {row.name} is CUDA {row.cuda.dotted}, but the toolkit found is CUDA {comp.version} "
            f"({comp.path}, through {comp.source}); a wheel tagged {row.local_tag} must be compiled by "
            f"CUDA {row.cuda.dotted}\n"
            f"    fix: point CUDA_HOME (or CUDACXX) at a CUDA {row.cuda.dotted} toolkit, or build the "
            f"{comp.train.cu if comp.train else 'matching'} row instead",
        )
    check_row_archs(row, comp, env)  # the train's own word on what it compiles (its data may be older)
    return comp

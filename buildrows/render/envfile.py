"""A row's environment (SPEC §5) and its exact quoting for GitHub, POSIX shell, PowerShell and dotenv.

Plain code rather than the jinja2 templates in presets/: the hook runs on every CI job and must
start fast (SPEC §10), and quoting is easier to prove exact in code than in a template.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Final, Literal

from buildrows.errors import BadInput
from buildrows.metadata import LOCAL_VERSION_VAR as LOCAL_VERSION_VAR
from buildrows.metadata import REQUIRES_DIST_VAR as REQUIRES_DIST_VAR
from buildrows.plan.row import RowPlan, plan_row
from buildrows.plan.toolchain import CudaCompiler, HostOs
from buildrows.policy.model import Policy, Row

Format = Literal["github", "shell", "powershell", "dotenv"]
FORMATS: tuple[Format, ...] = ("github", "shell", "powershell", "dotenv")


@cache
def _name() -> re.Pattern[str]:  # used with fullmatch: "X\n" is no name
    return re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)


#: Variables a project reads for the wheel's per-row metadata (the example's metadata provider
#: does): the local version tag (+cu130; empty for CPU rows) and the runtime requirements the wheel
#: declares, one per line (Row.requires_dist: the rule `buildrows check` holds the wheel to).
# LOCAL_VERSION_VAR and REQUIRES_DIST_VAR, imported above from buildrows.metadata, which reads them.
#: Architecture variables a builder's environment may carry (CUDA images often set them). A CPU row
#: writes them empty, so nothing can turn CUDA on with someone else's list: a GitHub env file
#: cannot unset a variable, and every reader (the CMake module, CMake's CUDAARCHS, torch's
#: TORCH_CUDA_ARCH_LIST) treats empty as unset.
CPU_CLEARED = ("TORCH_CUDA_ARCH_LIST", "CUDAARCHS", "CMAKE_CUDA_ARCHITECTURES")


def row_variables(plan: RowPlan) -> dict[str, str]:
    """The variables that come from the row itself: its identity, architecture list (cleared for a
    CPU row), CU_VERSION and the wheel's per-row metadata. Every build of the row sees these."""

    row = plan.row
    values: dict[str, str] = {
        "BUILDROWS_ROW": row.name,
        "BUILDROWS_PLATFORM": row.platform,
        "BUILDROWS_PYTHON": row.python,
        "BUILDROWS_CUDA": "ON" if row.is_cuda else "OFF",
    }
    if not row.is_cuda:
        from buildrows.plan.row import ARCHS_VAR, GENCODE_VAR

        values.update(dict.fromkeys((*CPU_CLEARED, GENCODE_VAR, ARCHS_VAR), ""))
    values.update(plan.environment)  # TORCH_CUDA_ARCH_LIST, CU_VERSION, BUILDROWS_LOCAL_VERSION
    values[LOCAL_VERSION_VAR] = row.local_tag
    values[REQUIRES_DIST_VAR] = "\n".join(row.requires_dist)
    return values


def environment_from_plan(plan: RowPlan, env: Mapping[str, str]) -> dict[str, str]:
    """The variables a wheel build of this row needs, derived from its resolved plan: the row's
    own (`row_variables`), then its toolchain, generator and CMAKE_ARGS. The hook, `env` and the
    setup.py driver of `build` all use this one builder."""
    row = plan.row
    values = row_variables(plan)
    cache = dict(plan.cache)
    if row.is_cuda:
        # CMake reads CUDAARCHS to initialise CMAKE_CUDA_ARCHITECTURES; scripts read the latter.
        values["CMAKE_CUDA_ARCHITECTURES"] = cache["CMAKE_CUDA_ARCHITECTURES"]
        values["CUDAARCHS"] = cache["CMAKE_CUDA_ARCHITECTURES"]
        # CUDACXX and CUDA_HOME: the plan decides (a provisioned toolkit overrides the caller's).
        values.update(plan.toolkit_variables(env))
    g = plan.generator
    values["CMAKE_GENERATOR"] = g.generator
    if g.toolset:
        values["CMAKE_GENERATOR_TOOLSET"] = g.toolset
    if g.architecture:
        values["CMAKE_GENERATOR_PLATFORM"] = g.architecture
    # CUDACXX carries the plan's compiler for setup.py and scikit-build-core builds, not a -D. A
    # CMAKE_CUDA_COMPILER the policy gives is the user's and passes on: a CPU row's "NOTFOUND" for a
    # project that enables CUDA whenever check_language(CUDA) finds nvcc (qsimcirq 0.22.0).
    given = {k for k, _ in row.cache}
    ours = [_define(k, v) for k, v in plan.cache if k != "CMAKE_CUDA_COMPILER" or k in given]
    previous = env.get("CMAKE_ARGS", "").strip()
    values["CMAKE_ARGS"] = " ".join([previous, *ours] if previous else ours)
    _refuse_oversized(values, [previous, *ours])
    return values


#: Linux's MAX_ARG_STRLEN: no one environment string (`NAME=value`) may be longer, or every program
#: started with it fails with "Argument list too long" (E2BIG). Windows' limit is 32,767 characters.
MAX_VARIABLE_BYTES: Final = 128 * 1024 - 1


def _refuse_oversized(values: Mapping[str, str], tokens: list[str]) -> None:
    """Refuse (not warn: nothing could run after it) a variable no process can be started with
    (issue 37: a 100 KB policy value made CMAKE_ARGS 300 KB, and every program after
    `source $BUILD_ENV_FILE` failed)."""
    for name, value in values.items():
        size = len(name.encode()) + 1 + len(value.encode("utf-8", "surrogateescape"))
        if size > MAX_VARIABLE_BYTES:
            longest = max(tokens, key=len) if name == "CMAKE_ARGS" and tokens else value
            raise BadInput(f"{name} would be {size} bytes, more than the {MAX_VARIABLE_BYTES + 1} bytes Linux allows one "
                           "environment variable (MAX_ARG_STRLEN): every program started after it would fail with "
                           f"'Argument list too long'; its longest part is {len(longest)} bytes: {longest[:60]!r}...\n"
                           "    fix: shorten that value in the policy (or in the CMAKE_ARGS you set), or move it into a "
                           "file the project reads")


# The characters shlex.split treats specially (`;` and `$` are plain to it).
@cache
def _split_special() -> re.Pattern[str]:
    return re.compile(r"[\s'\"\\]")


def _define(name: str, value: str) -> str:
    """One -D token of CMAKE_ARGS, which scikit-build-core and setup.py projects split with
    shlex.split: quoted (shlex.quote) only when splitting would change it, so a reader that splits
    on whitespace still sees the usual tokens bare."""
    token = f"-D{name}={value}"
    return shlex.quote(token) if _split_special().search(token) else token


def row_environment(policy: Policy, row: Row, env: Mapping[str, str], *, host: HostOs | None = None,
                    compiler: CudaCompiler | None = None, check_toolchain: bool = True) -> dict[str, str]:
    """The row's environment on this host: TORCH_CUDA_ARCH_LIST, CU_VERSION, CMAKE_ARGS (the
    caller's extended, not replaced), the generator variables, CUDACXX (only when unset), the
    local version tag (BUILDROWS_LOCAL_VERSION=+cu130) and BUILDROWS_ROW. Refuses like render."""
    plan = plan_row(policy, row, env, host=host, compiler=compiler, check_toolchain=check_toolchain, step="env")
    return environment_from_plan(plan, env)


def _check_names(values: Mapping[str, str]) -> None:
    for name in values:
        if not _name().fullmatch(name):
            raise BadInput(f"{name!r} is not a valid environment variable name\n"
                           "    fix: use letters, digits and underscores, not starting with a digit")
        if "\x00" in values[name]:
            # No environment variable can hold a NUL byte; bash and GitHub would silently cut the value.
            raise BadInput(f"{name}: the value contains a NUL character, which no environment variable can hold: "
                           f"{values[name]!r}\n    fix: remove the \\u0000 from the policy value it comes from")


def format_env(values: Mapping[str, str], fmt: Format) -> str:
    """Render values so that reading them back yields each value byte for byte."""
    _check_names(values)
    lines: list[str] = []
    for name, value in values.items():
        if fmt == "github":
            lines.append(_github(name, value))
        elif fmt == "shell":
            lines.append(f"export {name}={_sh_quote(value)}")
        elif fmt == "powershell":
            lines.append(f"$env:{name} = {_ps_quote(value)}")
        elif fmt == "dotenv":
            lines.append(f"{name}={_dotenv_quote(value)}")
        else:  # pragma: no cover - argparse restricts the choices
            raise BadInput(f"unknown format {fmt!r}\n    fix: use one of {', '.join(FORMATS)}")
    return "".join(line + "\n" for line in lines)


def _github(name: str, value: str) -> str:
    """GitHub's `NAME=value`, or `NAME<<DELIM` ... `DELIM` for values with line breaks."""
    if "\n" not in value and "\r" not in value:
        return f"{name}={value}"
    delim = "BUILDROWS_EOF"
    while delim in value:
        delim = f"BUILDROWS_EOF_{os.urandom(8).hex()}"
    return f"{name}<<{delim}\n{value}\n{delim}"


def _sh_quote(value: str) -> str:
    """Single quotes keep everything literal in POSIX shells, newlines included."""
    return "'" + value.replace("'", "'\"'\"'") + "'"


# PowerShell treats the typographic single quotes as quote characters too.
_PS_QUOTES = "'\u2018\u2019\u201a\u201b"


def _ps_quote(value: str) -> str:
    """A verbatim string: only quote characters are special, and are doubled."""
    return "'" + "".join(c + c if c in _PS_QUOTES else c for c in value) + "'"


def _dotenv_quote(value: str) -> str:
    """Single quotes, line breaks kept, only `\\` and `\'` escaped: exact for docker compose and for
    python-dotenv with interpolate=False (python-dotenv expands `${NAME}` even in single quotes and
    has no escape for it; a row's own values never contain `${`)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def append_file(path: str | Path, text: str) -> None:
    """Append text to one file: `append_files` with a single destination."""
    append_files([(path, text)])


def append_files(targets: Sequence[tuple[str | Path, str]]) -> None:
    """Append each text to its file in a single write, never truncating; start on a fresh line if
    the file lacks one.

    Every destination is opened and locked before the first write, so one that cannot be opened
    (a missing directory, a directory, no permission) is refused with its path while every file is
    still as it was (a file this call created for it is removed again). The last-byte check and the
    write happen under an exclusive lock (POSIX flock), so two hooks appending at once cannot see
    each other's half-written block and add a stray newline.
    """
    opened: list[tuple[Path, int, bool]] = []  # (path, fd, created by this call)
    by_file: dict[tuple[int, int], int] = {}  # one fd per file: a second flock on it would wait forever
    plan: list[tuple[Path, int, str]] = []
    try:
        for path, text in targets:
            p = Path(path)
            fd, created = _open_append(p)
            opened.append((p, fd, created))
            try:
                st = os.fstat(fd)
                key = (st.st_dev, st.st_ino)
                if key not in by_file:
                    _lock(fd)
                    by_file[key] = fd
            except OSError as e:
                raise BadInput(f"{p}: cannot lock the environment file: {e}\n"
                               "    fix: check the path and its permissions") from e
            plan.append((p, by_file[key], text))
    except BadInput:
        for p, fd, created in opened:
            os.close(fd)
            if created:
                with contextlib.suppress(OSError):
                    p.unlink()
        raise
    try:
        for p, fd, text in plan:
            _append(fd, p, text)
    finally:
        for _, fd, _ in opened:
            os.close(fd)  # closing releases the lock


def _open_append(p: Path) -> tuple[int, bool]:
    """An fd for appending to p, and whether this call created the file."""
    # O_BINARY: Windows would otherwise write \r\n, and bash would source a trailing CR into each value.
    flags = os.O_RDWR | os.O_APPEND | getattr(os, "O_BINARY", 0)
    try:
        try:
            return os.open(p, flags), False
        except FileNotFoundError:
            return os.open(p, flags | os.O_CREAT | os.O_EXCL, 0o644), True
    except OSError as e:
        raise BadInput(f"{p}: cannot open the environment file for appending: {e}\n"
                       "    fix: check the path and its permissions; nothing was written") from e


def _append(fd: int, p: Path, text: str) -> None:
    try:
        prefix = "\n" if _last_byte(fd) not in (b"", b"\n") else ""
        # surrogateescape: a value read from os.environ with undecodable bytes is written back as those bytes.
        data = (prefix + text).encode("utf-8", "surrogateescape")
        written = os.write(fd, data)
        if written != len(data):  # pragma: no cover - regular files take the whole write
            raise OSError(f"short write ({written} of {len(data)} bytes)")
    except OSError as e:
        raise BadInput(f"{p}: cannot append to the environment file: {e}") from e


def _last_byte(fd: int) -> bytes:
    """The file's last byte (b"" when empty); os.pread does not exist on Windows."""
    if os.fstat(fd).st_size == 0:
        return b""
    os.lseek(fd, -1, os.SEEK_END)
    return os.read(fd, 1)  # O_APPEND: the next write goes to the end wherever this left the offset


def _lock(fd: int) -> None:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: appends are still one write each
        return
    fcntl.flock(fd, fcntl.LOCK_EX)

"""This host, once: its OS and policy platform, the running Python, and the row CI asks for.

The hook, `build`/`doctor` without a ROW, and the build drivers all identify "this machine's row"
from these functions, so a CI job and a developer's machine cannot disagree on what CU_VERSION,
DESIRED_CUDA, the machine name or the interpreter mean. Everything reads an environment mapping
(never `os.environ` directly) so tests can simulate a host. Imports stay light: the hook runs this.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Literal

from buildrows.errors import BadInput, Refused

if TYPE_CHECKING:
    from buildrows.policy.model import Row

HostOs = Literal["linux", "windows"]

#: Set to `windows` or `linux` to make buildrows believe it runs there (tests, dry runs).
HOST_OS_VARIABLE = "BUILDROWS_HOST_OS"

#: The platforms buildrows builds for (the policy's platform names).
PLATFORMS = ("linux-x86_64", "linux-aarch64", "windows-amd64")

# Machine names as Linux (uname), Windows (PROCESSOR_ARCHITECTURE) and macOS spell them.
_MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


@cache
def _train() -> re.Pattern[str]:  # lower case, as the matrix generator writes it
    return re.compile(r"cu\d{2,3}", re.ASCII)


@cache
def _dotted() -> re.Pattern[str]:
    return re.compile(r"(?:cu)?(\d{1,2})\.(\d)", re.ASCII | re.IGNORECASE)


def host_os(env: Mapping[str, str]) -> HostOs:
    """The operating system buildrows renders for: BUILDROWS_HOST_OS, else the running one."""
    forced = env.get(HOST_OS_VARIABLE, "").strip().lower()
    if forced in ("linux", "windows"):
        return "windows" if forced == "windows" else "linux"
    if forced:
        raise BadInput(f"{HOST_OS_VARIABLE}={forced!r} is not a host buildrows knows\n"
                       "    fix: set it to 'linux' or 'windows', or unset it")
    return "windows" if sys.platform == "win32" else "linux"


def host_platform(env: Mapping[str, str]) -> str:
    """This machine as a policy platform: linux-x86_64, linux-aarch64 or windows-amd64."""
    os_ = host_os(env)
    raw = ""
    if os_ == "windows":  # a 32-bit Python on 64-bit Windows sees x86 in PROCESSOR_ARCHITECTURE
        raw = env.get("PROCESSOR_ARCHITEW6432", "") or env.get("PROCESSOR_ARCHITECTURE", "")
    raw = raw or _machine()
    machine = _MACHINES.get(raw.lower())
    if machine == "x86_64" and os_ == "windows":
        machine = "amd64"
    name = f"{os_}-{machine}"
    if machine is None or name not in PLATFORMS:
        raise BadInput(f"this machine is {os_} on {raw or 'an unknown machine'!r}, which buildrows does not build "
                       f"for (it knows {', '.join(PLATFORMS)})\n"
                       "    fix: run on one of those, or name the row (or pass --platform to the hook)")
    return name


def refuse_other_machine(row: str, row_platform: str, env: Mapping[str, str], step: str) -> None:
    """Refuse (exit 3) a step that builds here for a row of another machine (x86_64 vs aarch64)."""
    here = host_platform(env)
    if here.split("-", 1)[1] != row_platform.split("-", 1)[1]:
        raise Refused(f"{step}: row {row} is built on {row_platform}, and this machine is {here}\n"
                      f"    fix: run it on a {row_platform} builder, or choose a {here} row")


def host_python() -> str:
    """The running interpreter as a policy Python: `3.12`, or `3.13t` when free-threaded."""
    import sysconfig  # here, not at import: the hook starts on every CI job

    free = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    return f"{sys.version_info.major}.{sys.version_info.minor}{'t' if free else ''}"


def _parse_accel(var: str, raw: str) -> str:
    value = raw.strip()
    if not value or value.lower() == "cpu":
        return "cpu"
    if _train().fullmatch(value):
        return value
    m = _dotted().fullmatch(value)
    example = f"cu{m.group(1)}{m.group(2)}" if m else "cu130"
    raise BadInput(f"{var}={raw!r} is neither 'cpu' nor a CUDA train such as {example!r}\n"
                   f"    fix: export {var}=cpu or {var}=cuXYZ ({example}"
                   f"{f' for CUDA {m.group(1)}.{m.group(2)}' if m else ' for CUDA 13.0'})")


def requested_accel(env: Mapping[str, str]) -> tuple[str, str] | None:
    """(variable, accel) for the row CI asks for: CU_VERSION, falling back to DESIRED_CUDA (reading
    only one of them once made every row fall back to detection). accel is `cpu` or `cuXYZ`. None
    when neither variable is set at all. A variable set but empty is refused unless the other one
    says what to build: GitHub gives an empty string for a matrix key a job lacks, so reading empty
    as CPU once turned a CUDA job whose key was misspelt into a CPU build."""
    present = [v for v in ("CU_VERSION", "DESIRED_CUDA") if v in env]
    if not present:
        return None
    parsed = {v: _parse_accel(v, env[v]) for v in present}
    given = [v for v in present if env[v].strip()]
    if not given:
        names = " and ".join(present)
        raise BadInput(f"{names} {'is' if len(present) == 1 else 'are'} set but empty, so the hook cannot tell "
                       "which row this CI job builds (GitHub gives an empty string for a matrix key the job "
                       "lacks; buildrows does not read that as CPU)\n"
                       "    fix: pass the matrix's desired_cuda to the job (CU_VERSION=cuXYZ, e.g. cu130), "
                       "or DESIRED_CUDA=cpu for a CPU row")
    if len(given) == 2 and parsed["CU_VERSION"] != parsed["DESIRED_CUDA"]:
        raise Refused(f"CU_VERSION={env['CU_VERSION']!r} and DESIRED_CUDA={env['DESIRED_CUDA']!r} name different rows\n"
                      "    fix: set both to the same value (or only one of them)")
    var = given[0]
    return var, parsed[var]


def _machine() -> str:
    """The machine name; os.uname is enough on POSIX and avoids importing `platform` at start-up."""
    if hasattr(os, "uname"):
        return os.uname().machine
    import platform

    return platform.machine()


def row_python(row: Row, env: Mapping[str, str]) -> str | None:
    """The interpreter that builds the row: this one when it is the row's Python, else pythonX.Y on PATH."""
    if host_python() == row.python:
        return sys.executable
    from buildrows.process.runner import find_tool

    return find_tool(f"python{row.python}", env)

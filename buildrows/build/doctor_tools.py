"""Doctor's findings on the tools a CMake build runs: cmake and ninja, their versions and fixes."""

from __future__ import annotations

from buildrows.build.findings import Finding, parse_version

MIN_CMAKE = (3, 25)  # workflow presets (schema 6)
MIN_NINJA = (1, 10)  # Ninja Multi-Config


def _dotted(v: tuple[int, ...]) -> str:
    return ".".join(str(x) for x in v)


def check_tool(name: str, path: str | None, output: str | None, minimum: tuple[int, ...], fix: str) -> Finding:
    """A tool on PATH that reports at least `minimum` from `NAME --version`."""
    if path is None:
        return Finding(name, "missing", f"no {name} on PATH", fix)
    version = parse_version(output or "")
    if version is None:
        return Finding(name, "missing", f"{path} did not report a version ({(output or '').strip()[:80]!r})", fix)
    if version < minimum:
        return Finding(name, "missing", f"{path} is {_dotted(version)}, older than the {_dotted(minimum)} buildrows needs", fix)
    return Finding(name, "ok", f"{_dotted(version)} at {path}")


def cmake_fix() -> str:
    return f"pip install 'cmake>={_dotted(MIN_CMAKE)}' (PyPI's cmake puts a current cmake on PATH)"


def ninja_fix() -> str:
    return f"pip install 'ninja>={_dotted(MIN_NINJA)}'"

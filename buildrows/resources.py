"""Where the top-level `presets/` and `cmake/` directories are, in a checkout or an installed wheel.

A checkout keeps them beside the package (the user's layout); a wheel carries them in
`buildrows/_data/` (see `force-include` in pyproject.toml).
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """The directory `presets` or `cmake`, wherever this installation keeps it."""
    for cand in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if cand.is_dir():
            return cand
    raise FileNotFoundError(f"buildrows is installed without its {name}/ directory (looked in {_PACKAGE})")


def cmake_module() -> Path:
    """The CMake module the presets inject through CMAKE_PROJECT_TOP_LEVEL_INCLUDES."""
    return resource_dir("cmake") / "BuildrowsCudaArchs.cmake"


def data_file(name: str) -> Path:
    """A file of `buildrows/data/`: the CUDA trains, the runtime defaults, the pinned toolkits and
    the checked-in JSON Schema, read by the policy, provisioning and `schema`."""
    return _PACKAGE / "data" / name

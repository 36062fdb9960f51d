"""What a project's own sources say about how CMake may be run for it (issue 21 point 9).

- A setup.py that runs CMake and then `make` itself (a 2019 pattern: `subprocess.check_call(["make",
  ...])` in the build tree) breaks under CMAKE_GENERATOR=Ninja (`make: *** No targets specified`):
  for such a project the setup.py driver leaves the generator unset unless the policy fixes one.
- A setup.py that never mentions CMake (torch_spline_conv's, torch_scatter's: a torch.utils.cpp_extension
  build beside a CMakeLists.txt for the C++ API) never runs it: its CMakeLists.txt says nothing about
  the wheel build, so neither init's cuda-option nor doctor's CMake findings come from it (issue 28).
- A CMakeLists.txt whose `cmake_minimum_required` is below 3.5 is refused by CMake 4 (`Compatibility
  with CMake < 3.5 has been removed`); CMAKE_POLICY_VERSION_MINIMUM=3.5 lets CMake 4 configure it.
"""

from __future__ import annotations

import re
from pathlib import Path

#: `"make"` as a program run by the script (a list element or the start of a command string).
_MAKE = re.compile(r"""(?:\[\s*|check_call\(\s*|call\(\s*|run\(\s*|system\(\s*)['"]make(?:['"]|\s)""")
_MINIMUM = re.compile(r"cmake_minimum_required\s*\(\s*VERSION\s+(\d+)\.(\d+)", re.IGNORECASE)


def setup_py_runs_make(project: Path) -> bool:
    """Whether the project's setup.py runs `make` itself (so CMake must write Makefiles)."""
    try:
        text = (project / "setup.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return _MAKE.search(text) is not None


def setup_py_runs_cmake(project: Path) -> bool:
    """Whether the project's setup.py build may run CMake: its setup.py (or, with none, its
    pyproject.toml's build system) names CMake or scikit-build. A mention is enough (a comment, a
    helper's name such as CMakeBuild): a wrong "yes" only keeps the CMake findings, a wrong "no"
    would hide them."""
    for name in ("setup.py", "pyproject.toml"):
        try:
            text = (project / name).read_text(encoding="utf-8", errors="replace").lower()
        except OSError:
            continue
        if name == "pyproject.toml" and (project / "setup.py").is_file():
            # The build system's requirements name what setup.py may run (cmake from PyPI).
            text = text.partition("[build-system]")[2].partition("\n[")[0]
        if "cmake" in text or "skbuild" in text or "scikit-build" in text:
            return True
    return False


def cmake_minimum(source: Path) -> tuple[int, int] | None:
    """The version a CMakeLists.txt's cmake_minimum_required names, or None."""
    try:
        text = (source / "CMakeLists.txt").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    m = _MINIMUM.search(text)
    return (int(m.group(1)), int(m.group(2))) if m else None

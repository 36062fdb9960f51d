"""Separate extensions of a non-ninja torch build compiled at once (setuptools' ``build_ext --parallel``).

torch's ``BuildExtension(use_ninja=False)`` (PyG's packages: torch-scatter, torch-sparse,
torch-spline-conv, torch-cluster) compiles one source at a time, every extension after the other.
setuptools can build separate extensions on threads (``[build_ext] parallel = N``, read from the
``DIST_EXTRA_CONFIG`` buildrows writes for the row); ``BuildExtension`` honours it, since it only
replaces the compiler's ``_compile``. What it does there decides where that is safe:

- For each source it sets the shared compiler object's ``compiler_so`` and puts the old one back
  after the compile. For a ``.cu`` file that is nvcc: a thread compiling a ``.cpp`` meanwhile would
  take nvcc (or put it back as its "old" compiler for every later source). So a **CUDA row is never
  built in parallel** this way.
- For a ``.cpp`` it sets the same compiler wrapped in the ``ccache`` it finds on PATH
  (``_wrap_compiler``): two threads then nest the wrapper (``ccache ccache g++``) and one restores
  the other's wrapped value, so the nesting grows. With ``TORCH_NO_COMPILER_WRAPPER=1`` the value
  set is the value there, and nothing races. The compiles still go through the compiler cache: by
  ccache's masquerade directory (buildrows.build.cache_masquerade), not torch's wrapper.

So a **CPU row** of a setup.py that builds with ``BuildExtension`` and ``use_ninja=False`` gets
``parallel = N`` (N: ``MAX_JOBS`` when set, else the CPUs) and ``TORCH_NO_COMPILER_WRAPPER=1``;
every other build is left as it is (a ninja build compiles ``MAX_JOBS`` sources at once already,
and writes one ``build.ninja`` per build directory, which threads would share). A ``parallel`` the
user's own configuration sets is kept.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

__all__ = ["parallel_jobs", "uses_non_ninja_build_extension"]

_NO_NINJA = re.compile(r"use_ninja\s*=\s*False")


def uses_non_ninja_build_extension(project: Path) -> bool:
    """Whether the project's setup.py builds with torch's BuildExtension and ``use_ninja=False``."""
    try:
        text = (project / "setup.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "BuildExtension" in text and bool(_NO_NINJA.search(text))


def parallel_jobs(project: Path, is_cuda: bool, env: Mapping[str, str], cpus: int | None = None) -> int | None:
    """How many extensions a row's setup.py build compiles at once, or None to leave it serial
    (a CUDA row, a build that is not a non-ninja torch one, a single CPU)."""
    if is_cuda or not uses_non_ninja_build_extension(project):
        return None
    jobs = cpus if cpus is not None else (os.cpu_count() or 1)
    raw = env.get("MAX_JOBS", "").strip()
    if raw.isdigit() and int(raw) > 0:
        jobs = int(raw)
    return jobs if jobs > 1 else None

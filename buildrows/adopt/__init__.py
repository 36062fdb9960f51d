"""Adopting buildrows in a project (`buildrows init`): a starting policy from the project's own
files and, with --from-wheel, from a published wheel, and what init adds beside it.

- `starter`: the policy `init` writes (driver, CUDA option, rows, lists) and what it prints;
- `from_wheel`: what a published wheel says, as policy text (runtime mode, PTX, per-library rules);
- `starter_sources`: what init writes from a project's own switches, GPU detection and downloads,
  and the line it says when it found no switch.

`buildrows.build.provider` (the files init writes so wheels carry their row's local version and
requirement) lives in `build`, because doctor reads it too.

It sits above `build` (it reads a project as doctor does) and below the commands.
"""

"""Rendered by `buildrows workflow` for examples/executorch/buildrows.toml. Do not edit by hand.

test-infra's smoke test: the job installs the built wheel, then runs this. The builder has no GPU,
so it imports the package (its libraries load, the CUDA runtime resolves through the wheel);
what the wheel is held to - device code, runtime requirement, RPATH - the post-script checked with
`buildrows check` before this runs.
"""

import importlib

NAME = 'executorch'

module = importlib.import_module(NAME)
print(f"smoke test: imported {NAME} from {getattr(module, '__file__', '?')}")

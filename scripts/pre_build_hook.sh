#!/usr/bin/env bash
# Pre-build hook of a wheel workflow: find the CI row (CU_VERSION, else DESIRED_CUDA; Python;
# platform), check its nvcc, and append its environment to $BUILD_ENV_FILE and $GITHUB_ENV.
# Exits 3 (and writes nothing) when the row cannot be built honestly. Arguments pass through:
#   scripts/pre_build_hook.sh --config path/to/buildrows.toml
set -euo pipefail
PYTHON="${BUILDROWS_PYTHON_EXE:-${PYTHON:-python}}"
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  PYTHON=python3
fi
exec "$PYTHON" -m buildrows hook "$@"

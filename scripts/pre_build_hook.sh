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
# The wheel builder's container starts without buildrows: install it once, from
# BUILDROWS_SPEC (a requirement or a path; default: this checkout, which ships it).
if ! "$PYTHON" -c 'import buildrows' >/dev/null 2>&1; then
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  spec="${BUILDROWS_SPEC:-}"
  if [ -z "$spec" ] && [ -f "$here/buildrows/__init__.py" ]; then spec="$here"; fi
  echo "+ $PYTHON -m pip install -q ${spec:-buildrows}" >&2
  "$PYTHON" -m pip install -q "${spec:-buildrows}"
fi
exec "$PYTHON" -m buildrows hook "$@"

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
# The wheel builder's container starts without buildrows: install it once, from BUILDROWS_SPEC
# (pinned: buildrows==X, a VCS URL at a commit, or a path; default: this checkout, which ships it).
# Never an unpinned `buildrows`: CI would run whatever the index serves that day. In a project's
# CI, `buildrows workflow` renders its own pre-script from the policy's [ci] install instead.
if ! "$PYTHON" -c 'import buildrows' >/dev/null 2>&1; then
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  spec="${BUILDROWS_SPEC:-}"
  if [ -z "$spec" ] && [ -f "$here/buildrows/__init__.py" ]; then spec="$here"; fi
  if [ -z "$spec" ]; then
    echo "buildrows: not installed, and BUILDROWS_SPEC is not set" >&2
    echo "    fix: export BUILDROWS_SPEC=buildrows==VERSION (or a VCS URL at a full commit, or a path)" >&2
    exit 2
  fi
  echo "+ $PYTHON -m pip install -q $spec" >&2
  "$PYTHON" -m pip install -q "$spec"
fi
exec "$PYTHON" -m buildrows hook "$@"

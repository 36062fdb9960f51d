#!/usr/bin/env bash
# Rendered by `buildrows workflow` for examples/executorch/buildrows.toml. Do not edit by hand: change the policy and render again.
#
# test-infra's pre-script: run-script-with-cache runs it as `${CONDA_RUN} bash SCRIPT` in the
# repository, after `source "${BUILD_ENV_FILE}"` (which pkg-helpers wrote). It installs buildrows as
# the policy pins it ([ci] install), then runs the hook, which finds the row from CU_VERSION (or
# DESIRED_CUDA), the build environment's Python and the platform, checks the row's nvcc, and appends
# the row's values to BUILD_ENV_FILE - after pkg-helpers' own, so they win when the build step
# sources it (pkg-helpers' TORCH_CUDA_ARCH_LIST is not the row's) - and to GITHUB_ENV.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
CONFIG=examples/executorch/buildrows.toml
BUILDROWS_SPEC=buildrows==0.1.0
PYTHON="${BUILDROWS_PYTHON_EXE:-python}"

echo "+ $PYTHON -m pip install $BUILDROWS_SPEC"
"$PYTHON" -m pip install --quiet "$BUILDROWS_SPEC"

case "$(uname -s)" in
  MINGW* | MSYS* | CYGWIN*)
    # Git Bash on the Windows builder. The hook chooses the CMake generator from the environment it
    # runs in: ninja from the build environment, then the same Visual Studio developer environment
    # the build step runs in (env-script .github/scripts/buildrows-vc-env.bat), so it takes the Ninja route with clang-cl
    # and cl instead of the Visual Studio generator with ClangCL (MSB4023).
    echo "+ $PYTHON -m pip install ninja==1.13.0"
    "$PYTHON" -m pip install --quiet ninja==1.13.0
    command -v ninja >/dev/null || { echo "::error::buildrows: ninja is not on PATH after installing it" >&2; exit 4; }
    echo "+ cmd //c .github/scripts/buildrows-vc-env.bat $PYTHON -m buildrows --config $CONFIG hook"
    exec cmd //c "$(cygpath -w .github/scripts/buildrows-vc-env.bat)" "$PYTHON" -m buildrows --config "$CONFIG" hook
    ;;
esac

echo "+ $PYTHON -m buildrows --config $CONFIG hook"
exec "$PYTHON" -m buildrows --config "$CONFIG" hook

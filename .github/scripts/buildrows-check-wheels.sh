#!/usr/bin/env bash
# Rendered by `buildrows workflow` for examples/executorch/buildrows.toml. Do not edit by hand: change the policy and render again.
#
# test-infra's post-script: it runs after the wheel is built and before the smoke test and the
# upload, in the repository, after `source "${BUILD_ENV_FILE}"`. Every wheel in dist/ is held to
# its row with `buildrows check` and the policy; a wheel that fails (device code missing for an
# architecture of the row, the wrong runtime requirement, an RPATH into the builder) fails the job
# here, so it is never uploaded. A passing wheel's SHA-256 goes to $RUNNER_TEMP/buildrows-checked.sha256.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
CONFIG=examples/executorch/buildrows.toml
PYTHON="${BUILDROWS_PYTHON_EXE:-python}"
RECEIPTS="${RUNNER_TEMP:-${TMPDIR:-/tmp}}/buildrows-checked.sha256"

shopt -s nullglob
wheels=(dist/*.whl)
if (( ${#wheels[@]} == 0 )); then
  echo "::error::buildrows: no wheel in $(pwd)/dist to check; the build produced nothing to upload" >&2
  exit 5
fi
# The row the hook found for this job: a wheel of another row fails instead of passing as itself.
row_args=()
if [[ -n "${BUILDROWS_ROW:-}" ]]; then
  row_args=(--row "${BUILDROWS_ROW}")
fi
for whl in "${wheels[@]}"; do
  echo "+ $PYTHON -m buildrows --config $CONFIG check ${row_args[*]} $whl"
  if ! "$PYTHON" -m buildrows --config "$CONFIG" check "${row_args[@]}" "$whl"; then
    echo "::error::buildrows: $whl fails its row's checks; it must not be uploaded" >&2
    exit 5
  fi
  (cd dist && sha256sum "${whl#dist/}") >> "$RECEIPTS"
  if [[ -n "${GITHUB_STEP_SUMMARY:-}" ]]; then
    echo "buildrows check: \`${whl#dist/}\` passed (row ${BUILDROWS_ROW:-inferred from its name})" >> "$GITHUB_STEP_SUMMARY"
  fi
done

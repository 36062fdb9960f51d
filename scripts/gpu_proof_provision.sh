#!/usr/bin/env bash
# GPU proof for provisioned rows (issue 12, SPEC §11): a wheel compiled by a CUDA 13.2 toolkit that
# buildrows assembled from NVIDIA's PyPI wheels runs its kernel on an H100/H200 (sm_90) and matches
# the CPU result exactly.
#
# The GPU machine has Python 3.12, no internet and no CUDA 13.2, so the wheel is built on a
# machine with PyPI access and carried over, with the CUDA 13.2 runtime wheel its RPATH expects:
#
#   1. here (PyPI reachable; Python 3.12 and 3.13 findable, e.g. under pyenv):
#        scripts/gpu_proof_provision.sh prepare proof-carry
#      builds linux-x86_64-cu132-py312 and -py313 with `buildrows build ROW --provision` (both are
#      checked by `buildrows check`; the reports are saved beside the wheels) and copies the
#      nvidia-cuda-runtime 13.2 wheel from the buildrows download cache. proof-carry/ is untracked
#      and not ignored, so it travels with the working tree.
#   2. on the GPU machine (Python 3.12, no internet):
#        scripts/gpu_proof_provision.sh run proof-carry
#      installs the cp312 wheel and the runtime wheel into a fresh --target directory (no index,
#      no deps), runs the kernel on a million doubles and compares with the CPU sum, and checks the
#      wheel against its row and lists its device code (`buildrows check --row`, `buildrows archs
#      --from-wheel`, when buildrows' own dependencies are importable there).
# The py313 wheel is proof of the issue's row (compiled by nvcc 13.2, check PASS); it is not run on
# the GPU machine, which has no Python 3.13.
# Optional step B (`WITH_TOOLKIT=1 ... prepare` also carries the six pinned 13.2 wheels, ~115 MB):
# `run` then assembles CUDA 13.2 on the GPU machine itself from them (BUILDROWS_TOOLKIT_WHEELS, no
# network, hashes checked), builds linux-x86_64-cu132-py312 there with that toolkit (the machine's
# Python 3.12 and its scikit-build-core) and runs that wheel's kernel too.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
MODE=${1:-}
DIR=${2:-proof-carry}
say() { printf '\n######## %s\n' "$*"; }
KERNEL='
import random, sys, cuda_extension as ce
print("built_with_cuda:", ce.built_with_cuda, "| archs:", ce.cuda_architectures or "none", "| cuda:", ce.cuda_status())
random.seed(0)
n = 1_000_000
a = [random.uniform(-1e3, 1e3) for _ in range(n)]
b = [random.uniform(-1e3, 1e3) for _ in range(n)]
ref = [x + y for x, y in zip(a, b)]
try:
    out = ce.add(a, b)
except RuntimeError as e:
    print("RuntimeError:", e)
    sys.exit(3)
diff = max(abs(x - y) for x, y in zip(out, ref))
print(f"add() on {n} doubles: max |gpu - cpu reference| = {diff}")
sys.exit(0 if diff == 0.0 and ce.cuda_available() else 1)
'

prepare() {
  mkdir -p "$DIR"
  local BR=(python3 -m buildrows --config examples/cuda-extension/buildrows.toml)
  local fail=0
  for py in 312 313; do
    row=linux-x86_64-cu132-py$py
    say "build $row --provision"
    PYTHONPATH="$REPO" "${BR[@]}" build "$row" --provision --wheel-dir "$DIR/wheels" 2>&1 | tee "$DIR/build-$row.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || fail=1
  done
  local cache=${BUILDROWS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/buildrows}
  cp "$cache"/downloads/*-nvidia_cuda_runtime-13.2.86-*.whl "$DIR/" 2>/dev/null || fail=1
  for f in "$DIR"/*-nvidia_cuda_runtime-13.2.86-*.whl; do  # restore the wheel's own file name
    [ -e "$f" ] && mv "$f" "$DIR/$(basename "$f" | cut -d- -f2-)"
  done
  if [ "${WITH_TOOLKIT:-0}" = 1 ]; then  # the 13.2 toolkit's six pinned wheels (~115 MB), for step B
    mkdir -p "$DIR/toolkit-wheels"
    for f in "$cache"/downloads/*-nvidia_*13.2.86-*.whl; do
      case "$f" in *cublas*|*cusparse*|*cusolver*|*curand*|*cufft*) continue;; esac
      cp "$f" "$DIR/toolkit-wheels/$(basename "$f" | cut -d- -f2-)"
    done
  fi
  ls -la "$DIR" "$DIR/wheels"
  say "prepared: $([ $fail -eq 0 ] && echo OK || echo FAILED)"
  return $fail
}

run() {
  local PY=${PYTHON:-python3}
  local W
  W=$(mktemp -d /tmp/buildrows-proof12.XXXXXX)
  local fail=0
  say "machine"
  nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader || true
  "$PY" --version
  local whl rt
  whl=$(ls "$DIR"/wheels/cuda_extension-*+cu132-cp312-cp312-*.whl 2>/dev/null | head -1)
  rt=$(ls "$DIR"/nvidia_cuda_runtime-13.2.86-*.whl 2>/dev/null | head -1)
  echo "wheel: $whl"; echo "runtime: $rt"
  [ -n "$whl" ] && [ -n "$rt" ] || { echo "missing carried files: run 'prepare' first"; return 1; }
  grep -h "\[ok     \] nvcc\|CUDA compiler identification\|verdict:" "$DIR"/build-linux-x86_64-cu132-py312.log
  say "install (no index, no deps) into $W/site"
  "$PY" -m pip install -q --no-deps --no-index --no-compile --target "$W/site" "$whl" "$rt" || return 1
  ls "$W/site/nvidia/cu13/lib"
  say "run the kernel on the GPU and compare with the CPU (CUDA 13.2 runtime from the carried wheel)"
  out=$(cd "$W" && PYTHONPATH="$W/site" "$PY" -c "$KERNEL" 2>&1); rc=$?
  echo "$out"
  if [ $rc -ne 0 ] && grep -q "cudaErrorInsufficientDriver" <<<"$out"; then
    # A driver older than 13.2's: CUDA's minor version compatibility lets the same wheel run on
    # this machine's own CUDA 13 runtime (from its nvidia-cuda-runtime wheel); try that, and say so.
    local NV
    NV=$("$PY" -c 'import nvidia, os; print([p for p in nvidia.__path__ if os.path.isdir(os.path.join(p, "cu13", "lib"))][0])' 2>/dev/null)
    if [ -n "$NV" ]; then
      say "the driver is older than CUDA 13.2's runtime: again with this machine's CUDA 13 runtime ($NV/cu13/lib)"
      rm -rf "$W/site/nvidia" && ln -s "$NV" "$W/site/nvidia"
      out=$(cd "$W" && PYTHONPATH="$W/site" "$PY" -c "$KERNEL" 2>&1); rc=$?
      echo "$out"
    fi
  fi
  echo "kernel run exit status: $rc (0 = ran on the GPU and matches the CPU reference exactly)"
  [ $rc -eq 0 ] || fail=1
  say "buildrows check against the row, and the wheel's device code (sm_90 for this GPU)"
  if "$PY" -c 'import elftools, pefile, tomlkit, packaging' 2>/dev/null; then
    PYTHONPATH="$REPO" "$PY" -m buildrows --config examples/cuda-extension/buildrows.toml check "$whl" \
      --row linux-x86_64-cu132-py312; echo "check exit status: $? (expected 0)"
    PYTHONPATH="$REPO" "$PY" -m buildrows archs --from-wheel "$whl"
  else
    echo "(buildrows' dependencies are not importable here; the check ran at build time: see $DIR/build-*.log)"
  fi
  if [ -d "$DIR/toolkit-wheels" ]; then
    say "B. on this machine: assemble CUDA 13.2 from the carried pinned wheels, build cu132-py312 here, run it"
    export BUILDROWS_CACHE="$W/cache" BUILDROWS_TOOLKIT_WHEELS="$DIR/toolkit-wheels"
    PYTHONPATH="$REPO" "$PY" -m buildrows toolkit install 13.2 || fail=1
    PYTHONPATH="$REPO" "$PY" -m buildrows --config examples/cuda-extension/buildrows.toml \
      build linux-x86_64-cu132-py312 --wheel-dir "$W/devwheel" || fail=1
    local dev
    dev=$(ls "$W"/devwheel/*+cu132-cp312-*.whl 2>/dev/null | head -1)
    if [ -n "$dev" ] && "$PY" -m pip install -q --no-deps --no-index --no-compile --target "$W/site2" "$dev" "$rt"; then
      out=$(cd "$W" && PYTHONPATH="$W/site2" "$PY" -c "$KERNEL" 2>&1); rc=$?
      echo "$out"; echo "kernel run exit status (wheel built on this machine): $rc"
      [ $rc -eq 0 ] || fail=1
    else fail=1; fi
  fi
  say "verdict: $([ $fail -eq 0 ] && echo PROOF PASSED || echo PROOF FAILED)"
  return $fail
}

case "$MODE" in
  prepare) prepare ;;
  run) run ;;
  *) echo "usage: $0 prepare|run [DIR]" >&2; exit 2 ;;
esac

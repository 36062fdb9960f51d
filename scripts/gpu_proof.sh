#!/usr/bin/env bash
# GPU proof for `buildrows build` (SPEC §6), run on a machine with an NVIDIA GPU of compute
# capability 9.0 (H100/H200) and nvcc 13.0:
#   1. build examples/cuda-extension for a cu130 row whose list is "9.0" (sm_90 + PTX), install
#      the wheel, run its kernel on the GPU and compare with a CPU reference (exact: doubles);
#   2. build it for a row with "8.0" and no PTX: the kernel must fail with CUDA's
#      "no kernel image is available for execution on the device", and
#      `buildrows check WHEEL --archs 9.0` must have predicted it (exit 5, sm_90 missing);
#   3. build the CPU row: no device code, cuda_available() is False, add() runs on the CPU.
# Usage: scripts/gpu_proof.sh [OUTDIR]   (PYTHON=python3 by default; the row is this Python's)
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
OUTDIR=${1:-${OUT:-/tmp/gpu-proof}}
mkdir -p "$OUTDIR"
PY=${PYTHON:-python3}
PYV=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
PYT=${PYV/./}
W=$(mktemp -d /tmp/buildrows-proof.XXXXXX)
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
BR=("$PY" -m buildrows)
fail=0
say() { printf '\n######## %s\n' "$*"; }

say "machine"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader || true
command -v nvcc && nvcc --version | tail -2
"$PY" -c 'import scikit_build_core, sys; print("python", sys.version.split()[0], "scikit-build-core", scikit_build_core.__version__)'

# Two proof policies: the example's own policy with the cu130 list replaced.
src="$REPO/examples/cuda-extension/buildrows.toml"
sed 's/^archs = "7.5 8.0 8.6 8.9 9.0 10.0 12.0"$/archs = "9.0"/' "$src" > "$W/with90.toml"
sed 's/^archs = "7.5 8.0 8.6 8.9 9.0 10.0 12.0"$/archs = "8.0"\nptx = "none"/' "$src" > "$W/no90.toml"
ROW=linux-x86_64-cu130-py$PYT
CPUROW=linux-x86_64-cpu-py$PYT

# Where the installed wheel's RPATH ($ORIGIN/../nvidia/cu13/lib) finds libcudart: this Python's
# own nvidia-cuda-runtime wheel, linked beside the install, as pip would lay it out.
NV=$("$PY" -c 'import nvidia, os; print([p for p in nvidia.__path__ if os.path.isdir(os.path.join(p, "cu13", "lib"))][0])' 2>/dev/null)

install() {  # install WHEEL into DIR (no deps, no index) and link the CUDA runtime wheel's files
  "$PY" -m pip install -q --no-deps --no-index --no-compile --target "$2" "$1" || return 1
  if [ -n "$NV" ]; then ln -sfn "$NV" "$2/nvidia"; else echo "(no nvidia-cuda-runtime found; relying on the loader path)"; fi
}

RUN_KERNEL='
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
sys.exit(0 if diff == 0.0 else 1)
'

say "1. build $ROW with archs 9.0 (+PTX), run the kernel on the GPU"
"${BR[@]}" --config "$W/with90.toml" build "$ROW" --project examples/cuda-extension --wheel-dir "$W/with90" || fail=1
WHL1=$(ls "$W"/with90/*+cu130*.whl 2>/dev/null | head -1)
echo "wheel: $WHL1"
if [ -n "$WHL1" ] && install "$WHL1" "$W/site1"; then
  (cd "$W" && PYTHONPATH="$W/site1" "$PY" -c "$RUN_KERNEL"); rc=$?
  echo "kernel run exit status: $rc (0 = matches the CPU reference exactly)"; [ $rc -eq 0 ] || fail=1
  "${BR[@]}" check "$WHL1" --archs "9.0"; echo "buildrows check --archs 9.0 exit status: $? (expected 0)"
else fail=1; fi

say "2. build $ROW with archs 8.0 and no PTX: the kernel must not run on sm_90"
"${BR[@]}" --config "$W/no90.toml" build "$ROW" --project examples/cuda-extension --wheel-dir "$W/no90" || fail=1
WHL2=$(ls "$W"/no90/*+cu130*.whl 2>/dev/null | head -1)
echo "wheel: $WHL2"
echo "--- the check's prediction for a 9.0 GPU:"
"${BR[@]}" check "$WHL2" --archs "9.0"; crc=$?
echo "buildrows check --archs 9.0 exit status: $crc (expected 5: predicts the failure)"; [ $crc -eq 5 ] || fail=1
if [ -n "$WHL2" ] && install "$WHL2" "$W/site2"; then
  out=$(cd "$W" && PYTHONPATH="$W/site2" "$PY" -c "$RUN_KERNEL" 2>&1); rc=$?
  echo "$out"
  echo "kernel run exit status: $rc (expected 3: CUDA error)"
  if [ $rc -eq 3 ] && grep -q "no kernel image is available" <<<"$out"; then echo "OK: failed with CUDA's no-kernel-image error, as the check predicted"; else fail=1; fi
else fail=1; fi

say "4. the README's row as the example declares it (7.5 ... 12.0, PTX 12.0): runs on sm_90 too"
"${BR[@]}" --config "$src" build "$ROW" --project examples/cuda-extension --wheel-dir "$W/full" || fail=1
WHL4=$(ls "$W"/full/*+cu130*.whl 2>/dev/null | head -1)
if [ -n "$WHL4" ] && install "$WHL4" "$W/site4"; then
  (cd "$W" && PYTHONPATH="$W/site4" "$PY" -c "$RUN_KERNEL"); rc=$?
  echo "kernel run exit status: $rc (0 = matches the CPU reference exactly)"; [ $rc -eq 0 ] || fail=1
else fail=1; fi

say "5. the rendered GPU job's test ([ci.gpu-test] script: examples/cuda-extension/tests/gpu_test.py) on that wheel"
if [ -n "$WHL4" ]; then
  out=$(cd "$W" && PYTHONPATH="$W/site4" "$PY" "$REPO/examples/cuda-extension/tests/gpu_test.py" 2>&1); rc=$?
  echo "$out"; echo "gpu_test.py exit status: $rc (expected 0)"
  if [ $rc -ne 0 ] || ! grep -q "gpu test: add ran on the GPU" <<<"$out"; then fail=1; fi
else fail=1; fi

say "3. build $CPUROW: no device code, CPU fallback"
"${BR[@]}" --config "$src" build "$CPUROW" --project examples/cuda-extension --wheel-dir "$W/cpu" || fail=1
WHL3=$(ls "$W"/cpu/*.whl 2>/dev/null | head -1)
if [ -n "$WHL3" ] && "$PY" -m pip install -q --no-deps --no-index --no-compile --target "$W/site3" "$WHL3"; then
  (cd "$W" && PYTHONPATH="$W/site3" "$PY" -c 'import cuda_extension as ce; print("built_with_cuda:", ce.built_with_cuda, "cuda_available:", ce.cuda_available(), "|", ce.cuda_status()); print("add:", ce.add([1.5, 2], [2.5, 3]))') || fail=1
else fail=1; fi

say "verdict: $([ $fail -eq 0 ] && echo PROOF PASSED || echo PROOF FAILED)"
exit $fail

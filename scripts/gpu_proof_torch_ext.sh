#!/usr/bin/env bash
# GPU proof for issue 11: a real PyTorch CUDA extension, its source untouched, built by
# `buildrows build ROW` and its CUDA op checked against its CPU result on the GPU.
#
# The project is torchsort 0.1.10 (a torch.utils.cpp_extension setup.py project: isotonic_cpu.cpp
# and isotonic_cuda.cu), from its PyPI sdist. The GPU machine has no internet, so the sdist is
# carried in .whl/ (git-ignored), with a wheel of PyPA's `wheel` in case that Python lacks it:
#   mkdir -p .whl && pip download --no-deps --no-binary :all: --no-build-isolation torchsort==0.1.10 -d .whl
#   pip download --no-deps wheel==0.48.0 -d .whl
#
# Steps, on a machine with an NVIDIA GPU of compute capability 9.0 (H100/H200), nvcc and torch:
#   1. the CUDA row (the nvcc's train, archs "9.0" + PTX, runtime mode "torch", stamping on):
#      `buildrows build` (doctor, the row's environment with CUDA_HOME = the root nvcc reports,
#      the wheel stamped +cuXYZ with a torch pin and its build record, `buildrows check`);
#   2. install the wheel and compare soft_sort/soft_rank on the GPU (isotonic_cuda) with the same
#      calls on the CPU (isotonic_cpu), forward and backward;
#   3. the CPU row, built with nvcc off PATH (torchsort has no switch): no device code, CPU op runs.
# Usage: scripts/gpu_proof_torch_ext.sh [OUTDIR]   (PYTHON=python3 by default; the row is this Python's)
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
OUTDIR=${1:-${OUT:-/tmp/gpu-proof-torch-ext}}
mkdir -p "$OUTDIR"
PY=${PYTHON:-python3}
PYV=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
PYT=${PYV/./}
W=$(mktemp -d /tmp/buildrows-torch-proof.XXXXXX)
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
BR=("$PY" -m buildrows)
fail=0
say() { printf '\n######## %s\n' "$*"; }

say "machine"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader || true
NVCC=$(command -v nvcc || true)
[ -n "$NVCC" ] && "$NVCC" --version | tail -2
"$PY" -c 'import torch, sys; print("python", sys.version.split()[0], "| torch", torch.__version__, "| torch CUDA", torch.version.cuda, "| GPU", torch.cuda.is_available())'
if ! "$PY" -c 'import wheel.wheelfile' 2>/dev/null; then
  echo "(installing PyPA's wheel from .whl/ for stamping)"
  "$PY" -m pip install -q --no-index --find-links "$REPO/.whl" wheel || fail=1
fi
SDIST=$(ls "$REPO"/.whl/torchsort-0.1.10.tar.gz 2>/dev/null | head -1)
if [ -z "$SDIST" ]; then echo "missing .whl/torchsort-0.1.10.tar.gz (see the header of this script)"; exit 2; fi
tar -xzf "$SDIST" -C "$W" && SRC="$W/torchsort-0.1.10"

# The row's train is the nvcc's; torch must be a build for the same CUDA major (cpp_extension refuses otherwise).
TRAIN=$("$NVCC" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\),.*/\1/p')
TORCH_CUDA=$("$PY" -c 'import torch; print(torch.version.cuda or "")')
echo "nvcc train: $TRAIN | torch CUDA: $TORCH_CUDA"
[ "${TRAIN%%.*}" = "${TORCH_CUDA%%.*}" ] || { echo "torch's CUDA major differs from nvcc's: no row to build honestly"; exit 2; }
CU=cu${TRAIN/./}
ROW=linux-x86_64-$CU-py$PYT
CPUROW=linux-x86_64-cpu-py$PYT
cat > "$W/buildrows.toml" <<EOF
[project]
name = "torchsort"
driver = "setup.py"
stamp = true           # torchsort's build does not read BUILDROWS_LOCAL_VERSION: stamp +$CU and the torch pin
[python]
versions = ["$PYV"]
[cuda]
trains = ["$TRAIN"]
[cuda.runtime.${TRAIN%%.*}]
mode = "torch"         # a PyTorch extension: torch brings the CUDA runtime
[platforms.linux-x86_64]
trains = ["$TRAIN"]
cpu = true
[[platforms.linux-x86_64.cuda]]
trains = ["$TRAIN"]
archs = "9.0"
EOF

say "1. buildrows build $ROW (torchsort 0.1.10 from its sdist, unmodified)"
start=$(date +%s)
( PATH="$(dirname "$NVCC"):$PATH" "${BR[@]}" --config "$W/buildrows.toml" build "$ROW" --project "$SRC" --wheel-dir "$W/cuda" ) || fail=1
echo "build + check took $(( $(date +%s) - start )) s"
WHL=$(ls "$W"/cuda/*+"$CU"*.whl 2>/dev/null | head -1)
echo "wheel: $WHL"
[ -n "$WHL" ] || fail=1
[ -n "$WHL" ] && "$PY" - "$WHL" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for n in z.namelist():
        if n.endswith(".dist-info/buildrows.json"):
            print("build record:", z.read(n).decode().strip())
        if n.endswith(".dist-info/METADATA"):
            print("\n".join(l for l in z.read(n).decode().splitlines() if l.startswith(("Version:", "Requires-Dist:"))))
EOF

RUN_OP='
import sys, torch, torchsort
import torchsort.ops as ops
assert torch.cuda.is_available(), "no GPU"
cuda_ext = sys.modules.get("torchsort.isotonic_cuda")
print("isotonic_cuda loaded:", cuda_ext is not None and ops.isotonic_l2_cuda.__module__ != "torchsort.ops")
assert cuda_ext is not None, "the wheel has no CUDA extension"
torch.manual_seed(0)
worst = 0.0
for fn in (torchsort.soft_sort, torchsort.soft_rank):
    for reg in ("l2", "kl"):
        x = torch.randn(256, 1000, dtype=torch.float64)
        xc = x.clone().requires_grad_(True)
        xg = x.cuda().requires_grad_(True)
        yc = fn(xc, regularization=reg, regularization_strength=0.5)
        yg = fn(xg, regularization=reg, regularization_strength=0.5)
        assert yg.is_cuda
        yc.sum().backward(); yg.sum().backward()
        d = max((yg.detach().cpu() - yc.detach()).abs().max().item(), (xg.grad.cpu() - xc.grad).abs().max().item())
        print(f"{fn.__name__:9} {reg}: max |GPU - CPU| (value and gradient) = {d:.3e}")
        worst = max(worst, d)
sys.exit(0 if worst < 1e-6 else 1)
'
say "2. install the wheel, run its CUDA op on the GPU and compare with its CPU op"
if [ -n "$WHL" ] && "$PY" -m pip install -q --no-deps --no-index --no-compile --target "$W/site" "$WHL"; then
  (cd "$W" && PYTHONPATH="$W/site" "$PY" -c "$RUN_OP"); rc=$?
  echo "CUDA op vs CPU op exit status: $rc (0 = agree within 1e-6 in float64)"; [ $rc -eq 0 ] || fail=1
else fail=1; fi

say "3. buildrows build $CPUROW (nvcc off PATH: torchsort builds CUDA whenever nvcc is on PATH)"
NO_NVCC_PATH=$(tr ':' '\n' <<<"$PATH" | while read -r d; do [ -x "$d/nvcc" ] || printf '%s:' "$d"; done)
( PATH="${NO_NVCC_PATH%:}" "${BR[@]}" --config "$W/buildrows.toml" build "$CPUROW" --project "$SRC" --wheel-dir "$W/cpu" ) || fail=1
WHL3=$(ls "$W"/cpu/*.whl 2>/dev/null | head -1)
if [ -n "$WHL3" ] && "$PY" -m pip install -q --no-deps --no-index --no-compile --target "$W/site3" "$WHL3"; then
  (cd "$W" && PYTHONPATH="$W/site3" "$PY" -c 'import torch, torchsort; print(torchsort.soft_rank(torch.tensor([[3.0, 1.0, 2.0]]), regularization_strength=1e-3))') || fail=1
else fail=1; fi

cp -f "$W"/cuda/*.whl "$W"/cpu/*.whl "$OUTDIR"/ 2>/dev/null || true
say "verdict: $([ $fail -eq 0 ] && echo PROOF PASSED || echo PROOF FAILED)"
exit $fail

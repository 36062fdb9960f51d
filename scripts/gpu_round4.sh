#!/usr/bin/env bash
# Issue 40 on a GPU: torch-harmonics 0.8.0 (a setup.py torch extension that builds CUDA when
# FORCE_CUDA_EXTENSION=1 *or whenever torch sees a GPU*) from its unmodified PyPI sdist, adopted
# with `init` as it writes it (only the archs set to the GPU's own), on a machine with a GPU:
# doctor per row (the CPU row is ready because init hides the GPU; without CUDA_VISIBLE_DEVICES=""
# doctor refuses it), both rows built by buildrows, checked, installed, imported, and a DISCO
# convolution run on the GPU (the CUDA extension) against the CPU (torch's path).
#
#   scripts/gpu_round4.sh SDIST.tar.gz WHEELS_DIR OUT_DIR [ARCHS]
set -uo pipefail
sdist=$(realpath "$1"); wheels=$(realpath "$2"); out=$(realpath "$3"); archs=${4:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$work/site" "$wheels"/*.whl
export PYTHONPATH="$repo:$work/site" PYTHONUNBUFFERED=1
br() { python3 -m buildrows "$@"; }
py=$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")'); pyt=${py/./}
cpu="linux-x86_64-cpu-py$pyt"; cuda="linux-x86_64-cu130-py$pyt"
[ -n "$archs" ] || archs=$(python3 -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability())')
echo "== $(python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name())'); nvcc: $(command -v nvcc)"
tar -xzf "$sdist" -C "$work"; src=$(find "$work" -maxdepth 1 -mindepth 1 -type d -name 'torch_harmonics-*'); cd "$src"
echo "== buildrows init --cuda 13.0 --python $py"; br init --cuda 13.0 --python "$py"
sed -i "s/^archs = \".*\"/archs = \"$archs\"/" buildrows.toml; cp buildrows.toml "$out/buildrows.toml"
echo "== doctor (as init wrote it)"; br doctor "$cpu" "$cuda"; echo "doctor rc=$?"
echo "== doctor $cpu with the GPU not hidden (init's cpu-env line removed)"
sed 's/^CUDA_VISIBLE_DEVICES = .*//' buildrows.toml > unhidden.toml  # beside setup.py: the policy's directory is the project
br --config unhidden.toml doctor "$cpu" > "$work/unhidden.log" 2>&1; echo "doctor rc=$?"; grep -i -A1 "GPU" "$work/unhidden.log"; rm unhidden.toml
export MAX_JOBS=16
echo "== build $cpu $cuda"; dist="$work/dist"
br build "$cpu" "$cuda" --wheel-dir "$dist" --no-compiler-cache > "$out/build.log" 2>&1; echo "build rc=$?"; grep -v '^\s*\(copying\|creating\|running\|adding\)' "$out/build.log" | tail -40
ls -la "$dist"
for w in "$dist"/*.whl; do
  echo "== check $(basename "$w")"; br check "$w" 2>&1 | tee -a "$out/check.log" | tail -25
  python3 -m pip install -q --no-index --no-deps --target "$work/site-$(basename "$w" .whl)" "$w"
  python3 -c 'import sys, zipfile; print([n for n in zipfile.ZipFile(sys.argv[1]).namelist() if ".so" in n])' "$w"
done
cat > "$work/run.py" <<'PY'
import sys, torch, torch_harmonics as th
from torch_harmonics import convolution as c
print("module:", th.__file__, "CUDA extension:", c._cuda_extension_available)
torch.manual_seed(0)
conv = th.DiscreteContinuousConvS2(4, 8, in_shape=(32, 64), out_shape=(32, 64), kernel_shape=(3,), theta_cutoff=0.2)
x = torch.randn(2, 4, 32, 64)
y = conv(x)
print("CPU forward:", tuple(y.shape), float(y.sum()))
if len(sys.argv) > 1:
    assert c._cuda_extension_available, "the CUDA wheel's extension did not import"
    yg = conv.cuda()(x.cuda()).cpu()
    print("GPU:", torch.cuda.get_device_name(), "max |gpu-cpu| =", float((yg - y).abs().max()))
    assert float((yg - y).abs().max()) < 1e-3
PY
for w in "$dist"/*.whl; do
  s="$work/site-$(basename "$w" .whl)"; echo "== run $(basename "$w")"
  case "$w" in *cu130*) (cd "$work" && PYTHONPATH="$s" python3 run.py gpu) ;; *) (cd "$work" && PYTHONPATH="$s" python3 run.py) ;; esac
  echo "run rc=$?"
done

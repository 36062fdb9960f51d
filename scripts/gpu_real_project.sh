#!/usr/bin/env bash
# Issue 28 on a GPU: a real PyTorch extension from its unmodified PyPI sdist, adopted with `init`,
# built by buildrows for a CPU row and a CUDA 13.0 row into one directory, both wheels checked,
# installed and imported, and its operators run on the GPU against the CPU.
#
#   scripts/gpu_real_project.sh SDIST.tar.gz WHEELS_DIR OUT_DIR [ARCHS]
#
# SDIST: torch_spline_conv-1.2.2.tar.gz (sha256 ed45a81d...61b2, as tests/test_real_projects_round3.py
# pins it). WHEELS_DIR: buildrows' own dependencies as wheels for a machine without a package index
# (tomlkit, pyelftools, pefile, zlib-ng). The machine needs python3 with torch (a CUDA build), nvcc,
# setuptools, wheel and build. ARCHS defaults to the GPU's own (torch.cuda.get_device_capability).
set -euo pipefail
sdist=$(realpath "$1"); wheels=$(realpath "$2"); out=$(realpath "$3"); archs=${4:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$work/site" "$wheels"/*.whl
export PYTHONPATH="$repo:$work/site" PYTHONUNBUFFERED=1
br() { python3 -m buildrows "$@"; }
py=$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
pyt=${py/./}
cpu="linux-x86_64-cpu-py$pyt"; cuda="linux-x86_64-cu130-py$pyt"
if [ -z "$archs" ]; then
  archs=$(python3 -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability())')
fi
echo "== $(python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name())'); nvcc: $(command -v nvcc)"
tar -xzf "$sdist" -C "$work"
src=$(find "$work" -maxdepth 1 -mindepth 1 -type d -name 'torch_spline_conv-*')
cd "$src"
echo "== buildrows init --cuda 13.0 --python $py"
br init --cuda 13.0 --python "$py"
# What the docs say to change: the architecture list, here the GPU's own.
sed -i "s/^archs = \".*\"/archs = \"$archs\"/" buildrows.toml
cp buildrows.toml "$out/buildrows.toml"
echo "== doctor"; br doctor "$cpu" "$cuda" || true
echo "== build $cpu $cuda"
dist="$work/dist"
br build "$cpu" "$cuda" --wheel-dir "$dist" 2>&1 | tee "$out/build.log" | grep -v '^\s*\(copying\|creating\|running\)' || true
ls -la "$dist"
for w in "$dist"/*.whl; do
  echo "== check $(basename "$w")"; br check "$w" | tee -a "$out/check.log"
  t="$work/site-$(basename "$w" .whl)"
  python3 -m pip install -q --no-index --no-deps --target "$t" "$w"
done
cpu_site=$(ls -d "$work"/site-torch_spline_conv-*-cp* | grep -v cu130)
cuda_site=$(ls -d "$work"/site-torch_spline_conv-*+cu130-*)
cat > "$work/run.py" <<'EOF'
import sys, torch, torch_spline_conv as t
torch.manual_seed(0)
E, D, S = 20000, 3, 5
pseudo = torch.rand(E, D, dtype=torch.float64)
weight = torch.rand(S ** D, 16, 32, dtype=torch.float64)
size = torch.tensor([S] * D); open_ = torch.tensor([1] * D, dtype=torch.uint8)
x = torch.rand(E, 16, dtype=torch.float64)
def run(dev):
    b, i = t.spline_basis(pseudo.to(dev), size.to(dev), open_.to(dev), 1)
    y = t.spline_weighting(x.to(dev), weight.to(dev), b, i)
    return b.cpu(), i.cpu(), y.cpu()
cpu = run("cpu")
print("module:", t.__file__)
if len(sys.argv) > 1:
    gpu = run("cuda")
    assert torch.cuda.is_available()
    print("GPU:", torch.cuda.get_device_name(), "basis max |gpu-cpu| =", (gpu[0] - cpu[0]).abs().max().item(),
          "index equal:", bool((gpu[1] == cpu[1]).all()), "weighting max |gpu-cpu| =", (gpu[2] - cpu[2]).abs().max().item())
    assert (gpu[0] - cpu[0]).abs().max().item() < 1e-9 and bool((gpu[1] == cpu[1]).all())
    assert (gpu[2] - cpu[2]).abs().max().item() < 1e-6
print("CPU result sum:", cpu[2].sum().item())
EOF
echo "== the CPU wheel, on the CPU"; (cd "$work" && PYTHONPATH="$cpu_site" python3 run.py)
echo "== the CUDA wheel, on the GPU against the CPU"; (cd "$work" && PYTHONPATH="$cuda_site" python3 run.py gpu)

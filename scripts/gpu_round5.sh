#!/usr/bin/env bash
# Issue 40 on a GPU, round 5: the CUDA row of causal-conv1d 1.7.0 or gsplat 1.5.3, from the
# unmodified PyPI sdist, adopted with `buildrows init` as it writes it, on a machine with a GPU:
# doctor on the CUDA row, the row built by buildrows, checked, installed, imported, and one call
# on the GPU compared with a torch reference on the CPU.
#
#   scripts/gpu_round5.sh causal_conv1d|gsplat SDIST.tar.gz WHEELS_DIR OUT_DIR [ARCHS]
#
# causal-conv1d: no edit at all. Its setup.py hard-codes nine -gencode pairs (75 80 87 90 100 120
#   103 110 121 under CUDA 13) and ignores TORCH_CUDA_ARCH_LIST, so the row's list cannot narrow the
#   build; init writes that list as the row's archs, and the build compiles all nine.
#   It also passes nvcc `--threads 4`, so the nine run four at a time: on the H200 (16 cores)
#   causal_conv1d_bwd.cu was still compiling after 8.5 minutes (the other three sources took about
#   a minute), past the device's 10-minute call. The script therefore exports
#   NVCC_APPEND_FLAGS="--threads 0" (nvcc keeps the last --threads; 0: as many as the CPUs): what
#   is compiled is unchanged, and so are the source and the policy. NVCC_THREADS=keep leaves it out.
# gsplat: the row's archs line is set to ARCHS (default: the GPU's own) because buildrows has no
#   build-time override of a row's list (`archs --from-wheel --write` writes one read from a wheel);
#   init's list (7.5 ... 12.0, seven architectures) would compile its 22 .cu files seven times.
#   This is the only edit, the same one gpu_round4.sh made for torch-harmonics.
# DRY=1 stops after doctor (a dry run of the carry, the install and init on a machine without a GPU).
set -uo pipefail
proj=$1; sdist=$(realpath "$2"); wheels=$(realpath "$3"); out=$(realpath "$4"); archs=${5:-}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$work/site" "$wheels"/*.whl || exit 4
export PYTHONPATH="$repo:$work/site" PYTHONUNBUFFERED=1
br() { python3 -m buildrows "$@"; }
py=$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")'); pyt=${py/./}
cuda="linux-x86_64-cu130-py$pyt"
echo "== $(python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU")'); nvcc: $(command -v nvcc); $(nproc) cores"
tar -xzf "$sdist" -C "$work"; src=$(find "$work" -maxdepth 1 -mindepth 1 -type d -name "$proj-*"); cd "$src" || exit 2
echo "== buildrows init --cuda 13.0 --python $py"; br init --cuda 13.0 --python "$py"; echo "init rc=$?"
cp buildrows.toml "$out/buildrows-init.toml"
if [ "$proj" = gsplat ]; then
  [ -n "$archs" ] || archs=$(python3 -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability())')
  sed -i "s/^archs = \".*\"/archs = \"$archs\"/" buildrows.toml
  echo "== the one edit: archs = \"$archs\""; diff "$out/buildrows-init.toml" buildrows.toml
fi
br rows
echo "== doctor $cuda"; br doctor "$cuda"; echo "doctor rc=$?"
[ "${DRY:-}" = 1 ] && exit 0
export MAX_JOBS=$(nproc)
[ "$proj" = causal_conv1d ] && [ "${NVCC_THREADS:-}" != keep ] && export NVCC_APPEND_FLAGS="--threads 0"
echo "NVCC_APPEND_FLAGS=${NVCC_APPEND_FLAGS:-}"
echo "== build $cuda (MAX_JOBS=$MAX_JOBS)"; dist="$work/dist"; t0=$(date +%s)
br build "$cuda" --wheel-dir "$dist" --no-compiler-cache > "$out/build.log" 2>&1; rc=$?
echo "build rc=$rc in $(( $(date +%s) - t0 )) s"
grep -v '^\s*\(copying\|creating\|running\|adding\)' "$out/build.log" | grep -v 'ptxas info\|bytes stack frame\|Compiling entry\|Function properties\|Used [0-9]* registers' | tail -40
ls -la "$dist"
whl=$(ls "$dist"/*.whl 2>/dev/null | head -1); [ -n "$whl" ] || exit 4
echo "== check $(basename "$whl")"; br check "$whl" > "$out/check.log" 2>&1; echo "check rc=$?"; tail -30 "$out/check.log"
python3 -c 'import sys, zipfile; print([n for n in zipfile.ZipFile(sys.argv[1]).namelist() if ".so" in n])' "$whl"
cuobjdump --list-elf "$(python3 - "$whl" "$work" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1]); n = [m for m in z.namelist() if m.endswith(".so")][0]
print(z.extract(n, sys.argv[2] + "/elf"))
PY
)" | sed 's/.*\.\(sm_[0-9a-z]*\)\..*/\1/' | sort | uniq -c
s="$work/site-wheel"; python3 -m pip install -q --no-index --no-deps --target "$s" "$whl" || exit 4
cat > "$work/run_causal_conv1d.py" <<'PY'
import torch, torch.nn.functional as F
import causal_conv1d, causal_conv1d_cuda
from causal_conv1d import causal_conv1d_fn
print("module:", causal_conv1d.__file__, "extension:", causal_conv1d_cuda.__file__)
torch.manual_seed(0)
batch, dim, seqlen, width = 2, 64, 512, 4
x = torch.randn(batch, dim, seqlen); w = torch.randn(dim, width); b = torch.randn(dim)
ref = F.silu(F.conv1d(x, w.unsqueeze(1), b, padding=width - 1, groups=dim)[..., :seqlen])
out = causal_conv1d_fn(x.cuda(), w.cuda(), b.cuda(), activation="silu").cpu()
err = float((out - ref).abs().max())
print("GPU:", torch.cuda.get_device_name(), "causal_conv1d_fn", tuple(out.shape), "max |gpu-cpu| =", err)
assert err < 1e-4, err
PY
cat > "$work/run_gsplat.py" <<'PY'
import torch, gsplat
from gsplat.cuda import _backend
from gsplat.cuda._torch_impl import _quat_scale_to_covar_preci
print("module:", gsplat.__file__, "extension:", getattr(_backend._C, "__file__", _backend._C))
assert _backend._C is not None and _backend._C.__name__ == "gsplat.csrc", "the wheel's compiled extension did not import"
torch.manual_seed(0)
quats, scales = torch.randn(1000, 4), torch.rand(1000, 3) + 0.1
cg, pg = gsplat.quat_scale_to_covar_preci(quats.cuda(), scales.cuda())
cr, pr = _quat_scale_to_covar_preci(quats, scales)
ec, ep = float((cg.cpu() - cr).abs().max()), float(((pg.cpu() - pr).abs() / pr.abs().clamp_min(1)).max())
print("GPU:", torch.cuda.get_device_name(), "quat_scale_to_covar_preci: max |covar gpu-cpu| =", ec, "max rel |preci gpu-cpu| =", ep)
assert ec < 1e-4 and ep < 1e-3, (ec, ep)
# One Gaussian straight ahead: the pixel under its centre is opacity * colour over a black background.
d = "cuda"
img, alpha, _ = gsplat.rasterization(
    torch.tensor([[0.0, 0.0, 5.0]], device=d), torch.tensor([[1.0, 0, 0, 0]], device=d),
    torch.full((1, 3), 0.5, device=d), torch.tensor([0.8], device=d), torch.tensor([[0.2, 0.6, 1.0]], device=d),
    torch.eye(4, device=d)[None], torch.tensor([[[64.0, 0, 32], [0, 64.0, 32], [0, 0, 1]]], device=d), 64, 64)
centre = img[0, 32, 32].cpu(); want = 0.8 * torch.tensor([0.2, 0.6, 1.0])
print("rasterization:", tuple(img.shape), "centre pixel", [round(v, 4) for v in centre.tolist()], "want", [round(v, 4) for v in want.tolist()])
assert float((centre - want).abs().max()) < 2e-2 and float(img[0, 0, 0].abs().max()) < 1e-3
PY
echo "== run $(basename "$whl") (nvcc hidden: no JIT fallback)"
py3=$(command -v python3); (cd "$work" && env PYTHONPATH="$s" CUDA_HOME=/nonexistent PATH=/usr/bin:/bin "$py3" "run_$proj.py"); rc=$?
echo "run rc=$rc"; exit $rc

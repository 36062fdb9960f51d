"""Does torch.utils.cpp_extension accept a provisioned toolkit? Builds and imports a CUDA
extension that includes the cuBLAS, cuSPARSE, cuSOLVER, cuRAND, cuFFT and NVTX headers and links
cuBLAS, with CUDA_HOME set to the toolkit (`buildrows toolkit install TRAIN --libraries`).
No GPU is needed: the extension is compiled, linked and imported, not run.

    CUDA_HOME=$(buildrows toolkit path 13.2) TORCH_CUDA_ARCH_LIST=9.0 \\
        python scripts/check_toolkit_torch.py BUILD_DIR

(needs torch, ninja and setuptools in that Python; torch's CUDA major must be the toolkit's).
"""

from __future__ import annotations

import sys
import time

from torch.utils import cpp_extension

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <cublas_v2.h>
#include <cusparse.h>
#include <cusolverDn.h>
#include <curand.h>
#include <cufft.h>
#include <nvtx3/nvToolsExt.h>
__global__ void add_one(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1.0f; }
void run(torch::Tensor x) {
  nvtxRangePushA("add_one");
  add_one<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), x.numel());
  nvtxRangePop();
}
"""


def main() -> int:
    print("CUDA_HOME as torch sees it:", cpp_extension.CUDA_HOME)
    start = time.perf_counter()
    module = cpp_extension.load_inline("buildrows_toolkit_check", cpp_sources="void run(torch::Tensor x);",
                                       cuda_sources=CUDA_SOURCE, functions=["run"], extra_ldflags=["-lcublas"],
                                       verbose=True, build_directory=sys.argv[1])
    print(f"built and imported {module.__file__} in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

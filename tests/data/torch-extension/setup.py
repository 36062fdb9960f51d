"""A small PyTorch C++/CUDA extension in pytorch/extension-cpp's shape (one op, `mymuladd`, with a
CPU kernel and, on CUDA rows, a CUDA kernel), for issue 35's three-way comparison: the same row
built by `buildrows build`, through the CI path and with `--container`."""

import glob
import os

from setuptools import find_packages, setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

# buildrows sets FORCE_CUDA (the policy's env-switches): 1 on CUDA rows, 0 on CPU rows.
use_cuda = os.environ.get("FORCE_CUDA", "0") == "1"
sources = sorted(glob.glob("csrc/*.cpp")) + (sorted(glob.glob("csrc/cuda/*.cu")) if use_cuda else [])
extension = CUDAExtension if use_cuda else CppExtension
extra = {"cxx": ["-O2"], "nvcc": ["-O2"]} if use_cuda else {"cxx": ["-O2"]}

setup(
    name="extension_mini",
    version="0.1.0",
    packages=find_packages(),
    ext_modules=[extension("extension_mini._C", sources, extra_compile_args=extra)],
    install_requires=["torch"],
    cmdclass={"build_ext": BuildExtension},
)

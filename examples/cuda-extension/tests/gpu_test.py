"""The example's GPU test: the installed wheel adds two vectors on the GPU.

The rendered workflow's GPU job ([ci.gpu-test]) runs it on a GPU runner after installing the wheel
the build job uploaded for its train. Without a GPU the kernel call raises CUDA's own error, and
this exits 1 saying so.
"""

from __future__ import annotations

import sys

import cuda_extension


def main() -> int:
    print(f"cuda_extension from {cuda_extension.__file__}: built_with_cuda={cuda_extension.built_with_cuda}, "
          f"device code for {cuda_extension.cuda_architectures}")
    if not cuda_extension.built_with_cuda:
        print("gpu test: this wheel was built without CUDA", file=sys.stderr)
        return 1
    if not cuda_extension.cuda_available():
        print(f"gpu test: no usable GPU: {cuda_extension.cuda_status()}", file=sys.stderr)
        return 1
    got = cuda_extension.add([1.0, 2.0, 3.0], [10.0, 20.0, 30.0])
    if list(got) != [11.0, 22.0, 33.0]:
        print(f"gpu test: add gave {list(got)}", file=sys.stderr)
        return 1
    print("gpu test: add ran on the GPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""buildrows' example: element-wise vector add, on the GPU in a CUDA build.

``add(a, b)`` runs the CUDA kernel in a CUDA wheel and raises ``RuntimeError`` with CUDA's own
error string when it cannot (no GPU, or no device code for this GPU: "no kernel image is
available for execution on the device"). Only the CPU wheel adds on the CPU.
"""

from __future__ import annotations

from cuda_extension import _core
from cuda_extension._core import add, cuda_architectures, cuda_available, cuda_status

built_with_cuda: bool = bool(_core.built_with_cuda)

__all__ = ["add", "built_with_cuda", "cuda_architectures", "cuda_available", "cuda_status"]

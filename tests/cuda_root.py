"""A CUDA root a PyTorch extension builds against, assembled from NVIDIA's PyPI packages.

torch's CUDA wheels install the libraries with their headers under ``site-packages/nvidia/cu13``
(cuBLAS, cuSPARSE, cuSOLVER, ...); ``nvidia-cuda-nvcc``/``-crt``/``nvvm``/``cccl`` add nvcc to the
same tree. What the tree lacks for ``torch.utils.cpp_extension`` is a root whose ``bin/nvcc`` is
the real binary (nvcc derives its root from its own location) and the unversioned
``libcudart.so`` that ``-lcudart`` links. This builds exactly that, by hard links and symlinks,
into a directory of the test's choosing. (`buildrows toolkit`, issue 12, does this for users.)
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path


def nvidia_tree(major: int = 13) -> Path | None:
    """site-packages/nvidia/cuXX of this interpreter, when it holds nvcc and the library headers."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        tree = Path(root) / f"cu{major}"
        if (tree / "bin" / "nvcc").is_file() and (tree / "include" / "cusparse.h").is_file():
            return tree
    return None


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def assemble(tree: Path, dest: Path) -> Path:
    """A CUDA root at dest: bin/ (nvcc and friends as real files), include/, nvvm/ and lib64/ with
    libcudart.so. Idempotent; returns dest."""
    if (dest / "lib64" / "libcudart.so").exists():
        return dest
    (dest / "bin").mkdir(parents=True, exist_ok=True)
    for f in (tree / "bin").iterdir():
        if f.is_file():
            _link_or_copy(f, dest / "bin" / f.name)
        elif f.is_dir():
            (dest / "bin" / f.name).symlink_to(f, target_is_directory=True)
    for name in ("include", "nvvm"):
        (dest / name).symlink_to(tree / name, target_is_directory=True)
    lib = dest / "lib64"
    lib.mkdir()
    for f in (tree / "lib").iterdir():
        (lib / f.name).symlink_to(f)
    runtime = sorted(tree.glob("lib/libcudart.so.*"))[0]
    (lib / "libcudart.so").symlink_to(runtime)
    return dest

"""Doctor's findings from what a project's sources say the build will do, before it runs.

Round 4 (issue 40) met builds that failed, or built the wrong wheel, on things a reader of the
sources could know: a setup.py whose `bdist_wheel` downloads a prebuilt wheel unless an
environment variable says otherwise (causal-conv1d 1.7.0: CAUSAL_CONV1D_FORCE_BUILD=TRUE); a
hard-coded `-gencode` list, which makes torch.utils.cpp_extension ignore TORCH_CUDA_ARCH_LIST, that
disagrees with the row's list (found by the check after a 21-minute compile); a CPU row of a
project that builds CUDA whenever torch sees a GPU (torch-harmonics 0.8.0), on a machine with
one; and torch headers that include the CUDA libraries' headers (`ATen/cuda/CUDAUtils.h` ->
`CUDAContext.h` -> cusparse.h), which `library_header_use` now recognises (TORCH_LIBRARY_HEADERS).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from buildrows.build.findings import Finding
from buildrows.policy.model import Policy, Row
from buildrows.policy.switches import SetupSources, read_setup_py

#: torch headers that include cublas_v2.h, cusparse.h, cusolverDn.h or cublasLt.h, directly or through
#: each other (read from torch 2.14.1's include/; hip-only ones left out). A torch extension that
#: includes any of them needs those headers in the row's CUDA root.
TORCH_LIBRARY_HEADERS = (
    "ATen/cuda/ApplyGridUtils.cuh", "ATen/cuda/CUDAApplyUtils.cuh", "ATen/cuda/CUDABlas.h",
    "ATen/cuda/CUDAContext.h", "ATen/cuda/CUDAContextLight.h", "ATen/cuda/CUDADevice.h", "ATen/cuda/CUDAEvent.h",
    "ATen/cuda/CUDAGraphsUtils.cuh", "ATen/cuda/CUDASparse.h", "ATen/cuda/CUDASparseBlas.h",
    "ATen/cuda/CUDASparseDescriptors.h", "ATen/cuda/CUDAUtils.h", "ATen/cuda/Exceptions.h",
    "ATen/cuda/cub-RadixSortPairs.cuh", "ATen/cuda/cub.cuh", "ATen/cuda/detail/CublasLtUtils.h",
    "ATen/cuda/jiterator_impl.h", "ATen/cuda/tunable/GemmCommon.h", "ATen/cuda/tunable/GemmCublaslt.h",
    "ATen/cuda/tunable/TunableGemm.h", "ATen/cudnn/Descriptors.h", "ATen/cudnn/Utils.h",
    "ATen/native/cuda/CUDAJitLoops.cuh", "ATen/native/cuda/CUDALoops.cuh", "ATen/native/cuda/CuFFTPlanCache.h",
    "ATen/native/cuda/DistributionTemplates.h", "ATen/native/cuda/EmbeddingBackwardKernel.cuh",
    "ATen/native/cuda/MiscUtils.h", "ATen/native/cuda/MultiTensorApply.cuh", "ATen/native/cuda/Normalization.cuh",
    "ATen/native/cuda/Reduce.cuh", "ATen/native/cuda/ScanUtils.cuh", "ATen/native/cuda/SortUtils.cuh",
    "ATen/native/cuda/im2col.cuh", "ATen/native/cuda/vol2col.cuh",
    "torch/csrc/cuda/Event.h", "torch/csrc/cuda/THCP.h", "torch/csrc/cuda/comm.h", "torch/csrc/cuda/nccl.h",
    "torch/csrc/jit/cuda/cuda.h",
)

#: Includes that pull in the CUDA libraries' headers: the libraries' own, and TORCH_LIBRARY_HEADERS.
LIBRARY_INCLUDE = re.compile(
    r'^\s*#\s*include\s*[<"]((?:cublas|cusparse|cusolver)[^>"]*|'
    + "|".join(re.escape(h) for h in TORCH_LIBRARY_HEADERS) + r')[>"]', re.MULTILINE)

#: Where a GPU shows itself to torch on Linux: the driver's device nodes.
_GPU_DEVICES = ("/dev/nvidiactl", "/dev/nvidia0")


def machine_has_gpu() -> str | None:
    """The device node that shows this machine has an NVIDIA GPU torch can see, or None."""
    return next((d for d in _GPU_DEVICES if os.path.exists(d)), None)


def source_findings(policy: Policy, row: Row, project: Path, env: Mapping[str, str], *,
                    gpu: str | None = None, sources: SetupSources | None = None) -> list[Finding]:
    """What the project's setup.py says the row's build will do that stops it or builds another
    wheel. `gpu`: the device node of this machine's GPU (`machine_has_gpu()`), given by tests."""
    if not (project / "setup.py").is_file():
        return []
    sources = sources or read_setup_py(project)
    given = {**env, **dict(row.switches)}
    out: list[Finding] = []
    download = download_finding(sources, given, row)
    if download is not None:
        out.append(download)
    if row.cuda is None and sources.detects_gpu is not None:
        out.append(gpu_finding(sources, given, row, gpu))
    if row.cuda is not None and sources.gencode:
        out.append(gencode_finding(sources, row))
    threads = threads_finding(sources, given, row)
    if threads is not None:
        out.append(threads)
    return out


def threads_finding(sources: SetupSources, given: Mapping[str, str], row: Row) -> Finding | None:
    """A setup.py that passes nvcc `--threads N` for more than N architectures: nvcc compiles each
    source N architectures at a time. causal-conv1d 1.7.0 (--threads 4, nine hard-coded
    architectures): its backward kernel was still compiling after 9.5 minutes on 16 cores."""
    n = sources.nvcc_threads
    if row.cuda is None or n is None or n == 0 or "--threads" in given.get("NVCC_APPEND_FLAGS", ""):
        return None
    archs = row.archs
    count = (len(set(sources.gencode)) if sources.gencode
             else len({a.number for a in archs.archs} | {a.number for a in archs.ptx}) if archs is not None else 0)
    if count <= n:
        return None
    return Finding("nvcc-threads", "note", f"setup.py passes nvcc --threads {n} ({sources.nvcc_threads_where}) for "
                   f"{count} architectures: nvcc compiles each source for {n} of them at a time",
                   'NVCC_APPEND_FLAGS = "--threads 0" in [project.cuda-env] (nvcc keeps the last --threads; 0: '
                   "as many as the CPUs) compiles them all at once; the wheel is the same")


def download_finding(sources: SetupSources, given: Mapping[str, str], row: Row) -> Finding | None:
    """A setup.py that downloads (a prebuilt wheel, in bdist_wheel) unless a variable says otherwise."""
    if sources.downloads is None:
        return None
    force = sources.force_build
    if force is None:
        return Finding("download", "note", f"setup.py downloads while it builds ({sources.downloads}): a builder "
                       "without network access fails there, and what it fetches is not built by this row",
                       "read the setup.py for the variable that stops it, and set it in [project] cpu-env / cuda-env")
    value = given.get(force.name)
    on = value is not None and (value.strip().upper() == force.on.upper() if not force.truthiness else bool(value))
    if on:
        return Finding("download", "ok", f"setup.py would download a prebuilt wheel ({sources.downloads}); "
                       f"{force.name}={value} makes it build this row instead")
    key = "cuda-env" if row.cuda is not None else "cpu-env"
    return Finding("download", "refused", f"setup.py's bdist_wheel downloads a prebuilt wheel ({sources.downloads}) "
                   f"unless {force.name}={force.on} ({force.where}): the row would publish a wheel it did not build "
                   "(or stop, without network access)",
                   f"set it for the row: [project.{key}] {force.name} = \"{force.on}\" (buildrows init writes it)")


def gpu_finding(sources: SetupSources, given: Mapping[str, str], row: Row, gpu: str | None) -> Finding:
    """A CPU row of a setup.py that builds CUDA whenever torch sees a GPU: hidden, or this machine has none."""
    hidden = "CUDA_VISIBLE_DEVICES" in given and not given["CUDA_VISIBLE_DEVICES"].strip()
    if hidden:
        return Finding("GPU", "ok", f"setup.py builds CUDA whenever torch sees a GPU ({sources.detects_gpu}); "
                       "CUDA_VISIBLE_DEVICES=\"\" hides it from this CPU row")
    fix = "[project.cpu-env] CUDA_VISIBLE_DEVICES = \"\" hides the GPU from the CPU rows (buildrows init writes it)"
    if gpu is not None:
        return Finding("GPU", "refused", f"setup.py builds CUDA whenever torch sees a GPU ({sources.detects_gpu}), "
                       f"and this machine has one ({gpu}): the CPU row would compile the CUDA kernels into its wheel",
                       fix)
    return Finding("GPU", "note", f"setup.py builds CUDA whenever torch sees a GPU ({sources.detects_gpu}); this "
                   "machine has none, but a builder with one would put CUDA into this CPU row's wheel", fix)


def _arch_number(sm: str) -> int:
    return int(re.sub(r"\D", "", sm))


def gencode_finding(sources: SetupSources, row: Row) -> Finding:
    """A setup.py that hard-codes its -gencode list: torch.utils.cpp_extension then adds none from
    TORCH_CUDA_ARCH_LIST, so the wheel carries that list, whatever the row's is."""
    archs = row.archs
    wanted = sorted({a.number for a in archs.archs}) if archs is not None else []
    hard = sorted({_arch_number(s) for s in sources.gencode})
    listed = " ".join(f"{n // 10}.{n % 10}" for n in hard)
    if set(wanted) <= set(hard):
        extra = sorted(set(hard) - set(wanted))
        more = (f"; it also compiles {' '.join(f'{n // 10}.{n % 10}' for n in extra)}, which the row's list "
                "does not name (the check accepts more cubins)") if extra else ""
        return Finding("gencode", "ok", f"setup.py hard-codes -gencode for {listed} ({sources.gencode_where}), "
                       f"ignoring TORCH_CUDA_ARCH_LIST: the row's cubins are among them{more}")
    missing = sorted(set(wanted) - set(hard))
    return Finding("gencode", "refused", f"setup.py hard-codes -gencode for {listed} ({sources.gencode_where}), so "
                   "torch.utils.cpp_extension ignores TORCH_CUDA_ARCH_LIST; the row's list also asks for "
                   f"{' '.join(f'{n // 10}.{n % 10}' for n in missing)}, which the wheel would lack, and the check "
                   "would fail it after the whole compile",
                   f"make the row's archs the list the setup.py compiles (archs = \"{listed}\", ptx = \"none\" in "
                   f"[[platforms.{row.platform}.cuda]]), or patch the setup.py to read TORCH_CUDA_ARCH_LIST")

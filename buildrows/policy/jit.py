"""The `jit` statement of a CUDA major's runtime table, checked at load: a wheel whose kernels are
compiled at run time names the run-time compilers it needs (NVRTC, NVVM, nvJitLink), by soname or
NVIDIA package, with its reason. What they mean for a wheel is judged by buildrows.check.jit."""

from __future__ import annotations

import re
from typing import Final

from buildrows.policy.problems import PolicyProblems

__all__ = ["JIT_SONAME", "jit_fits"]

#: A run-time compiler's soname with its major: NVRTC, NVVM (NVIDIA's LLVM-based compiler), nvJitLink.
JIT_SONAME: Final = re.compile(r"^lib(?:nvrtc|nvvm|nvJitLink)\.so\.\d+$")
_PACKAGE: Final = re.compile(r"^nvidia-[a-z0-9][a-z0-9._-]*$")


def jit_fits(problems: PolicyProblems, path: tuple[str | int, ...], value: object, reason: str) -> bool:
    """Whether `[cuda.runtime.N] jit` is a list of compilers with its reason; one problem per mistake."""
    ok = True
    entries = value if isinstance(value, list) else []  # the schema reports a value of another type
    if not entries:
        problems.problem((*path, "jit"), "jit names no run-time compiler: a wheel whose kernels are compiled at run "
                                         "time needs one, and the check holds the wheel to it",
                         hint="name the compilers its JIT loads, e.g. jit = [\"libnvvm.so.4\", \"libnvJitLink.so.13\"] "
                              "(or their packages: \"nvidia-nvvm\", \"nvidia-nvjitlink\")")
        ok = False
    for i, entry in enumerate(entries):
        text = str(entry)
        if JIT_SONAME.match(text) or _PACKAGE.match(text):
            continue
        problems.problem((*path, "jit", i), f"{text!r} is not a run-time compiler: jit names NVRTC, NVVM or nvJitLink "
                                            "by soname with its major, or the NVIDIA package that carries one",
                         hint="write e.g. \"libnvrtc.so.13\", \"libnvvm.so.4\", \"libnvJitLink.so.13\" or "
                              "\"nvidia-cuda-nvrtc\"; other libraries the JIT dlopens go in [[check.libraries]] dlopens")
        ok = False
    if not reason:
        problems.problem((*path, "reason"), "jit needs a reason: the check then holds no library to the row's list, "
                                            "so the policy says how the kernels come",
                         hint=f"add reason = \"...\" under [{problems.key(*path)}], e.g. \"kernels are compiled at "
                              "run time with NVVM and linked with nvJitLink\"")
        ok = False
    return ok

"""What a project promises about its wheel beyond the defaults (SPEC §8, real projects).

Pure judgements over what the reader returns (member names, DT_NEEDED / imports, RPATH entries,
machines): the files that must ship, the libraries that must link no CUDA library, RPATH entries
kept on purpose, and every binary's machine against the wheel's platform tag.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from typing import Final

from buildrows.binaries.wheelread import LibraryInfo
from buildrows.policy.model import FileRule, RpathException

__all__ = ["CUDA_LIBRARY", "check_no_cuda", "check_required", "machine_of_platform_tag", "rpath_exception"]

# NVIDIA's CUDA libraries as a binary names them: the runtime, the driver, the math and
# communication libraries. Matched on the whole name, so libcurl or libcups never count.
CUDA_LIBRARY: Final = re.compile(
    r"^(?:lib(?:cuda|cudart|cublas|cublasLt|cufft|cufftw|curand|cusolver|cusolverMg|cusparse|cusparseLt|"
    r"nvrtc|nvrtc-builtins|nvJitLink|nvToolsExt|nvtx3interop|cupti|cudnn\w*|nccl|nvshmem\w*|cufile|npp\w*|"
    r"nvjpeg)\.so(?:\.[\d.]+)?"
    r"|(?:nvcuda|nvcudart_hybrid64|cudart(?:32|64)_\d+|cublas(?:Lt)?64_\d+|cufft(?:w)?64_\d+|curand64_\d+|"
    r"cusolver(?:Mg)?64_\d+|cusparse64_\d+|nvrtc64_\w+|nvrtc-builtins64_\w+|nvJitLink_\w+|cudnn\w*|"
    r"nvToolsExt64_\w+|cupti64_\w+|npp\w+64_\d+|nvjpeg64_\d+)\.dll)$",
    re.IGNORECASE,
)

_MACHINE_OF_TAG: Final = (
    (re.compile(r"(?:^|_)(x86_64|amd64)$"), "x86_64"),
    (re.compile(r"(?:^|_)(aarch64|arm64)$"), "aarch64"),
    (re.compile(r"(?:^|_)(i686|i386|win32)$"), "i386"),
    (re.compile(r"(?:^|_)(ppc64le|ppc64)$"), "ppc64"),
    (re.compile(r"(?:^|_)s390x$"), "s390x"),
    (re.compile(r"(?:^|_)(armv7l)$"), "arm"),
)


def machine_of_platform_tag(tag: str) -> str | None:
    """The machine a platform tag names, in binfmt's vocabulary (win_amd64 -> x86_64)."""
    for pattern, machine in _MACHINE_OF_TAG:
        if pattern.search(tag):
            return machine
    return None


def _matches(path: str, globs: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(path, g) for g in globs)


def rpath_exception(exceptions: Sequence[RpathException], library: str, entry: str,
                    resolved: str | None) -> RpathException | None:
    """The policy's exception that accepts `entry` of `library` (landing at `resolved`), if any."""
    spelled = entry.replace("${ORIGIN}", "$ORIGIN")
    for exc in exceptions:
        if exc.libraries and not _matches(library, exc.libraries):
            continue
        if exc.entry is not None and fnmatch.fnmatchcase(spelled, exc.entry.replace("${ORIGIN}", "$ORIGIN")):
            return exc
        if exc.reaches is not None and resolved is not None and (
                resolved == exc.reaches or fnmatch.fnmatchcase(resolved, exc.reaches)):
            return exc
    return None


def check_required(rules: Sequence[FileRule], members: Sequence[str]) -> tuple[bool, list[str]]:
    """Every glob of every rule matches at least one member."""
    missing: list[str] = []
    ships: list[str] = []
    for rule in rules:
        for glob in rule.files:
            hits = [m for m in members if fnmatch.fnmatchcase(m, glob)]
            if not hits:
                missing.append(f"missing {glob}: the policy requires it ({rule.reason}) [{rule.source}]")
            else:
                ships.append(f"{glob}: ships" + (f" ({', '.join(hits[:3])}{' and more' if len(hits) > 3 else ''})"
                                                 if hits != [glob] else ""))
    if missing:
        return False, missing + ships
    return True, [f"{len(ships)} required files ship", *ships]


def check_no_cuda(rules: Sequence[FileRule], libraries: Sequence[LibraryInfo]) -> tuple[bool, list[str]]:
    """The libraries each rule names (at least one per glob) link no CUDA library beyond `allow`."""
    details: list[str] = []
    bad: list[str] = []
    for rule in rules:
        allow = {a.lower() for a in rule.allow}
        for glob in rule.files:
            hits = [lib for lib in libraries if fnmatch.fnmatchcase(lib.path, glob)]
            if not hits:
                bad.append(f"{glob} matches no shipped library, so nothing was inspected "
                           f"(the policy names it because {rule.reason}) [{rule.source}]")
                continue
            for lib in hits:
                links = [n for n in (*lib.needed, *lib.imports, *lib.delay_imports)
                         if CUDA_LIBRARY.match(n) and n.lower() not in allow]
                if links:
                    bad.append(f"{lib.path} links {', '.join(links)}, but must link no CUDA library: {rule.reason} "
                               f"[{rule.source}]")
                else:
                    linked = [n for n in (*lib.needed, *lib.imports, *lib.delay_imports) if n.lower() in allow]
                    details.append(f"{lib.path}: no CUDA library" + (f" (only {', '.join(linked)}, allowed)" if linked else ""))
    return not bad, bad + details

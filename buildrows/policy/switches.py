"""Read a project's own CUDA switches from its sources, wherever they are, without running anything.

A setup.py is parsed with `ast`: every `os.environ.get("X")`, `os.getenv("X")`, `os.environ["X"]`
and `"X" in os.environ` is a variable it reads, and how the value is used says what turns it on
(`== "TRUE"`: the string TRUE; `in ("1", "ON")`: the first; `int(...)` or `== "1"`: 1; used as a truth
value: any non-empty string). A name that speaks of CUDA or the GPU is a CUDA switch; one that
says no/skip/disable CUDA, or CPU only, means CPU (round 4: torch-harmonics 0.8.0's
FORCE_CUDA_EXTENSION, gsplat 1.5.3's BUILD_NO_CUDA, causal-conv1d 1.7.0's
CAUSAL_CONV1D_SKIP_CUDA_BUILD compared with "TRUE"). A `<PROJECT>_FORCE_BUILD` is not a CUDA
switch: it is what stops a `bdist_wheel` that downloads a prebuilt wheel. The same parse finds
`torch.cuda.is_available()` (CUDA whenever torch sees a GPU), the downloads, a hard-coded
`-gencode` list, and whether the CPU build is a pure-Python wheel whose package compiles its
kernels at run time (`torch.utils.cpp_extension.load`).

CMake options are read in every file a configure reaches (`add_subdirectory`, `include`):
llama-cpp-python 0.3.x declares `option(GGML_CUDA ... OFF)` in vendor/llama.cpp/ggml.
"""

from __future__ import annotations

import ast
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

#: Names that are about CUDA without being a switch (where it is, which archs, which version).
_NOT_A_SWITCH = re.compile(r"(HOME|PATH|ROOT|DIR|ARCH|ARCHS|ARCH_LIST|VERSION|VISIBLE_DEVICES|FLAGS|CXX|CC|"
                           r"COMPILER|NVCC|LOCAL_VERSION|DEBUG|PROFILE|JOBS|LIBRARY|LIB|INCLUDE)$")
_CUDA_WORD = re.compile(r"(^|_)(CUDA|GPU|CUDA_EXTENSION|CUDA_BUILD|CUDA_EXT)(_|$)")
_CPU_MEANING = re.compile(r"(^|_)(NO|SKIP|DISABLE|WITHOUT)_(CUDA|GPU)|(^|_)(CPU_ONLY|ONLY_CPU|FORCE_CPU|NO_CUDA)(_|$)|"
                          r"(CUDA|GPU)_(DISABLE|DISABLED|OFF)$")
_CPU_NAMES = ("FORCE_ONLY_CPU", "FORCE_CPU", "CPU_ONLY", "ONLY_CPU")
_FORCE_BUILD = re.compile(r"(^|_)(FORCE_BUILD|BUILD_FROM_SOURCE|NO_PREBUILT|SKIP_DOWNLOAD|NO_DOWNLOAD)$")
_DOWNLOAD_CALLS = ("urlretrieve", "urlopen", "requests.get", "request.urlopen", "wget.download")
_GENCODE = re.compile(r"(?:arch=)?compute_(\d+)[a-z]?,\s*code=\[?(?:sm|compute)_(\d+)[a-z]?")
_TRUE_WORDS = ("1", "TRUE", "ON", "YES", "Y")


@dataclass(frozen=True)
class EnvSwitch:
    """An environment variable a setup.py reads to turn CUDA on (or, `cpu`, off), and its on-value."""

    name: str
    on: str  # the value that turns it on, as the setup.py compares it ("1", "TRUE")
    cpu: bool  # it means CPU: on for CPU rows (BUILD_NO_CUDA, SKIP_CUDA_BUILD)
    where: str  # setup.py:LINE
    truthiness: bool = False  # read as a truth value: "0" would be on, so the off value is empty

    @property
    def entry(self) -> str:
        """The switch as `[project] env-switches` writes it: NAME (1/0), !NAME, NAME=VALUE (off: empty)."""
        bang = "!" if self.cpu else ""
        if self.on == "1" and not self.truthiness:
            return bang + self.name
        return f"{bang}{self.name}={self.on}"


@dataclass(frozen=True)
class SetupSources:
    """What a setup.py says about CUDA, read without running it."""

    switches: tuple[EnvSwitch, ...] = ()
    force_build: EnvSwitch | None = None  # the variable that stops a download of a prebuilt wheel
    downloads: str | None = None  # where it downloads (setup.py:LINE urlretrieve)
    detects_gpu: str | None = None  # where it calls torch.cuda.is_available()
    gencode: tuple[str, ...] = ()  # the sm_XX its hard-coded -gencode flags name, in order
    gencode_where: str | None = None
    cuda_extension: bool = False  # it builds a CUDAExtension
    cpp_extension: bool = False  # it builds a CppExtension (a CPU build with compiled code)
    #: Where the package compiles its kernels at run time (torch.utils.cpp_extension.load), for a
    #: setup.py whose only extension is CUDA: its CPU wheel is pure Python (gsplat 1.5.3).
    jit: str | None = None
    read: tuple[str, ...] = field(default=())  # every variable it reads
    #: Where it runs or looks up nvcc itself (torchsort 0.1.10's `call(["nvcc"])`): CUDA whenever
    #: the builder has nvcc on PATH, which no switch turns off.
    detects_nvcc: str | None = None
    #: The `--threads N` it passes nvcc, and where (causal-conv1d 1.7.0's `["--threads", "4"]`): nvcc
    #: compiles each source for N of its architectures at a time.
    nvcc_threads: int | None = None
    nvcc_threads_where: str | None = None


def _const_str(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _env_read(node: ast.AST) -> str | None:
    """The variable a node reads: os.environ.get("X"), os.getenv("X"), os.environ["X"], environ.get."""
    if isinstance(node, ast.Call) and node.args:
        f = node.func
        name = _const_str(node.args[0])
        if name is None:
            return None
        if isinstance(f, ast.Attribute) and f.attr == "getenv":
            return name
        if isinstance(f, ast.Name) and f.id == "getenv":
            return name
        if isinstance(f, ast.Attribute) and f.attr == "get" and _is_environ(f.value):
            return name
    if isinstance(node, ast.Subscript) and _is_environ(node.value):
        return _const_str(node.slice)
    return None


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (isinstance(node, ast.Name) and node.id == "environ")


def _on_value(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> tuple[str, bool]:
    """How the read value is used: (the on-value, read as a truth value)."""
    cur = node
    parent = parents.get(cur)
    # .upper() / .lower() / .strip() around it: the comparison's value is what counts.
    while isinstance(parent, ast.Attribute) and parent.attr in ("upper", "lower", "strip", "casefold"):
        call = parents.get(parent)
        if not isinstance(call, ast.Call):
            break
        cur, parent = call, parents.get(call)
    if isinstance(parent, ast.Compare) and len(parent.ops) == 1:
        other = parent.comparators[0] if parent.left is cur else parent.left
        op = parent.ops[0]
        if isinstance(op, (ast.Eq, ast.NotEq)) and _const_str(other) is not None:
            value = _const_str(other) or ""
            return (value if isinstance(op, ast.Eq) else "1"), False
        if isinstance(op, ast.In) and isinstance(other, (ast.Tuple, ast.List, ast.Set)):
            values = [v for v in (_const_str(e) for e in other.elts) if v is not None]
            upper = [v for v in values if v.upper() in _TRUE_WORDS]
            return (upper[0] if upper else (values[0] if values else "1")), False
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "int":
        return "1", False
    return "1", True


def _classify(name: str) -> tuple[bool, bool] | None:
    """(a CUDA switch, it means CPU) for a variable's name; None for one that is no CUDA switch."""
    if name in _CPU_NAMES:
        return True, True
    # "CUDA only" (FORCE_ONLY_CUDA) is never turned on: upstream's CUDA wheel ships the CPU modules
    # too, which it would drop (issue 28, torch_spline_conv).
    if _NOT_A_SWITCH.search(name) or _FORCE_BUILD.search(name) or re.search(r"ONLY_CUDA|CUDA_ONLY", name):
        return None
    if _CPU_MEANING.search(name):
        return True, True
    if _CUDA_WORD.search(name):
        return True, False
    return None


def read_setup_py(project: Path) -> SetupSources:
    """What the project's setup.py says about CUDA (empty when it has none, or it does not parse)."""
    path = project / "setup.py"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
        tree = ast.parse(text)
    except (OSError, SyntaxError, ValueError):
        return SetupSources()
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    switches: dict[str, EnvSwitch] = {}
    force_build: EnvSwitch | None = None
    read: list[str] = []
    downloads = detects_gpu = gencode_where = detects_nvcc = None
    gencode: list[str] = []
    cuda_ext = cpp_ext = False
    nvcc_threads: int | None = None
    threads_where: str | None = None
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        name = _env_read(node)
        if name is not None:
            if name not in read:
                read.append(name)
            on, truth = _on_value(node, parents)
            if _FORCE_BUILD.search(name) and force_build is None:
                force_build = EnvSwitch(name, on, False, f"setup.py:{line}", truth)
            kind = _classify(name)
            if kind is not None and name not in switches and not _assigned_into(node, parents):
                switches[name] = EnvSwitch(name, on, kind[1], f"setup.py:{line}", truth)
        if isinstance(node, ast.Compare) and any(isinstance(o, ast.In) for o in node.ops):
            key = _const_str(node.left)
            if key is not None and any(_is_environ(c) for c in node.comparators):
                kind = _classify(key)
                if kind is not None and key not in switches:
                    switches[key] = EnvSwitch(key, "1", kind[1], f"setup.py:{line}", True)
        if isinstance(node, ast.Call):
            dotted = _dotted(node.func)
            if dotted.endswith("cuda.is_available") and detects_gpu is None:
                detects_gpu = f"setup.py:{line} {dotted}()"
            if downloads is None and (any(dotted.endswith(c) for c in _DOWNLOAD_CALLS)
                                      or (dotted in ("subprocess.run", "subprocess.check_call", "subprocess.call")
                                      and _runs_fetcher(node))):
                downloads = f"setup.py:{line} {dotted}"
            if detects_nvcc is None and _names_nvcc(node) and dotted.rsplit(".", 1)[-1] in _NVCC_CALLS:
                detects_nvcc = f"setup.py:{line} {dotted}(['nvcc'])"
            last = dotted.rsplit(".", 1)[-1]
            if last == "CUDAExtension":
                cuda_ext = True
            elif last == "CppExtension":
                cpp_ext = True
        threads = _threads_flag(node)
        if threads is not None and nvcc_threads is None:
            nvcc_threads, threads_where = threads, f"setup.py:{line}"
        value = _const_str(node)
        if value is not None:
            for m in _GENCODE.finditer(value):
                if f"sm_{m.group(2)}" not in gencode:
                    gencode.append(f"sm_{m.group(2)}")
                    gencode_where = gencode_where or f"setup.py:{line}"
    jit = _jit_load(project) if cuda_ext and not cpp_ext else None
    return SetupSources(tuple(switches.values()), force_build, downloads, detects_gpu, tuple(gencode),
                        gencode_where, cuda_ext, cpp_ext, jit, tuple(read), detects_nvcc,
                        nvcc_threads, threads_where)


_THREADS = re.compile(r"--threads[= ](\d+)$")


def _threads_flag(node: ast.AST) -> int | None:
    """N of an nvcc `--threads N` in a setup.py: "--threads=N" or "--threads N" as one string, or
    "--threads" followed by "N" in a list."""
    text = _const_str(node)
    if text is not None:
        m = _THREADS.match(text.strip())
        return int(m.group(1)) if m else None
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_const_str(e) for e in node.elts]
        for flag, value in itertools.pairwise(items):
            if flag == "--threads" and value is not None and value.isdigit():
                return int(value)
    return None


_NVCC_CALLS = ("call", "run", "check_call", "check_output", "Popen", "which", "find_executable")


def _names_nvcc(node: ast.Call) -> bool:
    """Whether a call's first argument is "nvcc", or a list starting with it."""
    first = node.args[0] if node.args else None
    if isinstance(first, (ast.List, ast.Tuple)) and first.elts:
        first = first.elts[0]
    return first is not None and _const_str(first) == "nvcc"


def _assigned_into(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """os.environ["X"] = ...: the setup.py sets it, it does not read it."""
    parent = parents.get(node)
    return isinstance(parent, ast.Assign) and node in parent.targets


def _dotted(node: ast.AST) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _runs_fetcher(node: ast.Call) -> bool:
    first = node.args[0] if node.args else None
    if isinstance(first, (ast.List, ast.Tuple)) and first.elts:
        return _const_str(first.elts[0]) in ("wget", "curl")
    return False


#: A run-time compile: cpp_extension.load(...), or load / load_inline / _jit_compile imported from it (gsplat 1.5.3).
_JIT = re.compile(r"cpp_extension\.(?:load|load_inline|_jit_compile)\s*\(|(?<![\w.])(?:_jit_compile|load_inline|load)\s*\(")


def _jit_load(project: Path, limit: int = 600) -> str | None:
    """Where the project's Python package compiles its extension at run time, or None."""
    seen = 0
    for path in sorted(project.rglob("*.py")):
        rel = path.relative_to(project)
        if rel.name == "setup.py" or any(p in ("build", "dist", "tests", "test", "examples", "docs") or p.startswith(".")
                                         for p in rel.parts[:-1]):
            continue
        seen += 1
        if seen > limit:
            break
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        m = _JIT.search(text) if "cpp_extension" in text else None
        if m:
            return f"{rel.as_posix()}:{text.count(chr(10), 0, m.start()) + 1}"
    return None

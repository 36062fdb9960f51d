"""The toolchain a row is built with: the CUDA compiler and its train, and the CMake generator.

Everything here is decided from an environment mapping (never `os.environ` directly) so that a
test can simulate a host - a Windows developer prompt included - with fake executables on a
temporary PATH. The only subprocess is `nvcc --version`. Imports stay light: the hook runs this.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path

from buildrows.errors import BadInput, Refused
from buildrows.frozen import Frozen, frozen_dataclass

# Host detection lives in buildrows.plan.host; re-exported for the many callers that import it from here.
from buildrows.plan.host import HOST_OS_VARIABLE as HOST_OS_VARIABLE
from buildrows.plan.host import HostOs as HostOs
from buildrows.plan.host import host_os as host_os
from buildrows.policy.model import Row
from buildrows.policy.trains import Train

#: `nvcc --version`'s release line (patterns here compile on first use: the hook starts on every CI job).
_RELEASE = r"release (\d+)\.(\d+), V(\d+(?:\.\d+)*)"
_NINJA_MULTI = "Ninja Multi-Config"
_NINJA = "Ninja"
#: The problem check_cuda_compiler reports when there is no nvcc at all (doctor adds how to get one).
NO_CUDA_COMPILER = "no nvcc"


def which(name: str, env: Mapping[str, str], host: HostOs) -> str | None:
    """Find an executable on env's PATH as the host would (`name` or `name.exe` on Windows)."""
    names = [name]
    if host == "windows" and not name.lower().endswith(".exe"):
        names = [name + ".exe", name]
    for d in env.get("PATH", "").split(os.pathsep):
        if not d:
            continue
        for n in names:
            p = os.path.join(d, n)
            if os.path.isfile(p) and (host == "windows" or os.access(p, os.X_OK)):
                return p
    return None


@frozen_dataclass(frozen=True, eq=False, repr=False)
class CudaCompiler(Frozen):
    """An nvcc, where it came from, and the train it reports."""

    path: str
    argv: tuple[str, ...]  # the command prefix: path plus any options CUDACXX carries
    source: str  # "CUDACXX", "CUDA_HOME", "CUDA_PATH" or "PATH"
    train: Train | None = None  # None until `nvcc --version` has been read
    version: str = ""  # the full version, e.g. 13.0.88
    #: The CUDA root nvcc itself uses (its TOP, symlinks resolved), asked of nvcc by read_train;
    #: None when nvcc did not say. /usr/local/bin/nvcc may be a wrapper whose parent is no toolkit.
    root: str | None = None

    @property
    def toolkit_root(self) -> str:
        """The toolkit directory: the root nvcc reports, else the parent of the real nvcc's bin/
        (symlinks resolved; a wrapper script's own location is never taken for the root)."""
        if self.root is not None:
            return self.root
        return str(Path(os.path.realpath(self.path)).parent.parent)

    def describe(self) -> str:
        what = f"CUDA {self.version or (self.train.dotted if self.train else '?')}"
        return f"{self.path} ({what}, found through {self.source})"


def locate_cuda_compiler(env: Mapping[str, str], host: HostOs | None = None) -> CudaCompiler | None:
    """The nvcc a build would use, without running it: CUDACXX, CUDA_HOME, CUDA_PATH, then PATH.

    CUDACXX may carry options (`nvcc -allow-unsupported-compiler`); they are kept in `argv`.
    A CUDACXX that names no executable is bad input: CMake would fail on it later.
    """
    host = host or host_os(env)
    exe = "nvcc.exe" if host == "windows" else "nvcc"
    cudacxx = env.get("CUDACXX", "").strip()
    if cudacxx:
        try:
            argv = shlex.split(cudacxx, posix=host != "windows")
        except ValueError as e:
            raise BadInput(f"CUDACXX={cudacxx!r} cannot be split into a command: {e}\n"
                           "    fix: quote the compiler path properly, or unset CUDACXX") from e
        path = argv[0].strip('"')
        found = path if os.path.isfile(path) else which(path, env, host)
        if found is None:
            raise BadInput(f"CUDACXX={cudacxx!r} names {path!r}, which does not exist\n"
                           "    fix: point CUDACXX at the row's nvcc, or unset it to use CUDA_HOME or PATH")
        return CudaCompiler(found, (found, *argv[1:]), "CUDACXX")
    on_path = which("nvcc", env, host)
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = env.get(var, "").strip()
        if root:
            cand = os.path.join(root, "bin", exe)
            if os.path.isfile(cand):
                return CudaCompiler(cand, (cand,), var)
            # Never fall through to another nvcc: torch.utils.cpp_extension and many setup.py
            # files read this variable and would build against a toolkit that is not there.
            raise BadInput(_no_nvcc_under(var, root, exe, on_path, env, host))
    found = on_path
    if found is not None:
        return CudaCompiler(found, (found,), "PATH")
    return None


def toolkit_root(nvcc: str, env: Mapping[str, str]) -> str | None:
    """The toolkit root an nvcc really uses, asked of nvcc itself (`--dryrun` prints `TOP=`), so a
    wrapper script (/usr/local/bin/nvcc exec'ing /usr/local/cuda-13.0/bin/nvcc) names the real root."""
    import subprocess

    try:
        proc = subprocess.run([nvcc, "--dryrun", "-x", "cu", "buildrows-probe.cu", "-E"], capture_output=True,
                              text=True, errors="replace", env=dict(env), timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"^#\$ TOP=(.+?)\s*$", proc.stdout + proc.stderr, re.MULTILINE)
    return os.path.normpath(m.group(1)) if m else None


def _no_nvcc_under(var: str, root: str, exe: str, on_path: str | None, env: Mapping[str, str], host: HostOs) -> str:
    """Why a CUDA_HOME/CUDA_PATH without nvcc is refused, and the assignment that fixes it."""
    what = f"{var}={root} has no {os.path.join('bin', exe)}"
    what += ": it is not a CUDA toolkit root" if os.path.isdir(root) else ": that directory does not exist"

    def set_cmd(value: str) -> str:
        return f"set {var}={value}" if host == "windows" else f"export {var}={shlex.quote(value)}"

    unset = f"set {var}=" if host == "windows" else f"unset {var}"
    real = toolkit_root(on_path, env) if on_path is not None else None
    if on_path is not None and real is not None:
        what += f" (the nvcc on PATH is {on_path}; buildrows does not silently use another toolkit than {var} names)"
        return f"{what}\n    fix: `{set_cmd(real)}` (the root of that nvcc), or `{unset}`"
    return (f"{what}\n    fix: `{set_cmd('/path/to/cuda')}` with the root that holds {os.path.join('bin', exe)} "
            f"(e.g. /usr/local/cuda), or `{unset}`")


#: What read_train learnt of an nvcc, by its command, its file and the variables nvcc reads: one
#: `build` of many rows asks each toolkit once (an nvcc replaced on disk has another file identity).
_TRAINS: dict[tuple[object, ...], tuple[Train, str, str | None]] = {}

#: The format of the answers kept on disk (the cache's `nvcc/` folder); another format is a miss.
ANSWER_FORMAT = 1


def _identity(compiler: CudaCompiler, env: Mapping[str, str]) -> tuple[object, ...] | None:
    try:
        st = os.stat(compiler.path)
    except OSError:
        return None
    variables = tuple(sorted((k, v) for k, v in env.items() if k == "PATH" or k.startswith(("NVCC_", "CUDA"))))
    return (compiler.argv, os.path.realpath(compiler.path), st.st_mtime_ns, st.st_size, variables)


def _real_nvcc(root: str | None, path: str) -> tuple[str, int, int] | None:
    """The file identity (path, size, mtime_ns) of the nvcc under the root nvcc reported: a wrapper
    script (/usr/local/bin/nvcc exec'ing a toolkit's nvcc) stays the same when that toolkit changes."""
    if root is None:
        return None
    real = os.path.join(root, "bin", os.path.basename(path))
    try:
        st = os.stat(real)
    except OSError:
        return None
    return (real, st.st_size, st.st_mtime_ns)


def _answer_file(ident: tuple[object, ...], env: Mapping[str, str]) -> tuple[Path, str]:
    """Where the answer for `ident` is kept, and the key the file must carry to be believed."""
    import zlib

    from buildrows.plan.provisioned import cache_root

    key = repr((ANSWER_FORMAT, ident))
    return cache_root(env) / "nvcc" / f"{zlib.crc32(key.encode('utf-8', 'surrogateescape')):08x}.json", key


def _read_answer(ident: tuple[object, ...], env: Mapping[str, str]) -> tuple[Train, str, str | None] | None:
    """The answer an earlier call kept on disk for this very nvcc, or None (absent, another nvcc,
    another format, unreadable or corrupt: the caller asks nvcc again and rewrites it)."""
    import json

    path, key = _answer_file(ident, env)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("format") != ANSWER_FORMAT or data.get("key") != key:
            return None
        major, minor = data["train"]
        version, root, real = data["version"], data["root"], data["real"]
        if not (isinstance(major, int) and isinstance(minor, int) and isinstance(version, str)
                and (root is None or isinstance(root, str))):
            return None
        if (real is None) != (root is None) or (real is not None and list(_real_nvcc(root, str(ident[1])) or ()) != real):
            return None  # the toolkit behind a wrapper changed (or vanished)
        return Train(major, minor), version, root
    except (OSError, ValueError, TypeError, KeyError, UnicodeError):
        return None


def _write_answer(ident: tuple[object, ...], env: Mapping[str, str], learnt: tuple[Train, str, str | None]) -> None:
    """Keep the answer for the next call (a new file replaces the old at once); a cache that
    cannot be written only costs the next call the two nvcc runs."""
    import json

    path, key = _answer_file(ident, env)
    train, version, root = learnt
    real = _real_nvcc(root, str(ident[1]))
    data = {"format": ANSWER_FORMAT, "key": key, "train": [train.major, train.minor], "version": version,
            "root": root, "real": list(real) if real is not None else None}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            tmp.unlink()


def read_train(compiler: CudaCompiler, env: Mapping[str, str]) -> CudaCompiler:
    """Run `nvcc --version` and return the compiler with its train; refuse one that does not run.

    The answer is kept in memory and on disk (the cache's `nvcc/` folder), keyed by nvcc's
    command, resolved path, size, mtime and the variables it reads, so `env` and `hook` (run on
    every CI job) do not run nvcc twice per call; an nvcc replaced or touched is asked again."""
    ident = _identity(compiler, env)
    known = _TRAINS.get(ident) if ident is not None else None
    if known is None and ident is not None:
        known = _read_answer(ident, env)
        if known is not None:
            _TRAINS[ident] = known
    if known is not None:
        return CudaCompiler(compiler.path, compiler.argv, compiler.source, *known)
    import subprocess

    argv = [*compiler.argv, "--version"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, env=dict(env), timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Refused(f"the CUDA compiler {compiler.path} (from {compiler.source}) does not run: {e}\n"
                      "    fix: repair or reinstall the toolkit, or point CUDA_HOME/CUDACXX at a working one") from e
    text = proc.stdout + proc.stderr
    m = re.search(_RELEASE, text)
    if proc.returncode != 0 or m is None:
        tail = text.strip().splitlines()[-1:] or ["(no output)"]
        raise Refused(f"the CUDA compiler {compiler.path} (from {compiler.source}) did not report its version: "
                      f"`{shlex.join(argv)}` exited {proc.returncode}: {tail[0]}\n"
                      "    fix: repair or reinstall the toolkit, or point CUDA_HOME/CUDACXX at a working one")
    learnt = (Train(int(m.group(1)), int(m.group(2))), m.group(3), ask_cuda_root(compiler.argv, env))
    if ident is not None:
        _TRAINS[ident] = learnt
        _write_answer(ident, env, learnt)
    return CudaCompiler(compiler.path, compiler.argv, compiler.source, *learnt)


_TOP = r"^#\$ TOP=(.+?)\s*$"


def ask_cuda_root(argv: tuple[str, ...], env: Mapping[str, str]) -> str | None:
    """The CUDA root this nvcc compiles with, asked of nvcc: `nvcc -v --dryrun` prints the
    variables it derived from its own location (`#$ TOP=/usr/local/cuda-13.0/bin/..`), through
    any wrapper script that execs it. The dry run writes nothing. None when nvcc does not say."""
    import subprocess

    probe = [*argv, "-v", "--dryrun", "-x", "cu", "-c", "buildrows-probe.cu", "-o", "buildrows-probe.o"]
    try:
        proc = subprocess.run(probe, capture_output=True, text=True, env=dict(env), timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(_TOP, proc.stdout + proc.stderr, re.MULTILINE)
    if m is not None:
        top = os.path.realpath(m.group(1).strip().strip('"'))
        return top if os.path.isdir(top) else None
    # The dry run also needs the host compiler; without one, nvcc's own rule still holds: TOP is
    # the parent of the directory of the nvcc executable itself, so only a real binary (symlinks
    # resolved, never a wrapper script) tells its root.
    real = os.path.realpath(argv[0])
    try:
        with open(real, "rb") as f:
            magic = f.read(4)
    except OSError:
        return None
    if magic == b"\x7fELF" or magic[:2] == b"MZ":
        return str(Path(real).parent.parent)
    return None


def find_cuda_compiler(env: Mapping[str, str], host: HostOs | None = None) -> CudaCompiler | None:
    """Locate nvcc and read its train; None when there is none anywhere."""
    found = locate_cuda_compiler(env, host)
    return read_train(found, env) if found is not None else None


@frozen_dataclass(frozen=True, eq=False, repr=False)
class GeneratorChoice(Frozen):
    """The CMake generator of a row on this host, why it was chosen, and what it fixes."""

    generator: str
    reason: str
    cache: tuple[tuple[str, str], ...] = ()  # compilers etc. the preset sets as cache variables
    toolset: str | None = None
    architecture: str | None = None
    #: Windows: the Visual Studio developer environment's version (VSCMD_VER, else VCToolsInstallDir),
    #: or "" when this is not one; the tools of ninja, clang-cl and cl not on PATH.
    developer_environment: str = ""
    missing_tools: tuple[str, ...] = ()

    @property
    def is_ninja(self) -> bool:
        return self.generator.startswith("Ninja")

    @property
    def multi_config(self) -> bool:
        """Whether outputs land under a per-configuration directory (Release/)."""
        return self.generator == _NINJA_MULTI or self.generator.startswith(("Visual Studio", "Xcode"))


def _windows_ninja_cache(row: Row) -> tuple[tuple[str, str], ...]:
    # Bare names, not paths: they are on PATH by construction, and a VS path has spaces that
    # CMAKE_ARGS (split on spaces by some setup.py files) cannot carry.
    cache = [("CMAKE_C_COMPILER", "clang-cl"), ("CMAKE_CXX_COMPILER", "clang-cl")]
    if row.is_cuda:
        cache.append(("CMAKE_CUDA_HOST_COMPILER", "cl"))
    return tuple(cache)


def _vs_generator(env: Mapping[str, str]) -> str:
    major = env.get("VisualStudioVersion", "17.0").split(".")[0]
    return {"16": "Visual Studio 16 2019", "18": "Visual Studio 18 2026"}.get(major, "Visual Studio 17 2022")


def choose_generator(row: Row, env: Mapping[str, str], host: HostOs | None = None) -> GeneratorChoice:
    """SPEC §5: the generator the policy fixes for the row's platform, else the host's default rule.

    Linux: single-config Ninja, the layout most packaging reads (ExecuTorch's setup.py strips the
    configuration directory on Linux; scikit-build-core and plain setup.py builds use one tree).
    Windows: Ninja Multi-Config with clang-cl (and nvcc with cl.exe as host) in a Visual Studio
    developer environment (VSCMD_VER or VCToolsInstallDir set, as vcvars sets them) with ninja,
    clang-cl and cl on PATH, otherwise the Visual Studio generator with the ClangCL toolset.
    Decided here only; doctor reports this choice."""
    host = host or host_os(env)
    fixed = row.generator
    if host != "windows":
        if fixed is not None:
            return GeneratorChoice(fixed, f"fixed by the policy ({row.generator_source})")
        return GeneratorChoice(_NINJA, "Linux default: single-config Ninja, one tree without a Release/ directory, "
                                       "the layout a project's own packaging reads unless its policy fixes another")
    vs = env.get("VSCMD_VER", "").strip() or env.get("VCToolsInstallDir", "").strip()
    missing = tuple(n for n in ("ninja", "clang-cl", "cl") if which(n, env, "windows") is None)
    if fixed is not None:
        why = f"fixed by the policy ({row.generator_source})"
        if fixed.startswith("Visual Studio"):
            return GeneratorChoice(fixed, f"{why}: with the ClangCL toolset", toolset="ClangCL", architecture="x64",
                                   developer_environment=vs)
        return GeneratorChoice(fixed, f"{why}: clang-cl for C/C++" + (", nvcc with cl.exe as its host compiler"
                                                                      if row.is_cuda else ""),
                               _windows_ninja_cache(row), developer_environment=vs,
                               missing_tools=missing if vs else ("a Visual Studio developer environment", *missing))
    if vs and not missing:
        return GeneratorChoice(
            _NINJA_MULTI,
            f"Visual Studio developer environment ({vs}) with ninja, clang-cl and cl on PATH: Ninja Multi-Config, "
            "clang-cl for C/C++" + (", nvcc with cl.exe as its host compiler" if row.is_cuda else ""),
            _windows_ninja_cache(row), developer_environment=vs)
    gen = _vs_generator(env)
    if not vs:
        why = "not a Visual Studio developer environment (neither VSCMD_VER nor VCToolsInstallDir is set)"
    else:
        why = f"Visual Studio developer environment ({vs}), but {', '.join(missing)} not on PATH"
    return GeneratorChoice(gen, f"{why}: {gen} with the ClangCL toolset", toolset="ClangCL", architecture="x64",
                           developer_environment=vs, missing_tools=missing)

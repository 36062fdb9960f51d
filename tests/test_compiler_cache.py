"""The compiler cache rows share: how ccache is configured and launched, and how its log is read."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from buildrows.build import compiler_cache as cc
from buildrows.build import drivers
from buildrows.policy.load import load_policy
from buildrows.render.presets import plan_row

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "cuda-extension"


def _cache(tmp_path: Path, cuda_files: tuple[str, ...] = ("/tk/bin/nvcc", "/tk/nvvm/bin/cicc")) -> cc.CompilerCache:
    return cc.CompilerCache("/venv/bin/ccache", tmp_path / "ccache", tmp_path / "project",
                            tmp_path / "ccache" / "stats" / "row.log", "buildrows-0123", cuda_files)


def test_launchers_cover_c_cxx_and_cuda_and_cuda_hashes_the_toolkit(tmp_path: Path) -> None:
    launchers = _cache(tmp_path).launchers()
    assert launchers["CMAKE_C_COMPILER_LAUNCHER"] == launchers["CMAKE_CXX_COMPILER_LAUNCHER"] == "/venv/bin/ccache"
    # A CMake list: ccache, then a command-line setting (outranks every file and variable).
    assert launchers["CMAKE_CUDA_COMPILER_LAUNCHER"] == (
        f"/venv/bin/ccache;extra_files_to_hash=/tk/bin/nvcc{os.pathsep}/tk/nvvm/bin/cicc")
    assert _cache(tmp_path, ()).launchers()["CMAKE_CUDA_COMPILER_LAUNCHER"] == "/venv/bin/ccache"


def test_environment_names_buildrows_config_and_the_rows_base_dir(tmp_path: Path) -> None:
    c = _cache(tmp_path)
    env = c.environment()
    assert env["CCACHE_CONFIGPATH"] == str(tmp_path / "ccache" / "buildrows-ccache.conf")
    assert env["CCACHE_DIR"] == str(tmp_path / "ccache")
    assert env["CCACHE_BASEDIR"] == str(tmp_path / "project")
    assert env["CCACHE_NAMESPACE"] == "buildrows-0123"
    assert env["CCACHE_STATSLOG"] == str(c.stats_log)
    assert "PYTORCH_NVCC" not in env
    # torch.utils.cpp_extension uses PYTORCH_NVCC verbatim in its ninja file.
    nvcc = c.environment("/tk/bin/nvcc")["PYTORCH_NVCC"]
    assert nvcc == f"/venv/bin/ccache extra_files_to_hash=/tk/bin/nvcc{os.pathsep}/tk/nvvm/bin/cicc /tk/bin/nvcc"


def test_on_windows_the_extra_files_go_through_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # ccache separates the files with `;` there, which would split the CMake launcher list.
    monkeypatch.setattr(os, "pathsep", ";")
    c = _cache(tmp_path, ("C:/tk/bin/nvcc.exe", "C:/tk/nvvm/bin/cicc.exe"))
    assert c.launchers()["CMAKE_CUDA_COMPILER_LAUNCHER"] == "/venv/bin/ccache"
    env = c.environment("C:/tk/bin/nvcc.exe")
    assert env["CCACHE_EXTRAFILES"] == "C:/tk/bin/nvcc.exe;C:/tk/nvvm/bin/cicc.exe"
    assert env["PYTORCH_NVCC"] == "/venv/bin/ccache C:/tk/bin/nvcc.exe"
    monkeypatch.setattr(os, "pathsep", ":")
    assert "CCACHE_EXTRAFILES" not in _cache(tmp_path).environment()


def test_the_users_ccache_variables_never_reach_the_build() -> None:
    env = {"CCACHE_SLOPPINESS": "time_macros", "CCACHE_NOHASHDIR": "1", "ccache_dir": "/x", "PATH": "/bin"}
    assert cc.without_ccache_settings(env) == {"PATH": "/bin"}


def test_namespace_changes_with_variables_ccache_does_not_hash() -> None:
    base = cc.namespace({"PATH": "/bin"})
    assert base == cc.namespace({"PATH": "/usr/bin"})  # PATH is not a hidden input
    assert base.startswith("buildrows-")
    for var in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN", "CPATH"):
        assert cc.namespace({var: "-DX=1"}) != base, var
    assert cc.namespace({"NVCC_APPEND_FLAGS": ""}) != base  # set-but-empty differs from unset
    assert cc.namespace({"NVCC_APPEND_FLAGS": "-a"}) != cc.namespace({"NVCC_APPEND_FLAGS": "-b"})


def test_config_file_has_no_empty_values(tmp_path: Path) -> None:
    # ccache reads `key =` followed by more lines as one long value: an empty value would
    # swallow the settings after it.
    text = _cache(tmp_path).config_text()
    settings = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert all(ln.split("=", 1)[1].strip() for ln in settings), settings
    assert "compiler_check = content" in settings and "hash_dir = true" in settings


def test_prepare_writes_the_config_and_empties_the_rows_log(tmp_path: Path) -> None:
    c = _cache(tmp_path)
    c.stats_log.parent.mkdir(parents=True)
    c.stats_log.write_text("# old.c\ncache_miss\n", encoding="utf-8")
    cc.prepare(c)
    assert c.config_path.read_text(encoding="utf-8") == c.config_text()
    assert c.stats_log.read_text(encoding="utf-8") == ""
    c.config_path.write_text("hash_dir = false\n", encoding="utf-8")  # an edit is overwritten
    cc.prepare(c)
    assert "hash_dir = true" in c.config_path.read_text(encoding="utf-8")


def test_cache_dir_follows_buildrows_cache_then_xdg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BUILDROWS_CACHE", raising=False)  # tests/conftest.py sets one for every test
    assert cc.cache_dir({"BUILDROWS_CACHE": "/c"}) == Path("/c/ccache")
    assert cc.cache_dir({"XDG_CACHE_HOME": "/x", "HOME": "/h"}) == Path("/x/buildrows/ccache")
    assert cc.cache_dir({"HOME": "/h"}) == Path("/h/.cache/buildrows/ccache")


LOG = """\
# ../../csrc/vadd_cuda.cu
direct_cache_miss
local_storage_hit
preprocessed_cache_hit
# ../../csrc/module.c
cache_miss
direct_cache_miss
local_storage_miss
# /usr/share/cmake/Modules/CMakeCCompilerABI.c
called_for_link
# ../../csrc/other.cu
direct_cache_hit
"""


def test_stats_log_counts_hits_and_misses_per_source() -> None:
    stats = cc.read_stats_log(LOG)
    assert stats.compiles == (("../../csrc/vadd_cuda.cu", "local"), ("../../csrc/module.c", "miss"),
                              ("../../csrc/other.cu", "local"))
    assert (stats.hits, stats.misses) == (2, 1)
    assert stats.describe() == "2/3 hits"
    assert stats.hit("csrc/vadd_cuda.cu") is True and stats.hit("module.c") is False
    assert stats.hit("missing.cu") is None
    assert stats.report() == "2/3 hits; hit vadd_cuda.cu, other.cu; missed module.c"
    assert cc.read_stats_log("").describe() == "no compiles"


# What ccache 4.14.2 wrote for a remote hit, a local hit, and a miss whose store was unreachable.
REMOTE_LOG = """\
# ../../csrc/vadd_cuda.cu
direct_cache_hit
local_storage_miss
local_storage_read_miss
local_storage_write
remote_storage_hit
remote_storage_read_hit
# ../../csrc/module.c
direct_cache_hit
local_storage_hit
local_storage_read_hit
# ../../csrc/other.cu
cache_miss
direct_cache_miss
local_storage_miss
local_storage_write
preprocessed_cache_miss
remote_storage_error
remote_storage_miss
"""


def test_stats_log_tells_local_hits_remote_hits_misses_and_remote_errors_apart() -> None:
    stats = cc.read_stats_log(REMOTE_LOG)
    assert stats.compiles == (("../../csrc/vadd_cuda.cu", "remote"), ("../../csrc/module.c", "local"),
                              ("../../csrc/other.cu", "miss"))
    assert (stats.local_hits, stats.remote_hits, stats.misses, stats.remote_errors) == (1, 1, 1, 1)
    assert stats.outcome("vadd_cuda.cu") == "remote" and stats.hit("vadd_cuda.cu") is True
    assert stats.describe() == "2/3 hits (1 local, 1 remote), 1 remote error"
    assert stats.report() == ("2/3 hits (1 local, 1 remote), 1 remote error; hit vadd_cuda.cu, module.c; "
                              "remote vadd_cuda.cu; missed other.cu")


def _script(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX shell script stands in for nvcc")
def test_toolkit_files_are_found_through_a_wrapper(tmp_path: Path) -> None:
    # A toolkit whose nvcc is reached through a wrapper script, as /usr/local/bin/nvcc often is:
    # the files hashed are the toolkit's, not the wrapper's.
    tk = tmp_path / "cuda-13.0"
    (tk / "bin").mkdir(parents=True)
    (tk / "nvvm" / "bin").mkdir(parents=True)
    for name in ("ptxas", "fatbinary", "nvlink", "cudafe++", "nvcc.profile"):
        (tk / "bin" / name).write_text(name, encoding="utf-8")
    (tk / "nvvm" / "bin" / "cicc").write_text("cicc", encoding="utf-8")
    _script(tk / "bin" / "nvcc", f'#!/bin/sh\necho "#$ _HERE_={tk}/bin"\necho "#$ CICC_PATH={tk}/bin/../nvvm/bin"\n')
    wrapper = _script(tmp_path / "nvcc", f'#!/bin/sh\nexec {tk}/bin/nvcc "$@"\n')
    files = cc.toolkit_files([str(wrapper)], {"PATH": os.defpath})
    assert files == tuple(str(p) for p in (tk / "bin" / "nvcc", tk / "bin" / "ptxas", tk / "bin" / "fatbinary",
                                            tk / "bin" / "nvlink", tk / "bin" / "cudafe++", tk / "bin" / "nvcc.profile",
                                            tk / "nvvm" / "bin" / "cicc"))
    assert str(wrapper) not in files
    # An nvcc that does not answer yields nothing (its compile fails on its own).
    assert cc.toolkit_files([str(tmp_path / "missing")], {}) == ()


def test_host_compilers_are_those_on_the_builds_path(tmp_path: Path) -> None:
    gcc = _script(tmp_path / "gcc", "#!/bin/sh\n")
    gxx = _script(tmp_path / "g++", "#!/bin/sh\n")
    named = _script(tmp_path / "my-g++", "#!/bin/sh\n")
    found = cc.host_compilers({"PATH": str(tmp_path)}, [str(named)])
    assert found == (str(named.resolve()), str(gcc.resolve()), str(gxx.resolve()))
    assert cc.host_compilers({"PATH": str(tmp_path / "none")}) == ()


def test_find_ccache_beside_the_interpreter(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    exe = _script(tmp_path / "ccache", "#!/bin/sh\n")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    assert cc.find_ccache({"PATH": str(tmp_path / "empty")}) == str(exe)
    on_path = tmp_path / "bin"
    on_path.mkdir()
    _script(on_path / "ccache", "#!/bin/sh\n")
    assert cc.find_ccache({"PATH": str(on_path)}) == str(on_path / "ccache")


def test_scikit_build_core_gets_the_launchers_as_cmake_defines(tmp_path: Path) -> None:
    pol = load_policy(EXAMPLE / "buildrows.toml")
    row = pol.row("linux-x86_64-cu130-py311")
    assert row is not None
    plan = plan_row(pol, row, {"PATH": ""}, host="linux", check_toolchain=False)
    bp = drivers.scikit_build_core_plan(plan, "python3.11", EXAMPLE, tmp_path)
    c = _cache(tmp_path)
    (cmd,) = drivers.with_compiler_cache(bp, c.environment(), c.launchers()).commands
    assert cmd.argv[-1] == str(EXAMPLE)  # the project stays last
    assert "cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=/venv/bin/ccache;extra_files_to_hash=" \
        f"/tk/bin/nvcc{os.pathsep}/tk/nvvm/bin/cicc" in cmd.argv
    assert dict(cmd.env)["CCACHE_BASEDIR"] == str(tmp_path / "project")
    # Off: the launchers an existing tree may remember are cleared, a user's own kept.
    off = drivers.launchers_without_cache({"CMAKE_CXX_COMPILER_LAUNCHER": "sccache"})
    (cmd,) = drivers.with_compiler_cache(bp, {}, off).commands
    assert "cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=" in cmd.argv
    assert "cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=sccache" in cmd.argv


def test_other_drivers_get_the_launchers_through_the_environment(tmp_path: Path) -> None:
    pol = load_policy(EXAMPLE / "buildrows.toml")
    row = pol.row("linux-x86_64-cu130-py311")
    assert row is not None
    bp = drivers.cmake_presets_plan(row, EXAMPLE)
    c = _cache(tmp_path)
    cmd, *_ = drivers.with_compiler_cache(bp, c.environment(), c.launchers()).commands
    assert cmd.argv == ("cmake", "--workflow", "--preset", row.name)
    assert dict(cmd.env)["CMAKE_C_COMPILER_LAUNCHER"] == "/venv/bin/ccache"


needs_ccache = pytest.mark.skipif(cc.find_ccache(dict(os.environ)) is None, reason=f"needs ccache ({cc.INSTALL_HINT})")


@needs_ccache
def test_ccache_reads_only_buildrows_config(tmp_path: Path) -> None:
    # The user's directory-level ccache.conf and variables would weaken the key; with
    # CCACHE_CONFIGPATH ccache reads only buildrows' file.
    c = _cache(tmp_path)
    cc.prepare(c)
    work = tmp_path / "project"
    work.mkdir()
    (work / "ccache.conf").write_text("hash_dir = false\nsloppiness = time_macros\n", encoding="utf-8")
    exe = cc.find_ccache(dict(os.environ))
    assert exe is not None
    env = {**cc.without_ccache_settings({**os.environ, "CCACHE_COMPILERCHECK": "none"}), **c.environment()}
    shown = subprocess.run([exe, "--show-config"], capture_output=True, text=True, env=env, cwd=work,
                           check=True).stdout
    lines = {ln.split(") ", 1)[1] for ln in shown.splitlines() if ") " in ln}
    assert "hash_dir = true" in lines and "compiler_check = content" in lines
    assert "sloppiness = " in lines or "sloppiness =" in lines
    assert f"base_dir = {work}" in lines and f"cache_dir = {c.directory}" in lines


@needs_ccache
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_a_c_compile_hits_across_build_dirs_and_misses_with_other_flags(tmp_path: Path) -> None:
    # The base_dir rule with the real ccache and gcc: the same source compiled from two build
    # trees at the same depth hits; a different flag misses.
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "a.c").write_text("int f(int x) { return x * 3; }\n", encoding="utf-8")
    c = cc.CompilerCache(cc.find_ccache(dict(os.environ)) or "", tmp_path / "cache", project,
                         tmp_path / "cache" / "log", cc.namespace({}))
    cc.prepare(c)
    env = {**cc.without_ccache_settings(dict(os.environ)), **c.environment()}
    results = []
    for tree, flag in (("row-a", "-O2"), ("row-b", "-O2"), ("row-c", "-O1")):
        build = project / "build" / tree
        build.mkdir(parents=True)
        c.stats_log.write_text("", encoding="utf-8")
        subprocess.run([c.executable, "gcc", flag, "-c", str(project / "src" / "a.c"), "-o", "a.o"],
                       cwd=build, env=env, check=True)
        results.append(cc.read_stats_log(c.stats_log.read_text(encoding="utf-8")).hit("a.c"))
    assert results == [False, True, False]


def test_setup_py_nvcc_not_cached_says_why_from_the_build_log(tmp_path: Path) -> None:
    """A setup.py whose build_ext runs nvcc by its full path (pyvkfft 2025.1.1 does) never meets the
    ccache first on PATH: the summary says that, from the commands the build's log shows, instead
    of a torch reason that does not apply; a log with no nvcc command says nothing was compiled."""
    from buildrows.build.compiler_cache import CacheStats
    from buildrows.build.row_steps import _nvcc_runs, _setup_py_cache_text

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "01-build-setup-py-wheel.log").write_text(
        "running build_ext\n"
        "/opt/cuda-13.0/bin/nvcc -O3 -gencode arch=compute_90,code=sm_90 -c src/cuda_module.cu -o build/cuda_module.o\n"
        "/opt/cuda-13.0/bin/nvcc -O3 -c src/other.cu -o build/other.o\n"
        "x86_64-linux-gnu-g++ -shared build/cuda_module.o -o build/_vkfft_cuda.so\n")
    runs = _nvcc_runs(logs)
    assert runs == (2, "/opt/cuda-13.0/bin/nvcc")
    text = _setup_py_cache_text(CacheStats(compiles=()), True, nvcc_runs=runs)
    assert text.startswith("nvcc not cached (2 compiles ran /opt/cuda-13.0/bin/nvcc by its full path, which the "
                           "ccache first on PATH never sees"), text
    # Through ccache, the command is not counted as one that bypassed it.
    (logs / "01-build-setup-py-wheel.log").write_text("/usr/bin/ccache /opt/cuda-13.0/bin/nvcc -c a.cu -o a.o\n")
    assert _nvcc_runs(logs) == (0, "")
    assert _setup_py_cache_text(CacheStats(compiles=()), True, nvcc_runs=(0, "")).startswith(
        "nvcc not cached (the build's log shows no nvcc command: nothing was compiled by nvcc)")

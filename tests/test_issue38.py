"""Issue 38 (and 36 item 8): symbols read in a bounded window, every setup.py compile through the
compiler cache, non-ninja torch CPU rows built in parallel."""

from __future__ import annotations

import os
import shutil
import subprocess
from array import array
from pathlib import Path

import pytest

from buildrows.binaries import dynstream
from buildrows.binaries.binfmt import BinaryFormatError
from buildrows.binaries.exportset import ExportSet
from buildrows.binaries.symbols import FileSource, _read_whole_strings, read_dynamic_symbols
from buildrows.build import cache_masquerade as cm
from buildrows.build.setup_parallel import parallel_jobs, uses_non_ninja_build_extension

HAS_CC = shutil.which("gcc") is not None


def _keys(offsets: list[int]) -> list[int]:
    return sorted(o << 24 | i for i, o in enumerate(offsets))


def test_stream_strings_gives_what_slicing_the_whole_table_gives() -> None:
    table = b"\0libfoo.so.1\0" + b"x" * 40 + b"\0_ZN3foo3barEv\0tail-without-nul"
    offsets = [0, 1, 13, 20, 54, 55, 69, 5, len(table) + 3, 1]

    def whole(at: int) -> bytes:
        end = table.find(b"\0", at)
        return table[at:end if end >= 0 else None]

    for piece in (1, 3, 7, 1 << 20):  # names cut across pieces of every size
        def read(at: int, n: int, piece: int = piece) -> bytes:
            return table[at:at + min(n, piece)]

        got = dict(dynstream.stream_strings(read, 0, len(table), _keys(offsets)))
        assert [got[o << 24 | i] for i, o in enumerate(offsets)] == [whole(o) for o in offsets], piece


def test_a_string_table_cut_short_is_an_error() -> None:
    with pytest.raises(BinaryFormatError, match="the string table is cut short"):
        list(dynstream.stream_strings(lambda at, n: b"abc" if at == 0 else b"", 0, 100, [0]))


def test_export_set_answers_like_a_set_and_holds_no_names(monkeypatch: pytest.MonkeyPatch) -> None:
    names = [f"_Z{i}name" for i in range(70_000)]  # over the size sorted in parts
    as_set = ExportSet.of(names)
    monkeypatch.setattr("buildrows.binaries.exportset.SET_MAX", 1000)  # the array way beyond it
    as_array = ExportSet.of(names)
    assert not as_set.held_as_array and as_array.held_as_array and as_array.nbytes == 8 * 70_000
    for exports in (as_set, as_array):
        assert len(exports) == 70_000
        assert all(n in exports for n in names[::997]) and "_Z70000name" not in exports and 3 not in exports
        asked = {ExportSet.key(n.encode()) for n in ("_Z5name", "_Z69999name", "_Z70000name", "_Znope")}
        assert exports.missing(asked) == {ExportSet.key(b"_Z70000name"), ExportSet.key(b"_Znope")}
        with pytest.raises(TypeError, match="an ExportSet holds hashes, not names"):
            list(exports)
    assert as_set == as_array and hash(as_set) == hash(as_array)
    for versioned in (ExportSet([ExportSet.versioned_key(b"memcpy", b"GLIBC_2.14")]),
                      ExportSet([ExportSet.versioned_key(b"memcpy", b"GLIBC_2.14")] * 1001)):
        assert versioned.has_versioned("memcpy", "GLIBC_2.14") and not versioned.has_versioned("memcpy", "GLIBC_2.2.5")


def test_export_sets_past_the_budget_take_the_array() -> None:
    from buildrows.binaries import exportset

    before = exportset._held[0]
    exportset._held[0] = exportset.SET_BUDGET - 10
    try:
        small, big = ExportSet(range(10)), ExportSet(range(100, 111))  # the second would pass the budget
        assert not small.held_as_array and big.held_as_array and exportset._held[0] == exportset.SET_BUDGET
        del small
        assert exportset._held[0] == exportset.SET_BUDGET - 10  # a set let go gives its share back
        assert 105 not in big and big.has_key(105) and not big.has_key(99)
    finally:
        exportset._held[0] = before


_LIB = """
#include <string.h>
#include <stdio.h>
int exported_one(void) { return 1; }
int exported_two(void) { return 2; }
__attribute__((visibility("hidden"))) int hidden_one(void) { return 3; }
void *copy(void *d, const void *s, size_t n) { printf("%d", undefined_elsewhere()); return memcpy(d, s, n); }
"""


@pytest.mark.skipif(not HAS_CC, reason="needs gcc")
def test_streaming_symbols_equal_reading_the_string_table_whole(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "lib.c"
    src.write_text(_LIB.replace("undefined_elsewhere()", "((int (*)(void))0)()"), encoding="utf-8")
    script = tmp_path / "v.map"
    script.write_text("V_1 { global: exported_one; local: *; };\nV_2 { global: exported_two; copy; } V_1;\n",
                      encoding="utf-8")
    lib = tmp_path / "libv.so.1"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src), "-Wl,-soname,libv.so.1",
                    f"-Wl,--version-script={script}"], check=True)
    whole = _read_whole_strings(FileSource(lib))
    got = dynstream.read_symbols_streaming(FileSource(lib))
    assert whole is not None and got is not None
    soname, needed, imports, exports, versioned = got
    assert (soname, needed, versioned) == (whole.soname, whole.needed, whole.versioned) == ("libv.so.1", ("libc.so.6",), True)
    assert imports == [(i.name, i.version, i.file) for i in whole.imports]
    assert any(n == "memcpy" and f in (None, "libc.so.6") for n, _, f in imports)
    for name, version in (("exported_one", "V_1"), ("exported_two", "V_2"), ("copy", "V_2")):
        assert name in exports and exports.has_versioned(name, version) and whole.defines(name, version)
    assert "hidden_one" not in exports and not exports.has_versioned("exported_one", "V_2")
    # read_dynamic_symbols takes the streaming way for a table over the window: the same answer
    monkeypatch.setattr("buildrows.binaries.symbols.STRING_WINDOW", 0)
    streamed = read_dynamic_symbols(FileSource(lib))
    assert streamed is not None and streamed.imports == whole.imports and streamed.exported == whole.exported


def _fake_compiler(where: Path, name: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    (where / name).write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    (where / name).chmod(0o755)


@pytest.mark.skipif(os.name == "nt", reason="no masquerade on Windows")
def test_the_masquerade_links_the_compilers_path_has_and_keeps_links_and_nvcc_off_ccache(tmp_path: Path) -> None:
    real = tmp_path / "usr-bin"
    for name in ("gcc", "g++", "cc"):
        _fake_compiler(real, name)
    ccache = tmp_path / "ccache-bin" / "ccache"
    _fake_compiler(ccache.parent, "ccache")
    where = tmp_path / "masq"
    env = {"PATH": str(real), "LDSHARED": "gcc -shared -Wl,-O1"}
    out = cm.masquerade_environment(where, str(ccache), env, ("gcc -shared", "g++ -shared"))
    assert sorted(p.name for p in where.iterdir()) == ["cc", "g++", "gcc"]
    assert all(os.path.realpath(p) == os.path.realpath(ccache) for p in where.iterdir())
    assert out["PATH"] == f"{where}{os.pathsep}{real}"
    assert out["NVCC_CCBIN"] == str(real / "gcc")  # nvcc's host compiles run the real gcc
    assert out["LDSHARED"] == f"{real / 'gcc'} -shared -Wl,-O1"  # a link never runs ccache
    assert out["LDCXXSHARED"] == f"{real / 'g++'} -shared"
    # The user's own NVCC_CCBIN and CC are theirs: kept, and setuptools derives the link from CC.
    mine = cm.masquerade_environment(where, str(ccache), {**env, "NVCC_CCBIN": "/opt/gcc12/bin/gcc", "CC": "gcc"})
    assert "NVCC_CCBIN" not in mine and "LDSHARED" not in mine
    # A compiler that went away is unlinked; a name PATH does not have is never linked.
    (real / "cc").unlink()
    cm.masquerade_links(where, str(ccache), str(real))
    assert sorted(p.name for p in where.iterdir()) == ["g++", "gcc"]
    assert cm.resolve_link_command("/abs/gcc -shared", str(real)) == "/abs/gcc -shared"
    assert cm.resolve_link_command("clang -shared", str(real)) == "clang -shared"


def _setup(tmp_path: Path, text: str) -> Path:
    (tmp_path / "setup.py").write_text(text, encoding="utf-8")
    return tmp_path


def test_only_a_non_ninja_torch_cpu_row_builds_extensions_in_parallel(tmp_path: Path) -> None:
    pyg = _setup(tmp_path, "from torch.utils.cpp_extension import BuildExtension\n"
                 "cmdclass={'build_ext': BuildExtension.with_options(no_python_abi_suffix=True, use_ninja=False)}\n")
    assert uses_non_ninja_build_extension(pyg)
    assert parallel_jobs(pyg, False, {}, cpus=16) == 16
    assert parallel_jobs(pyg, False, {"MAX_JOBS": "3"}, cpus=16) == 3
    assert parallel_jobs(pyg, True, {}, cpus=16) is None  # nvcc swapped in per source: threads would race
    assert parallel_jobs(pyg, False, {}, cpus=1) is None
    (tmp_path / "plain").mkdir()
    plain = _setup(tmp_path / "plain", "from setuptools import setup\n")
    assert parallel_jobs(plain, False, {}, cpus=16) is None


def test_the_setuptools_configuration_gets_parallel_unless_the_user_set_it(tmp_path: Path) -> None:
    from buildrows.build.drivers import setuptools_config
    from buildrows.policy.model import Row

    row = Row(name="linux-x86_64-cpu-py311", platform="linux-x86_64", os="linux", machine="x86_64", cuda=None,
              python="3.11", archs=None)
    _, text = setuptools_config(row, tmp_path, {}, parallel=4)
    assert "[build_ext]\nparallel = 4" in text
    theirs = tmp_path / "theirs.cfg"
    theirs.write_text("[build_ext]\nparallel = 2\n", encoding="utf-8")
    _, text = setuptools_config(row, tmp_path, {"DIST_EXTRA_CONFIG": str(theirs)}, parallel=4)
    assert "parallel = 2" in text and "parallel = 4" not in text


def test_export_sets_of_the_same_hashes_are_equal() -> None:
    a = ExportSet(array("q", [3, 1, 2]))
    assert a == ExportSet([1, 2, 3]) and a != ExportSet([1, 2])

"""Property-based tests of the binary readers: ELF/PE (buildrows.binaries.binfmt), fat binaries (buildrows.binaries.fatbin)
and wheels (buildrows.binaries.wheelread), seeded with a real nvcc-built CUDA library (one compile per session)
and hand-made files. Whatever the bytes: a result or the reader's own error, in bounded time and
memory, nothing written outside the temporary directory; the CLI exits 0/2/3/5 without a traceback.

scripts/fuzz_all.py runs the same mutators 100,000+ times.
"""

from __future__ import annotations

import contextlib
import random
import resource
import shutil
import struct
import subprocess
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from buildrows.binaries.binfmt import BinaryFormatError, read_binary
from buildrows.binaries.fatbin import FatbinError, list_device_code
from buildrows.binaries.wheelread import WheelError, read_wheel
from tests.conftest import EXAMPLE_POLICY, Result
from tests.cuda_tools import METADATA, fatbin_container, fatbin_entry, make_elf
from tests.fuzz_tools import (
    library_in_memory,
    library_streamed,
    lie_about_sizes,
    mutate_bytes,
    mutate_elf,
    mutate_fatbin,
    mutate_wheel,
    wheel_bytes,
)

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
CASE_SECONDS = 2.0
CASE_MEMORY_MB = 512

KERNEL = """
__global__ void scale(float* x, float a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }
extern "C" void launch(float* x, float a, int n) { scale<<<(n + 255) / 256, 256>>>(x, a, n); }
"""


def _nvcc() -> str | None:
    return shutil.which("nvcc") or ("/usr/local/bin/nvcc" if Path("/usr/local/bin/nvcc").exists() else None)


@pytest.fixture(scope="session")
def elf_seeds(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """A hand-made ELF with a fat binary and links, plus a real nvcc-built CUDA .so when nvcc exists."""
    fatbin = fatbin_container([fatbin_entry(2, 80), fatbin_entry(2, 90), fatbin_entry(1, 90),
                               fatbin_entry(2, 100, flags=0x100011)])
    seeds = [make_elf([(".nv_fatbin", fatbin)], needed=["libcudart.so.13"], rpath="$ORIGIN/../nvidia/cu13/lib")]
    nvcc = _nvcc()
    if nvcc is not None:
        d = tmp_path_factory.mktemp("nvcc-seed")
        (d / "k.cu").write_text(KERNEL)
        cmd = [nvcc, "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared", "-gencode=arch=compute_80,code=sm_80",
               "-gencode=arch=compute_90,code=[sm_90,compute_90]", "-o", str(d / "libk.so"), str(d / "k.cu")]
        if subprocess.run(cmd, capture_output=True, check=False).returncode == 0:
            seeds.append((d / "libk.so").read_bytes())
    return seeds


@pytest.fixture(scope="session")
def fatbin_seeds(elf_seeds: list[bytes]) -> list[bytes]:
    return [bytes(s) for e in elf_seeds for s in read_binary(e).device_code_sections]


@pytest.fixture(scope="session")
def pe_seed(tmp_path_factory: pytest.TempPathFactory, fatbin_seeds: list[bytes]) -> bytes:
    from tests.pe_fixture import build_pe_dll

    return build_pe_dll(tmp_path_factory.mktemp("pe-seed"), fatbin_seeds[-1], True).read_bytes()


def test_seeds_are_read_as_cuobjdump_would(elf_seeds: list[bytes]) -> None:
    code = list_device_code(read_binary(elf_seeds[0]).device_code_sections[0])
    assert (code.cubins, code.ptx) == (("sm_80", "sm_90", "sm_100a"), ("sm_90",))
    if len(elf_seeds) > 1:
        real = list_device_code(read_binary(elf_seeds[1]).device_code_sections[0])
        assert set(real.cubins) == {"sm_80", "sm_90"} and set(real.ptx) == {"sm_90"}


@pytest.fixture
def bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Callable[[], object]], None]]:
    """Run a case in a temporary cwd, timing it and watching peak memory; nothing may be left in the cwd."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)

    def run(fn: Callable[[], object]) -> None:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        fn()
        took = time.perf_counter() - start
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024
        assert took < CASE_SECONDS, f"one case took {took:.1f}s"
        assert grown < CASE_MEMORY_MB, f"one case raised peak memory by {grown} MiB"
        assert list(cwd.iterdir()) == []

    yield run


def _read_all(data: bytes) -> None:
    """read_binary, then every fat binary it found; only the readers' own errors may escape."""
    try:
        info = read_binary(data)
    except BinaryFormatError:
        return
    for section in info.device_code_sections:
        with contextlib.suppress(FatbinError):
            list_device_code(section)


@FUZZ
@given(st.randoms(use_true_random=False))
def test_mutated_elf_files(elf_seeds: list[bytes], bounded: Callable[[Callable[[], object]], None],
                           rng: random.Random) -> None:
    data = mutate_elf(rng.choice(elf_seeds), rng)
    bounded(lambda: _read_all(data))


@FUZZ
@given(st.randoms(use_true_random=False))
def test_mutated_fat_binaries(fatbin_seeds: list[bytes], bounded: Callable[[Callable[[], object]], None],
                              rng: random.Random) -> None:
    data = mutate_fatbin(rng.choice(fatbin_seeds), rng)

    def case() -> None:
        with contextlib.suppress(FatbinError):
            list_device_code(data)
    bounded(case)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False))
def test_mutated_pe_files(pe_seed: bytes, bounded: Callable[[Callable[[], object]], None], rng: random.Random) -> None:
    data = mutate_bytes(pe_seed, rng, rounds=rng.choice([1, 2, 8]))
    bounded(lambda: _read_all(data))


@FUZZ
@given(st.binary(max_size=512))
def test_arbitrary_bytes(bounded: Callable[[Callable[[], object]], None], data: bytes) -> None:
    bounded(lambda: _read_all(b"\x7fELF\x02\x01\x01" + data))
    bounded(lambda: _read_all(b"MZ" + data))
    bounded(lambda: _read_all(data))


@pytest.mark.parametrize("field", ["shoff", "shnum", "shentsize", "shstrndx", "sh_size", "sh_offset"])
@pytest.mark.parametrize("value", [0, 1, 0xFFFF, 0xFFFFFFFF, 2**63, 2**64 - 1])
def test_header_fields_past_the_end_or_huge(elf_seeds: list[bytes], field: str, value: int) -> None:
    b = bytearray(elf_seeds[0])
    shoff, = struct.unpack_from("<Q", b, 0x28)
    where = {"shoff": (0x28, "<Q"), "shnum": (0x3C, "<H"), "shentsize": (0x3A, "<H"), "shstrndx": (0x3E, "<H"),
             "sh_size": (shoff + 64 + 0x20, "<Q"), "sh_offset": (shoff + 64 + 0x18, "<Q")}[field]
    offset, fmt = where
    struct.pack_into(fmt, b, offset, value & ((1 << (8 * struct.calcsize(fmt))) - 1))
    _read_all(bytes(b))


def test_overlapping_sections_read_the_same_bytes_twice(elf_seeds: list[bytes]) -> None:
    b = bytearray(elf_seeds[0])
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shnum, = struct.unpack_from("<H", b, 0x3C)
    fat_offset, = struct.unpack_from("<Q", b, shoff + 64 + 0x18)
    struct.pack_into("<Q", b, shoff + (shnum - 1) * 64 + 0x18, fat_offset)  # .shstrtab onto .nv_fatbin
    _read_all(bytes(b))


@pytest.mark.parametrize("count", [2**20, 2**32 - 1])
def test_huge_entry_counts_are_bounded(count: int) -> None:
    """A container declaring gigabytes of entries made of 64-byte headers: bounded by the data present."""
    tiny = fatbin_entry(2, 90, payload=b"")
    data = fatbin_container([tiny] * 1000)
    data = data[:8] + struct.pack("<Q", count) + data[16:]
    start = time.perf_counter()
    with contextlib.suppress(FatbinError):
        list_device_code(data)
    assert time.perf_counter() - start < CASE_SECONDS


# --- the streaming reader: chunk boundaries anywhere, same answer ----------------------------------

def _stream_case(data: bytes, rng: random.Random, tmp_path: Path) -> None:
    expected = library_in_memory(data)
    for _ in range(2):
        got = library_streamed(data, rng, tmp_path, deflated=rng.random() < 0.8)
        assert got == expected, f"streamed {got!r}, in memory {expected!r}"


STREAM_FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@STREAM_FUZZ
@given(st.randoms(use_true_random=False))
def test_streamed_mutated_elf_files_read_as_in_memory(elf_seeds: list[bytes], tmp_path: Path,
                                                      bounded: Callable[[Callable[[], object]], None],
                                                      rng: random.Random) -> None:
    data = mutate_elf(rng.choice(elf_seeds), rng) if rng.random() < 0.8 else rng.choice(elf_seeds)
    bounded(lambda: _stream_case(data, rng, tmp_path))


@STREAM_FUZZ
@given(st.randoms(use_true_random=False))
def test_streamed_mutated_fat_binaries_read_as_in_memory(fatbin_seeds: list[bytes], tmp_path: Path,
                                                         bounded: Callable[[Callable[[], object]], None],
                                                         rng: random.Random) -> None:
    fatbin = mutate_fatbin(rng.choice(fatbin_seeds), rng)
    padding = b"\0" * rng.choice([0, 0, 8, 24])
    decoy = rng.choice(fatbin_seeds)[:rng.randrange(16, 200)] if rng.random() < 0.3 else b""
    data = make_elf([(".rodata", decoy), (".nv_fatbin", fatbin + padding + rng.choice(fatbin_seeds))],
                    needed=["libcudart.so.13"])
    bounded(lambda: _stream_case(data, rng, tmp_path))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False))
def test_streamed_mutated_pe_files_read_as_in_memory(pe_seed: bytes, tmp_path: Path,
                                                     bounded: Callable[[Callable[[], object]], None],
                                                     rng: random.Random) -> None:
    data = mutate_bytes(pe_seed, rng, rounds=rng.choice([1, 2, 8])) if rng.random() < 0.8 else pe_seed
    bounded(lambda: _stream_case(data, rng, tmp_path))


# --- wheels ----------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def wheel_members(elf_seeds: list[bytes]) -> list[tuple[str, bytes]]:
    return [("demo/_core.so", elf_seeds[-1]), ("demo/_plain.so", elf_seeds[0]),
            ("demo-1.0+cu130.dist-info/METADATA", METADATA.encode())]


WHEEL = "demo-1.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"


@FUZZ
@given(st.randoms(use_true_random=False))
def test_mutated_wheels(tmp_path: Path, wheel_members: list[tuple[str, bytes]],
                        bounded: Callable[[Callable[[], object]], None], rng: random.Random) -> None:
    path = tmp_path / WHEEL
    path.write_bytes(mutate_wheel(wheel_members, rng))

    def case() -> None:
        with contextlib.suppress(WheelError):
            read_wheel(path)
    bounded(case)


@pytest.mark.parametrize(("label", "names"), [
    ("duplicate", ["demo/_core.so", "demo/_core.so"]),
    ("dot-dot", ["../evil.so"]),
    ("nested dot-dot", ["demo/../../evil.so"]),
    ("absolute", ["/etc/evil.so"]),
    ("drive", ["C:/evil.so"]),
    ("backslash", ["demo\\..\\..\\evil.so"]),
])
def test_hostile_member_names_are_refused(tmp_path: Path, wheel_members: list[tuple[str, bytes]], label: str,
                                          names: list[str]) -> None:
    members = [*wheel_members, *((n, wheel_members[0][1]) for n in names)]
    path = tmp_path / WHEEL
    path.write_bytes(wheel_bytes(members))
    with pytest.raises(WheelError):
        read_wheel(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [WHEEL]


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED], ids=["stored", "deflated"])
@pytest.mark.parametrize("claim", [2**30, 0xFFFFFFFF])
def test_members_claiming_gigabytes_fail_fast_without_allocating(tmp_path: Path, wheel_members: list[tuple[str, bytes]],
                                                                 compression: int, claim: int) -> None:
    data = bytearray(wheel_bytes(wheel_members, compression=compression))
    i = data.find(b"PK\x01\x02")
    struct.pack_into("<I", data, i + 24, claim)  # the central directory's uncompressed size of the first member
    path = tmp_path / WHEEL
    path.write_bytes(bytes(data))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    with pytest.raises(WheelError):
        read_wheel(path)
    assert time.perf_counter() - start < 0.5
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024 < 64


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False))
def test_lying_central_directories(tmp_path: Path, wheel_members: list[tuple[str, bytes]], rng: random.Random) -> None:
    path = tmp_path / WHEEL
    data = wheel_bytes(wheel_members, compression=rng.choice([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))
    path.write_bytes(lie_about_sizes(data, rng))
    start = time.perf_counter()
    with contextlib.suppress(WheelError):
        read_wheel(path)
    assert time.perf_counter() - start < CASE_SECONDS


@pytest.mark.parametrize("cut", [0, 1, 4, 22, 100, -22, -1])
def test_truncated_wheels(tmp_path: Path, wheel_members: list[tuple[str, bytes]], cut: int) -> None:
    data = wheel_bytes(wheel_members)
    path = tmp_path / WHEEL
    path.write_bytes(data[:cut])
    with pytest.raises(WheelError):
        read_wheel(path)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False),
       st.sampled_from([["check"], ["check", "--json"], ["check", "--row", "linux-x86_64-cu130-py312"], ["archs"]]))
def test_cli_on_mutated_wheels_exits_with_our_codes(tmp_path: Path, wheel_members: list[tuple[str, bytes]],
                                                    cli: Callable[..., Result], rng: random.Random,
                                                    argv: list[str]) -> None:
    path = tmp_path / WHEEL
    path.write_bytes(mutate_wheel(wheel_members, rng))
    args = ["archs", "--from-wheel", str(path), "--json"] if argv == ["archs"] else [argv[0], str(path), *argv[1:]]
    r = cli("--config", str(EXAMPLE_POLICY), *args)
    assert r.code in (0, 2, 3, 5), r.err
    assert "Traceback" not in r.err and "internal error" not in r.err


@pytest.mark.parametrize("field", [b"Name: d\xc3\xa9mo\n", b"Name: d\xffmo\n", b"Version: 1.0+cu130\xc3\xa9\n",
                                   b"Author: Jos\xc3\xa9 Garc\xc3\xada\nName: demo\n"])
def test_non_ascii_metadata_fields_are_text_not_an_internal_error(
        tmp_path: Path, wheel_members: list[tuple[str, bytes]], cli: Callable[..., Result], field: bytes) -> None:
    """compat32 hands a field with non-ASCII bytes back as an email Header object; a fuzzed METADATA (and
    any non-ASCII name or version) made `check` fail with "internal error: 'Header' object has no attribute
    'strip'". Fields are read as UTF-8 text; the verdict is the check's (here pip's refusal), not a crash."""
    import zipfile

    line = b"Version: 1.0+cu130\n" if field.startswith(b"Version") else b"Name: demo\n"
    members = [(n, d.replace(line, field) if n.endswith("METADATA") else d) for n, d in wheel_members]
    assert any(field in d for _, d in members)
    path = tmp_path / WHEEL
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(name, data)
    r = cli("--config", str(EXAMPLE_POLICY), "check", str(path))
    assert "internal error" not in r.err
    if field.startswith(b"Author"):  # nothing wrong with the metadata: the check goes on to judge the wheel
        assert "pip would refuse it" not in r.err and "libraries-load" in r.out, r.out + r.err
    else:
        assert r.code == 5 and "pip refuses it" in r.err, r.err

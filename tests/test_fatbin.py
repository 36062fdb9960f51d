"""The fat binary reader: real nvcc output cross-checked with cuobjdump, and crafted bad input."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from cuda_tools import (
    VARIANTS,
    Variant,
    build_variants,
    cuobjdump_headers,
    cuobjdump_list,
    fatbin_container,
    fatbin_entry,
    find_cuobjdump,
    find_nvcc,
    listed,
    section_bytes,
)

from buildrows.binaries.fatbin import (
    FLAG_ARCH_SPECIFIC,
    FLAG_FAMILY,
    FLAG_LZ4,
    FLAG_ZSTD,
    KIND_ELF,
    KIND_LTO_IR,
    KIND_PTX,
    DeviceCode,
    FatbinError,
    list_device_code,
    parse_fatbin,
)

# --- real libraries ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def cuda_libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found on PATH")
    return build_variants(nvcc, tmp_path_factory.mktemp("cuda-libs"))


@pytest.fixture(scope="session")
def cuobjdump() -> str:
    found = find_cuobjdump()
    if found is None:
        pytest.skip("cuobjdump not found (PATH, or pip install nvidia-cuda-cuobjdump)")
    return found


def _device_code(path: Path) -> DeviceCode:
    try:
        return list_device_code(section_bytes(path, ".nv_fatbin"))
    except KeyError:
        return DeviceCode()


@pytest.mark.integration
@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_nvcc_output(cuda_libs: dict[str, Path], variant: Variant) -> None:
    code = _device_code(cuda_libs[variant.name])
    # nvcc -shared links one copy from the object and one from the device-link step; order and
    # repeats are cuobjdump's, the set is what the flags asked for.
    assert set(code.cubins) == set(variant.cubins)
    assert set(code.ptx) == set(variant.ptx)


@pytest.mark.integration
@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_agrees_with_cuobjdump(
    cuda_libs: dict[str, Path], cuobjdump: str, variant: Variant
) -> None:
    path = cuda_libs[variant.name]
    expected_elf, expected_ptx = cuobjdump_list(cuobjdump, path)
    # The executable fat binary, as cuobjdump reads it by default.
    code = _device_code(path)
    assert (listed(code.cubins), code.ptx) == (expected_elf, expected_ptx)
    # and the a/f variants and PTX ISA versions as `cuobjdump -elf` prints each entry's header
    elf, ptx, isa = cuobjdump_headers(cuobjdump, path)
    assert (code.cubins, code.ptx, code.ptx_isa) == (elf, ptx, isa)


@pytest.mark.integration
def test_compression_is_seen(cuda_libs: dict[str, Path]) -> None:
    def compressions(name: str) -> set[str]:
        return {e.compression for e in parse_fatbin(section_bytes(cuda_libs[name], ".nv_fatbin"))}

    assert compressions("compress_none") == {"none"}
    assert "zstd" in compressions("compress_size")
    assert "zstd" in compressions("compress_all")
    assert "lz4" in compressions("compress_speed")


@pytest.mark.integration
def test_raw_fatbin_file_agrees_with_cuobjdump(
    cuda_libs: dict[str, Path], cuobjdump: str, tmp_path: Path
) -> None:
    # cuobjdump also reads a bare fat binary; the PE tests rely on this.
    raw = tmp_path / "family.fatbin"
    raw.write_bytes(section_bytes(cuda_libs["family"], ".nv_fatbin"))
    elf, ptx = cuobjdump_list(cuobjdump, raw)
    code = list_device_code(raw.read_bytes())
    assert (listed(code.cubins), code.ptx) == (elf, ptx)
    assert "sm_100f" in code.cubins
    assert (code.cubins, code.ptx, code.ptx_isa) == cuobjdump_headers(cuobjdump, raw)


# --- naming ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "sm", "flags", "cubins", "ptx"),
    [
        (KIND_ELF, 75, 0x11, ("sm_75",), ()),
        (KIND_ELF, 90, 0x11 | FLAG_ARCH_SPECIFIC, ("sm_90a",), ()),
        (KIND_ELF, 100, 0x11 | FLAG_FAMILY, ("sm_100f",), ()),  # cuobjdump -elf: arch = sm_100f (--list-elf drops it)
        (KIND_ELF, 121, 0x11 | FLAG_ARCH_SPECIFIC | FLAG_ZSTD, ("sm_121a",), ()),
        (KIND_PTX, 90, 0x11 | FLAG_LZ4, (), ("sm_90",)),
        (KIND_PTX, 120, 0x11 | FLAG_ARCH_SPECIFIC, (), ("sm_120a",)),
        (KIND_PTX, 100, 0x11 | FLAG_FAMILY, (), ("sm_100f",)),
        (KIND_LTO_IR, 90, 0x11, (), ()),  # LTO IR is neither listed as ELF nor as PTX
    ],
)
def test_names(
    kind: int, sm: int, flags: int, cubins: tuple[str, ...], ptx: tuple[str, ...]
) -> None:
    blob = fatbin_container([fatbin_entry(kind=kind, sm=sm, flags=flags)])
    assert list_device_code(blob) == DeviceCode(cubins=cubins, ptx=ptx)


def test_several_containers_and_zero_padding() -> None:
    first = fatbin_container([fatbin_entry(sm=75), fatbin_entry(kind=KIND_PTX, sm=75)])
    second = fatbin_container([fatbin_entry(sm=90, header_size=112)])
    blob = first + b"\0" * 24 + second + b"\0" * 100
    assert list_device_code(blob) == DeviceCode(cubins=("sm_75", "sm_90"), ptx=("sm_75",))
    entries = parse_fatbin(blob)
    assert [e.offset for e in entries] == [16, 16 + 72, len(first) + 24 + 16]


def test_empty_input_has_no_device_code() -> None:
    assert not list_device_code(b"")
    assert not list_device_code(b"\0" * 64)


# --- malformed input -------------------------------------------------------------------------

GOOD = fatbin_container([fatbin_entry(sm=90)])


def _patch(data: bytes, offset: int, fmt: str, *values: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, *values)
    return bytes(out)


MALFORMED = [
    (GOOD[:10], "truncated container header at offset 0x0: 10 bytes left, need 16"),
    (b"\x01" + GOOD[1:], "bad container magic 0xba55ed01 at offset 0x0"),
    (GOOD + b"junkjunkjunkjunk", "bad container magic 0x6b6e756a at offset 0x58"),
    (_patch(GOOD, 6, "<H", 4), "has header size 4"),
    (
        _patch(GOOD, 8, "<Q", 2**63),
        "declares 9223372036854775808 bytes of entries but only 72 remain",
    ),
    (GOOD[:40], "declares 72 bytes of entries but only 24 remain"),
    (
        _patch(GOOD, 8, "<Q", 40)[:56],
        "truncated entry header at offset 0x10: 40 bytes left in the container, need 64",
    ),
    (_patch(GOOD, 16 + 4, "<I", 8), "has header size 8 (expected 64..1048576)"),
    (_patch(GOOD, 16 + 4, "<I", 2**31), "has header size 2147483648"),
    (
        _patch(GOOD, 16 + 8, "<Q", 2**64 - 1),
        "declares 64+18446744073709551615 bytes but only 72 remain",
    ),
    (_patch(GOOD, 16 + 16, "<I", 9), "compressed size 9 larger than its payload (8)"),
]


@pytest.mark.parametrize(("data", "message"), MALFORMED, ids=[m for _, m in MALFORMED])
def test_malformed(data: bytes, message: str) -> None:
    with pytest.raises(FatbinError) as info:
        parse_fatbin(data)
    assert message in str(info.value)


def test_entry_count_is_capped() -> None:
    blob = fatbin_container([fatbin_entry(payload=b"")] * 50)
    with pytest.raises(FatbinError, match="more than 10 entries"):
        parse_fatbin(blob, max_entries=10)


def test_every_truncation_fails_cleanly() -> None:
    blob = fatbin_container([fatbin_entry(sm=75), fatbin_entry(kind=KIND_PTX, header_size=80)])
    for cut in range(1, len(blob)):
        try:
            parse_fatbin(blob[:cut])
        except FatbinError:
            continue
        pytest.fail(f"truncation at {cut} parsed")


def test_a_device_linked_cubin_with_a_long_inline_name_is_read() -> None:
    """nvlink names the cubin of a device link (-rdc, CUDA_RESOLVE_DEVICE_SYMBOLS) after every object
    it links: LightGBM 4.7.0's entry header is 4688 bytes, and the wheel was refused as malformed."""
    from buildrows.binaries.fatscan import FatbinScanner

    blob = fatbin_container([fatbin_entry(sm=90, header_size=4688, payload=b"\x7fELF" + b"\0" * 4)])
    (entry,) = parse_fatbin(blob)
    assert entry.kind == "elf" and entry.sm == 90
    scanner = FatbinScanner(len(blob))
    scanner.feed(0, blob)
    scanner.finish()
    found = scanner.device_code(0, len(blob))
    assert found is not None and found.cubins == ("sm_90",)

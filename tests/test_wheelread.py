"""Reading wheels in memory: libraries, name and metadata; hostile archives refused."""

from __future__ import annotations

import os
import re
import struct
import zipfile
from pathlib import Path

import pytest
from cuda_tools import (
    VARIANTS,
    build_variants,
    cuobjdump_list,
    fatbin_container,
    fatbin_entry,
    find_cuobjdump,
    find_nvcc,
    listed,
    make_elf,
    make_wheel,
)

from buildrows.binaries.wheelread import (
    WheelError,
    is_shared_library,
    iter_libraries,
    list_device_code,
    parse_wheel_filename,
    read_wheel,
)

FATBIN = fatbin_container([fatbin_entry(sm=75), fatbin_entry(kind=1, sm=90, header_size=80)])
LIB = make_elf(
    [(".nv_fatbin", FATBIN)],
    needed=["libcudart.so.13"],
    runpath="$ORIGIN/../nvidia/cu13/lib",
)
PLAIN = make_elf(needed=["libc.so.6"])
WHEEL_NAME = "demo-1.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"


def _wheel(tmp_path: Path, members: dict[str, bytes], **kwargs: object) -> Path:
    return make_wheel(tmp_path / WHEEL_NAME, members, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("workers", [1, 4])
@pytest.mark.parametrize("compression", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED])
def test_read_wheel(tmp_path: Path, workers: int, compression: int) -> None:
    wheel = _wheel(
        tmp_path,
        {"demo/_core.so": LIB, "demo/libplain.so.1": PLAIN, "demo/__init__.py": b""},
        compression=compression,
    )
    info = read_wheel(wheel, workers=workers)
    assert info.name.distribution == "demo"
    assert info.name.local_version == "cu130"
    assert info.name.platform_tags == ("manylinux_2_28_x86_64",)
    assert info.requires_dist == (
        'nvidia-cuda-runtime==13.0.*; platform_system == "Linux"',
        "packaging>=23",
    )
    assert [lib.path for lib in info.libraries] == ["demo/_core.so", "demo/libplain.so.1"]
    core, plain = info.libraries
    assert (core.cubins, core.ptx) == (("sm_75",), ("sm_90",))
    assert core.needed == ("libcudart.so.13",)
    assert core.rpaths == ("$ORIGIN/../nvidia/cu13/lib",)
    assert core.size == len(LIB)
    assert not plain.has_device_code
    assert "demo/__init__.py" in info.members


def test_list_device_code_and_iter_libraries(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, {"a/x.so": LIB, "a/y.pyd": LIB, "a/z.txt": b"text"})
    libs = list_device_code(wheel)
    assert sorted(libs) == ["a/x.so", "a/y.pyd"]
    assert libs["a/y.pyd"].cubins == ("sm_75",)
    assert [lib.path for lib in iter_libraries(wheel, workers=2)] == ["a/x.so", "a/y.pyd"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("torch/lib/libtorch_cuda.so", True),
        ("nvidia/lib/libcudart.so.13", True),
        ("x/libfoo.so.1.2.3", True),
        ("x/foo.cpython-312-x86_64-linux-gnu.so", True),
        ("x/torch_cuda.DLL", True),
        ("x/_C.pyd", True),
        ("x/so.py", False),
        ("x/libfoo.so.txt", False),
        ("x/foo.dll.manifest", False),
    ],
)
def test_is_shared_library(name: str, expected: bool) -> None:
    assert is_shared_library(name) is expected


def test_wheel_filename() -> None:
    name = parse_wheel_filename(
        "torch-2.9.0+cu130-1-cp312-cp312-manylinux_2_28_x86_64.manylinux2014_x86_64.whl"
    )
    assert (name.distribution, name.version, name.build) == ("torch", "2.9.0+cu130", "1")
    assert name.platform_tags == ("manylinux_2_28_x86_64", "manylinux2014_x86_64")
    assert parse_wheel_filename("a-1-py3-none-any.whl").local_version is None


@pytest.mark.parametrize(
    ("filename", "message"),
    [
        ("demo-1.0.tar.gz", "no .whl suffix"),
        ("demo-1.0-py3.whl", "expected 'name-version[-build]-python-abi-platform.whl'"),
        ("demo-1.0-x-py3-none-any.whl", "build tag 'x' must start with a digit"),
    ],
)
def test_bad_wheel_filename(filename: str, message: str) -> None:
    with pytest.raises(WheelError, match=re.escape(message)):
        parse_wheel_filename(filename)


# --- hostile and broken archives ------------------------------------------------------------


@pytest.mark.parametrize(
    ("member", "message"),
    [
        ("../evil.so", "member name climbs out of the wheel"),
        ("demo/../../evil.so", "member name climbs out of the wheel"),
        ("/etc/evil.so", "absolute member name"),
        ("C:/evil.dll", "absolute member name"),
        ("demo\\evil.dll", "member name contains a backslash"),
    ],
)
def test_unsafe_member_names(tmp_path: Path, member: str, message: str) -> None:
    wheel = _wheel(tmp_path, {member: PLAIN})
    with pytest.raises(WheelError, match=message) as info:
        read_wheel(wheel)
    assert info.value.member == member


def test_duplicate_member(tmp_path: Path) -> None:
    wheel = tmp_path / WHEEL_NAME
    with (
        pytest.warns(UserWarning, match="Duplicate name"),
        zipfile.ZipFile(wheel, "w") as zf,
    ):
        zf.writestr("demo/x.so", PLAIN)
        zf.writestr("demo/x.so", LIB)
    with pytest.raises(WheelError, match="demo/x.so: duplicate member name"):
        read_wheel(wheel)


def test_member_over_the_size_cap(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, {"demo/x.so": LIB})
    with pytest.raises(
        WheelError, match=f"demo/x.so: declares {len(LIB)} bytes, more than the 100-byte limit"
    ):
        list_device_code(wheel, max_member_size=100)


def _patch_sizes(wheel: Path, member: str, size: int) -> None:
    """Rewrite a member's uncompressed size in both its local and central headers."""
    data = bytearray(wheel.read_bytes())
    name = member.encode()
    pos = 0
    while True:
        pos = data.find(b"PK\x03\x04", pos)
        assert pos >= 0
        (name_len,) = struct.unpack_from("<H", data, pos + 26)
        if data[pos + 30 : pos + 30 + name_len] == name:
            struct.pack_into("<I", data, pos + 22, size)
            break
        pos += 4
    pos = 0
    while True:
        pos = data.find(b"PK\x01\x02", pos)
        assert pos >= 0
        (name_len,) = struct.unpack_from("<H", data, pos + 28)
        if data[pos + 46 : pos + 46 + name_len] == name:
            struct.pack_into("<I", data, pos + 24, size)
            break
        pos += 4
    wheel.write_bytes(bytes(data))


def test_member_inflating_past_its_declared_size(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, {"demo/x.so": LIB})
    _patch_sizes(wheel, "demo/x.so", 100)
    with pytest.raises(WheelError, match="demo/x.so: inflates to more than its declared 100 bytes"):
        read_wheel(wheel)


def test_member_shorter_than_declared(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, {"demo/x.so": LIB})
    _patch_sizes(wheel, "demo/x.so", len(LIB) + 10)
    with pytest.raises(
        WheelError, match=f"demo/x.so: inflates to {len(LIB)} bytes, declares {len(LIB) + 10}"
    ):
        read_wheel(wheel)


def test_crc_mismatch(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, {"demo/x.so": LIB}, compression=zipfile.ZIP_STORED)
    data = bytearray(wheel.read_bytes())
    at = data.find(LIB) + len(LIB) - 1
    data[at] ^= 0xFF
    wheel.write_bytes(bytes(data))
    with pytest.raises(WheelError, match="demo/x.so: CRC-32 mismatch"):
        read_wheel(wheel)


def test_truncated_archive(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, {"demo/x.so": LIB})
    wheel.write_bytes(wheel.read_bytes()[:-30])
    with pytest.raises(WheelError, match="cannot open as a zip archive"):
        read_wheel(wheel)


def test_member_data_past_the_end(tmp_path: Path) -> None:
    # Central directory intact, the member's data cut short: move the directory up over it.
    wheel = _wheel(tmp_path, {"demo/x.so": LIB}, metadata=None, compression=zipfile.ZIP_STORED)
    data = wheel.read_bytes()
    central = data.find(b"PK\x01\x02")
    cut = 200
    shortened = bytearray(data[: central - cut] + data[central:])
    eocd = shortened.rfind(b"PK\x05\x06")
    (offset,) = struct.unpack_from("<I", shortened, eocd + 16)
    struct.pack_into("<I", shortened, eocd + 16, offset - cut)
    wheel.write_bytes(bytes(shortened))
    with pytest.raises(WheelError, match="demo/x.so: compressed data .* runs past the end"):
        list(iter_libraries(wheel))


def test_local_header_disagrees(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, {"demo/x.so": LIB})
    data = wheel.read_bytes()
    at = data.find(b"demo/x.so")  # the first one is the local header's
    wheel.write_bytes(data[:at] + b"demo/y.so" + data[at + 9 :])
    with pytest.raises(WheelError, match="local header names 'demo/y.so'"):
        read_wheel(wheel)


def test_corrupt_deflate(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, {"demo/x.so": LIB})
    data = bytearray(wheel.read_bytes())
    start = data.find(b"demo/x.so") + len("demo/x.so")
    for i in range(start, start + 16):
        data[i] = 0xFF
    wheel.write_bytes(bytes(data))
    with pytest.raises(WheelError, match="demo/x.so: "):
        read_wheel(wheel)


def test_malformed_library_names_the_member(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, {"demo/bad.so": LIB[:100], "demo/txt.so": b"INPUT(-lfoo)"})
    with pytest.raises(WheelError, match="demo/bad.so: ELF section header table") as info:
        read_wheel(wheel, workers=1)
    assert isinstance(info.value.__cause__, ValueError)
    wheel = _wheel(tmp_path, {"demo/txt.so": b"INPUT(-lfoo)"})
    with pytest.raises(WheelError, match="demo/txt.so: not an ELF or PE file"):
        read_wheel(wheel)


def test_malformed_fatbin_names_the_member(tmp_path: Path) -> None:
    lib = make_elf([(".nv_fatbin", FATBIN[:-4])])
    wheel = _wheel(tmp_path, {"demo/x.so": lib})
    with pytest.raises(WheelError, match="demo/x.so: container at offset 0x0 declares"):
        read_wheel(wheel)


def test_missing_metadata(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, {"demo/x.so": LIB}, metadata=None)
    with pytest.raises(WheelError, match="no .dist-info/METADATA"):
        read_wheel(wheel)


# --- real libraries, cross-checked with cuobjdump ---------------------------------------------


@pytest.mark.integration
def test_nvcc_wheel_agrees_with_cuobjdump(tmp_path_factory: pytest.TempPathFactory) -> None:
    nvcc, cuobjdump = find_nvcc(), find_cuobjdump()
    if nvcc is None or cuobjdump is None:
        pytest.skip("needs nvcc and cuobjdump")
    out = tmp_path_factory.mktemp("wheel-libs")
    picked = [v for v in VARIANTS if v.name in ("mixed", "family", "compress_size", "rdc")]
    libs = build_variants(nvcc, out, picked)
    members = {f"demo/{p.name}": p.read_bytes() for p in libs.values()}
    wheel = make_wheel(out / WHEEL_NAME, members)
    info = read_wheel(wheel)
    assert len(info.libraries) == len(libs)
    for lib in info.libraries:
        elf, ptx = cuobjdump_list(
            cuobjdump, libs[lib.path.removeprefix("demo/lib").removesuffix(".so")]
        )
        assert (listed(lib.cubins), lib.ptx) == (elf, ptx), lib.path


@pytest.mark.integration
@pytest.mark.skipif(
    not os.environ.get("BUILDROWS_TORCH_WHEEL"),
    reason="set BUILDROWS_TORCH_WHEEL to a PyTorch CUDA wheel",
)
def test_torch_wheel_agrees_with_cuobjdump(tmp_path: Path) -> None:
    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        pytest.skip("cuobjdump not found")
    wheel = Path(os.environ["BUILDROWS_TORCH_WHEEL"])
    info = read_wheel(wheel)
    assert any(lib.has_device_code for lib in info.libraries)
    with zipfile.ZipFile(wheel) as zf:
        for lib in info.libraries:
            extracted = Path(zf.extract(lib.path, tmp_path))
            assert (listed(lib.cubins), lib.ptx) == cuobjdump_list(cuobjdump, extracted), lib.path
            extracted.unlink()

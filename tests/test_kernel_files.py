"""Device code outside shared libraries (issue 27, point 3): cubins, fat binaries, PTX text and host
ELF objects shipped as files, recognised by content whatever their name, read like cuobjdump reads
them, judged as one unit per row, reported per directory; a pure-tagged (`py3-none-any`) CUDA wheel
placed in a row; the central directory read once; symbols read streaming (init's memory).

The kernels are real: nvcc 13.0 compiles one tiny kernel into each shape, once per module."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.binaries import wheelread, zipdir
from buildrows.binaries.kernelfiles import cubin_arch, sniff
from buildrows.binaries.looseread import LooseError, read_loose
from buildrows.binaries.symbols import imported_symbols
from buildrows.binaries.wheelread import WheelError, read_kernels, read_wheel
from buildrows.binaries.wheelsymbols import wheel_imported_symbols
from tests.conftest import Result
from tests.cuda_tools import build_plain_so, cuobjdump_list, find_cuobjdump, find_nvcc

KERNEL = 'extern "C" __global__ void add(float *x) { x[threadIdx.x] += 1.0f; }\n'
# file name -> nvcc arguments (besides the source and -o)
SHAPES = {
    "k80.cubin": ["-cubin", "-gencode", "arch=compute_80,code=sm_80"],
    "k90.cubin": ["-cubin", "-gencode", "arch=compute_90,code=sm_90"],
    "k90a.cubin": ["-cubin", "-gencode", "arch=compute_90a,code=sm_90a"],
    "k100f.cubin": ["-cubin", "-gencode", "arch=compute_100f,code=sm_100f"],
    "k90.ptx": ["-ptx", "-arch=compute_90"],
    "k.fatbin": ["-fatbin", "-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_86,code=[sm_86,compute_86]"],
    "k.o": ["-c", "-gencode", "arch=compute_80,code=[sm_80,compute_80]"],
}
EXPECTED = {  # what cuobjdump -elf's headers / --list-ptx name (PTX text: its .target; cuobjdump reads no PTX file)
    "k80.cubin": (("sm_80",), ()), "k90.cubin": (("sm_90",), ()), "k90a.cubin": (("sm_90a",), ()),
    # a family cubin: its toolkit note says -arch sm_100f, as cuobjdump -elf does (--list-elf drops the f)
    "k100f.cubin": (("sm_100f",), ()), "k90.ptx": ((), ("sm_90",)),
    "k.fatbin": (("sm_75", "sm_86"), ("sm_86",)), "k.o": (("sm_80",), ("sm_80",)),
}
METADATA = "Metadata-Version: 2.1\nName: kern\nVersion: 1.0\n"


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found")
    out = tmp_path_factory.mktemp("kernels")
    (out / "k.cu").write_text(KERNEL, encoding="utf-8")
    for name, args in SHAPES.items():
        subprocess.run([nvcc, *args, "-o", str(out / name), str(out / "k.cu")], check=True, capture_output=True)
    return out


def _wheel(path: Path, members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        zf.writestr("kern-1.0.dist-info/METADATA", METADATA)
    return path


# Odd names on purpose: content decides, not the extension.
RENAMED = {"k80.cubin": "kern/kernels/add_80", "k90a.cubin": "kern/kernels/add.sm90a.bin", "k90.ptx": "kern/ptx/add.txt",
           "k.fatbin": "kern/kernels/add.fatbin", "k.o": "kern/obj/add.o", "k100f.cubin": "kern/kernels/add_100.cubin",
           "k90.cubin": "kern/kernels/add_90.cubin"}


@pytest.mark.parametrize("compression", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED])
def test_every_shape_read_by_content_as_cuobjdump_lists_it(kernels: Path, tmp_path: Path, compression: int) -> None:
    members = {RENAMED[f]: (kernels / f).read_bytes() for f in SHAPES}
    members["kern/__init__.py"] = b".version 9.0\n.target sm_90\n"  # a source file is never sniffed
    members["kern/data.bin"] = b"\x7fELF" + b"\0" * 60  # starts like ELF, is none: not a kernel file
    members["kern/bin/tool"] = Path("/bin/true").read_bytes()  # a host executable without device code: neither
    info = read_wheel(_wheel(tmp_path / "kern-1.0-py3-none-any.whl", members, compression))
    got = {k.path: (k.cubins, k.ptx) for k in info.kernels}
    assert got == {RENAMED[f]: EXPECTED[f] for f in SHAPES}
    assert {k.path: k.kind for k in info.kernels}["kern/obj/add.o"] == "elf"
    assert info.libraries == ()
    cuobjdump = find_cuobjdump()
    if cuobjdump is not None:  # the real cuobjdump agrees on every file it can read (not PTX text)
        for f in SHAPES:
            if f.endswith(".ptx"):
                continue
            listed = cuobjdump_list(cuobjdump, kernels / f)
            want = EXPECTED[f]
            assert listed == (tuple(a.removesuffix("f") for a in want[0]), want[1]), f
    # a directory (an install tree) reads the same
    tree = tmp_path / "tree"
    for name, data in members.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_bytes(data)
    assert {k.path: (k.cubins, k.ptx) for k in read_loose(tree).kernels} == got


def test_sniff_decides_by_content_from_a_prefix(kernels: Path) -> None:
    assert sniff((kernels / "k80.cubin").read_bytes()[:64]) == "cubin"
    assert sniff((kernels / "k.fatbin").read_bytes()[:16]) == "fatbin"
    assert sniff((kernels / "k.o").read_bytes()[:64]) == "elf"
    assert sniff((kernels / "k90.ptx").read_bytes()[:400]) == "ptx"
    assert sniff(b"// .target sm_90 before\n.version 9.0\n") is None  # .target must follow .version
    assert sniff(b"plain text") is None


def _policy(tmp_path: Path, archs: str, extra: str = "", platform: str = "linux-x86_64") -> Path:
    policy = tmp_path / "buildrows.toml"
    policy.write_text(f"""[project]
name = "kern"
driver = "setup.py"

[python]
versions = ["3.12"]

[cuda]
trains = ["13.0"]

[cuda.runtime.13]
mode = "static"

[platforms.{platform}]
trains = ["13.0"]

[[platforms.{platform}.cuda]]
trains = ["13.0"]
archs = "{archs}"
{extra}""", encoding="utf-8")
    return policy


def _kernel_wheel(kernels: Path, tmp_path: Path, name: str = "kern-1.0-py3-none-any.whl") -> Path:
    members = {"kern/kernels/add_80.cubin": (kernels / "k80.cubin").read_bytes(),
               "kern/kernels/add_90.cubin": (kernels / "k90.cubin").read_bytes(),
               "kern/kernels/add_90.ptx": (kernels / "k90.ptx").read_bytes(),
               "kern/vendor/other.fatbin": (kernels / "k.fatbin").read_bytes()}
    return _wheel(tmp_path / name, members)


VENDOR = """
[[check.libraries]]
files = ["kern/vendor/*"]
vendored = true
reason = "a vendored kernel set"
"""


def test_pure_kernel_wheel_passes_its_row(kernels: Path, tmp_path: Path, cli: Callable[..., Result]) -> None:
    wheel = _kernel_wheel(kernels, tmp_path)
    r = cli("check", str(wheel), "--cuda", "13.0", "--config", str(_policy(tmp_path, "8.0 9.0", VENDOR)))
    assert r.code == 0, r.out + r.err
    assert "row linux-x86_64-cu130-py312" in r.out  # the policy's one platform for the train
    assert "3 kernel files under kern/kernels/ carry exactly sm_80 sm_90 with PTX sm_90" in r.out
    assert "kern/kernels/: 3 kernel files (2 cubin, 1 ptx): elf sm_80 sm_90; ptx sm_90" in r.out
    assert "1 kernel file under kern/vendor/: vendored, not held to the row's list" in r.out
    r = cli("check", str(wheel), "--cuda", "13.0", "--config", str(_policy(tmp_path, "8.0 9.0", VENDOR)), "--json")
    report = json.loads(r.out)
    assert report["ok"] is True
    assert report["kernels"]["kern/kernels/add_90.ptx"] == {"kind": "ptx", "elf": [], "ptx": ["sm_90"]}
    # the policy's one platform for the train, not this machine's
    r = cli("check", str(wheel), "--cuda", "13.0",
            "--config", str(_policy(tmp_path, "8.0 9.0", VENDOR, platform="linux-aarch64")))
    assert r.code == 0, r.out + r.err
    assert "row linux-aarch64-cu130-py312" in r.out
    # --row names the row of a pure wheel too (its platform tag `any` installs everywhere)
    r = cli("check", str(wheel), "--row", "linux-x86_64-cu130-py312", "--cuda", "13.0",
            "--config", str(_policy(tmp_path, "8.0 9.0", VENDOR)))
    assert r.code == 0, r.out + r.err


def test_kernel_files_are_dated_by_their_notes_and_ptx_isa(kernels: Path, tmp_path: Path,
                                                           cli: Callable[..., Result]) -> None:
    """A cubin file's toolkit note and a PTX file's .version date the kernel files as they date a library:
    nvcc 13.0's (ISA 9.0, release 13.0) claimed as CUDA 12.8 fails, naming the unit; the vendored one is not judged."""
    info = read_wheel(_kernel_wheel(kernels, tmp_path))
    files = {k.path: k for k in info.kernels}
    nvcc = find_nvcc()
    assert nvcc is not None
    release = re.search(r"release (\d+)\.(\d+),", subprocess.run([nvcc, "--version"], capture_output=True, text=True,
                                                                   check=True).stdout)
    assert release is not None and (int(release.group(1)), int(release.group(2))) == (13, 0)
    assert files["kern/kernels/add_80.cubin"].cubin_toolkits == ((13, 0),)
    assert files["kern/kernels/add_90.ptx"].ptx_isa == ((9, 0),)
    assert files["kern/vendor/other.fatbin"].cubin_toolkits == ((13, 0), (13, 0))  # small: stored uncompressed
    wheel = _kernel_wheel(kernels, tmp_path, "kern-1.0-py3-none-any.whl")
    ok = cli("check", str(wheel), "--cuda", "13.0", "--config", str(_policy(tmp_path, "8.0 9.0", VENDOR)))
    assert ("PTX ISA 9.0 in 1 kernel-file group and cubins of CUDA 13.0 (their toolkit notes) in 1 kernel-file group: "
            "no newer than CUDA 13.0 writes") in ok.out
    claim = _policy(tmp_path, "8.0 9.0", VENDOR)
    claim.write_text(claim.read_text(encoding="utf-8").replace('"13.0"', '"12.8"').replace("runtime.13", "runtime.12"),
                     encoding="utf-8")
    old = cli("check", str(wheel), "--cuda", "12.8", "--config", str(claim))
    assert old.code == 5, old.out + old.err
    assert ("3 kernel files under kern/kernels/: PTX ISA 9.0 is CUDA 13.0's, but the row claims CUDA 12.8") in old.out
    assert ("3 kernel files under kern/kernels/: its cubins were written by CUDA 13.0 (their toolkit note), but the "
            "row claims CUDA 12.8") in old.out
    assert "kern/vendor" not in old.out.split("device-code-train")[1].split("[")[0]


def test_kernel_files_are_judged_as_one_unit(kernels: Path, tmp_path: Path, cli: Callable[..., Result]) -> None:
    wheel = _kernel_wheel(kernels, tmp_path)
    r = cli("check", str(wheel), "--cuda", "13.0", "--config", str(_policy(tmp_path, "8.0 9.0 12.0", VENDOR)))
    assert r.code == 5
    assert "3 kernel files under kern/kernels/: missing device code for sm_120" in r.out
    # without the vendored rule, the fat binary joins the unit and its sm_75/sm_86 are extra
    r = cli("check", str(wheel), "--cuda", "13.0", "--config", str(_policy(tmp_path, "8.0 9.0")))
    assert r.code == 5
    assert "4 kernel files under kern/: device code for sm_75, sm_86, which the row does not list" in r.out
    assert "4 kernel files under kern/: PTX for sm_86, which the row does not list as PTX" in r.out


def test_cpu_row_with_kernel_files_fails(kernels: Path, tmp_path: Path, cli: Callable[..., Result]) -> None:
    wheel = _kernel_wheel(kernels, tmp_path, "kern-1.0-cp312-cp312-manylinux_2_28_x86_64.whl")
    r = cli("check", str(wheel))
    assert r.code == 5
    assert ("a CPU row's wheel ships device code in kern/kernels/: 3 kernel files (2 cubin, 1 ptx): "
            "elf sm_80 sm_90; ptx sm_90") in r.out


def test_no_device_code_anywhere_fails(tmp_path: Path, cli: Callable[..., Result]) -> None:
    wheel = _wheel(tmp_path / "kern-1.0-py3-none-any.whl", {"kern/readme.txt": b"no kernels here, only text"})
    r = cli("check", str(wheel), "--cuda", "13.0", "--config", str(_policy(tmp_path, "8.0")))
    assert r.code == 5
    assert ("the wheel ships no shared library at all, and no kernel file (cubin, fat binary, PTX); "
            "a CUDA row's wheel needs its CUDA libraries") in r.out


def test_archs_summarises_thousands_of_cubins_per_directory(kernels: Path, tmp_path: Path,
                                                            cli: Callable[..., Result]) -> None:
    cubin80, cubin90 = (kernels / "k80.cubin").read_bytes(), (kernels / "k90.cubin").read_bytes()
    members = {f"kern/cubins/{d}/k{i}.cubin": cubin80 if i % 2 else cubin90 for d in ("a", "b") for i in range(300)}
    wheel = _wheel(tmp_path / "kern-1.0-py3-none-any.whl", members, zipfile.ZIP_STORED)
    r = cli("archs", "--from-wheel", str(wheel))
    assert r.code == 0, r.err
    assert r.out.splitlines() == [
        "kern/cubins/a/: 300 kernel files (300 cubin): elf sm_80 sm_90; ptx -",
        "kern/cubins/b/: 300 kernel files (300 cubin): elf sm_80 sm_90; ptx -",
        "0 of 0 libraries carry device code; 600 kernel files (cubins, fat binaries, PTX) carry device code, "
        "judged together as one unit",
        "common to all: elf sm_80 sm_90; ptx -",
    ]
    r = cli("archs", "--from-wheel", str(wheel), "--json")
    assert '"kern/cubins/a/k1.cubin": {' in r.out


def _bad_cubin(kernels: Path) -> bytes:
    data = bytearray((kernels / "k80.cubin").read_bytes())
    struct.pack_into("<I", data, 48, 0)  # e_flags: no SM
    return bytes(data)


def test_guards_name_the_member(kernels: Path, tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "kern-1.0-py3-none-any.whl", {"kern/bad.cubin": _bad_cubin(kernels)})
    with pytest.raises(WheelError, match=r"kern/bad.cubin: cubin: e_flags 0x0 name no SM architecture"):
        read_kernels(wheel)
    wheel = _wheel(tmp_path / "kern-2.0-py3-none-any.whl",
                   {"kern/bad.fatbin": (kernels / "k.fatbin").read_bytes()[:40] + b"\xff" * 64})
    with pytest.raises(WheelError, match=r"kern/bad.fatbin: fatbin: "):
        read_kernels(wheel)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "bad.cubin").write_bytes(_bad_cubin(kernels))
    with pytest.raises(LooseError, match=r"bad.cubin: cubin: e_flags 0x0 name no SM architecture"):
        read_loose(tree)
    with pytest.raises(ValueError, match="truncated ELF header"):
        cubin_arch(lambda at, n: b"\x7fELF"[at:at + n], 4)


def test_sniffing_refuses_a_local_header_that_disagrees(kernels: Path, tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "kern-1.0-py3-none-any.whl", {"kern/aaaa.cubin": (kernels / "k80.cubin").read_bytes()})
    data = bytearray(wheel.read_bytes())
    at = data.index(b"kern/aaaa.cubin")  # the local header's copy comes first
    data[at:at + 15] = b"kern/bbbb.cubin"
    wheel.write_bytes(bytes(data))
    with pytest.raises(WheelError, match="kern/aaaa.cubin: local header names another member than the central directory"):
        read_kernels(wheel)


def test_central_directory_read_once_and_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheel = _wheel(tmp_path / "kern-1.0-py3-none-any.whl", {"kern/a.py": b"x = 1\n"})
    calls: list[Path] = []
    real = zipdir._read_central_directory
    monkeypatch.setattr(zipdir, "_read_central_directory", lambda w: calls.append(w) or real(w))
    wheelread.check_archive(wheel)
    read_wheel(wheel)
    wheelread.read_dist_info_member(wheel, "buildrows.json")
    assert len(calls) == 1
    # data before the archive (a self-extractor) shifts every offset, as zipfile allows
    shifted = tmp_path / "kern-2.0-py3-none-any.whl"
    shifted.write_bytes(b"#!/bin/sh\n" * 8 + wheel.read_bytes())
    assert read_wheel(shifted).members == ("kern/a.py", "kern-1.0.dist-info/METADATA")
    bad = tmp_path / "kern-3.0-py3-none-any.whl"
    bad.write_bytes(wheel.read_bytes()[:-30])
    with pytest.raises(WheelError, match="cannot open as a zip archive: File is not a zip file"):
        read_wheel(bad)
    cut = tmp_path / "kern-4.0-py3-none-any.whl"
    data = wheel.read_bytes()
    cd = data.index(b"PK\x01\x02")
    cut.write_bytes(data[:cd] + data[cd + 10:])  # a central directory 10 bytes short of its end record
    with pytest.raises(WheelError, match="cannot open as a zip archive"):
        read_wheel(cut)


def test_zip64_end_record(tmp_path: Path) -> None:
    """A zip64 end of central directory (what more than 65,535 members or 4 GiB bring), made by
    rewriting a small archive's end record the way zip64 writers do."""
    plain = _wheel(tmp_path / "plain.whl", {f"kern/d/{i}": b"x" * i for i in range(5)})
    data = plain.read_bytes()
    eocd = data.rindex(b"PK\x05\x06")
    _, _, _, _, count, cd_size, cd_offset, _ = struct.unpack_from("<4s4H2LH", data, eocd)
    body = data[:eocd]
    record = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, cd_size, cd_offset)
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, len(body), 1)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    wheel = tmp_path / "kern-1.0-py3-none-any.whl"
    wheel.write_bytes(body + record + locator + end)
    with zipfile.ZipFile(wheel) as zf:
        want = [(i.filename, i.header_offset, i.file_size) for i in zf.infolist()]
    assert [(m.filename, m.header_offset, m.file_size) for m in zipdir._read_central_directory(wheel)] == want
    assert len(want) == 6
    broken = tmp_path / "kern-2.0-py3-none-any.whl"
    broken.write_bytes(body + record + end)  # the locator missing
    with pytest.raises(WheelError, match="zip64 end of central directory locator missing"):
        zipdir._read_central_directory(broken)


def test_symbols_stream_as_read_whole(tmp_path: Path) -> None:
    lib = build_plain_so(tmp_path)
    if lib is None:
        pytest.skip("no C compiler")
    data = lib.read_bytes()
    wheel = _wheel(tmp_path / "kern-1.0-py3-none-any.whl", {"kern/libplain.so": data})
    streamed = wheel_imported_symbols(wheel, ["kern/libplain.so"])
    assert streamed == {"kern/libplain.so": imported_symbols(data)}
    assert streamed["kern/libplain.so"]  # it imports something (libc)
    with pytest.raises(WheelError, match="kern/missing.so: no such member"):
        wheel_imported_symbols(wheel, ["kern/missing.so"])


def _ptxas_12() -> Path | None:
    """A CUDA 12.x ptxas (Triton ships one): its cubins use ELF ABI 7, where e_flags say `a` themselves."""
    import importlib.util

    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        ptxas = Path(root) / "backends" / "nvidia" / "bin" / "ptxas"
        if ptxas.is_file():
            return ptxas
    return None


def test_abi7_cubins_from_a_cuda12_ptxas(kernels: Path, tmp_path: Path) -> None:
    ptxas = _ptxas_12()
    if ptxas is None:
        pytest.skip("no CUDA 12 ptxas (Triton's) installed")
    text = (kernels / "k90.ptx").read_text(encoding="utf-8").replace(".version 9.0", ".version 8.0")
    members = {}
    for target, want in (("sm_80", "sm_80"), ("sm_90a", "sm_90a")):
        source = tmp_path / f"{target}.ptx"
        source.write_text(text.replace(".target sm_90", f".target {target}"), encoding="utf-8")
        out = tmp_path / f"{target}.cubin"
        subprocess.run([str(ptxas), f"-arch={target}", "-o", str(out), str(source)], check=True, capture_output=True)
        assert out.read_bytes()[8] == 7  # ELF ABI version 7: no toolkit note (below)
        members[f"kern/{target}.cubin"] = out.read_bytes()
        cuobjdump = find_cuobjdump()
        if cuobjdump is not None:
            assert cuobjdump_list(cuobjdump, out) == ((want,), ())
    info = read_wheel(_wheel(tmp_path / "kern-1.0-py3-none-any.whl", members))
    assert {k.path: k.cubins for k in info.kernels} == {"kern/sm_80.cubin": ("sm_80",), "kern/sm_90a.cubin": ("sm_90a",)}
    assert {k.cubin_toolkits for k in info.kernels} == {()}  # ptxas writes the note in ABI 8 cubins only


def test_load_symbols_ride_on_the_readers_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`check` reads the wheel with keep_for_symbols: the load check's symbol reader then takes each
    library's stream and string scan from that pass (no second inflate), with the same answer."""
    from buildrows.binaries import wheelsymbols

    lib = build_plain_so(tmp_path)
    if lib is None:
        pytest.skip("no C compiler")
    wheel = _wheel(tmp_path / "kern-1.0-py3-none-any.whl", {"kern/libplain.so": lib.read_bytes()})
    read_wheel(wheel)  # not kept: the symbol reader streams the library itself
    assert wheelread.passed_library(wheel, "kern/libplain.so") is None
    alone = wheelsymbols.wheel_library_symbols(wheel, ["kern/libplain.so"], markers={"kern/libplain.so"})
    read_wheel(wheel, keep_for_symbols=True)
    assert wheelread.passed_library(wheel, "kern/libplain.so") is not None
    streams: list[object] = []
    # where wheel_library_symbols looks the stream up (it was patched on wheelread, which it never looked in)
    monkeypatch.setattr(wheelsymbols, "member_stream", lambda *a: streams.append(a) or pytest.fail("inflated again"))
    assert wheelsymbols.wheel_library_symbols(wheel, ["kern/libplain.so"], markers={"kern/libplain.so"}) == alone
    assert streams == []

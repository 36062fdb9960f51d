"""Helpers shared by the device-code tests: find nvcc and cuobjdump, build tiny CUDA libraries,
parse cuobjdump's listings, and write small fat binaries, ELF files and wheels by hand."""

from __future__ import annotations

import importlib.util
import io
import os
import re
import shutil
import struct
import subprocess
import zipfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

KERNEL = """\
__global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }
extern "C" void launch(float* x) { scale<<<1, 32>>>(x); }
"""


def find_nvcc() -> str | None:
    return shutil.which("nvcc")


def find_cuobjdump() -> str | None:
    """cuobjdump from PATH, else from PyPI's nvidia-cuda-cuobjdump (``nvidia/cu*/bin``)."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        for candidate in sorted(Path(root).glob("cu*/bin/cuobjdump"), reverse=True):
            if os.access(candidate, os.X_OK):
                return str(candidate)
    return None


_ELF_LINE = re.compile(r"^ELF file\s+\d+: .*\.(sm_\w+)\.cubin$")
_PTX_LINE = re.compile(r"^PTX file\s+\d+: .*\.(sm_\w+)\.ptx$")


def listed(cubins: tuple[str, ...]) -> tuple[str, ...]:
    """Cubin names as ``cuobjdump --list-elf`` prints them: a family cubin without its "f" (``sm_100``)."""
    return tuple(c.removesuffix("f") for c in cubins)


_HEADER = re.compile(r"^Fatbin (elf|ptx) code:\n=+\narch = (sm_\w+)\ncode version = \[(\d+),(\d+)\]$", re.MULTILINE)


def cuobjdump_headers(cuobjdump: str, path: Path) -> tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[int, int], ...]]:
    """(cubin archs, PTX archs, PTX code versions) from the entry headers ``cuobjdump -elf`` prints, where
    a family cubin keeps its "f" (``arch = sm_100f``) and a PTX entry's code version is its ISA (``[9,0]``)."""
    out = subprocess.run([cuobjdump, "-elf", str(path)], capture_output=True, text=True, check=True).stdout
    cubins, ptx, isa = [], [], []
    for kind, arch, major, minor in _HEADER.findall(out):
        if kind == "elf":
            cubins.append(arch)
        else:
            ptx.append(arch)
            isa.append((int(major), int(minor)))
    return tuple(cubins), tuple(ptx), tuple(isa)


def cuobjdump_list(cuobjdump: str, path: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(cubin archs, PTX archs) as ``cuobjdump --list-elf`` / ``--list-ptx`` print them."""
    result: list[tuple[str, ...]] = []
    for flag, pattern in (("--list-elf", _ELF_LINE), ("--list-ptx", _PTX_LINE)):
        proc = subprocess.run(
            [cuobjdump, flag, str(path)], capture_output=True, text=True, check=False
        )
        # A file without device code exits non-zero with an "info" line; that is an empty list.
        if proc.returncode != 0 and "does not contain device code" not in proc.stderr:
            raise RuntimeError(f"cuobjdump {flag} {path} failed ({proc.returncode}): {proc.stderr}")
        archs = []
        for line in proc.stdout.splitlines():
            match = pattern.match(line.strip())
            if match:
                archs.append(match.group(1))
            elif line.strip():
                raise RuntimeError(f"unexpected cuobjdump line: {line!r}")
        result.append(tuple(archs))
    return result[0], result[1]


@dataclass(frozen=True)
class Variant:
    """One test library: nvcc flags and the (cubins, ptx) that nvcc 13.0 produces."""

    name: str
    flags: tuple[str, ...]
    cubins: tuple[str, ...]
    ptx: tuple[str, ...]


GENCODE_MIXED = (
    "-gencode=arch=compute_75,code=sm_75",
    "-gencode=arch=compute_90,code=[sm_90,compute_90]",
)

VARIANTS: tuple[Variant, ...] = (
    Variant("mixed", GENCODE_MIXED, ("sm_75", "sm_90"), ("sm_90",)),
    Variant(
        "arch_specific",
        ("-gencode=arch=compute_90a,code=sm_90a", "-gencode=arch=compute_120a,code=compute_120a"),
        ("sm_90a",),
        ("sm_120a",),
    ),
    # The reader names a family cubin with its "f", as `cuobjdump -elf` does; --list-elf drops it (see `listed`).
    Variant(
        "family",
        (
            "-gencode=arch=compute_100f,code=[sm_100f,compute_100f]",
            "-gencode=arch=compute_120f,code=sm_120f",
        ),
        ("sm_100f", "sm_120f"),
        ("sm_100f",),
    ),
    Variant("ptx_only", ("-gencode=arch=compute_80,code=compute_80",), (), ("sm_80",)),
    Variant(
        "compress_all", (*GENCODE_MIXED, "-Xfatbin=-compress-all"), ("sm_75", "sm_90"), ("sm_90",)
    ),
    Variant(
        "compress_none", (*GENCODE_MIXED, "--compress-mode=none"), ("sm_75", "sm_90"), ("sm_90",)
    ),
    Variant(
        "compress_size", (*GENCODE_MIXED, "--compress-mode=size"), ("sm_75", "sm_90"), ("sm_90",)
    ),
    Variant(
        "compress_speed", (*GENCODE_MIXED, "--compress-mode=speed"), ("sm_75", "sm_90"), ("sm_90",)
    ),
    # -rdc: the executable fat binary has the linked cubin only; PTX stays in __nv_relfatbin.
    Variant(
        "rdc", ("-rdc=true", "-gencode=arch=compute_90,code=[sm_90,compute_90]"), ("sm_90",), ()
    ),
)


def build_variants(
    nvcc: str, out_dir: Path, variants: Sequence[Variant] = VARIANTS
) -> dict[str, Path]:
    """Compile each variant into ``lib<name>.so``, two at a time (CI has two cores)."""
    source = out_dir / "kernel.cu"
    source.write_text(KERNEL, encoding="utf-8")

    def build(variant: Variant) -> Path:
        target = out_dir / f"lib{variant.name}.so"
        cmd = [
            nvcc,
            "-shared",
            "-Xcompiler",
            "-fPIC",
            *variant.flags,
            "-o",
            str(target),
            str(source),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr}")
        return target

    with ThreadPoolExecutor(max_workers=2) as pool:
        paths = list(pool.map(build, variants))
    return {v.name: p for v, p in zip(variants, paths, strict=True)}


def build_plain_so(out_dir: Path) -> Path | None:
    """A shared library with no device code, DT_NEEDED libm and an RPATH (needs gcc)."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        return None
    source = out_dir / "plain.c"
    source.write_text("int plain(void) { return 1; }\n", encoding="utf-8")
    target = out_dir / "libplain.so"
    cmd = [
        gcc, "-shared", "-fPIC", "-o", str(target), str(source),
        "-Wl,--no-as-needed", "-lm", "-Wl,--disable-new-dtags",
        "-Wl,-rpath,$ORIGIN/../nvidia/cu13/lib:/opt/elsewhere",
    ]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True)
    return target


def section_bytes(path: Path, name: str) -> bytes:
    """Contents of an ELF section, read with pyelftools (independent of buildrows.binaries.binfmt)."""
    from elftools.elf.elffile import ELFFile

    with path.open("rb") as fp:
        section = ELFFile(fp).get_section_by_name(name)
        if section is None:
            raise KeyError(name)
        data: bytes = section.data()
        return data


# --- hand-made fat binaries --------------------------------------------------------------


def fatbin_entry(
    kind: int = 2,
    sm: int = 90,
    flags: int = 0x11,
    payload: bytes = b"\0" * 8,
    header_size: int = 64,
    version: tuple[int, int] = (1, 8),
) -> bytes:
    """One entry header and payload; `version` is (major, minor): a cubin's ELF ABI, a PTX entry's ISA."""
    header = struct.pack(
        "<HHIQIIHHIIIQQQ",
        kind,
        0x0101,
        header_size,
        len(payload),
        0,
        0,
        version[1],
        version[0],
        sm,
        0,
        0,
        flags,
        0,
        0,
    )
    return header + b"\0" * (header_size - 64) + payload


def fatbin_container(entries: Iterable[bytes]) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


# --- hand-made ELF files -----------------------------------------------------------------


def make_elf(
    sections: Sequence[tuple[str, bytes]] = (),
    needed: Sequence[str] = (),
    rpath: str | None = None,
    runpath: str | None = None,
    load_flags: int = 4,
) -> bytes:
    """A minimal little-endian ELF64 shared object: the named sections, and a PT_DYNAMIC
    segment (inside one PT_LOAD mapping the whole file at address 0, with `load_flags`: 4 read-only,
    5 read+execute as NVIDIA links its libraries, 6 read+write) when links are given."""
    ehdr_size, phdr_size, shdr_size = 64, 56, 64
    dynamic = bool(needed or rpath or runpath)
    phnum = 2 if dynamic else 0
    out = bytearray(ehdr_size + phnum * phdr_size)

    def add(blob: bytes) -> int:
        while len(out) % 8:
            out.append(0)
        offset = len(out)
        out.extend(blob)
        return offset

    dynstr = bytearray(b"\0")

    def string(text: str) -> int:
        offset = len(dynstr)
        dynstr.extend(text.encode() + b"\0")
        return offset

    dyn_entries: list[tuple[int, int]] = [(1, string(n)) for n in needed]
    if rpath is not None:
        dyn_entries.append((15, string(rpath)))
    if runpath is not None:
        dyn_entries.append((29, string(runpath)))
    section_offsets = [(name, add(data), len(data)) for name, data in sections]
    dyn_off = dyn_size = 0
    if dynamic:
        strtab_off = add(bytes(dynstr))
        dyn_entries += [(5, strtab_off), (10, len(dynstr)), (0, 0)]
        dyn_blob = b"".join(struct.pack("<qQ", t, v) for t, v in dyn_entries)
        dyn_off = add(dyn_blob)
        dyn_size = len(dyn_blob)
    shstrtab = bytearray(b"\0")
    names = []
    for name, _, _ in section_offsets:
        names.append(len(shstrtab))
        shstrtab.extend(name.encode() + b"\0")
    shstr_name = len(shstrtab)
    shstrtab.extend(b".shstrtab\0")
    shstr_off = add(bytes(shstrtab))
    shdrs = [b"\0" * shdr_size]
    for name_off, (_, offset, size) in zip(names, section_offsets, strict=True):
        shdrs.append(struct.pack("<IIQQQQIIQQ", name_off, 1, 2, 0, offset, size, 0, 0, 8, 0))
    shdrs.append(
        struct.pack("<IIQQQQIIQQ", shstr_name, 3, 0, 0, shstr_off, len(shstrtab), 0, 0, 1, 0)
    )
    shoff = add(b"".join(shdrs))
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    header = ident + struct.pack(
        "<HHIQQQIHHHHHH",
        3, 62, 1, 0, ehdr_size if phnum else 0, shoff, 0, ehdr_size,
        phdr_size, phnum, shdr_size, len(shdrs), len(shdrs) - 1,
    )  # fmt: skip
    out[:ehdr_size] = header
    if dynamic:
        load = struct.pack("<IIQQQQQQ", 1, load_flags, 0, 0, 0, len(out), len(out), 0x1000)
        dyn = struct.pack("<IIQQQQQQ", 2, 6, dyn_off, dyn_off, dyn_off, dyn_size, dyn_size, 8)
        out[ehdr_size : ehdr_size + 2 * phdr_size] = load + dyn
    return bytes(out)


# --- hand-made wheels --------------------------------------------------------------------

METADATA = """\
Metadata-Version: 2.1
Name: demo
Version: 1.0+cu130
Requires-Dist: nvidia-cuda-runtime==13.0.*; platform_system == "Linux"
Requires-Dist: packaging>=23

A description that mentions
Requires-Dist: nothing
"""


DIST_INFO = "demo-1.0+cu130.dist-info"


def make_wheel(
    path: Path,
    members: dict[str, bytes],
    metadata: str | None = METADATA,
    compression: int = zipfile.ZIP_DEFLATED,
) -> Path:
    """Write a wheel with the given members and, unless None, a METADATA. The `.dist-info` and
    METADATA's Name and Version are the file name's (`check` refuses a wheel whose are not, as pip
    does); members given under the default `demo-1.0+cu130.dist-info/` move there too."""
    import re

    parts = path.name.removesuffix(".whl").split("-")
    dist_info = f"{parts[0]}-{parts[1]}.dist-info" if path.name.endswith(".whl") and len(parts) >= 5 else DIST_INFO
    if metadata is not None and dist_info != DIST_INFO:
        for field, value in (("Name", parts[0]), ("Version", parts[1])):
            if re.search(rf"(?m)^{field}: ", metadata):
                metadata = re.sub(rf"(?m)^{field}: .*$", f"{field}: {value}", metadata, count=1)
            else:
                metadata = f"{field}: {value}\n" + metadata
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as zf:
        for name, data in members.items():
            if name.startswith(DIST_INFO + "/"):
                name = dist_info + name[len(DIST_INFO):]
            zf.writestr(zipfile.ZipInfo(name), data, compress_type=compression)
        if metadata is not None:
            zf.writestr(f"{dist_info}/METADATA", metadata)
    path.write_bytes(buffer.getvalue())
    return path

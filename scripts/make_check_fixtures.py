#!/usr/bin/env python3
"""Build real wheels for the wheel-check tests: nvcc-built libraries, each wheel failing one check.

    python scripts/make_check_fixtures.py OUT_DIR      # prints the wheels it made

Every fixture is checked against the row `--archs "7.5 9.0"` (9.0 also as PTX), CUDA 13.0,
with the seed runtime values. `FIXTURES` says which check each one must fail.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

KERNEL = r"""
extern "C" __global__ void scale(float* x) { x[threadIdx.x] *= 2.0f; }
extern "C" int launch(float* x) { scale<<<1, 32>>>(x); return (int)cudaDeviceSynchronize(); }
"""
CPU_SOURCE = "int answer(void) { return 42; }\n"

GOOD_RPATH = "$ORIGIN/../nvidia/cu13/lib"
RUNTIME_13 = "nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'"
ROW_ARCHS = "7.5 9.0"

# gencode sets, by name
GENCODES: dict[str, list[str]] = {
    "row": ["arch=compute_75,code=sm_75", "arch=compute_90,code=[sm_90,compute_90]"],
    "noptx": ["arch=compute_75,code=sm_75", "arch=compute_90,code=sm_90"],
    "only75": ["arch=compute_75,code=sm_75"],
    "only90": ["arch=compute_90,code=[sm_90,compute_90]"],
    "extra": ["arch=compute_75,code=sm_75", "arch=compute_80,code=sm_80", "arch=compute_90,code=[sm_90,compute_90]"],
}


@dataclass
class Fixture:
    name: str
    fails: tuple[str, ...]  # the checks it must fail; () for a good wheel
    libs: dict[str, tuple[str, str]] = field(default_factory=dict)  # member -> (gencode set, rpath)
    requires: tuple[str, ...] = (RUNTIME_13,)
    local: str = "+cu130"
    platform: str = "manylinux_2_28_x86_64"
    cpu_lib: bool = False
    dll: str | None = None  # Windows: "clean" or "cudart" (imports cudart64_13.dll)


FIXTURES = [
    Fixture("good", (), {"fx/_core.so": ("row", GOOD_RPATH)}),
    Fixture("good-reordered-pins", (), {"fx/_core.so": ("row", GOOD_RPATH)},
            requires=("nvidia-cuda-runtime <14, >=13", "numpy>=1.24")),
    Fixture("ptx-missing", ("device-code-covers-row",), {"fx/_core.so": ("noptx", GOOD_RPATH)}),
    Fixture("split-across-libraries", ("device-code-covers-row",),
            {"fx/_core.so": ("only75", GOOD_RPATH), "fx/_kernels.so": ("only90", GOOD_RPATH)}),
    Fixture("extra-arch", ("device-code-covers-row",), {"fx/_core.so": ("extra", GOOD_RPATH)}),
    Fixture("declares-cu11", ("runtime-declared",), {"fx/_core.so": ("row", GOOD_RPATH)},
            requires=("nvidia-cuda-runtime-cu11>=11",)),
    Fixture("absolute-runpath", ("runtime-reached",), {"fx/_core.so": ("row", "/usr/local/cuda-13.0/lib64")}),
    Fixture("origin-to-nowhere", ("runtime-reached",),
            {"fx/_core.so": ("row", GOOD_RPATH + ":$ORIGIN/../build/lib")}),
    Fixture("no-library", ("cuda-libraries-present", "runtime-reached", "device-code-covers-row"), {}),
    Fixture("cpu-declares-nvidia", ("runtime-declared",), {}, requires=(RUNTIME_13,), local="", cpu_lib=True),
    Fixture("cpu-good", (), {}, requires=(), local="", cpu_lib=True),
    # Windows: a MinGW-built DLL carrying the row's real fat binary
    Fixture("win-good", (), {}, requires=(RUNTIME_13,), platform="win_amd64", dll="clean"),
    Fixture("win-imports-cudart", ("no-cudart-import",), {}, requires=(), platform="win_amd64", dll="cudart"),
    Fixture("win-declares-nvidia", ("runtime-declared",), {}, requires=("nvidia-cuda-runtime>=13,<14",),
            platform="win_amd64", dll="clean"),
]

MINGW_GCC = "x86_64-w64-mingw32-gcc"
MINGW_DLLTOOL = "x86_64-w64-mingw32-dlltool"


def mingw_available() -> bool:
    return all(shutil.which(tool) for tool in (MINGW_GCC, MINGW_DLLTOOL))


def build_pe_dll(out_dir: Path, fatbin_bytes: bytes, import_cudart: bool, *, name: str = "devicecode",
                 long_section_names: bool = False) -> Path:
    """A Windows DLL with `fatbin_bytes` in a `.nv_fatbin` section, optionally importing cudart64_13.dll.

    Without long section names the linker truncates the name to `.nv_fatb`, as MSVC's link.exe
    does for nvcc-built DLLs; with them MinGW keeps `.nv_fatbin` through the COFF string table.
    """
    if not mingw_available():
        raise RuntimeError(f"{MINGW_GCC}/{MINGW_DLLTOOL} not found (apt-get install gcc-mingw-w64-x86-64)")
    out_dir.mkdir(parents=True, exist_ok=True)
    data = fatbin_bytes or b"\0"
    array = ",\n".join(", ".join(str(b) for b in data[i:i + 32]) for i in range(0, len(data), 32))
    source = out_dir / f"{name}.c"
    call = "cudaGetDeviceCount(&n);" if import_cudart else ""
    source.write_text(
        f"__attribute__((section(\".nv_fatbin\"), used, aligned(8)))\n"
        f"const unsigned char buildrows_fatbin[{len(data)}] = {{\n{array}\n}};\n"
        "extern int cudaGetDeviceCount(int *count);\n"
        f"__declspec(dllexport) int buildrows_probe(void) {{ int n = 0; {call} return n + buildrows_fatbin[0]; }}\n",
        encoding="utf-8",
    )
    cmd = [MINGW_GCC, "-shared", "-O1", "-o", str(out_dir / f"{name}.dll"), str(source)]
    if import_cudart:
        definition = out_dir / "cudart64_13.def"
        definition.write_text("LIBRARY cudart64_13.dll\nEXPORTS\ncudaGetDeviceCount\n", encoding="ascii")
        subprocess.run([MINGW_DLLTOOL, "-d", str(definition), "-l", str(out_dir / "libcudart64_13.a")],
                       check=True, capture_output=True)
        cmd += [f"-L{out_dir}", "-lcudart64_13"]
    cmd += ["-Wl,--enable-long-section-names"] if long_section_names else ["-s", "-Wl,--disable-long-section-names"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return out_dir / f"{name}.dll"


def row_fatbin(work: Path, nvcc: str) -> bytes:
    """The `.nv_fatbin` section of the row's Linux library: real device code for the DLLs."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from buildrows.binfmt import read_binary

    info = read_binary(build_library(work, "row", GOOD_RPATH, nvcc).read_bytes())
    return bytes(info.fatbin[0])


def _nvcc() -> str:
    path = shutil.which("nvcc")
    if path is None:
        raise SystemExit("nvcc not found on PATH")
    return path


def build_library(work: Path, gencode: str, rpath: str, nvcc: str) -> Path:
    out = work / f"lib-{gencode}-{hashlib.sha1(rpath.encode()).hexdigest()[:8]}.so"
    if out.exists():
        return out
    src = work / "kernel.cu"
    src.write_text(KERNEL)
    argv = [nvcc, "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared", "-o", str(out), str(src),
            f"-Xlinker=-rpath={rpath}"]
    for g in GENCODES[gencode]:
        argv += ["-gencode", g]
    subprocess.run(argv, check=True)
    return out


def build_cpu_library(work: Path) -> Path:
    out = work / "cpu.so"
    if not out.exists():
        src = work / "cpu.c"
        src.write_text(CPU_SOURCE)
        subprocess.run([shutil.which("cc") or "gcc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return out


def write_wheel(path: Path, dist: str, version: str, files: dict[str, bytes], requires: tuple[str, ...],
                tag: str) -> None:
    """A minimal, valid wheel: METADATA, WHEEL and RECORD with hashes."""
    info = f"{dist}-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {dist}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    files = dict(files)
    files[f"{dist}/__init__.py"] = b""
    files[f"{info}/METADATA"] = ("\n".join(meta) + "\n").encode()
    files[f"{info}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: buildrows-fixtures\nRoot-Is-Purelib: false\nTag: {tag}\n".encode()
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)


def build_all(out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    work = out / "_work"
    work.mkdir(exist_ok=True)
    nvcc = _nvcc()
    made: dict[str, Path] = {}
    for fx in FIXTURES:
        files: dict[str, bytes] = {}
        for member, (gencode, rpath) in fx.libs.items():
            files[member] = build_library(work, gencode, rpath, nvcc).read_bytes()
        if fx.cpu_lib:
            files["fx/_core.so"] = build_cpu_library(work).read_bytes()
        if fx.dll is not None:
            if not mingw_available():
                continue
            dll = build_pe_dll(work / f"pe-{fx.dll}", row_fatbin(work, nvcc), fx.dll == "cudart", name="fx_core")
            files["fx/fx_core.dll"] = dll.read_bytes()
        tag = f"cp311-cp311-{fx.platform}"
        wheel = out / f"fx-1.0{fx.local}-{tag}.whl"
        # one fixture per file name: keep them apart in subdirectories
        wheel = out / fx.name / wheel.name
        wheel.parent.mkdir(exist_ok=True)
        write_wheel(wheel, "fx", f"1.0{fx.local}", files, fx.requires, tag)
        made[fx.name] = wheel
    return made


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    for name, path in build_all(Path(sys.argv[1])).items():
        print(f"{name}\t{path}")

#!/usr/bin/env python3
"""Build real wheels for the wheel-check tests: nvcc-built libraries, each wheel failing one check.

    python scripts/make_check_fixtures.py OUT_DIR      # prints the wheels it made

`FIXTURES` are checked against the row `--archs "7.5 9.0"` (9.0 also as PTX), CUDA 13.0, with
the seed runtime values. `PROMISE_FIXTURES` are checked under a policy (`policy`: the ExecuTorch
example, or one of `POLICIES`, which `build_all` writes beside the wheels): an ExecuTorch-shaped
wheel that keeps every promise, then one wheel per broken promise. Each says which checks it fails.
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
# A PyTorch extension as its library imports torch: libtorch's C++ API (a mangled c10:: symbol,
# tied to one torch minor) or only torch's stable C ABI (aoti_torch_*). Left undefined: a shared
# library may import what the process (torch) provides.
TORCH_CXX = KERNEL + 'namespace c10 { void fixture_check(); }\nextern "C" void uses_libtorch() { c10::fixture_check(); }\n'
TORCH_STABLE = KERNEL + ('extern "C" int aoti_torch_get_device_type(void* t, int* d);\n'
                         'extern "C" int uses_stable(void* t, int* d) { return aoti_torch_get_device_type(t, d); }\n')
CPU_SOURCE = "int answer(void) { return 42; }\n"
# A host-only library that calls the runtime: built with -nodlink, so it carries no device code
# (nvcc's device link step otherwise embeds a default-architecture cubin in every library).
HOST_SOURCE = "#include <cuda_runtime_api.h>\nint devices(void) { int n = 0; cudaGetDeviceCount(&n); return n; }\n"

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
    # the example policy's rows: linux-x86_64 and linux-aarch64, CUDA 13.0
    "et-x86_64": [f"arch=compute_{a},code=sm_{a}" for a in (75, 80, 86, 89, 90, 100)]
    + ["arch=compute_120,code=[sm_120,compute_120]"],
    "et-aarch64": ["arch=compute_90,code=sm_90", "arch=compute_100,code=sm_100", "arch=compute_110,code=[sm_110,compute_110]"],
    "et-windows": [f"arch=compute_{a},code=sm_{a}" for a in (80, 86, 89, 90, 100)]
    + ["arch=compute_120,code=[sm_120,compute_120]"],
}


@dataclass(frozen=True)
class Lib:
    """One library of a fixture: `kind` "kernel" (device code for `gencode`), "torch-cxx" / "torch-stable"
    (a kernel that imports libtorch's C++ API / only torch's stable C ABI), "host" (calls the
    runtime, no device code) or "cpu" (plain C); linked to cudart `shared` or `static`."""

    kind: str = "kernel"
    gencode: str = "row"
    rpath: str = ""
    cudart: str = "shared"
    rdc: bool = False


@dataclass(frozen=True)
class Win:
    """One Windows file of a fixture, built with MinGW: a DLL or .pyd carrying the fat binary of
    `gencode` (None: no device code) and importing `imports`, or (`kind` "lib") the import library
    of the DLL named `imports[0]`."""

    kind: str = "dll"
    gencode: str | None = None
    imports: tuple[str, ...] = ()


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
    dist: str = "fx"
    version: str = "1.0"
    files: dict[str, Lib] = field(default_factory=dict)  # member -> library spec (beside `libs`)
    record: dict[str, str | None] | None = None  # .dist-info/buildrows.json (buildrows.check.record)
    policy: str = ""  # PROMISE_FIXTURES: "example" or a key of POLICIES
    windows: dict[str, Win] = field(default_factory=dict)  # member -> MinGW-built file (skipped without MinGW)


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
    # separable compilation: the PTX is only in __nv_relfatbin, which the runtime never JIT-compiles
    Fixture("separable-compilation", ("device-code-covers-row",), files={"fx/_core.so": Lib(rpath=GOOD_RPATH, rdc=True)}),
    # nothing links cudart dynamically: fine only under a static policy (see PROMISE_FIXTURES)
    Fixture("static-cudart", ("runtime-declared", "runtime-reached"),
            files={"fx/_core.so": Lib(cudart="static")}, requires=()),
    Fixture("cpu-declares-nvidia", ("runtime-declared",), {}, requires=(RUNTIME_13,), local="", cpu_lib=True),
    Fixture("cpu-good", (), {}, requires=(), local="", cpu_lib=True),
    # Windows: a MinGW-built DLL carrying the row's real fat binary
    Fixture("win-good", (), {}, requires=(RUNTIME_13,), platform="win_amd64", dll="clean"),
    Fixture("win-imports-cudart", ("no-cudart-import",), {}, requires=(), platform="win_amd64", dll="cudart"),
    Fixture("win-declares-nvidia", ("runtime-declared",), {}, requires=("nvidia-cuda-runtime>=13,<14",),
            platform="win_amd64", dll="clean"),
]

# ExecuTorch's layout and search paths, as its setup.py and CMake write them: every library gets the
# CUDA hop and the sibling hops (backends/cuda, lib, src/executorch/lib) at its depth; _C also gets
# torch/lib and keeps the absolute /lib/intel64 that PyTorch's link interface adds.
ET_DEPTH1 = "$ORIGIN/../../nvidia/cu13/lib:$ORIGIN/../backends/cuda:$ORIGIN/../lib:$ORIGIN/../src/executorch/lib"
ET_DEPTH2 = ("$ORIGIN/../../../nvidia/cu13/lib:$ORIGIN/../../backends/cuda:$ORIGIN/../../lib:"
             "$ORIGIN/../../src/executorch/lib")
ET_C_RPATH = "$ORIGIN/../../../torch/lib:$ORIGIN/../../src/executorch/lib:/lib/intel64:" + ET_DEPTH2
ET_C = "executorch/extension/pybindings/_C.cpython-311-x86_64-linux-gnu.so"
ET_REQUIRES = ("nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'", "numpy>=2.0.0; python_version >= '3.10'",
               "flatbuffers")


def et_files(gencode: str = "et-x86_64", *, cudart: str = "shared", c_kind: str = "cpu",
             c_rpath: str = ET_C_RPATH, drop: str = "") -> dict[str, Lib]:
    files = {
        "executorch/lib/libexecutorch.so": Lib("cpu", rpath=ET_DEPTH1),
        "executorch/lib/libexecutorch_backend_cuda.so": Lib("host", rpath=ET_DEPTH1, cudart=cudart),
        "executorch/lib/libexecutorch_extension_cuda.so": Lib("host", rpath=ET_DEPTH1, cudart=cudart),
        "executorch/backends/cuda/libaoti_cuda_shims.so": Lib("kernel", gencode, ET_DEPTH2, cudart=cudart),
        ET_C: Lib(c_kind, rpath=c_rpath),
    }
    files.pop(drop, None)
    return files


def et(name: str, fails: tuple[str, ...], platform: str = "manylinux_2_28_x86_64", **kw: object) -> Fixture:
    return Fixture(name, fails, dist="executorch", version="1.5.0", requires=ET_REQUIRES, platform=platform,
                   files=et_files(**kw), policy="example")  # type: ignore[arg-type]


# ExecuTorch's Windows CUDA wheel (its Windows CUDA wheel PR): the DLLs and their import libraries,
# the shims carrying the kernels, every DLL importing only the driver, and _C.pyd with no CUDA.
def win_et_files(*, drop: str = "", backend_imports: tuple[str, ...] = ("nvcuda.dll",),
                 c_imports: tuple[str, ...] = ()) -> dict[str, Win]:
    files = {
        "executorch/lib/executorch_backend_cuda.dll": Win("dll", None, backend_imports),
        "executorch/lib/executorch_backend_cuda.lib": Win("lib", None, ("executorch_backend_cuda.dll",)),
        "executorch/lib/executorch_extension_cuda.dll": Win("dll", None, ("nvcuda.dll",)),
        "executorch/lib/executorch_extension_cuda.lib": Win("lib", None, ("executorch_extension_cuda.dll",)),
        "executorch/backends/cuda/aoti_cuda_shims.dll": Win("dll", "et-windows", ("nvcuda.dll",)),
        "executorch/data/lib/aoti_cuda_shims.lib": Win("lib", None, ("aoti_cuda_shims.dll",)),
        "executorch/extension/pybindings/_C.cp311-win_amd64.pyd": Win("pyd", None, c_imports),
    }
    files.pop(drop, None)
    return files


def win_et(name: str, fails: tuple[str, ...], **kw: object) -> Fixture:
    return Fixture(name, fails, dist="executorch", version="1.5.0", requires=ET_REQUIRES[1:], platform="win_amd64",
                   windows=win_et_files(**kw), policy="example")  # type: ignore[arg-type]


TORCH_RECORD: dict[str, str | None] = {"row": "linux-x86_64-cu130-py311", "cuda": "13.0", "torch": "2.14.1",
                                       "torch_cuda": "13.0"}
TORCH_EXT = {"tx/_C.so": Lib("torch-cxx")}  # torch.utils.cpp_extension sets no RPATH: torch loads cudart
TORCH_STABLE_EXT = {"tx/_C.so": Lib("torch-stable")}

PROMISE_FIXTURES = [
    et("et-good", ()),
    et("et-rpath-outside-exceptions", ("runtime-reached",), c_rpath=ET_C_RPATH + ":/opt/conda/lib"),
    et("et-missing-library", ("required-files",), drop="executorch/lib/libexecutorch_extension_cuda.so"),
    # Linux: ExecuTorch's CUDA build links aoti_cuda_backend (and through it cudart) into _C, so
    # the example's no-CUDA promise for _C is Windows-only and this wheel passes.
    et("et-c-links-cudart", (), c_kind="host"),
    et("et-nothing-links-runtime", ("runtime-reached",), cudart="static"),
    et("et-x86_64-libraries-in-aarch64-wheel", ("binary-machine",), platform="manylinux_2_28_aarch64",
       gencode="et-aarch64"),
    win_et("win-et-good", ()),
    win_et("win-et-missing-import-library", ("required-files",), drop="executorch/lib/executorch_backend_cuda.lib"),
    win_et("win-et-dll-imports-cudart", ("no-cudart-import", "no-cuda-link"),
           backend_imports=("nvcuda.dll", "cudart64_13.dll")),
    win_et("win-et-c-imports-driver", ("no-cuda-link",), c_imports=("nvcuda.dll",)),
    Fixture("static-cudart-under-static", (), files={"fx/_core.so": Lib(cudart="static")}, requires=(), policy="static"),
    Fixture("dynamic-cudart-under-static", ("runtime-declared", "runtime-reached"),
            files={"fx/_core.so": Lib(rpath=GOOD_RPATH)}, policy="static"),
    Fixture("torch-ext", (), dist="tx", files=TORCH_EXT, requires=("torch==2.14.*",), record=TORCH_RECORD,
            policy="torch"),
    Fixture("torch-ext-range-pin", (), dist="tx", files=TORCH_EXT, requires=("torch>=2.14.1,<2.15",),
            record=TORCH_RECORD, policy="torch"),
    Fixture("torch-ext-loose-pin", ("torch-matches-build",), dist="tx", files=TORCH_EXT, requires=("torch>=2.14",),
            record=TORCH_RECORD, policy="torch"),
    Fixture("torch-ext-other-torch", ("torch-matches-build",), dist="tx", files=TORCH_EXT,
            requires=("torch==2.13.*",), record=TORCH_RECORD, policy="torch"),
    Fixture("torch-ext-cu126-torch", ("torch-matches-build",), dist="tx", files=TORCH_EXT,
            requires=("torch==2.14.*",), record={**TORCH_RECORD, "torch_cuda": "12.6"}, policy="torch"),
    Fixture("torch-ext-no-record", ("torch-matches-build",), dist="tx", files=TORCH_EXT,
            requires=("torch==2.14.*",), policy="torch"),
    # torch's stable C ABI only: torch>=X with no upper bound is right, and needs no build record
    Fixture("torch-stable-ext", (), dist="tx", files=TORCH_STABLE_EXT, requires=("torch>=2.10",), policy="torch"),
    Fixture("torch-stable-no-lower-bound", ("torch-matches-build",), dist="tx", files=TORCH_STABLE_EXT,
            requires=("torch",), policy="torch"),
    Fixture("torch-mode-without-torch", ("torch-matches-build",), dist="tx", files={"tx/_C.so": Lib("kernel")},
            requires=("torch>=2.10",), policy="torch"),
    Fixture("torch-ext-under-dynamic", ("runtime-declared", "runtime-reached"), dist="tx", files=TORCH_EXT,
            requires=("torch==2.14.*",), record=TORCH_RECORD, policy="dynamic"),
]

# Small policies for the modes: one row, linux-x86_64 CUDA 13.0, the fixtures' two architectures.
_POLICY = """[project]
name = "fx"
[python]
versions = ["3.11"]
[cuda]
trains = ["13.0"]
[cuda.runtime.13]
{runtime}
[platforms.linux-x86_64]
trains = ["13.0"]
[[platforms.linux-x86_64.cuda]]
trains = ["13.0"]
archs = "{archs}"
"""
POLICIES = {
    "static": _POLICY.format(runtime='mode = "static"', archs=ROW_ARCHS),
    "torch": _POLICY.format(runtime='mode = "torch"', archs=ROW_ARCHS),
    "dynamic": _POLICY.format(runtime='mode = "dynamic"', archs=ROW_ARCHS),
}

MINGW_GCC = "x86_64-w64-mingw32-gcc"
MINGW_DLLTOOL = "x86_64-w64-mingw32-dlltool"


def mingw_available() -> bool:
    return all(shutil.which(tool) for tool in (MINGW_GCC, MINGW_DLLTOOL))


_IMPORTED_FUNCTION = {"cudart64_13.dll": ("cudaGetDeviceCount", "int *"), "nvcuda.dll": ("cuInit", "unsigned int")}


def build_pe_dll(out_dir: Path, fatbin_bytes: bytes | None, import_cudart: bool = False, *, name: str = "devicecode",
                 long_section_names: bool = False, imports: tuple[str, ...] = (), suffix: str = ".dll") -> Path:
    """A Windows DLL with `fatbin_bytes` in a `.nv_fatbin` section (None: no section), importing
    cudart64_13.dll when asked and each DLL of `imports` (`nvcuda.dll`: the driver) through a real
    import library made from a one-line `.def` file.

    Without long section names the linker truncates the name to `.nv_fatb`, as MSVC's link.exe
    does for nvcc-built DLLs; with them MinGW keeps `.nv_fatbin` through the COFF string table.
    """
    if not mingw_available():
        raise RuntimeError(f"{MINGW_GCC}/{MINGW_DLLTOOL} not found (apt-get install gcc-mingw-w64-x86-64)")
    out_dir.mkdir(parents=True, exist_ok=True)
    imports = (*imports, "cudart64_13.dll") if import_cudart else imports
    source = out_dir / f"{name}.c"
    lines: list[str] = []
    use = "0"
    if fatbin_bytes is not None:
        data = fatbin_bytes or b"\0"
        array = ",\n".join(", ".join(str(b) for b in data[i:i + 32]) for i in range(0, len(data), 32))
        lines += ["__attribute__((section(\".nv_fatbin\"), used, aligned(8)))",
                  f"const unsigned char buildrows_fatbin[{len(data)}] = {{\n{array}\n}};"]
        use = "buildrows_fatbin[0]"
    calls = []
    cmd = [MINGW_GCC, "-shared", "-O1", "-o", str(out_dir / f"{name}{suffix}"), str(source)]
    for dll in imports:
        function, arg = _IMPORTED_FUNCTION[dll]
        lines.append(f"extern int {function}({arg});")
        calls.append(f"n += {function}(0);")
        stem = dll.removesuffix(".dll")
        definition = out_dir / f"{stem}.def"
        definition.write_text(f"LIBRARY {dll}\nEXPORTS\n{function}\n", encoding="ascii")
        subprocess.run([MINGW_DLLTOOL, "-d", str(definition), "-l", str(out_dir / f"lib{stem}.a")],
                       check=True, capture_output=True)
        cmd += [f"-L{out_dir}", f"-l{stem}"]
    lines.append(f"__declspec(dllexport) int buildrows_probe(void) {{ int n = 0; {' '.join(calls)} return n + {use}; }}")
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cmd += ["-Wl,--enable-long-section-names"] if long_section_names else ["-s", "-Wl,--disable-long-section-names"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return out_dir / f"{name}{suffix}"


def build_import_library(out_dir: Path, dll: str) -> Path:
    """The import library (`.lib`) a C++ application links to use `dll`, made by dlltool."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = dll.removesuffix(".dll")
    definition = out_dir / f"{stem}-exports.def"
    definition.write_text(f"LIBRARY {dll}\nEXPORTS\nbuildrows_probe\n", encoding="ascii")
    out = out_dir / f"{stem}.lib"
    subprocess.run([MINGW_DLLTOOL, "-d", str(definition), "-l", str(out)], check=True, capture_output=True)
    return out


def row_fatbin(work: Path, nvcc: str, gencode: str = "row") -> bytes:
    """The `.nv_fatbin` section of a Linux library built for `gencode`: real device code for the DLLs."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from buildrows.binaries.binfmt import read_binary

    info = read_binary(build_library(work, gencode, GOOD_RPATH, nvcc).read_bytes())
    return bytes(info.fatbin[0])


def _nvcc() -> str:
    path = shutil.which("nvcc")
    if path is None:
        raise SystemExit("nvcc not found on PATH")
    return path


def build_library(work: Path, gencode: str, rpath: str, nvcc: str) -> Path:
    return build_lib(work, Lib("kernel", gencode, rpath), nvcc)


def build_lib(work: Path, lib: Lib, nvcc: str) -> Path:
    """Build one library with the real nvcc (cached in `work` by its spec)."""
    if lib.kind == "cpu":
        out = build_cpu_library(work, lib.rpath)
        return out
    key = hashlib.sha1(repr(lib).encode()).hexdigest()[:10]
    out = work / f"lib-{lib.kind}-{lib.gencode}-{key}.so"
    if out.exists():
        return out
    if lib.kind in ("kernel", "torch-cxx", "torch-stable"):
        src = work / f"{lib.kind}.cu"
        src.write_text({"kernel": KERNEL, "torch-cxx": TORCH_CXX, "torch-stable": TORCH_STABLE}[lib.kind])
    else:
        src = work / "host.c"
        src.write_text(HOST_SOURCE)
    argv = [nvcc, "-shared", "-Xcompiler", "-fPIC", "-cudart", lib.cudart, "-o", str(out), str(src)]
    if lib.rpath:
        argv.append(f"-Xlinker=-rpath={lib.rpath}")
    if lib.kind == "host":
        argv.append("-nodlink")
    else:
        for g in GENCODES[lib.gencode]:
            argv += ["-gencode", g]
    if lib.rdc:
        argv.append("-rdc=true")
    subprocess.run(argv, check=True)
    return out


def build_cpu_library(work: Path, rpath: str = "") -> Path:
    out = work / f"cpu-{hashlib.sha1(rpath.encode()).hexdigest()[:8]}.so"
    if not out.exists():
        src = work / "cpu.c"
        src.write_text(CPU_SOURCE)
        argv = [shutil.which("cc") or "gcc", "-shared", "-fPIC", "-o", str(out), str(src)]
        if rpath:
            argv.append(f"-Wl,-rpath,{rpath}")
        subprocess.run(argv, check=True)
    return out


def write_wheel(path: Path, dist: str, version: str, files: dict[str, bytes], requires: tuple[str, ...],
                tag: str, record: bytes | None = None) -> None:
    """A minimal, valid wheel: METADATA, WHEEL and RECORD with hashes."""
    info = f"{dist}-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {dist}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    files = dict(files)
    files[f"{dist}/__init__.py"] = b""
    files[f"{info}/METADATA"] = ("\n".join(meta) + "\n").encode()
    files[f"{info}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: buildrows-fixtures\nRoot-Is-Purelib: false\nTag: {tag}\n".encode()
    if record is not None:
        files[f"{info}/buildrows.json"] = record
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)


def build_all(out: Path, fixtures: list[Fixture] | None = None) -> dict[str, Path]:
    """Build every fixture (or the ones given) into `out`; write POLICIES beside them as policy-NAME.toml."""
    out.mkdir(parents=True, exist_ok=True)
    work = out / "_work"
    work.mkdir(exist_ok=True)
    nvcc = _nvcc()
    made: dict[str, Path] = {}
    for name, text in POLICIES.items():
        (out / f"policy-{name}.toml").write_text(text, encoding="utf-8")
    for fx in FIXTURES + PROMISE_FIXTURES if fixtures is None else fixtures:
        files: dict[str, bytes] = {}
        for member, (gencode, rpath) in fx.libs.items():
            files[member] = build_library(work, gencode, rpath, nvcc).read_bytes()
        for member, lib in fx.files.items():
            files[member] = build_lib(work, lib, nvcc).read_bytes()
        if fx.cpu_lib:
            files["fx/_core.so"] = build_cpu_library(work).read_bytes()
        if fx.windows and not mingw_available():
            continue
        for member, win in fx.windows.items():
            where = work / "pe" / hashlib.sha1(repr(win).encode()).hexdigest()[:10]
            if win.kind == "lib":
                files[member] = build_import_library(where, win.imports[0]).read_bytes()
            else:
                fatbin = row_fatbin(work, nvcc, win.gencode) if win.gencode else None
                files[member] = build_pe_dll(where, fatbin, imports=win.imports, name="m",
                                             suffix="." + win.kind).read_bytes()
        if fx.dll is not None:
            if not mingw_available():
                continue
            dll = build_pe_dll(work / f"pe-{fx.dll}", row_fatbin(work, nvcc), fx.dll == "cudart", name="fx_core")
            files["fx/fx_core.dll"] = dll.read_bytes()
        tag = f"cp311-cp311-{fx.platform}"
        version = f"{fx.version}{fx.local}"
        # one fixture per file name: keep them apart in subdirectories
        wheel = out / fx.name / f"{fx.dist}-{version}-{tag}.whl"
        wheel.parent.mkdir(exist_ok=True)
        record = None
        if fx.record is not None:
            sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
            from buildrows.check.record import BuildRecord, record_bytes

            record = record_bytes(BuildRecord(**fx.record))  # type: ignore[arg-type]
        write_wheel(wheel, fx.dist, version, files, fx.requires, tag, record)
        made[fx.name] = wheel
    return made


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    for name, path in build_all(Path(sys.argv[1])).items():
        print(f"{name}\t{path}")

"""`buildrows build ROW --provision` end to end with real toolkits, real cmake/ninja/nvcc builds and
the real wheel check:

- cu132: CUDA 13.2 assembled from NVIDIA's PyPI wheels (pinned hashes; downloaded once per test
  session into a session cache, or into $BUILDROWS_TEST_CACHE to keep them between runs);
- cu126: through the manifest route from a loopback mirror this module creates in NVIDIA's format
  (redistrib_12.6.3.json + tar.xz archives). No real CUDA 12.6 compiler can be fetched here (no
  12.x wheel carries nvcc, and NVIDIA's server is unreachable), so the mirror's cuda_nvcc archive
  re-packages the real nvcc 13.2 from the session's PyPI toolkit behind a version shim (it answers
  `--version` as 12.6 and runs the real nvcc otherwise) and with the installer's nvcc.profile
  (`$(TOP)/$(_TARGET_DIR_)/include`). Everything the manifest route does is real: the index, the
  manifest, the checksums, the safe unpacking into the installer layout, CMake's compiler and
  toolkit detection, the build. The compiler is not 12.6, and the check says so: the kernel links
  CUDA 13's runtime, which a cu126 wheel's RPATH does not reach (runtime-reached fails, exit 5).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import socket
import sys
import tarfile
import threading
from collections.abc import Callable, Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from buildrows.errors import ExternalFailure
from buildrows.policy.trains import Train
from buildrows.provision import toolkit

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "cuda-extension"
PYT = f"{sys.version_info.major}{sys.version_info.minor}"
FULL = 'archs = "7.5 8.0 8.6 8.9 9.0 10.0 12.0"'
SHORT_126 = 'archs = "7.5 8.0 8.6 8.9 9.0"'

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64",
                                 reason="provisioning is tested on linux-x86_64"),
              pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("ninja") is None,
                                 reason="needs cmake and ninja")]


@pytest.fixture(scope="session")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    kept = os.environ.get("BUILDROWS_TEST_CACHE")
    return Path(kept) if kept else tmp_path_factory.mktemp("buildrows-cache")


@pytest.fixture(scope="session")
def toolkit_132(cache: Path) -> toolkit.Toolkit:
    try:
        return toolkit.install(Train(13, 2), "linux-x86_64", {"BUILDROWS_CACHE": str(cache), "PATH": os.environ["PATH"]})
    except ExternalFailure as e:  # offline developer machines; CI reaches PyPI
        pytest.skip(f"PyPI is not reachable: {e}")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the example (the checkout stays clean) with short lists (CI has 2 cores)."""
    dest = tmp_path / "project"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns(
        "build", "dist", "CMakeUserPresets.json", "buildrows-presets.json", "__pycache__"))
    text = (EXAMPLE / "buildrows.toml").read_text(encoding="utf-8")
    assert FULL in text and SHORT_126 in text
    text = text.replace(FULL, 'archs = "7.5 9.0"', 1).replace(SHORT_126, 'archs = "7.5 9.0"', 1)
    (dest / "buildrows.toml").write_text(text, encoding="utf-8")
    return dest


@pytest.fixture
def provision_env(cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BUILDROWS_CACHE", str(cache))
    for var in ("CUDACXX", "CUDA_HOME", "CUDA_PATH", "CMAKE_ARGS", "TORCH_CUDA_ARCH_LIST", "CUDAARCHS",
                "CU_VERSION", "DESIRED_CUDA", "BUILDROWS_CUDA_MIRROR"):
        monkeypatch.delenv(var, raising=False)
    return cache


def _build(cli: Callable[..., object], project: Path, row: str, wheel_dir: Path) -> object:
    return cli("--config", str(project / "buildrows.toml"), "build", row, "--provision", "--project", str(project),
               "--wheel-dir", str(wheel_dir))


def _compiler_version(project: Path, row: str) -> tuple[str, str]:
    """(CMAKE_CUDA_COMPILER, CMAKE_CUDA_COMPILER_VERSION) the build tree recorded."""
    tree = project / "build" / f"skbuild-{row}"
    cache = (tree / "CMakeCache.txt").read_text()
    compiler = next(line.split("=", 1)[1] for line in cache.splitlines() if line.startswith("CMAKE_CUDA_COMPILER:"))
    (info,) = tree.glob("CMakeFiles/*/CMakeCUDACompiler.cmake")
    version = next(line.split('"')[1] for line in info.read_text().splitlines()
                   if line.startswith("set(CMAKE_CUDA_COMPILER_VERSION "))
    return compiler, version


def test_cu132_row_is_built_by_a_provisioned_nvcc_13_2(cli: Callable[..., object], project: Path,
                                                       provision_env: Path, toolkit_132: toolkit.Toolkit,
                                                       tmp_path: Path) -> None:
    row = f"linux-x86_64-cu132-py{PYT}"
    r = _build(cli, project, row, tmp_path / "dist")
    assert r.code == 0, r.err  # type: ignore[attr-defined]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert wheel.name.startswith("cuda_extension-0.1.0+cu132-") and f"-cp{PYT}-cp{PYT}-" in wheel.name
    assert "check PASS" in r.out  # type: ignore[attr-defined]
    compiler, version = _compiler_version(project, row)
    assert compiler == str(toolkit_132.nvcc) and version == "13.2.86"
    assert "[PASS] python-tag" in r.err  # type: ignore[attr-defined]
    # Python pinned: the row environment's interpreter, which is the row's version.
    assert f"-C cmake.define.Python_EXECUTABLE={provision_env}/envs/py{sys.version_info[0]}.{sys.version_info[1]}" \
        in r.err  # type: ignore[attr-defined]


def test_toolkit_command_reuses_the_cache(cli: Callable[..., object], provision_env: Path,
                                          toolkit_132: toolkit.Toolkit) -> None:
    r = cli("toolkit", "install", "13.2")
    assert r.code == 0 and r.out.strip() == str(toolkit_132.root)  # type: ignore[attr-defined]
    assert "download" not in r.err  # type: ignore[attr-defined]
    r = cli("toolkit", "list")
    assert f"linux-x86_64  13.2  {toolkit_132.root}  (pypi 13.2.86, nvcc 13.2.86)" in r.out  # type: ignore[attr-defined]
    # The root is one CMake and torch.utils.cpp_extension accept.
    root = toolkit_132.root
    for rel in ("bin/nvcc", "nvvm/bin/cicc", "include/cuda_runtime.h", "include/crt/host_config.h",
                "include/cccl/cuda/std/version", "include/nvtx3/nvToolsExt.h", "lib64/libcudart.so",
                "lib64/libcudart_static.a"):
        assert (root / rel).exists(), rel


def test_rows_of_two_trains_and_two_pythons_build_beside_each_other_without_mixing_wheels(
        cli: Callable[..., object], project: Path, provision_env: Path, toolkit_132: toolkit.Toolkit,
        tmp_path: Path) -> None:
    """cu130 and cu132 for two Pythons: each train's first row builds first (the two at once: they
    share no compile), then the two rows of the second Python (same Python tag, two trains) build
    at the same time. Each writes its wheel
    into a directory of its own first, so neither takes the other's; each is compiled by its own
    train's nvcc and takes the detection of its own train's first tree."""
    from buildrows.binaries.wheelread import read_dist_info_member
    from buildrows.build.compiler_cache import find_ccache
    from buildrows.plan.toolchain import locate_cuda_compiler
    from buildrows.provision.interpreters import find_interpreter

    if locate_cuda_compiler(dict(os.environ)) is None or find_ccache(dict(os.environ)) is None:
        pytest.skip("needs nvcc 13.0 and ccache")
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    other = next((f"3.{m}" for m in (12, 11, 13, 10) if f"3.{m}" != here
                  and find_interpreter(f"3.{m}", dict(os.environ)).found is not None), None)
    if other is None:
        pytest.skip("needs a second CPython 3.10-3.13 (pyenv)")
    rows = [f"linux-x86_64-cu13{t}-py{py.replace('.', '')}" for t in (0, 2) for py in (here, other)]
    r = cli("--config", str(project / "buildrows.toml"), "build", *rows, "--provision", "--jobs", "2",
            "--project", str(project), "--wheel-dir", str(tmp_path / "dist"))
    assert r.code == 0, r.err  # type: ignore[attr-defined]
    assert "building 2 more rows 2 at a time" in r.err  # type: ignore[attr-defined]
    wheels = sorted((tmp_path / "dist").glob("*.whl"))
    assert len(wheels) == 4 and not (tmp_path / "dist" / ".buildrows-staging").exists()
    for row in rows:
        train, py = row.split("-")[2], row.split("-py")[1]
        line = next(ln for ln in r.out.splitlines() if ln.startswith(row + " "))  # type: ignore[attr-defined]
        assert f"+{train}-cp{py}-cp{py}-" in line and "PASS" in line, line
        (wheel,) = [w for w in wheels if f"+{train}-cp{py}-" in w.name]
        record = json.loads(read_dist_info_member(wheel, "buildrows.json") or b"{}")
        assert record.get("row") == row and record.get("cuda") == ("13.2" if train == "cu132" else "13.0"), record
        compiler, version = _compiler_version(project, row)
        assert version.startswith("13.2." if train == "cu132" else "13.0."), (row, compiler, version)
    assert r.err.count("CMake compiler detection: taken from linux-x86_64-cu130-py") == 1  # type: ignore[attr-defined]
    assert r.err.count("CMake compiler detection: taken from linux-x86_64-cu132-py") == 1  # type: ignore[attr-defined]


# --- the manifest route, from a loopback mirror ---------------------------------------------------

_SHIM = """#!/bin/sh
# Test mirror only: a real nvcc 13.2 that reports the release this archive claims to be.
for a in "$@"; do
  case "$a" in --version|-V) echo "nvcc: NVIDIA (R) Cuda compiler driver"
    echo "Cuda compilation tools, release 12.6, V12.6.85"; exit 0;; esac
done
exec "$(dirname "$0")/nvcc.real" "$@"
"""
#: The nvcc.profile of NVIDIA's installer and redistributable archives (headers under targets/).
_PROFILE = """
TOP              = $(_HERE_)/..

CICC_PATH        = $(TOP)/nvvm/bin
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice

LD_LIBRARY_PATH += $(TOP)/lib:
PATH            += $(CICC_PATH):$(_HERE_):

INCLUDES        +=  "-I$(TOP)/$(_TARGET_DIR_)/include" $(_SPACE_)
SYSTEM_INCLUDES +=  "-isystem" "$(TOP)/$(_TARGET_DIR_)/include/cccl" $(_SPACE_)

LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/$(_TARGET_DIR_)/lib$(_TARGET_SIZE_)/stubs" "-L$(TOP)/$(_TARGET_DIR_)/lib$(_TARGET_SIZE_)"

CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
"""
RELEASE = "12.6.3"


def _components(root: Path) -> dict[str, list[tuple[str, Path | bytes]]]:
    """The toolkit's files split into NVIDIA's components (archive-relative name -> file or bytes)."""
    out: dict[str, list[tuple[str, Path | bytes]]] = {"cuda_nvcc": [], "cuda_cudart": [], "cuda_cccl": [],
                                                      "cuda_nvtx": []}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_dir() or p.is_symlink() or rel == toolkit.RECEIPT or rel.startswith("cuda_cccl/"):
            continue
        if rel.startswith("bin/"):
            if rel == "bin/nvcc":
                out["cuda_nvcc"] += [("bin/nvcc.real", p), ("bin/nvcc", _SHIM.encode())]
            elif rel == "bin/nvcc.profile":
                out["cuda_nvcc"].append((rel, _PROFILE.encode()))
            else:
                out["cuda_nvcc"].append((rel, p))
        elif rel.startswith("nvvm/") or rel.startswith("include/crt/") or rel.startswith("include/nv/"):
            out["cuda_nvcc"].append((rel, p))
        elif rel.startswith("include/cccl/"):
            out["cuda_cccl"].append((rel, p))
        elif rel.startswith("include/nvtx3/"):
            out["cuda_nvtx"].append((rel, p))
        elif rel.startswith("include/") or (rel.startswith("lib/") and ("cudart" in rel or "cudadevrt" in rel)):
            out["cuda_cudart"].append((rel, p))
    return out


def _write_archive(path: Path, top: str, members: list[tuple[str, Path | bytes]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:xz", preset=0) as tf:
        for name, src in members:
            info = tarfile.TarInfo(f"{top}/{name}")
            if isinstance(src, bytes):
                info.size, info.mode = len(src), 0o755
                tf.addfile(info, io.BytesIO(src))
            else:
                info.size, info.mode = src.stat().st_size, src.stat().st_mode & 0o777
                with open(src, "rb") as f:
                    tf.addfile(info, f)
        if top.startswith("cuda_cudart"):  # the runtime's development link, as NVIDIA ships it
            link = tarfile.TarInfo(f"{top}/lib/libcudart.so")
            link.type, link.linkname = tarfile.SYMTYPE, "libcudart.so.13"
            tf.addfile(link)


@pytest.fixture(scope="session")
def mirror_dir(toolkit_132: toolkit.Toolkit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mirror")
    manifest: dict[str, object] = {"release_date": "2024-11-19", "release_label": RELEASE, "release_product": "cuda"}
    for comp, members in _components(toolkit_132.root).items():
        top = f"{comp}-linux-x86_64-12.6.85-archive"
        rel = f"{comp}/linux-x86_64/{top}.tar.xz"
        _write_archive(root / rel, top, members)
        data = (root / rel).read_bytes()
        manifest[comp] = {"name": comp, "license": "CUDA Toolkit", "version": "12.6.85",
                          "linux-x86_64": {"relative_path": rel, "sha256": hashlib.sha256(data).hexdigest(),
                                           "md5": hashlib.md5(data).hexdigest(), "size": str(len(data))}}
    (root / f"redistrib_{RELEASE}.json").write_text(json.dumps(manifest, indent=4), encoding="utf-8")
    return root


@pytest.fixture
def mirror(mirror_dir: Path) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(mirror_dir)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def test_cu126_row_through_the_manifest_route(cli: Callable[..., object], project: Path, provision_env: Path,
                                              mirror: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BUILDROWS_CUDA_MIRROR", mirror)
    row = f"linux-x86_64-cu126-py{PYT}"
    r = _build(cli, project, row, tmp_path / "dist")
    err = r.err  # type: ignore[attr-defined]
    tk = toolkit.installed(Train(12, 6), "linux-x86_64", {"BUILDROWS_CACHE": str(provision_env)})
    assert tk is not None and tk.source == "redist" and tk.release == RELEASE, err
    assert f"download {mirror}cuda_nvcc/linux-x86_64/cuda_nvcc-linux-x86_64-12.6.85-archive.tar.xz" in err \
        or "toolkit: CUDA 12.6.85 (redist 12.6.3)" in err
    assert (tk.root / "targets/x86_64-linux/include/cuda_runtime.h").is_file()
    compiler, _ = _compiler_version(project, row)
    assert compiler == str(tk.nvcc)  # the mirror's toolkit, not the machine's nvcc 13.0
    assert not list((tmp_path / "dist").glob("*.whl"))  # it failed its check: kept out of dist/ (issue 28)
    (wheel,) = (tmp_path / "dist" / ".buildrows" / "rejected").glob("*.whl")
    assert wheel.name.startswith("cuda_extension-0.1.0+cu126-") and f"-cp{PYT}-cp{PYT}-" in wheel.name
    # The device code is the row's; only the runtime is CUDA 13's (the shim's real compiler), and
    # the check catches exactly that.
    assert "[PASS] device-code-covers-row" in err and "[PASS] runtime-declared" in err
    assert "[FAIL] runtime-reached" in err
    assert r.code == 5, err  # type: ignore[attr-defined]


def test_build_refuses_clearly_when_the_mirror_cannot_be_reached(cli: Callable[..., object], project: Path,
                                                                 provision_env: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("BUILDROWS_CUDA_MIRROR", f"http://127.0.0.1:{port}/")
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "empty-cache"))
    r = _build(cli, project, f"linux-x86_64-cu126-py{PYT}", tmp_path / "dist")
    assert r.code == 4  # type: ignore[attr-defined]
    assert f"cannot reach the CUDA mirror for the release index at http://127.0.0.1:{port}/" in r.err  # type: ignore[attr-defined]
    assert not (tmp_path / "dist").exists()

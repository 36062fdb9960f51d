"""Provisioning without the network: finding interpreters, the per-row environment key, unpacking
archives safely (each guard tripped by a hostile archive), the manifest route against a loopback
mirror (a train with no release, a checksum mismatch, an unreachable mirror), and the plan pins."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import stat
import sys
import tarfile
import threading
import zipfile
from collections.abc import Callable, Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from buildrows.errors import BadInput, ExternalFailure, Refused
from buildrows.plan.row import plan_row
from buildrows.policy.load import load_policy
from buildrows.policy.trains import Train
from buildrows.provision import buildenv, sources, toolkit
from buildrows.provision.archives import Artifact, fetch, unpack
from buildrows.provision.interpreters import Interpreter, find_interpreter, install_hint

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "cuda-extension" / "buildrows.toml"


def _fake_python(path: Path, major: int, minor: int, free: bool = False, code: int = 0) -> Path:
    """An executable that answers buildrows' probe like an interpreter of that version would
    (or fails the way a pyenv shim does with code 127)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if code:
        body = f"echo 'pyenv: {path.name}: command not found' >&2\nexit {code}\n"
    else:
        body = f"echo '[{major}, {minor}, {str(free).lower()}, \"{path}\", \"{major}.{minor}.7\"]'\n"
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)
    return path


def _env(tmp_path: Path, path: str = "") -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), "PATH": path, "BUILDROWS_MANYLINUX_PYTHONS": str(tmp_path / "opt")}


# --- interpreters -------------------------------------------------------------------------------

OTHER = "3.9" if sys.version_info[:2] != (3, 9) else "3.8"  # never the running interpreter's version


def test_a_failing_shim_is_not_an_interpreter(tmp_path: Path) -> None:
    """The issue's case: a pyenv shim on PATH that exits 127 was reported as 'python 3.12: ok'."""
    shims = tmp_path / "elsewhere"
    _fake_python(shims / f"python{OTHER}", 3, 9, code=127)
    search = find_interpreter(OTHER, _env(tmp_path, str(shims)))
    assert search.found is None
    (rej,) = search.rejected
    assert rej.path.endswith(f"python{OTHER}") and "it exited with status 127" in rej.why and "command not found" in rej.why


def test_pyenv_shims_directory_is_never_searched(tmp_path: Path) -> None:
    env = _env(tmp_path)
    shims = Path(env["HOME"]) / ".pyenv" / "shims"
    _fake_python(shims / f"python{OTHER}", 3, 9)
    env["PATH"] = str(shims)
    assert find_interpreter(OTHER, env).found is None


def test_pyenv_version_uv_and_manylinux_are_found(tmp_path: Path) -> None:
    major, minor = (int(x) for x in OTHER.split("."))
    env = _env(tmp_path)
    home = Path(env["HOME"])
    uv = _fake_python(home / ".local/share/uv/python" / f"cpython-{OTHER}.4-linux-x86_64-gnu/bin/python{OTHER}", major, minor)
    found = find_interpreter(OTHER, env).found
    assert found is not None and found.path == str(uv) and found.source == "uv"
    uv.unlink()
    pyenv = _fake_python(home / ".pyenv/versions" / f"{OTHER}.18/bin/python{OTHER}", major, minor)
    found = find_interpreter(OTHER, env).found
    assert found is not None and found.path == str(pyenv) and found.source == "pyenv"
    pyenv.unlink()
    tag = f"cp{major}{minor}"
    many = _fake_python(tmp_path / "opt" / f"{tag}-{tag}" / "bin" / "python", major, minor)
    found = find_interpreter(OTHER, env).found
    assert found is not None and found.path == str(many) and found.source == "manylinux"


def test_wrong_version_and_gil_build_are_rejected(tmp_path: Path) -> None:
    major, minor = (int(x) for x in OTHER.split("."))
    env = _env(tmp_path)
    tag = f"cp{major}{minor}"
    _fake_python(tmp_path / "opt" / f"{tag}-{tag}t" / "bin" / "python", major, minor, free=False)
    search = find_interpreter(f"{OTHER}t", env)
    assert search.found is None and "is Python" in search.rejected[0].why
    _fake_python(tmp_path / "opt" / f"{tag}-{tag}t" / "bin" / "python", major, minor, free=True)
    found = find_interpreter(f"{OTHER}t", env).found
    assert found is not None and found.python == f"{OTHER}t"


def test_the_running_interpreter_is_found_first() -> None:
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if __import__("sysconfig").get_config_var("Py_GIL_DISABLED"):
        here += "t"
    found = find_interpreter(here, dict(os.environ)).found
    assert found is not None and found.source == "running" and found.version == sys.version.split()[0]


def _tool(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    path.chmod(0o755)


def test_install_hint_names_only_what_this_machine_has(tmp_path: Path) -> None:
    """It said `uv python install 3.13` on a machine without uv."""
    bindir = tmp_path / "bin"
    env = _env(tmp_path, str(bindir))
    # neither pyenv nor uv: uv from PyPI into a venv of the running Python, then the interpreter
    hint = install_hint("3.13", env)
    venv = Path(env["HOME"]) / ".cache" / "buildrows" / "uv-tool"
    assert hint.startswith(f"`{sys.executable} -m venv {venv} && {venv}/bin/pip install -q uv && "
                           f"{venv}/bin/uv python install 3.13` (this machine has neither pyenv nor uv")
    assert "pyenv" not in hint.split("`")[1]
    # uv on PATH
    _tool(bindir / "uv")
    assert install_hint("3.13t", env).startswith("`uv python install 3.13t`; buildrows then finds it")
    # pyenv installed but not on PATH (its installer's layout): the full path, uv offered as well
    _tool(Path(env["HOME"]) / ".pyenv" / "bin" / "pyenv")
    hint = install_hint("3.12", env)
    assert hint.startswith(f"`{Path(env['HOME']) / '.pyenv' / 'bin' / 'pyenv'} install 3.12` (or `uv python install 3.12`)")
    _tool(bindir / "pyenv")
    assert install_hint("3.12", env).startswith("`pyenv install 3.12` (or")


def test_doctor_reports_the_shim_and_the_command(tmp_path: Path) -> None:
    from buildrows.build.doctor import diagnose

    pol = load_policy(str(EXAMPLE))
    shims = tmp_path / "bin"
    _fake_python(shims / f"python{OTHER}", 3, 9, code=127)
    base = pol.row("linux-x86_64-cpu-py310")
    assert base is not None
    row = dataclasses.replace(base, python=OTHER)  # a row of a Python this test's PATH lacks
    findings = diagnose(pol, row, _env(tmp_path, str(shims)), EXAMPLE.parent, driver="scikit-build-core",
                        host="linux", probe=_NoTools())
    (py,) = [f for f in findings if f.check == "python"]
    assert py.failed and "does not run: it exited with status 127" in py.seen and f"uv python install {OTHER}" in py.fix


class _NoTools:
    def tool(self, name: str, env: object) -> tuple[str | None, str | None]:
        return f"/x/{name}", "9.9.9"

    def distributions(self, python: str, names: object) -> dict[str, str | None]:
        return {}


# --- the plan pins the interpreter and the toolkit ------------------------------------------------

def test_plan_pins_the_interpreter_and_a_provisioned_toolkit(tmp_path: Path) -> None:
    pol = load_policy(str(EXAMPLE))
    row = pol.row("linux-x86_64-cu132-py313")
    assert row is not None
    root = tmp_path / "tk"
    nvcc = root / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.2, V13.2.86'\n", encoding="utf-8")
    nvcc.chmod(0o755)
    interp = Interpreter("/py/bin/python", "3.13", "3.13.0", "test")
    env = {"PATH": "", "CUDACXX": "/elsewhere/nvcc-13.0", "CUDA_HOME": "/elsewhere"}
    plan = plan_row(pol, row, env, host="linux", interpreter=interp, toolkit=str(root))
    cache = dict(plan.cache)
    assert cache["Python_EXECUTABLE"] == cache["Python3_EXECUTABLE"] == "/py/bin/python"
    assert cache["CMAKE_CUDA_COMPILER"] == str(nvcc)  # the provisioned nvcc wins over CUDACXX
    assert plan.cuda_home == str(root)
    assert plan.toolkit_variables(env) == {"CUDACXX": str(nvcc), "CUDA_HOME": str(root), "CUDA_PATH": str(root)}
    assert dict(plan.environment)["CUDAToolkit_ROOT"] == str(root)


def test_a_provisioned_toolkit_of_another_train_is_refused(tmp_path: Path) -> None:
    pol = load_policy(str(EXAMPLE))
    row = pol.row("linux-x86_64-cu132-py313")
    assert row is not None
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n", encoding="utf-8")
    nvcc.chmod(0o755)
    with pytest.raises(Refused, match=r"is CUDA 13.0.88, not the row's 13.2"):
        plan_row(pol, row, {"PATH": ""}, host="linux", toolkit=str(tmp_path))


def test_the_built_wheel_must_carry_the_rows_python_tag(tmp_path: Path) -> None:
    from buildrows.check.tags import python_tag_problem

    pol = load_policy(str(EXAMPLE))
    row = pol.row("linux-x86_64-cu132-py312")
    assert row is not None
    bad = python_tag_problem(row, Path("cuda_extension-0.1.0+cu132-cp311-cp311-linux_x86_64.whl"))
    assert bad is not None and "tagged cp311-cp311, not cp312-cp312" in bad
    assert python_tag_problem(row, Path("cuda_extension-0.1.0+cu132-cp312-cp312-linux_x86_64.whl")) is None
    assert python_tag_problem(row, Path("x-1+cu132-cp310-abi3-linux_x86_64.whl")) is None
    assert python_tag_problem(row, Path("x-1+cu132-cp313-abi3-linux_x86_64.whl")) is not None


# --- the per-row environment ----------------------------------------------------------------------

def test_build_environment_key_follows_interpreter_and_requirements(tmp_path: Path) -> None:
    env = {"BUILDROWS_CACHE": str(tmp_path)}
    a = Interpreter(sys.executable, "3.x", "3.11.7", "test")
    one = buildenv.plan_env(a, ["build>=1.0", "scikit-build-core>=0.10"], env)
    assert one.root == buildenv.plan_env(a, ["scikit-build-core>=0.10", "build>=1.0"], env).root
    assert one.root != buildenv.plan_env(a, ["build>=1.0", "scikit-build-core>=0.11"], env).root
    assert one.root != buildenv.plan_env(Interpreter(sys.executable, "3.x", "3.11.8", "t"), ["build>=1.0"], env).root
    assert not one.ready
    assert one.commands()[0].argv[:3] == (sys.executable, "-m", "venv")


# --- archives: every guard has an input that trips it --------------------------------------------

def _tar(path: Path, members: list[tuple[str, bytes | None, str | None, bytes]]) -> Path:
    """members: (name, data for a file or None, link target for a symlink/hardlink, kind)."""
    with tarfile.open(path, "w:xz") as tf:
        for name, data, link, kind in members:
            info = tarfile.TarInfo(name)
            if kind == b"sym":
                info.type, info.linkname = tarfile.SYMTYPE, link or ""
                tf.addfile(info)
            elif kind == b"hard":
                info.type, info.linkname = tarfile.LNKTYPE, link or ""
                tf.addfile(info)
            elif kind == b"fifo":
                info.type = tarfile.FIFOTYPE
                tf.addfile(info)
            else:
                payload = data or b""
                info.size, info.mode = len(payload), 0o755
                tf.addfile(info, io.BytesIO(payload))
    return path


def _art(path: Path, strip: str = "top") -> Artifact:
    return Artifact(path.as_uri(), path.name, hashlib.sha256(path.read_bytes()).hexdigest(), strip=strip)


HOSTILE = [
    ("dotdot", [("top/../../evil", b"x", None, b"file")], "climbs out of the target with '..'"),
    ("absolute", [("/etc/evil", b"x", None, b"file")], "is an absolute path"),
    ("symlink-out", [("top/lib/libcudart.so", None, "../../../../etc/passwd", b"sym")], "outside the toolkit"),
    ("symlink-absolute", [("top/lib/x", None, "/etc/passwd", b"sym")], "outside the toolkit"),
    ("hardlink-out", [("top/lib/x", None, "../../etc/passwd", b"hard")], "climbs out"),
    ("fifo", [("top/bin/pipe", None, None, b"fifo")], "is a device or fifo"),
    # inside the archive, but the top directory is stripped: it would point above the toolkit
    ("symlink-above-stripped-root", [("top/lib/x", None, "../../elsewhere", b"sym")], "outside the toolkit"),
    # each link lexically inside, the chain outside: s -> . makes s/t -> ../evil leave the toolkit
    ("symlink-chain", [("top/s", None, ".", b"sym"), ("top/s/t", None, "../evil", b"sym")], "outside the toolkit"),
    ("write-through-link", [("top/up", None, ".", b"sym"), ("top/up/lib", None, "../..", b"sym")],
     "outside the toolkit"),
]


@pytest.mark.parametrize(("name", "members", "message"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_archive_is_refused_and_nothing_written(tmp_path: Path, name: str,
                                                        members: list[tuple[str, bytes | None, str | None, bytes]],
                                                        message: str) -> None:
    good = [("top/bin/nvcc", b"#!/bin/sh\n", None, b"file")]
    path = _tar(tmp_path / f"{name}.tar.xz", good + members)
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(Refused, match=message):
        unpack(path, _art(path), root)
    if name not in ("symlink-chain", "write-through-link"):
        assert not any(root.iterdir())  # checked before the first write
    # (a chain is caught while writing; toolkit.install then discards the whole staging directory)
    assert not (tmp_path / "evil").exists() and not (tmp_path / "elsewhere").exists()


def test_symlink_inside_is_kept_and_prefix_stripped(tmp_path: Path) -> None:
    path = _tar(tmp_path / "ok.tar.xz", [("top/lib/libcudart.so.12", b"elf", None, b"file"),
                                         ("top/lib/libcudart.so", None, "libcudart.so.12", b"sym"),
                                         ("other/skipped", b"x", None, b"file")])
    root = tmp_path / "root"
    root.mkdir()
    assert unpack(path, _art(path), root) == 2
    assert os.readlink(root / "lib" / "libcudart.so") == "libcudart.so.12"
    assert not (root / "other").exists()


def test_wheel_with_a_symlink_member_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x-1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        info = zipfile.ZipInfo("nvidia/cu13/lib/evil")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(Refused, match="is a symlink"):
        unpack(path, _art(path, "nvidia/cu13"), tmp_path / "root")


def test_truncated_archive_is_bad_input(tmp_path: Path) -> None:
    path = _tar(tmp_path / "t.tar.xz", [("top/bin/nvcc", b"x" * 5000, None, b"file")])
    path.write_bytes(path.read_bytes()[:60])
    with pytest.raises(BadInput, match="not a readable archive"):
        unpack(path, _art(path), tmp_path)


# --- the manifest route against a loopback mirror ------------------------------------------------

@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "mirror"
    root.mkdir()
    handler = partial(_Quiet, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", root
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _publish(root: Path, release: str, components: dict[str, list[tuple[str, bytes | None, str | None, bytes]]],
             *, corrupt: str | None = None) -> None:
    manifest: dict[str, object] = {"release_date": "2026-01-01", "release_label": release, "release_product": "cuda"}
    for comp, members in components.items():
        top = f"{comp}-linux-x86_64-{release}-archive"
        rel = f"{comp}/linux-x86_64/{top}.tar.xz"
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        _tar(path, [(f"{top}/{n}", d, link, kind) for n, d, link, kind in members])
        data = path.read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        if comp == corrupt:
            sha = "0" * 64
        manifest[comp] = {"name": comp, "license": "CUDA Toolkit", "version": release,
                          "linux-x86_64": {"relative_path": rel, "sha256": sha,
                                           "md5": hashlib.md5(data).hexdigest(), "size": str(len(data))}}
    (root / f"redistrib_{release}.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")


def _nvcc_script(version: str) -> bytes:
    major, minor = version.split(".")[:2]
    return f"#!/bin/sh\necho 'Cuda compilation tools, release {major}.{minor}, V{version}'\n".encode()


MINIMAL = {
    "cuda_nvcc": [("bin/nvcc", _nvcc_script("12.6.85"), None, b"file"), ("nvvm/bin/cicc", b"x", None, b"file")],
    "cuda_cudart": [("include/cuda_runtime.h", b"//", None, b"file"), ("lib/libcudart.so.12", b"elf", None, b"file"),
                    ("lib/libcudart_static.a", b"ar", None, b"file"), ("lib/libcufft.so.11", b"elf", None, b"file")],
    "cuda_cccl": [("include/cuda/std/version", b"//", None, b"file")],
}


def test_manifest_route_assembles_an_installer_layout(tmp_path: Path, mirror: tuple[str, Path]) -> None:
    url, root = mirror
    _publish(root, "12.6.3", MINIMAL)
    _publish(root, "12.6.1", MINIMAL)
    env = {"BUILDROWS_CACHE": str(tmp_path / "cache"), "PATH": os.environ.get("PATH", "")}
    tk = toolkit.install(Train(12, 6), "linux-x86_64", env, mirror=url)
    assert tk.release == "12.6.3" and tk.source == "redist" and tk.nvcc_version == "12.6.85"
    r = tk.root
    assert (r / "targets/x86_64-linux/include/cuda_runtime.h").is_file()
    assert (r / "include/cuda_runtime.h").is_file() and (r / "lib64/libcudart_static.a").is_file()
    assert os.readlink(r / "targets/x86_64-linux/lib/libcudart.so") == "libcudart.so.12"
    assert os.readlink(r / "lib64/libcufft.so") == "libcufft.so.11"  # -lcufft links
    receipt = json.loads((r / toolkit.RECEIPT).read_text())
    assert receipt["origin"] == f"{url}redistrib_12.6.3.json" and len(receipt["artifacts"]) == 3
    # Ready from the cache: nothing is fetched again (the mirror could be gone).
    (root / "redistrib_12.6.3.json").unlink()
    assert toolkit.install(Train(12, 6), "linux-x86_64", env, mirror=url).root == r
    # Issue 31: the archives are dropped once unpacked and checked; BUILDROWS_KEEP_DOWNLOADS=1 keeps them.
    assert not list((tmp_path / "cache" / "downloads").iterdir())
    _publish(root, "12.6.3", MINIMAL)
    toolkit.install(Train(12, 6), "linux-x86_64", {**env, "BUILDROWS_KEEP_DOWNLOADS": "1"}, mirror=url, force=True)
    assert len(list((tmp_path / "cache" / "downloads").iterdir())) == 3


def test_train_without_a_release_is_refused_naming_what_was_looked_for(tmp_path: Path, mirror: tuple[str, Path]) -> None:
    url, root = mirror
    _publish(root, "12.6.3", MINIMAL)
    env = {"BUILDROWS_CACHE": str(tmp_path / "cache")}
    with pytest.raises(Refused, match=r"CUDA 12\.4 has no release at .*redistrib_12\.4\.\*\.json.*releases there: 12\.6\.3"):
        toolkit.install(Train(12, 4), "linux-x86_64", env, mirror=url)


def test_checksum_mismatch_is_refused_and_nothing_installed(tmp_path: Path, mirror: tuple[str, Path]) -> None:
    url, root = mirror
    _publish(root, "12.6.3", MINIMAL, corrupt="cuda_cudart")
    env = {"BUILDROWS_CACHE": str(tmp_path / "cache")}
    with pytest.raises(Refused, match="does not match its pinned checksum"):
        toolkit.install(Train(12, 6), "linux-x86_64", env, mirror=url)
    assert toolkit.installed(Train(12, 6), "linux-x86_64", env) is None
    assert not list((tmp_path / "cache" / "downloads").glob("*cuda_cudart*"))


def test_nvcc_of_another_train_is_refused(tmp_path: Path, mirror: tuple[str, Path]) -> None:
    url, root = mirror
    lying = dict(MINIMAL, cuda_nvcc=[("bin/nvcc", _nvcc_script("12.4.131"), None, b"file")])
    _publish(root, "12.6.3", lying)
    env = {"BUILDROWS_CACHE": str(tmp_path / "cache")}
    with pytest.raises(Refused, match=r"reports CUDA 12\.4\.131, not 12\.6"):
        toolkit.install(Train(12, 6), "linux-x86_64", env, mirror=url)
    assert toolkit.installed(Train(12, 6), "linux-x86_64", env) is None


def test_manifest_path_leaving_the_mirror_is_refused(tmp_path: Path, mirror: tuple[str, Path]) -> None:
    url, root = mirror
    _publish(root, "12.6.3", MINIMAL)
    m = json.loads((root / "redistrib_12.6.3.json").read_text())
    m["cuda_nvcc"]["linux-x86_64"]["relative_path"] = "../../etc/passwd"
    (root / "redistrib_12.6.3.json").write_text(json.dumps(m))
    with pytest.raises(Refused, match="leaves the mirror"):
        toolkit.install(Train(12, 6), "linux-x86_64", {"BUILDROWS_CACHE": str(tmp_path)}, mirror=url)


def test_unreachable_mirror_is_refused_clearly(tmp_path: Path, cli: Callable[..., object],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path))
    monkeypatch.setenv("BUILDROWS_CUDA_MIRROR", f"http://127.0.0.1:{port}/redist/")
    r = cli("toolkit", "install", "12.6")
    assert r.code == 4, r.err  # type: ignore[attr-defined]
    assert f"cannot reach the CUDA mirror for the release index at http://127.0.0.1:{port}/redist/" in r.err  # type: ignore[attr-defined]
    assert "BUILDROWS_CUDA_MIRROR" in r.err  # type: ignore[attr-defined]


def test_download_checksum_guard(tmp_path: Path) -> None:
    f = tmp_path / "a.whl"
    f.write_bytes(b"data")
    with pytest.raises(Refused, match="does not match its pinned checksum"):
        fetch(Artifact(f.as_uri(), "a.whl", "1" * 64), tmp_path / "dl")
    with pytest.raises(ExternalFailure, match="cannot download"):
        fetch(Artifact((tmp_path / "missing.whl").as_uri(), "m.whl", "1" * 64), tmp_path / "dl")


# --- the PyPI pins ---------------------------------------------------------------------------------

def test_pypi_pins_make_a_compiler_at_one_release() -> None:
    for train in (Train(13, 0), Train(13, 2)):
        rel = sources.pypi_release(train, "linux-x86_64", libraries=False)
        names = {a.component for a in rel.artifacts}
        assert {"nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-nvvm", "nvidia-cuda-runtime",
                "nvidia-cuda-cccl"} <= names
        assert all(len(a.sha256) == 64 and a.url.startswith("https://files.pythonhosted.org/") for a in rel.artifacts)
        assert all(rel.release in a.filename for a in rel.artifacts if a.component in
                   ("nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-nvvm", "nvidia-cuda-runtime"))
        libs = {a.component for a in sources.pypi_release(train, "linux-x86_64", libraries=True).artifacts} - names
        assert libs == {"nvidia-cublas", "nvidia-cusparse", "nvidia-cusolver", "nvidia-curand", "nvidia-cufft",
                        "nvidia-cuda-profiler-api"}  # cudaProfiler.h, beside cuda.h (pycuda 2026.1 includes it)


def test_cuda_12_has_no_pypi_compiler() -> None:
    with pytest.raises(Refused, match="NVIDIA publishes no 12.x wheel that contains nvcc"):
        sources.pypi_release(Train(12, 6), "linux-x86_64", libraries=False)


def test_toolkit_path_of_a_missing_train(tmp_path: Path, cli: Callable[..., object],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path))
    r = cli("toolkit", "path", "13.2")
    assert r.code == 3 and "`buildrows toolkit install 13.2`" in r.err  # type: ignore[attr-defined]
    r = cli("toolkit", "install", "13.x")
    assert r.code == 2 and "name the train as 13.2 or cu132" in r.err  # type: ignore[attr-defined]


def test_a_cached_toolkit_serves_render_env_and_doctor(tmp_path: Path, mirror: tuple[str, Path]) -> None:
    """After `buildrows toolkit install 12.6`, a machine without nvcc 12.6 renders, writes env files
    for and passes doctor's nvcc check for a cu126 row through the cached toolkit; the hook does not."""
    from buildrows.build.doctor_cuda import check_cuda

    url, root = mirror
    _publish(root, "12.6.3", MINIMAL)
    env = {"BUILDROWS_CACHE": str(tmp_path / "cache"), "PATH": ""}
    pol = load_policy(str(EXAMPLE))
    row = pol.row("linux-x86_64-cu126-py311")
    assert row is not None
    with pytest.raises(Refused, match="needs a CUDA 12.6 compiler and none was found"):
        plan_row(pol, row, env, host="linux", step="env")
    assert check_cuda(row, pol, env, "linux").status == "missing"
    tk = toolkit.install(Train(12, 6), "linux-x86_64", env, mirror=url)
    plan = plan_row(pol, row, env, host="linux", step="env")
    assert plan.toolkit == str(tk.root) and dict(plan.cache)["CMAKE_CUDA_COMPILER"] == str(tk.nvcc)
    assert plan.cuda_home == str(tk.root)
    finding = check_cuda(row, pol, env, "linux")
    assert finding.status == "ok" and "provisioned toolkit" in finding.seen
    with pytest.raises(Refused, match="needs a CUDA 12.6 compiler"):
        plan_row(pol, row, env, host="linux", step="hook")


def test_build_refuses_a_row_without_an_interpreter_with_the_command(tmp_path: Path, cli: Callable[..., object],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """No Python of the row's version that runs: build stops before anything is built, naming the
    failing shim and the exact commands that provide one."""
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    other = next(v for v in ("3.10", "3.11", "3.12", "3.13") if v != here)
    major, minor = (int(x) for x in other.split("."))
    shims = tmp_path / "bin"
    _fake_python(shims / f"python{other}", major, minor, code=127)
    monkeypatch.setenv("PATH", str(shims))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var in ("PYENV_ROOT", "UV_PYTHON_INSTALL_DIR", "BUILDROWS_MANYLINUX_PYTHONS"):
        monkeypatch.setenv(var, str(tmp_path / "empty" / var))
    monkeypatch.setenv("CU_VERSION", "cpu")
    row = f"linux-x86_64-cpu-py{other.replace('.', '')}"
    r = cli("--config", str(EXAMPLE), "build", row, "--wheel-dir", str(tmp_path / "dist"))
    assert r.code == 3, r.err  # type: ignore[attr-defined]
    err = r.err  # type: ignore[attr-defined]
    assert f"no Python {other} that runs to build {row} with" in err
    assert f"{shims}/python{other} (PATH) does not run: it exited with status 127" in err
    # neither pyenv nor uv on this PATH: the command installs uv first, and offers no pyenv
    assert "/bin/pip install -q uv && " in err and f"uv python install {other}" in err
    assert f"pyenv install {other}" not in err
    assert not (tmp_path / "dist").exists()


def test_doctor_judges_the_row_environment_build_provision_made(tmp_path: Path) -> None:
    """After `build --provision`, doctor checks the build requirements in the cached row environment
    (what the provisioned build uses), and otherwise names `build ROW --provision` as a fix."""
    import sysconfig

    from buildrows.build.doctor import diagnose
    from buildrows.build.doctor_python import FRONTEND

    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        pytest.skip("the example publishes no free-threaded rows")
    pol = load_policy(str(EXAMPLE))
    row = pol.row(f"linux-x86_64-cpu-py{here.replace('.', '')}")
    if row is None:
        pytest.skip("this Python is not on the example's allowlist")
    env = {"BUILDROWS_CACHE": str(tmp_path / "cache"), "PATH": ""}

    class Probe:
        def tool(self, name: str, env: object) -> tuple[str | None, str | None]:
            return f"/x/{name}", "9.9.9"

        def interpreter(self, python: str) -> tuple[str | None, str | None]:
            return None, None

        def distributions(self, python: str, names: list[str]) -> dict[str, str | None]:
            good = python.startswith(str(tmp_path / "cache"))
            return {n: ("99.0" if good else None) for n in names}

    def requirement_findings() -> list[object]:
        found = diagnose(pol, row, env, EXAMPLE.parent, driver="scikit-build-core", host="linux", probe=Probe())
        return [f for f in found if f.check in ("build", "scikit-build-core", "row environment")]

    missing = requirement_findings()
    assert all(f.failed for f in missing)  # type: ignore[attr-defined]
    assert f"`buildrows build {row.name} --provision`" in missing[0].fix  # type: ignore[attr-defined]
    running = find_interpreter(here, env).found
    assert running is not None
    be = buildenv.plan_env(running, [FRONTEND, "scikit-build-core>=0.10"], env, project=EXAMPLE.parent)  # one per project
    _fake_python(Path(be.python), sys.version_info.major, sys.version_info.minor)
    buildenv.finish(be)
    judged = requirement_findings()
    assert [f.check for f in judged] == ["row environment", "build", "scikit-build-core"]  # type: ignore[attr-defined]
    assert not any(f.failed for f in judged)  # type: ignore[attr-defined]


def test_toolkit_of_another_machine_is_refused(tmp_path: Path, cli: Callable[..., object],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path))
    other = "linux-aarch64" if os.uname().machine == "x86_64" else "linux-x86_64"
    r = cli("toolkit", "install", "13.2", "--platform", other)
    assert r.code == 3 and f"CUDA 13.2 for {other} cannot be assembled on this" in r.err  # type: ignore[attr-defined]
    assert not (tmp_path / "downloads").exists()


def test_pinned_wheels_from_a_wheelhouse_are_still_held_to_their_hashes(tmp_path: Path) -> None:
    """BUILDROWS_TOOLKIT_WHEELS (an offline machine's wheelhouse) replaces PyPI as the place the
    pinned files come from, never the pins: a file that is not the pinned one is refused."""
    house = tmp_path / "wheels"
    house.mkdir()
    rel = sources.pypi_release(Train(13, 2), "linux-x86_64", libraries=False, wheels_from=str(house))
    assert all(a.url == (house / a.filename).as_uri() for a in rel.artifacts)
    for a in rel.artifacts:
        (house / a.filename).write_bytes(b"not the wheel")
    env = {"BUILDROWS_CACHE": str(tmp_path / "cache"), sources.WHEELS_VARIABLE: str(house)}
    with pytest.raises(Refused, match="does not match its pinned checksum"):
        toolkit.install(Train(13, 2), "linux-x86_64", env)
    assert toolkit.installed(Train(13, 2), "linux-x86_64", env) is None


def _publish_windows(root: Path, release: str, components: dict[str, list[tuple[str, bytes]]]) -> None:
    """A release in NVIDIA's format for windows-x86_64: zip archives, one top directory each."""
    import zipfile

    manifest: dict[str, object] = {"release_date": "2026-10-01", "release_label": release, "release_product": "cuda"}
    for comp, members in components.items():
        top = f"{comp}-windows-x86_64-{release}-archive"
        rel = f"{comp}/windows-x86_64/{top}.zip"
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(path, "w") as zf:
            for name, data in members:
                info = zipfile.ZipInfo(f"{top}/{name}")
                info.external_attr = (0o100755 if name.endswith(".exe") else 0o100644) << 16
                zf.writestr(info, data)
        data = path.read_bytes()
        manifest[comp] = {"name": comp, "license": "CUDA Toolkit", "version": release,
                          "windows-x86_64": {"relative_path": rel, "sha256": hashlib.sha256(data).hexdigest(),
                                             "md5": hashlib.md5(data).hexdigest(), "size": str(len(data))}}
    (root / f"redistrib_{release}.json").write_text(json.dumps(manifest), encoding="utf-8")


def test_windows_archives_assemble_the_windows_layout(tmp_path: Path, mirror: tuple[str, Path]) -> None:
    """[ci] provision-toolkit on the Windows builder: NVIDIA's Windows archives are zips laid out as
    the installer is (bin/nvcc.exe, include/, lib/x64/), with no targets/ directory. The layout is
    kept; nvcc.exe (a script standing in here) is run and must report the train."""
    url, root = mirror
    _publish_windows(root, "13.4.1", {
        "cuda_nvcc": [("bin/nvcc.exe", _nvcc_script("13.4.51")), ("nvvm/bin/cicc.exe", b"x")],
        "cuda_cudart": [("include/cuda_runtime.h", b"//"), ("lib/x64/cudart.lib", b"lib"),
                        ("bin/x64/cudart64_13.dll", b"dll")],
        "cuda_cccl": [("include/cuda/std/version", b"//")],
    })
    env = {"BUILDROWS_CACHE": str(tmp_path / "cache"), "PATH": os.environ.get("PATH", "")}
    tk = toolkit.install(Train(13, 4), "windows-amd64", env, mirror=url)
    assert tk.nvcc == tk.root / "bin" / "nvcc.exe" and tk.nvcc_version == "13.4.51"
    assert (tk.root / "lib" / "x64" / "cudart.lib").is_file() and (tk.root / "include" / "cuda_runtime.h").is_file()
    assert not (tk.root / "targets").exists() and not (tk.root / "lib64").exists()
    assert toolkit.installed(Train(13, 4), "windows-amd64", env) == tk
    # a release without the runtime's import library is refused, not installed
    _publish_windows(root, "13.4.2", {"cuda_nvcc": [("bin/nvcc.exe", _nvcc_script("13.4.60"))],
                                      "cuda_cudart": [("include/cuda_runtime.h", b"//")],
                                      "cuda_cccl": [("include/cuda/std/version", b"//")]})
    with pytest.raises(Refused, match="has no lib/x64"):
        toolkit.install(Train(13, 4), "windows-amd64", env, mirror=url, release="13.4.2", force=True)

"""The wheel check against real nvcc-built wheels, each made to fail one check (scripts/make_check_fixtures.py)."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_POLICY, REPO, Result

sys.path.insert(0, str(REPO / "scripts"))
import make_check_fixtures as mcf

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return mcf.build_all(tmp_path_factory.mktemp("check-fixtures"))


def cuobjdump() -> str | None:
    found = shutil.which("cuobjdump")
    if found:
        return found
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        for cand in Path(base).glob("cu*/bin/cuobjdump"):
            return str(cand)
    return None


@pytest.mark.parametrize("fx", mcf.FIXTURES, ids=[f.name for f in mcf.FIXTURES])
def test_each_fixture_fails_exactly_its_checks(fx: mcf.Fixture, wheels: dict[str, Path], cli: Callable[..., Result]) -> None:
    if fx.dll is not None and not mcf.mingw_available():
        pytest.skip("MinGW is not installed (apt-get install gcc-mingw-w64-x86-64)")
    archs = ["--archs", mcf.ROW_ARCHS] if fx.local else []  # a CPU wheel has no list to check against
    r = cli("check", str(wheels[fx.name]), *archs, "--json")
    report = json.loads(r.out)
    failed = tuple(c["name"] for c in report["checks"] if not c["ok"])
    assert failed == fx.fails, json.dumps(report, indent=1)
    assert report["ok"] is (not fx.fails)
    assert r.code == (5 if fx.fails else 0)


EXPECTED_MESSAGES = {
    "ptx-missing": "fx/_core.so: missing PTX for sm_90",
    "split-across-libraries": "fx/_core.so: missing device code for sm_90",
    "extra-arch": "fx/_core.so: device code for sm_80, which the row does not list",
    "declares-cu11": "unexpected: 'nvidia-cuda-runtime-cu11>=11' is not in the set for CUDA 13.0",
    "absolute-runpath": "fx/_core.so: search path '/usr/local/cuda-13.0/lib64' is absolute",
    "origin-to-nowhere": "'$ORIGIN/../build/lib' resolves to site-packages/build/lib, which neither the wheel nor the CUDA runtime",
    "no-library": "the wheel ships no shared library at all",
    "cpu-declares-nvidia": "unexpected: \"nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'\" is not in the set for a CPU row",
    "win-imports-cudart": "fx/fx_core.dll imports cudart64_13.dll: link cudart statically",
    "win-declares-nvidia": "unexpected: 'nvidia-cuda-runtime>=13,<14' is not in the set for CUDA 13.0 on Windows",
}


@pytest.mark.parametrize("name", sorted(EXPECTED_MESSAGES))
def test_failure_messages_name_library_and_architecture(name: str, wheels: dict[str, Path], cli: Callable[..., Result]) -> None:
    if name.startswith("win-") and not mcf.mingw_available():
        pytest.skip("MinGW is not installed (apt-get install gcc-mingw-w64-x86-64)")
    archs = ["--archs", mcf.ROW_ARCHS] if not name.startswith("cpu-") else []
    r = cli("check", str(wheels[name]), *archs)
    assert r.code == 5
    assert EXPECTED_MESSAGES[name] in r.out, r.out
    assert "verdict: FAIL" in r.out
    assert "check failed" in r.err


def test_no_library_check_never_passes_vacuously(wheels: dict[str, Path], cli: Callable[..., Result]) -> None:
    r = cli("check", str(wheels["no-library"]), "--archs", mcf.ROW_ARCHS, "--json")
    checks = {c["name"]: c for c in json.loads(r.out)["checks"]}
    # numerically sorted, PTX named (it once printed a Python list sorted as strings)
    assert checks["device-code-covers-row"]["details"] == ["inspected no library with device code; expected sm_75 sm_90 "
                                                           "with PTX sm_90"]


def test_architecture_lists_sort_numerically(wheels: dict[str, Path], cli: Callable[..., Result]) -> None:
    r = cli("check", str(wheels["no-library"]), "--archs", "12.0 7.5 10.0", "--json")
    checks = {c["name"]: c for c in json.loads(r.out)["checks"]}
    assert checks["device-code-covers-row"]["details"] == ["inspected no library with device code; expected sm_75 "
                                                           "sm_100 sm_120 with PTX sm_120"]


def test_good_report_shape(wheels: dict[str, Path], cli: Callable[..., Result]) -> None:
    r = cli("check", str(wheels["good"]), "--archs", "9.0 7.5", "--json")
    report = json.loads(r.out)
    assert report["ok"] is True
    assert report["row"] == "linux-x86_64-cu130-py311"
    assert report["libraries"] == {"fx/_core.so": {"elf": ["sm_75", "sm_90"], "ptx": ["sm_90"]}}
    assert [c["name"] for c in report["checks"]] == [
        "cuda-libraries-present", "runtime-declared", "runtime-reached", "device-code-covers-row", "device-code-train",
        "binary-machine", "cuda-soname-majors", "libraries-load"]


def test_row_inferred_from_wheel_name_and_policy(wheels: dict[str, Path], cli: Callable[..., Result]) -> None:
    """+cu130, cp311 and manylinux x86_64 select linux-x86_64-cu130-py311, whose seven architectures the wheel lacks."""
    r = cli("--config", str(EXAMPLE_POLICY), "check", str(wheels["good"]))
    assert r.code == 5
    assert "row linux-x86_64-cu130-py311" in r.out
    assert "missing device code for sm_80, sm_86, sm_89, sm_100, sm_120" in r.out
    assert "missing PTX for sm_120" in r.out


def test_check_predicts_the_missing_gpu(wheels: dict[str, Path], cli: Callable[..., Result]) -> None:
    r = cli("check", str(wheels["split-across-libraries"]), "--archs", "9.0")
    assert r.code == 5
    assert "fx/_core.so: missing device code for sm_90 (a GPU of that architecture gets 'no kernel image is available')" in r.out


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--archs", "9.0+ptx"], 2, "--archs: '9.0+ptx': PTX must be written '+PTX'"),
        ([], 2, "a CUDA 13.0 wheel needs the row's architecture list"),
        (["--archs", "7.0"], 2, "CUDA 13.0 cannot compile this architecture"),
    ],
)
def test_bad_arguments(args: list[str], code: int, message: str, wheels: dict[str, Path], cli: Callable[..., Result],
                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = cli("check", str(wheels["good"]), *args)
    assert r.code == code, r.err
    assert message in r.err


def _without_local_version(src: Path, dest: Path) -> None:
    """The same wheel as PyPI would carry it: version 1.0, not 1.0+cu130, in its name, .dist-info and
    METADATA alike (a file merely renamed is one pip refuses: "inconsistent version")."""
    import zipfile

    with zipfile.ZipFile(src) as old, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as new:
        for info in old.infolist():
            data = old.read(info)
            if info.filename.endswith(".dist-info/METADATA"):
                data = data.replace(b"Version: 1.0+cu130", b"Version: 1.0")
            new.writestr(info.filename.replace("fx-1.0+cu130.dist-info", "fx-1.0.dist-info"), data)


def test_train_for_a_wheel_without_local_tag(wheels: dict[str, Path], cli: Callable[..., Result], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """PyPI's torch carries no +cu130: --archs alone must not silently check it as a CPU wheel."""
    monkeypatch.chdir(tmp_path)
    plain = tmp_path / "fx-1.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    _without_local_version(wheels["good"], plain)
    r = cli("check", str(plain), "--archs", mcf.ROW_ARCHS)
    assert r.code == 2
    assert "the wheel's name carries no +cuXYZ tag, so its CUDA train is unknown" in r.err
    r = cli("check", str(plain), "--archs", mcf.ROW_ARCHS, "--cuda", "13.0")
    assert r.code == 0, r.out + r.err
    r = cli("check", str(wheels["good"]), "--archs", mcf.ROW_ARCHS, "--cuda", "12.6")
    assert r.code == 2 and "--cuda 12.6 contradicts the wheel's tag +cu130" in r.err
    r = cli("check", str(plain))  # checked as the CPU row its name suggests, with the way out named
    assert r.code == 5
    assert ("if this is a CUDA wheel whose name carries no +cuXYZ tag, check it with --cuda 13.0 --archs LIST (its newest "
            "PTX is ISA 9.0, first written by CUDA 13.0)") in r.out
    r = cli("--config", str(EXAMPLE_POLICY), "check", str(wheels["good"]), "--row", "linux-x86_64-cu130-py311",
            "--cuda", "12.6")
    assert r.code == 2 and "--cuda 12.6 contradicts --row linux-x86_64-cu130-py311 (CUDA 13.0)" in r.err


def test_policy_in_pyproject_is_found(wheels: dict[str, Path], cli: Callable[..., Result], tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """[tool.buildrows] in ./pyproject.toml is the policy, as for every other command."""
    text = EXAMPLE_POLICY.read_text().replace('archs = "7.5 8.0 8.6 8.9 9.0 10.0 12.0"', 'archs = "7.5 9.0"')
    text = text.split("# What ExecuTorch's wheels promise")[0]  # an fx wheel makes none of ExecuTorch's promises
    body = "\n".join(("[tool.buildrows." + line[1:]) if line.startswith("[") and not line.startswith("[[") else
                     ("[[tool.buildrows." + line[2:]) if line.startswith("[[") else line for line in text.splitlines())
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "fx"\nversion = "1.0"\n\n' + body + "\n")
    monkeypatch.chdir(tmp_path)
    r = cli("check", str(wheels["good"]))
    assert r.code == 0, r.out + r.err
    assert "row linux-x86_64-cu130-py311" in r.out


def test_unreadable_wheels(tmp_path: Path, cli: Callable[..., Result]) -> None:
    r = cli("check", str(tmp_path / "missing-1.0-cp311-cp311-linux_x86_64.whl"), "--archs", "9.0")
    assert r.code == 2 and "no such wheel" in r.err
    bad = tmp_path / "bad-1.0+cu130-cp311-cp311-linux_x86_64.whl"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    r = cli("check", str(bad), "--archs", "9.0")
    assert r.code == 2 and "Traceback" not in r.err and str(bad) in r.err


def _cuobjdump_list(tool: str, flag: str, lib: Path) -> list[str]:
    out = subprocess.run([tool, flag, str(lib)], capture_output=True, text=True).stdout
    return sorted(re.findall(r"\.(sm_\d+[a-z]?)\.", out))


def test_reader_agrees_with_cuobjdump_on_fixture_libraries(wheels: dict[str, Path], tmp_path: Path) -> None:
    tool = cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
    import zipfile

    from buildrows.binaries.wheelread import read_wheel

    compared = 0
    for wheel in wheels.values():
        info = read_wheel(wheel)
        with zipfile.ZipFile(wheel) as zf:
            # Linux cuobjdump cannot open a PE file; test_binfmt compares DLL sections cut out with objcopy
            for lib in (x for x in info.libraries if x.format == "elf"):
                path = tmp_path / f"{compared}.so"
                path.write_bytes(zf.read(lib.path))
                # --list-elf drops a family cubin's f (sm_100f -> sm_100); the reader keeps it, as cuobjdump -elf does
                assert sorted(c.removesuffix("f") for c in lib.cubins) == _cuobjdump_list(tool, "--list-elf", path), lib.path
                assert sorted(lib.ptx) == _cuobjdump_list(tool, "--list-ptx", path), lib.path
                compared += 1
    assert compared >= 10


# --- what a project promises (SPEC §8, real projects) -------------------------------------------


def _policy_args(fx: mcf.Fixture, wheels: dict[str, Path]) -> list[str]:
    path = EXAMPLE_POLICY if fx.policy == "example" else next(iter(wheels.values())).parent.parent / f"policy-{fx.policy}.toml"
    return ["--config", str(path)]


@pytest.mark.parametrize("fx", mcf.PROMISE_FIXTURES, ids=[f.name for f in mcf.PROMISE_FIXTURES])
def test_each_promise_fixture_fails_exactly_its_checks(fx: mcf.Fixture, wheels: dict[str, Path],
                                                        cli: Callable[..., Result]) -> None:
    if fx.windows and not mcf.mingw_available():
        pytest.skip("MinGW is not installed (apt-get install gcc-mingw-w64-x86-64)")
    r = cli(*_policy_args(fx, wheels), "check", str(wheels[fx.name]), "--json")
    report = json.loads(r.out)
    failed = tuple(c["name"] for c in report["checks"] if not c["ok"])
    assert failed == fx.fails, json.dumps(report, indent=1)
    assert r.code == (5 if fx.fails else 0)


PROMISE_MESSAGES = {
    "et-rpath-outside-exceptions": f"{mcf.ET_C}: search path '/opt/conda/lib' is absolute (the builder's toolkit or "
                                   "build tree); use an $ORIGIN-relative entry, or list it under [[check.rpath-exceptions]]",
    "et-missing-library": "missing executorch/lib/libexecutorch_extension_cuda.so: the policy requires it (a row named "
                          "for CUDA ships the CUDA delegate",
    "et-nothing-links-runtime": "no shipped library links the CUDA runtime (libcudart.so.13) dynamically, yet "
                                "[cuda.runtime.13] mode is \"dynamic\" (5 libraries inspected); if the libraries link "
                                "cudart statically",
    "et-x86_64-libraries-in-aarch64-wheel": "5 libraries (executorch/lib/libexecutorch.so, "
                                            "executorch/lib/libexecutorch_backend_cuda.so, executorch/lib/"
                                            "libexecutorch_extension_cuda.so and 2 more): is built for x86_64, but the "
                                            "wheel is tagged for aarch64",
    "dynamic-cudart-under-static": "fx/_core.so: links libcudart.so.13 dynamically, but [cuda.runtime.13] mode is "
                                   "\"static\"",
    "torch-ext-loose-pin": "Requires-Dist 'torch>=2.14': >=2.14 admits torch other than 2.14 (the wheel was built "
                           "against 2.14.1",
    "torch-ext-other-torch": "Requires-Dist 'torch==2.13.*': ==2.13.* does not admit the torch the wheel was built "
                             "against (2.14.1); declare torch==2.14.*",
    "torch-ext-cu126-torch": "built against torch 2.14.1 for CUDA 12.6, but the row is CUDA 13.0",
    "torch-ext-no-record": "the wheel has no build record (.dist-info/buildrows.json), so which torch it was compiled "
                           "against is unknown\n         fix: give it: `buildrows check WHEEL --torch 2.8.0` (the "
                           "torch the wheel was built against), or build it with `buildrows build`, which records it",
    "torch-stable-no-lower-bound": "Requires-Dist 'torch': no lower bound: torch's stable ABI grows with each release, "
                                   "so declare torch>=X.Y",
    "torch-mode-without-torch": "mode \"torch\", but no library links libtorch or imports torch's C++ or stable C ABI",
    "win-et-missing-import-library": "missing executorch/lib/executorch_backend_cuda.lib: the policy requires it "
                                     "(a C++ application links executorch::backend_cuda",
    "win-et-dll-imports-cudart": "executorch/lib/executorch_backend_cuda.dll links cudart64_13.dll, but must link no "
                                 "CUDA library: CMake links cudart.lib into the DLLs",
    "win-et-c-imports-driver": "executorch/extension/pybindings/_C.cp311-win_amd64.pyd links nvcuda.dll, but must "
                               "link no CUDA library",
    "torch-ext-under-dynamic": "no shipped library links the CUDA runtime (libcudart.so.13) dynamically" + "\0",
}


@pytest.mark.parametrize("name", sorted(PROMISE_MESSAGES))
def test_promise_failure_messages(name: str, wheels: dict[str, Path], cli: Callable[..., Result]) -> None:
    fx = next(f for f in mcf.PROMISE_FIXTURES if f.name == name)
    if fx.windows and not mcf.mingw_available():
        pytest.skip("MinGW is not installed (apt-get install gcc-mingw-w64-x86-64)")
    r = cli(*_policy_args(fx, wheels), "check", str(wheels[name]))
    assert r.code == 5
    want = PROMISE_MESSAGES[name]
    if want.endswith("\0"):  # this message must NOT appear: the failure is elsewhere
        assert want[:-1] not in r.out, r.out
    else:
        assert want in r.out, r.out
    assert "Traceback" not in r.err


def test_torch_ext_under_dynamic_says_what_it_lacks(wheels: dict[str, Path], cli: Callable[..., Result]) -> None:
    """A PyTorch extension checked as a dynamic-runtime wheel: its cudart is not reached and not declared."""
    fx = next(f for f in mcf.PROMISE_FIXTURES if f.name == "torch-ext-under-dynamic")
    r = cli(*_policy_args(fx, wheels), "check", str(wheels[fx.name]))
    assert "tx/_C.so: links libcudart.so.13 but no RPATH/RUNPATH entry reaches site-packages/nvidia/cu13/lib" in r.out
    assert "missing: the wheel must declare \"nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'\"" in r.out


def test_static_wheel_passes_only_under_a_static_policy(wheels: dict[str, Path], cli: Callable[..., Result]) -> None:
    static = next(f for f in mcf.PROMISE_FIXTURES if f.name == "static-cudart-under-static")
    r = cli(*_policy_args(static, wheels), "check", str(wheels["static-cudart"]))
    assert r.code == 0, r.out
    assert "runtime mode static: none of the 1 libraries links libcudart dynamically" in r.out
    r = cli("check", str(wheels["static-cudart"]), "--archs", mcf.ROW_ARCHS)  # the default: dynamic
    assert r.code == 5
    assert "set mode = \"static\"" in r.out


def test_torch_pin_passes_and_says_what_it_compared(wheels: dict[str, Path], cli: Callable[..., Result]) -> None:
    fx = next(f for f in mcf.PROMISE_FIXTURES if f.name == "torch-ext")
    r = cli(*_policy_args(fx, wheels), "check", str(wheels["torch-ext"]))
    assert r.code == 0, r.out
    assert "requires torch==2.14.*: admits torch 2.14.1 (CUDA 13.0), recorded, and no other minor version" in r.out
    assert "tx/_C.so imports libtorch's C++ API (1 symbols, e.g. _ZN3c1013fixture_checkEv)" in r.out


@pytest.mark.parametrize(("name", "args", "code", "message"), [
    # a wheel built elsewhere: the torch it compiled against comes from the command line
    ("torch-ext-no-record", ["--torch", "2.14.1"], 0, "requires torch==2.14.*: admits torch 2.14.1, given with --torch,"),
    ("torch-ext-no-record", ["--torch", "2.13.0"], 5, "==2.14.* does not admit the torch the wheel was built against (2.13.0)"),
    ("torch-ext", ["--torch", "2.13.0"], 5, "--torch 2.13.0 contradicts the build record, which says torch 2.14.1"),
    ("torch-ext", ["--torch", "two"], 2, "--torch: 'two' is not a version"),
    ("torch-stable-ext", [], 0, "1 libraries import only torch's stable C ABI (1 aoti_torch_*/torch_* symbols, "
                                "no libtorch C++ symbol)"),
    ("torch-stable-ext", ["--torch", "2.9.1"], 5, ">=2.10 does not admit torch 2.9.1, which the wheel was built against"),
])
def test_torch_version_from_the_command_line(name: str, args: list[str], code: int, message: str,
                                             wheels: dict[str, Path], cli: Callable[..., Result]) -> None:
    fx = next(f for f in mcf.PROMISE_FIXTURES if f.name == name)
    r = cli(*_policy_args(fx, wheels), "check", str(wheels[name]), *args)
    assert r.code == code, r.out + r.err
    assert message in r.out + r.err
    assert "Traceback" not in r.err


def test_torch_flag_refused_outside_torch_mode(wheels: dict[str, Path], cli: Callable[..., Result]) -> None:
    r = cli("check", str(wheels["good"]), "--archs", mcf.ROW_ARCHS, "--torch", "2.8.0")
    assert r.code == 2
    assert "--torch 2.8.0: the row linux-x86_64-cu130-py311 is not a PyTorch extension's (its runtime mode is 'dynamic')" in r.err


def test_separable_compilation_is_explained(wheels: dict[str, Path], cli: Callable[..., Result]) -> None:
    r = cli("check", str(wheels["separable-compilation"]), "--archs", mcf.ROW_ARCHS)
    assert r.code == 5
    assert ("fx/_core.so: PTX for sm_90 exists only in __nv_relfatbin, the relocatable device code that separable "
            "compilation (CUDA_SEPARABLE_COMPILATION ON, nvcc -rdc=true)") in r.out
    assert "the runtime never JIT-compiles it" in r.out and "Fix: turn separable compilation off" in r.out
    assert "missing PTX for sm_90 (newer GPUs" not in r.out  # the plain message is replaced, not repeated


def test_abi3_and_free_threaded_tags_select_their_rows(wheels: dict[str, Path], cli: Callable[..., Result],
                                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    abi3 = tmp_path / "fx-1.0+cu130-cp39-abi3-manylinux_2_28_x86_64.whl"
    abi3.write_bytes(wheels["good"].read_bytes())
    r = cli("check", str(abi3), "--archs", mcf.ROW_ARCHS)
    assert r.code == 0, r.out + r.err
    assert "row linux-x86_64-cu130-py39" in r.out
    policy = tmp_path / "buildrows.toml"
    policy.write_text(mcf.POLICIES["dynamic"].replace('versions = ["3.11"]', 'versions = ["3.12", "3.11", "3.13t"]'))
    r = cli("--config", str(policy), "check", str(abi3))  # the oldest Python the policy builds stands for abi3
    assert r.code == 0, r.out + r.err
    assert "row linux-x86_64-cu130-py311" in r.out
    threaded = tmp_path / "fx-1.0+cu130-cp313-cp313t-manylinux_2_28_x86_64.whl"
    threaded.write_bytes(wheels["good"].read_bytes())
    r = cli("--config", str(policy), "check", str(threaded))
    assert r.code == 0, r.out + r.err
    assert "row linux-x86_64-cu130-py313t" in r.out
    policy.write_text(mcf.POLICIES["dynamic"])
    r = cli("--config", str(policy), "check", str(threaded))
    assert r.code == 3
    assert "inferred row linux-x86_64-cu130-py313t (Python 3.13t) is not in" in r.err


def test_loose_library_and_install_tree(wheels: dict[str, Path], cli: Callable[..., Result], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """check/archs on a shared library or a directory: the checks that apply without wheel metadata."""
    import zipfile

    monkeypatch.chdir(tmp_path)
    tree = tmp_path / "install"
    (tree / "lib").mkdir(parents=True)
    with zipfile.ZipFile(wheels["good"]) as zf:
        (tree / "lib" / "libfx.so").write_bytes(zf.read("fx/_core.so"))
    (tree / "lib" / "libfx.so.1").symlink_to("libfx.so")
    (tree / "include").mkdir()
    (tree / "include" / "fx.h").write_text("int launch(float*);\n")
    r = cli("check", str(tree / "lib" / "libfx.so"), "--cuda", "13.0", "--archs", mcf.ROW_ARCHS, "--json")
    assert r.code == 0, r.out + r.err
    report = json.loads(r.out)
    assert [c["name"] for c in report["checks"]] == [
        "cuda-libraries-present", "runtime-reached", "device-code-covers-row", "device-code-train", "binary-machine",
        "cuda-soname-majors", "libraries-load"]
    r = cli("check", str(tree), "--cuda", "13.0", "--archs", "9.0")
    assert r.code == 5
    assert "lib/libfx.so: device code for sm_75, which the row does not list" in r.out
    with zipfile.ZipFile(wheels["absolute-runpath"]) as zf:
        (tree / "lib" / "libfx.so").write_bytes(zf.read("fx/_core.so"))
    r = cli("check", str(tree), "--cuda", "13.0", "--archs", mcf.ROW_ARCHS)
    assert r.code == 5
    assert "lib/libfx.so: search path '/usr/local/cuda-13.0/lib64' is absolute" in r.out
    r = cli("check", str(tree), "--archs", mcf.ROW_ARCHS)
    assert r.code == 2 and "loose files carry no CUDA train" in r.err
    notlib = tmp_path / "notes.so"
    notlib.write_text("not a library")
    r = cli("check", str(notlib))
    assert r.code == 2 and "notes.so: neither a wheel nor an ELF or PE shared library" in r.err
    assert "Traceback" not in r.err
    r = cli("archs", "--from-wheel", str(tree), "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["libraries"]["lib/libfx.so"]["elf"] == ["sm_75", "sm_90"]


def test_windows_executorch_wheel_passes_with_driver_only_dlls(wheels: dict[str, Path], cli: Callable[..., Result]) -> None:
    if not mcf.mingw_available():
        pytest.skip("MinGW is not installed (apt-get install gcc-mingw-w64-x86-64)")
    r = cli("--config", str(EXAMPLE_POLICY), "check", str(wheels["win-et-good"]), "--json")
    assert r.code == 0, r.out
    report = json.loads(r.out)
    assert report["row"] == "windows-amd64-cu130-py311"
    checks = {c["name"]: c for c in report["checks"]}
    assert "executorch/lib/executorch_backend_cuda.dll: no CUDA library (only nvcuda.dll, allowed)" in checks["no-cuda-link"]["details"]
    assert checks["required-files"]["details"][0] == "6 required files ship"
    assert checks["binary-machine"]["details"] == ["4 binaries, all x86_64"]

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
    assert checks["device-code-covers-row"]["details"] == ["inspected no library with device code; expected ['sm_75', 'sm_90']"]


def test_good_report_shape(wheels: dict[str, Path], cli: Callable[..., Result]) -> None:
    r = cli("check", str(wheels["good"]), "--archs", "9.0 7.5", "--json")
    report = json.loads(r.out)
    assert report["ok"] is True
    assert report["row"] == "linux-x86_64-cu130-py311"
    assert report["libraries"] == {"fx/_core.so": {"elf": ["sm_75", "sm_90"], "ptx": ["sm_90"]}}
    assert [c["name"] for c in report["checks"]] == [
        "cuda-libraries-present", "runtime-declared", "runtime-reached", "device-code-covers-row", "binary-machine"]


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


def test_train_for_a_wheel_without_local_tag(wheels: dict[str, Path], cli: Callable[..., Result], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """PyPI's torch carries no +cu130: --archs alone must not silently check it as a CPU wheel."""
    monkeypatch.chdir(tmp_path)
    plain = tmp_path / "fx-1.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    plain.write_bytes(wheels["good"].read_bytes())
    r = cli("check", str(plain), "--archs", mcf.ROW_ARCHS)
    assert r.code == 2
    assert "the wheel's name carries no +cuXYZ tag, so its CUDA train is unknown" in r.err
    r = cli("check", str(plain), "--archs", mcf.ROW_ARCHS, "--cuda", "13.0")
    assert r.code == 0, r.out + r.err
    r = cli("check", str(wheels["good"]), "--archs", mcf.ROW_ARCHS, "--cuda", "12.6")
    assert r.code == 2 and "--cuda 12.6 contradicts the wheel's tag +cu130" in r.err
    r = cli("check", str(plain))  # checked as the CPU row its name suggests, with the way out named
    assert r.code == 5
    assert "if this is a CUDA wheel whose name carries no +cuXYZ tag, check it with --cuda TRAIN --archs LIST" in r.out
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

    from buildrows.wheelread import read_wheel

    compared = 0
    for wheel in wheels.values():
        info = read_wheel(wheel)
        with zipfile.ZipFile(wheel) as zf:
            # Linux cuobjdump cannot open a PE file; test_binfmt compares DLL sections cut out with objcopy
            for lib in (x for x in info.libraries if x.format == "elf"):
                path = tmp_path / f"{compared}.so"
                path.write_bytes(zf.read(lib.path))
                assert sorted(lib.cubins) == _cuobjdump_list(tool, "--list-elf", path), lib.path
                assert sorted(lib.ptx) == _cuobjdump_list(tool, "--list-ptx", path), lib.path
                compared += 1
    assert compared >= 10

"""The row a wheel's name names (buildrows.check.tags): every tag pip accepts, read before any library
is inflated; `--row` holds the name to the row; `--row` with `--archs`, and `--ptx`. Wheels are made
by hand (tests/cuda_tools.py), so no toolchain is needed."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cuda_tools import fatbin_container, fatbin_entry, make_elf, make_wheel

from buildrows.binaries.wheelread import parse_wheel_filename
from buildrows.check.tags import platform_of_name, python_of_name, serves, tags_of_name
from tests.conftest import REPO, Result

sys.path.insert(0, str(REPO / "scripts"))
import make_check_fixtures as mcf

RUNTIME_13 = mcf.RUNTIME_13
METADATA = f"Metadata-Version: 2.1\nName: fx\nVersion: 1.0\nRequires-Dist: {RUNTIME_13}\n"
ROW_CODE = fatbin_container([fatbin_entry(2, 75), fatbin_entry(2, 90), fatbin_entry(1, 90)])  # "7.5 9.0", PTX 9.0
NO_PTX = fatbin_container([fatbin_entry(2, 75), fatbin_entry(2, 90)])


def _lib(code: bytes = ROW_CODE) -> bytes:
    return make_elf([(".nv_fatbin", code)], needed=["libcudart.so.13"], runpath=mcf.GOOD_RPATH)


def _wheel(tmp_path: Path, name: str, code: bytes = ROW_CODE) -> Path:
    return make_wheel(tmp_path / name, {"fx/_core.so": _lib(code)}, metadata=METADATA)


def _policy(tmp_path: Path, versions: str = '["3.11"]') -> Path:
    path = tmp_path / "buildrows.toml"
    path.write_text(mcf.POLICIES["dynamic"].replace('versions = ["3.11"]', f"versions = {versions}"))
    return path


@pytest.mark.parametrize(
    ("filename", "platform", "python", "described"),
    [
        ("x-1-cp312-cp312-manylinux2014_x86_64.whl", "linux-x86_64", "3.12", "Python 3.12"),
        ("x-1-cp312-cp312-manylinux2010_x86_64.whl", "linux-x86_64", "3.12", "Python 3.12"),
        ("x-1-py3-none-manylinux1_x86_64.whl", "linux-x86_64", "3", "py3-none (any Python 3)"),
        ("x-1-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", "linux-x86_64", "3", "py3-none (any Python 3)"),
        ("x-1-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "linux-x86_64", "3.12", "Python 3.12"),
        ("x-1-py39-none-manylinux_2_28_x86_64.whl", "linux-x86_64", "3.9", "py39-none (Python 3.9 and newer)"),
        ("x-1-cp310-abi3-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl", "linux-x86_64", "3.10",
         "abi3 (Python 3.10 and newer)"),
        ("x-1-cp313-cp313t-manylinux2014_x86_64.whl", "linux-x86_64", "3.13t", "Python 3.13t"),
        ("x-1-py2.py3-none-manylinux2014_aarch64.whl", "linux-aarch64", "3", "py3-none (any Python 3)"),
        ("x-1-cp311.cp312-cp311.cp312-musllinux_1_2_x86_64.whl", "linux-x86_64", "3.11", "Python 3.11"),
        ("x-1-cp312-cp312-win_amd64.whl", "windows-amd64", "3.12", "Python 3.12"),
        ("x-1-cp312-cp312-macosx_11_0_arm64.whl", None, "3.12", "Python 3.12"),
        ("x-1-cp312-cp312-manylinux2014_x86_64.manylinux2014_aarch64.whl", None, "3.12", "Python 3.12"),
        ("x-1-pp310-pypy310_pp73-manylinux2014_x86_64.whl", "linux-x86_64", None, None),
    ],
)
def test_every_tag_pip_accepts_names_its_row(filename: str, platform: str | None, python: str | None,
                                             described: str | None) -> None:
    name = parse_wheel_filename(filename)
    assert platform_of_name(name) == platform
    found = python_of_name(name)
    assert (found.version if found else None) == python
    assert (found.described if found else None) == described


@pytest.mark.parametrize(
    ("tags", "python", "expected"),
    [
        ("cp312-cp312", "3.12", True), ("cp312-cp312", "3.13", False), ("cp312-cp312", "3.12t", False),
        ("cp313-cp313t", "3.13t", True), ("cp313-cp313t", "3.13", False),
        ("cp39-abi3", "3.13", True), ("cp39-abi3", "3.8", False), ("cp39-abi3", "3.13t", False),
        ("py3-none", "3.8", True), ("py3-none", "3.14t", True), ("py39-none", "3.12", True),
        ("py39-none", "3.8", False), ("py310-none", "3.13t", True), ("cp312-none", "3.12", True),
        ("cp312-none", "3.11", False), ("pp310-pypy310_pp73", "3.10", False),
    ],
)
def test_which_pythons_a_tag_serves(tags: str, python: str, expected: bool) -> None:
    assert serves(tags_of_name(parse_wheel_filename(f"x-1-{tags}-linux_x86_64.whl")), python) is expected


def test_published_tags_select_a_row_and_pass(tmp_path: Path, cli: Callable[..., Result],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name, row in [("fx-1.0-py3-none-manylinux1_x86_64.whl", "linux-x86_64-cu130-py3"),
                      ("fx-1.0-py39-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl", "linux-x86_64-cu130-py39"),
                      ("fx-1.0-cp312-cp312-manylinux2014_x86_64.whl", "linux-x86_64-cu130-py312")]:
        r = cli("check", str(_wheel(tmp_path, name)), "--cuda", "13.0", "--archs", "7.5 9.0")
        assert r.code == 0, r.out + r.err
        assert f"row {row}" in r.out
    policy = _policy(tmp_path, '["3.12", "3.11"]')
    r = cli("--config", str(policy), "check", str(_wheel(tmp_path, "fx-1.0-py3-none-manylinux1_x86_64.whl")),
            "--cuda", "13.0")
    assert r.code == 0, r.out + r.err
    assert "row linux-x86_64-cu130-py311" in r.out  # the oldest row the wheel serves stands for it
    r = cli("--config", str(policy), "check", str(_wheel(tmp_path, "fx-1.0-py313-none-manylinux1_x86_64.whl")),
            "--cuda", "13.0")
    assert r.code == 3
    assert "inferred row linux-x86_64-cu130-py313 (py313-none (Python 3.13 and newer)) is not in" in r.err


@pytest.mark.parametrize(
    ("filename", "message"),
    [
        ("fx-1.0-cp312-cp312-macosx_11_0_arm64.whl",
         "cannot infer the row: no platform tag names a platform buildrows builds (linux x86_64/aarch64, win_amd64) "
         "(platform tags macosx_11_0_arm64, python tags cp312-cp312)"),
        ("fx-1.0-cp312-cp312-manylinux2014_x86_64.manylinux2014_aarch64.whl",
         "cannot infer the row: its platform tags name several platforms (linux-aarch64, linux-x86_64)"),
        ("fx-1.0-pp310-pypy310_pp73-manylinux2014_x86_64.whl",
         "cannot infer the row: no python tag names CPython 3 (cpXY, cpXY-abi3, pyX-none)"),
    ],
)
def test_a_tag_problem_comes_before_any_library_is_read(filename: str, message: str, tmp_path: Path,
                                                        cli: Callable[..., Result],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The library is malformed: had it been inflated first, its error would be the one reported."""
    monkeypatch.chdir(tmp_path)
    wheel = make_wheel(tmp_path / filename, {"fx/_core.so": _lib()[:100]}, metadata=METADATA)
    r = cli("check", str(wheel), "--cuda", "13.0", "--archs", "7.5 9.0")
    assert r.code == 2
    assert message in r.err
    assert "fix: pass --row ROW --config POLICY" in r.err
    assert "fx/_core.so" not in r.err


@pytest.mark.parametrize(
    ("filename", "row", "extra", "failed", "message"),
    [
        ("fx-1.0-cp311-cp311-manylinux_2_28_x86_64.whl", "linux-x86_64-cu130-py311", [], ("local-version-tag",),
         "fx-1.0-cp311-cp311-manylinux_2_28_x86_64.whl is version 1.0, not tagged +cu130 for row "
         "linux-x86_64-cu130-py311"),
        ("fx-1.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl", "linux-x86_64-cu130-py311", [], ("python-tag",),
         "is tagged cp312-cp312, not cp311-cp311 for row linux-x86_64-cu130-py311"),
        ("fx-1.0+cu130-cp311-cp311-manylinux_2_28_aarch64.whl", "linux-x86_64-cu130-py311", [],
         ("platform-tag", "binary-machine"),
         "is tagged manylinux_2_28_aarch64 (linux-aarch64), not for row linux-x86_64-cu130-py311's platform "
         "linux-x86_64"),
        ("fx-1.0+cu130-cp311-cp311-manylinux2014_x86_64.whl", "linux-x86_64-cu130-py311", [], (),
         "version tag matches linux-x86_64-cu130-py311"),
        ("fx-1.0+cu130-py3-none-manylinux1_x86_64.whl", "linux-x86_64-cu130-py311", [], (),
         "Python tag matches linux-x86_64-cu130-py311"),
        ("fx-1.0+cu130-cp39-abi3-manylinux1_x86_64.whl", "linux-x86_64-cu130-py311", [], (),
         "platform tag matches linux-x86_64-cu130-py311"),
        # A wheel published without local tags: --cuda states the train, so no tag is expected.
        ("fx-1.0-cp311-cp311-manylinux_2_28_x86_64.whl", "linux-x86_64-cu130-py311", ["--cuda", "13.0"], (),
         "version tag matches linux-x86_64-cu130-py311"),
    ],
)
def test_row_holds_the_wheels_tags(filename: str, row: str, extra: list[str], failed: tuple[str, ...], message: str,
                                   tmp_path: Path, cli: Callable[..., Result]) -> None:
    import json

    policy = _policy(tmp_path)
    r = cli("--config", str(policy), "check", str(_wheel(tmp_path, filename)), "--row", row, *extra, "--json")
    report = json.loads(r.out)
    assert tuple(c["name"] for c in report["checks"] if not c["ok"]) == failed, r.out
    assert any(message in d for c in report["checks"] for d in c["details"]), r.out
    assert [c["name"] for c in report["checks"]][:3] == ["local-version-tag", "python-tag", "platform-tag"]
    assert r.code == (5 if failed else 0)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        # --row with --archs: the row's train, this list
        (["--archs", "9.0"], 5, "fx/_core.so: device code for sm_75, which the row does not list"),
        (["--archs", "7.5 9.0"], 0, "1 library carries exactly sm_75 sm_90 with PTX sm_90"),
        (["--archs", "7.0"], 2, "--archs: "),  # CUDA 13.0 cannot compile 7.0
        # --ptx: the policy's ptx key on the command line, for --archs or the row's list
        (["--ptx", "none"], 5, "fx/_core.so: PTX for sm_90, which the row does not list as PTX (to promise it, write 9.0+PTX in the list)"),
        (["--archs", "7.5 9.0", "--ptx", "7.5"], 5, "fx/_core.so: missing PTX for sm_75"),
        (["--archs", "7.5 9.0", "--ptx", "8.0"], 2, "--ptx: ptx = '8.0' is not in the row's list"),
    ],
)
def test_row_with_archs_and_ptx(args: list[str], code: int, message: str, tmp_path: Path,
                                cli: Callable[..., Result]) -> None:
    policy = _policy(tmp_path)
    wheel = _wheel(tmp_path, "fx-1.0+cu130-cp311-cp311-manylinux_2_28_x86_64.whl")
    r = cli("--config", str(policy), "check", str(wheel), "--row", "linux-x86_64-cu130-py311", *args)
    assert r.code == code, r.out + r.err
    assert message in (r.out if code in (0, 5) else r.err)


def test_ptx_none_passes_a_wheel_without_ptx(tmp_path: Path, cli: Callable[..., Result],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    wheel = _wheel(tmp_path, "fx-1.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", NO_PTX)
    r = cli("check", str(wheel), "--cuda", "13.0", "--archs", "7.5 9.0")
    assert r.code == 5 and "fx/_core.so: missing PTX for sm_90" in r.out
    r = cli("check", str(wheel), "--cuda", "13.0", "--archs", "7.5 9.0", "--ptx", "none")
    assert r.code == 0, r.out + r.err
    assert "1 library carries exactly sm_75 sm_90" in r.out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--row", "linux-x86_64-cpu-py311", "--archs", "9.0"],
         "--archs names GPU code, but --row linux-x86_64-cpu-py311 is a CPU row"),
        (["--row", "linux-x86_64-cpu-py311", "--ptx", "none"],
         "--ptx names GPU code, but --row linux-x86_64-cpu-py311 is a CPU row"),
        (["--ptx", "none"], "--ptx names GPU code, but the wheel's name carries no +cuXYZ tag"),
    ],
)
def test_gpu_options_without_a_gpu_row(args: list[str], message: str, tmp_path: Path,
                                       cli: Callable[..., Result]) -> None:
    policy = _policy(tmp_path).read_text().replace('trains = ["13.0"]\n[[', 'trains = ["13.0"]\ncpu = true\n[[')
    (tmp_path / "buildrows.toml").write_text(policy)
    wheel = _wheel(tmp_path, "fx-1.0-cp311-cp311-manylinux_2_28_x86_64.whl")
    r = cli("--config", str(tmp_path / "buildrows.toml"), "check", str(wheel), *args)
    assert r.code == 2, r.out + r.err
    assert message in r.err


def test_json_reports_an_input_error_as_json(tmp_path: Path, cli: Callable[..., Result],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`check --json` on a wheel whose row cannot be inferred: stdout is still JSON, stderr the error."""
    import json

    monkeypatch.chdir(tmp_path)
    wheel = _wheel(tmp_path, "fx-1.0-cp312-cp312-macosx_11_0_arm64.whl")
    r = cli("check", str(wheel), "--cuda", "13.0", "--archs", "7.5 9.0", "--json")
    assert r.code == 2
    report = json.loads(r.out)
    assert report["ok"] is False and report["wheel"] == str(wheel)
    assert report["error"]["kind"] == "bad input" and report["error"]["exit_code"] == 2
    assert "cannot infer the row: no platform tag names a platform buildrows builds" in report["error"]["message"]
    assert report["error"]["fix"] == ["pass --row ROW --config POLICY"]
    assert "cannot infer the row" in r.err

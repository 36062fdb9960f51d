"""No vacuous pass (issue 36, item 4): a row's architecture list is judged against the device code the
project built; code marked vendored neither keeps nor silently excuses it. A wheel whose only device
code is vendored fails the row, saying so and how to state what it really carries; stated truthfully
(the vendored files' own list, or the project's libraries host-only) it passes, and says what it did."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.binaries.wheelread import LibraryInfo, WheelInfo, parse_wheel_filename
from buildrows.check.device import check_device_code
from buildrows.check.device_train import check_device_train
from buildrows.check.judging import Expectation
from buildrows.policy.archs import Train, parse_arch_list
from buildrows.policy.model import LibraryRule
from tests.conftest import Result

T130 = Train(13, 0)
VENDORED = LibraryRule(("pkg.libs/*",), "NVIDIA's libnvjpeg", "check.libraries[0]", vendored=True)
HOST = LibraryRule(("pkg/_jit*.so",), "compiles its kernels with NVRTC", "check.libraries[1]", host_only=True)


def _lib(path: str, elf: str = "", ptx: str = "") -> LibraryInfo:
    return LibraryInfo(path=path, format="elf", size=1, machine="x86_64", cubins=tuple(elf.split()),
                       ptx=tuple(ptx.split()))


def _wheel(*libs: LibraryInfo) -> WheelInfo:
    name = "pkg-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    return WheelInfo(Path(name), parse_wheel_filename(name), (), libs, tuple(lib.path for lib in libs))


def _exp(*rules: LibraryRule) -> Expectation:
    return Expectation("row", "linux-x86_64", T130, parse_arch_list("7.5"), machine="x86_64", library_rules=rules)


def test_only_vendored_device_code_fails_the_row() -> None:
    r = check_device_code(_exp(VENDORED), _wheel(_lib("pkg.libs/libnvjpeg.so.13", "sm_80 sm_90", "sm_90"),
                                                 _lib("pkg/_C.so")))
    assert not r.ok
    assert r.details[0] == (
        "the only device code in the wheel is vendored (pkg.libs/libnvjpeg.so.13 (elf sm_80 sm_90; ptx sm_90) "
        "[check.libraries[0]]): nothing of the project's own carries the row's list (sm_75 with PTX sm_75), and "
        "vendored code neither keeps nor excuses that promise")
    assert r.details[1].startswith("fix: state what the wheel really carries: if the vendored code is the device "
                                   "code that runs for this row, give its [[check.libraries]] rule the list it "
                                   "carries instead of vendored = true (pkg.libs/libnvjpeg.so.13: archs = \"8.0 "
                                   "9.0+PTX\"); if the project's own libraries compile their kernels at run time")
    # the vendored library is still named, as before
    assert "pkg.libs/libnvjpeg.so.13: vendored, not held to the row's list: NVIDIA's libnvjpeg" in r.details[2]


def test_stated_host_only_with_vendored_code_passes_and_says_so() -> None:
    r = check_device_code(_exp(VENDORED, HOST), _wheel(_lib("pkg.libs/libnvjpeg.so.13", "sm_80"),
                                                       _lib("pkg/_jit.so")))
    assert r.ok, r.details
    assert r.details[0] == ("no library of the project's own carries device code (1 host-only, as stated: "
                            "pkg/_jit.so); the row's list (sm_75 with PTX sm_75) is carried by nothing, and the "
                            "device code it ships is vendored:")


def test_vendored_beside_the_projects_own_code_is_unchanged() -> None:
    r = check_device_code(_exp(VENDORED), _wheel(_lib("pkg/_C.so", "sm_75", "sm_75"),
                                                 _lib("pkg.libs/libnvjpeg.so.13", "sm_80")))
    assert r.ok, r.details
    assert r.details[0] == "1 library carries exactly sm_75 with PTX sm_75"
    # and the project's own library still fails when it lacks the list
    r = check_device_code(_exp(VENDORED), _wheel(_lib("pkg/_C.so", "sm_80"), _lib("pkg.libs/libnvjpeg.so.13", "sm_75")))
    assert not r.ok and "pkg/_C.so" in r.details[0]


def test_the_train_check_names_what_it_did_not_judge() -> None:
    lib = LibraryInfo(path="pkg.libs/libnvjpeg.so.13", format="elf", size=1, machine="x86_64", cubins=("sm_80",),
                      ptx=("sm_80",), ptx_isa=((9, 5),))
    r = check_device_train(_exp(VENDORED), _wheel(lib))
    assert r.ok
    assert r.details[0].startswith("not judged, vendored (not built by the project's toolkit): pkg.libs/libnvjpeg.so.13;")


POLICY = """[project]
name = "jitpkg"
driver = "setup.py"
[python]
versions = ["3.12"]
[cuda]
trains = ["13.0"]
[cuda.runtime.13]
mode = "none"
[platforms.linux-x86_64]
trains = ["13.0"]
[[platforms.linux-x86_64.cuda]]
trains = ["13.0"]
archs = "7.5"
[[check.libraries]]
files = ["jitpkg/tests/data/*"]
{rule}
reason = "test fixtures, not loaded at run time"
"""
# PTX text as NVVM writes it (the PTX ISA reference's format): a test fixture for sm_20
FIXTURE = "//\n// Generated by NVIDIA NVVM Compiler\n.version 3.2\n.target sm_20\n.address_size 64\n\n.visible .entry k()\n{\n\tret;\n}\n"


@pytest.fixture
def jit_wheel(tmp_path: Path) -> Path:
    """The issue's shape: a JIT-only wheel whose only device code is a test fixture's PTX."""
    wheel = tmp_path / "jitpkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("jitpkg/__init__.py", "def compile(src): ...\n")
        z.writestr("jitpkg/tests/data/fixture.ptx", FIXTURE)
        z.writestr("jitpkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: jitpkg\nVersion: 1.0\n")
    return wheel


@pytest.mark.parametrize(("rule", "code", "lines"), [
    ("vendored = true", 5, [
        "[FAIL] device-code-covers-row",
        "the only device code in the wheel is vendored (1 kernel file under jitpkg/tests/data/ (elf -; ptx sm_20) "
        "[check.libraries[0] (buildrows.toml:15)]): nothing of the project's own carries the row's list (sm_75 "
        "with PTX sm_75), and vendored code neither keeps nor excuses that promise",
        "(1 kernel file under jitpkg/tests/data/: archs = \"2.0-virtual\")"]),
    # the fix the failure gives, applied: the fixture's own list; the row passes and says what it judged
    ('archs = "2.0-virtual"', 0, [
        "[PASS] device-code-covers-row",
        "with PTX sm_20: its own list [check.libraries[0] (buildrows.toml:15)]",
        "oldest driver it loads on: 580.65.06, CUDA 13's first driver"]),
])
def test_a_jit_only_wheel_with_vendored_fixture_ptx(jit_wheel: Path, tmp_path: Path, cli: Callable[..., Result],
                                                   rule: str, code: int, lines: list[str]) -> None:
    policy = tmp_path / "buildrows.toml"
    policy.write_text(POLICY.format(rule=rule), encoding="utf-8")
    r = cli("check", str(jit_wheel), "--cuda", "13.0", "--config", str(policy))
    assert r.code == code, r.out + r.err
    for line in lines:
        assert line in r.out, r.out

"""Per-library device-code rules ([[check.libraries]]) and exceptions that matched nothing (issue 20):
a vendored NVIDIA library, one kernel library per CUDA train, libraries with their own list, and
every stale exception reported. Tables of (wheel as the reader returns it, expected message)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.binaries.wheelread import LibraryInfo, WheelInfo, parse_wheel_filename
from buildrows.check.device import check_device_code
from buildrows.check.judging import Expectation
from buildrows.check.runtime import unused_exceptions
from buildrows.check.sonames import check_soname_majors
from buildrows.policy.archs import ArchList, Train, parse_arch_list
from buildrows.policy.model import FileRule, LibraryRule, RpathException
from tests.conftest import Result

T128, T130 = Train.parse("12.8"), Train.parse("13.0")
ROW = parse_arch_list("8.0 9.0", ptx="none", train=T128)
TRAINS: tuple[tuple[Train, ArchList], ...] = (
    (T128, ROW), (T130, parse_arch_list("9.0 10.0", ptx="none", train=T130)))


def _lib(path: str, elf: str = "", ptx: str = "", **kw: object) -> LibraryInfo:
    return LibraryInfo(path=path, format="elf", size=1, machine="x86_64", cubins=tuple(elf.split()),  # type: ignore[arg-type]
                       ptx=tuple(ptx.split()), **kw)


def _wheel(libs: list[LibraryInfo], members: tuple[str, ...] = ()) -> WheelInfo:
    name = "pkg-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    return WheelInfo(Path(name), parse_wheel_filename(name), (), tuple(libs), members or tuple(lib.path for lib in libs))


def _exp(*rules: LibraryRule, exceptions: tuple[RpathException, ...] = (), files: tuple[FileRule, ...] = ()) -> Expectation:
    return Expectation("row", "linux-x86_64", T128, ROW, machine="x86_64", library_rules=rules, train_archs=TRAINS,
                       rpath_exceptions=exceptions, files=files)


VENDORED = LibraryRule(("pkg.libs/libnvjpeg.*.so.*",), "NVIDIA's", "check.libraries[0]", vendored=True)
PER_TRAIN = LibraryRule(("pkg/lib_cuda{cu}.so",), "one per train", "check.libraries[1]", per_train=True)
OWN = LibraryRule(("pkg/legacy_*.so",), "older kernels", "check.libraries[2]", archs=parse_arch_list("6.0 7.0", ptx="none"))


@pytest.mark.parametrize(("libs", "rules", "ok", "message"), [
    # a vendored NVIDIA library keeps NVIDIA's list; the project's library keeps the row's
    ([_lib("pkg/_C.so", "sm_80 sm_90"), _lib("pkg.libs/libnvjpeg.8dd2.so.12", "sm_50 sm_120", "sm_120")], (VENDORED,), True,
     "pkg.libs/libnvjpeg.8dd2.so.12: vendored, not held to the row's list: NVIDIA's [check.libraries[0]] "
     "(carries elf sm_50 sm_120; ptx sm_120)"),
    ([_lib("pkg/_C.so", "sm_80 sm_90"), _lib("pkg.libs/libnvjpeg.8dd2.so.12", "sm_50 sm_120", "sm_120")], (), False,
     "pkg.libs/libnvjpeg.8dd2.so.12: device code for sm_50, sm_120, which the row does not list"),
    # one library per train, each held to its own train's list
    ([_lib("pkg/lib_cuda128.so", "sm_80 sm_90"), _lib("pkg/lib_cuda130.so", "sm_90 sm_100")], (PER_TRAIN,), True,
     "1 library carries exactly sm_90 sm_100: CUDA 13.0's list"),
    ([_lib("pkg/lib_cuda128.so", "sm_80 sm_90"), _lib("pkg/lib_cuda130.so", "sm_80 sm_90")], (PER_TRAIN,), False,
     "pkg/lib_cuda130.so: device code for sm_80, which CUDA 13.0's list does not list"),
    ([_lib("pkg/lib_cuda126.so", "sm_80 sm_90")], (PER_TRAIN,), False,
     "pkg/lib_cuda126.so: its name says CUDA 12.6, but the policy has no architecture list for it on linux-x86_64 "
     "[check.libraries[1]]; fix: publish the train with its list, or put a [[check.libraries]] rule with its own archs "
     "before this one"),
    # a rule's own list; the first matching rule wins
    ([_lib("pkg/legacy_a.so", "sm_60 sm_70")], (OWN,), True, "1 library carries exactly sm_60 sm_70: its own list [check.libraries[2]]"),
    ([_lib("pkg/legacy_a.so", "sm_70")], (OWN,), False, "pkg/legacy_a.so: missing device code for sm_60 (a GPU of that "
                                                        "architecture gets 'no kernel image is available') [check.libraries[2]]"),
])
def test_library_rules(libs: list[LibraryInfo], rules: tuple[LibraryRule, ...], ok: bool, message: str) -> None:
    r = check_device_code(_exp(*rules), _wheel(libs))
    assert r.ok is ok, r.details
    assert message in r.details, r.details


@pytest.mark.parametrize(("libs", "rules", "ok", "message"), [
    # a per-train library is held to its own train's majors: libcudart.so.13 is right for lib_cuda130.so on a 12.8 row
    ([_lib("pkg/lib_cuda128.so", needed=("libcudart.so.12",)), _lib("pkg/lib_cuda130.so", needed=("libcudart.so.13",))],
     (PER_TRAIN,), True, "held to their own train's majors ([[check.libraries]] per-train): pkg/lib_cuda130.so (CUDA 13.0)"),
    # ... and only to its own: CUDA 12's runtime in the 13.0 library fails, naming its train
    ([_lib("pkg/lib_cuda130.so", needed=("libcudart.so.12",))], (PER_TRAIN,), False,
     "pkg/lib_cuda130.so: links libcudart.so.12 (cudart (the CUDA runtime) of CUDA 12), but the row is CUDA 13.0, "
     "which ships libcudart.so.13"),
    # without the rule the row's major holds
    ([_lib("pkg/lib_cuda130.so", needed=("libcudart.so.13",))], (), False,
     "pkg/lib_cuda130.so: links libcudart.so.13 (cudart (the CUDA runtime) of CUDA 13), but the row is CUDA 12.8"),
    # a vendored library brings its own CUDA: a shipped other-major library, and what it NEEDS beside it, is a note
    ([_lib("pkg.libs/libnvjpeg.8dd2.so.13", needed=("libcudart.e8e8b82a.so.13",)),
      _lib("pkg.libs/libcudart.e8e8b82a.so.13")],
     (LibraryRule(("pkg.libs/*",), "NVIDIA's", "check.libraries[0]", vendored=True),), True,
     "vendored, reported not failed: pkg.libs/libnvjpeg.8dd2.so.13: links libcudart.e8e8b82a.so.13"),
    # ... but what it NEEDS from the environment is still the row's CUDA
    ([_lib("pkg.libs/libnvjpeg.8dd2.so.12", needed=("libcublas.so.13",))], (VENDORED,), False,
     "pkg.libs/libnvjpeg.8dd2.so.12: links libcublas.so.13 (cuBLAS of CUDA 13), but the row is CUDA 12.8, which ships "
     "libcublas.so.12"),
])
def test_soname_majors_follow_library_rules(libs: list[LibraryInfo], rules: tuple[LibraryRule, ...], ok: bool,
                                            message: str) -> None:
    r = check_soname_majors(_exp(*rules), _wheel(libs))
    assert r.ok is ok, r.details
    assert any(message in d for d in r.details), r.details


def test_every_exception_that_matched_nothing_is_reported() -> None:
    dead = RpathException("a typo", "check.rpath-exceptions[0]", entry="$ORIGIN/../../nvidia/*/lib")
    live = RpathException("torch", "check.rpath-exceptions[1]", reaches="torch/lib")
    req = FileRule("required", ("pkg/missing.txt",), "docs", "check.required[0]")
    libs = [_lib("pkg/_C.so", "sm_80 sm_90", rpath=("$ORIGIN/../torch/lib",))]
    unused = unused_exceptions(_exp(VENDORED, exceptions=(dead, live), files=(req,)), _wheel(libs))
    assert unused == [
        {"source": "check.rpath-exceptions[0]", "rule": "RPATH exception entry = '$ORIGIN/../../nvidia/*/lib'",
         "reason": "a typo"},
        {"source": "check.required[0]", "rule": "required files 'pkg/missing.txt'", "reason": "docs"},
        {"source": "check.libraries[0]", "rule": "libraries files ['pkg.libs/libnvjpeg.*.so.*']", "reason": "NVIDIA's"},
    ]


POLICY = """
[project]
name = "pkg"
driver = "setup.py"
[python]
versions = ["3.12"]
[cuda]
trains = ["13.0"]
[cuda.runtime.13]
mode = "torch"
[platforms.linux-x86_64]
trains = ["13.0"]
[[platforms.linux-x86_64.cuda]]
trains = ["13.0"]
archs = "8.0 9.0"
"""


@pytest.mark.parametrize(("rule", "message"), [
    ('files = ["a/*.so"]\nreason = "x"', "[check.libraries[0]]: a library rule says exactly one of archs, per-train = true, "
                                         "vendored = true or host-only = true (or only dlopens, system or provided-by)"),
    ('files = ["a/*.so"]\nhost-only = true\nvendored = true\nreason = "x"', "(here vendored, host-only)"),
    ('files = ["a/*.so"]\ndlopens = ["libcublas.so"]\nreason = "x"',
     "[check.libraries[0].dlopens]: 'libcublas.so' is not a soname with its major version"),
    ('files = ["a/*.so"]\narchs = "8.0"\nvendored = true\nreason = "x"', "(here archs, vendored)"),
    ('files = ["a/*.so"]\nper-train = true\nreason = "x"', "[check.libraries[0].files]: per-train needs {cu} in files"),
    ('files = ["a/x{cu}.so"]\nvendored = true\nreason = "x"', "{cu} only means something with per-train = true"),
    ('files = ["a/*.so"]\nvendored = true\nptx = "none"\nreason = "x"', "[check.libraries[0].ptx]: ptx is only used with archs"),
    ('files = ["a/*.so"]\narchs = "8.O"\nreason = "x"', "[check.libraries[0].archs]: '8.O' is not a GPU architecture"),
    ('files = ["a/*.so"]\nvendored = true\nreason = " "', "[check.libraries[0].reason]: an exception needs its reason"),
    ('files = ["a/*.so"]\nvendored = true', "missing required key 'reason'"),
    ('files = ["a/*.so"]\nvendor = true\nreason = "x"', "unknown key 'vendor'\n    fix: did you mean 'vendored'?"),
    ('files = ["a/*.so"]\nvendored = true\nrows = ["win*"]\nreason = "x"', "rows = 'win*' (check.libraries[0]"),
])
def test_library_rule_errors(rule: str, message: str, tmp_path: Path, cli: Callable[..., Result]) -> None:
    p = tmp_path / "buildrows.toml"
    p.write_text(POLICY + "[[check.libraries]]\n" + rule + "\n", encoding="utf-8")
    r = cli("--config", str(p), "rows")
    assert r.code == 2, r.err
    assert message in r.err
    assert str(p) in r.err and "Traceback" not in r.err


def test_unused_exceptions_in_text_and_json(tmp_path: Path, cli: Callable[..., Result]) -> None:
    """End to end on a real (tiny, hand-made) wheel: the dead exception is named in both outputs."""
    import zipfile

    p = tmp_path / "buildrows.toml"
    p.write_text(POLICY.replace('mode = "torch"', 'mode = "static"')
                 + '[[check.rpath-exceptions]]\nentry = "/opt/gone/*"\nreason = "an old toolchain"\n', encoding="utf-8")
    whl = tmp_path / "pkg-1.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("pkg/__init__.py", "")
        z.writestr("pkg-1.0+cu130.dist-info/METADATA", "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0+cu130\n")
        z.writestr("pkg-1.0+cu130.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: cp312-cp312-manylinux_2_28_x86_64\n")
        z.writestr("pkg-1.0+cu130.dist-info/RECORD", "")
    r = cli("--config", str(p), "check", str(whl))
    assert "[NOTE] 1 exception of the policy matched nothing in this wheel (stale or mistyped?)" in r.out
    assert "RPATH exception entry = '/opt/gone/*': an old toolchain [check.rpath-exceptions[0] (buildrows.toml:" in r.out
    r = cli("--config", str(p), "check", str(whl), "--json")
    unused = json.loads(r.out)["unused_exceptions"]
    assert [u["rule"] for u in unused] == ["RPATH exception entry = '/opt/gone/*'"]

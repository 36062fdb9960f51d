"""Which train wrote a wheel's device code, read from its PTX ISA (buildrows.check.device_train, issue 27
point 5): every guard with a library that trips it, per-library rules honoured. Tables of (libraries as the
reader returns them, expected verdict and message). Real nvcc output: tests/test_ptx_only_and_variants.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from buildrows.binaries.wheelread import LibraryInfo, WheelInfo, parse_wheel_filename
from buildrows.check.device_train import (
    check_device_train,
    cubin_train,
    oldest_driver,
    train_of_code,
)
from buildrows.check.judging import Expectation
from buildrows.policy.archs import (
    Train,
    newest_ptx_isa,
    parse_arch_list,
    ptx_isa_train,
    train_driver,
)
from buildrows.policy.model import LibraryRule

T118, T126, T128, T130 = (Train.parse(t) for t in ("11.8", "12.6", "12.8", "13.0"))


def _lib(path: str, *isa: tuple[int, int]) -> LibraryInfo:
    return LibraryInfo(path=path, format="elf", size=1, machine="x86_64", cubins=("sm_80",),
                       ptx=("sm_80",) * len(isa), ptx_isa=isa)


def _cubins(path: str, *toolkits: tuple[int, int]) -> LibraryInfo:
    return LibraryInfo(path=path, format="elf", size=1, machine="x86_64", cubins=("sm_80",) * len(toolkits),
                       cubin_toolkits=toolkits)


def _wheel(libs: list[LibraryInfo]) -> WheelInfo:
    name = "pkg-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    return WheelInfo(Path(name), parse_wheel_filename(name), (), tuple(libs), tuple(lib.path for lib in libs))


def _exp(train: Train, *rules: LibraryRule, platform: str = "linux-x86_64") -> Expectation:
    return Expectation("row", platform, train, parse_arch_list("8.0"), library_rules=rules)


VENDORED = LibraryRule(("pkg.libs/*",), "NVIDIA's", "check.libraries[0]", vendored=True)
PER_TRAIN = LibraryRule(("pkg/lib_cuda{cu}.so",), "one per train", "check.libraries[1]", per_train=True)


@pytest.mark.parametrize(("train", "libs", "rules", "ok", "message"), [
    # the issue's example: CUDA 12.8's PTX (ISA 8.7) under a policy that claims CUDA 11.8
    (T118, [_lib("pkg/_C.so", (8, 7))], (), False,
     "pkg/_C.so: PTX ISA 8.7 is CUDA 12.8's, but the row claims CUDA 11.8 (which writes ISA 7.8 at most): it was "
     "built by a newer toolkit, and its PTX needs CUDA 12.8's driver (>= 570.26 on Linux)"),
    (T128, [_lib("pkg/_C.so", (8, 7))], (), True, "PTX ISA 8.7 in 1 library: no newer than CUDA 12.8 writes"),
    # 12.6 added no ISA: it writes 12.5's 8.5
    (T126, [_lib("pkg/_C.so", (8, 5))], (), True, "PTX ISA 8.5 in 1 library"),
    (T126, [_lib("pkg/_C.so", (8, 6))], (), False, "PTX ISA 8.6 is CUDA 12.7's, but the row claims CUDA 12.6"),
    # the newest of several PTX entries decides
    (T130, [_lib("pkg/_C.so", (7, 8), (9, 9))], (), False,
     "pkg/_C.so: PTX ISA 9.9 is newer than any train buildrows knows (add it under [ptx-isa] in "
     "buildrows/data/cuda_trains.toml), but the row claims CUDA 13.0 (which writes ISA 9.0 at most)"),
    # a vendored library is not judged; a per-train library is held to the train its name carries
    (T118, [_lib("pkg.libs/libnvjpeg.so.12", (8, 8))], (VENDORED,), True,
     "not judged, vendored (not built by the project's toolkit): pkg.libs/libnvjpeg.so.12; nothing else "
     "carries PTX or a cubin toolkit note"),
    (T130, [_lib("pkg/lib_cuda128.so", (8, 7)), _lib("pkg/lib_cuda130.so", (9, 0))], (PER_TRAIN,), True,
     "PTX ISA 9.0 in 2 libraries"),
    (T130, [_lib("pkg/lib_cuda118.so", (8, 7))], (PER_TRAIN,), False,
     "pkg/lib_cuda118.so: PTX ISA 8.7 is CUDA 12.8's, but its name claims CUDA 11.8"),
    # no PTX and no toolkit note: nothing dates it, and the cubins' floor is the oldest driver
    (T128, [LibraryInfo(path="pkg/_C.so", format="elf", size=1, cubins=("sm_80",))], (), True,
     "no PTX, and no cubin with a toolkit note, to date it (ptxas writes that note in some CUDA 12.8+ cubins; "
     "compressed cubins are not inflated to look); oldest driver it loads on: 525.60.13, CUDA 12's "
     "first driver (minor-version compatibility)"),
    # cubins only, dated by their toolkit notes (the newest cubin of a library decides)
    (T128, [_cubins("pkg/_C.so", (12, 6), (12, 8))], (), True,
     "cubins of CUDA 12.8 (their toolkit notes) in 1 library: no newer than CUDA 12.8 writes; oldest driver it "
     "loads on: 525.60.13, CUDA 12's first driver"),
    (T126, [_cubins("pkg/_C.so", (12, 8))], (), False,
     "pkg/_C.so: its cubins were written by CUDA 12.8 (their toolkit note), but the row claims CUDA 12.6: it was "
     "built by a newer toolkit; they load on every CUDA 12 driver (minor-version compatibility), but the wheel is "
     "not the CUDA 12.6 build the row promises; fix: build it with the CUDA 12.6 toolkit, or check it against a "
     "CUDA 12.8 row"),
    (T128, [_cubins("pkg/_C.so", (13, 0))], (), False,
     "pkg/_C.so: its cubins were written by CUDA 13.0 (their toolkit note), but the row claims CUDA 12.8: it was "
     "built by a newer toolkit; its cubins need CUDA 13's driver (>= 580.65.06 on Linux), not the CUDA 12 drivers "
     "the row promises"),
    # PTX and cubins both dated; a per-train library held to its own train, a vendored one not judged
    (T130, [LibraryInfo(path="pkg/_C.so", format="elf", size=1, cubins=("sm_80",), ptx=("sm_80",),
                        ptx_isa=((8, 7),), cubin_toolkits=((12, 8),))], (), True,
     "PTX ISA 8.7 in 1 library and cubins of CUDA 12.8 (their toolkit notes) in 1 library: no newer than CUDA 13.0"),
    (T130, [_cubins("pkg/lib_cuda128.so", (12, 9))], (PER_TRAIN,), False,
     "pkg/lib_cuda128.so: its cubins were written by CUDA 12.9 (their toolkit note), but its name claims CUDA 12.8"),
    (T118, [_cubins("pkg.libs/libnvjpeg.so.12", (12, 9))], (VENDORED,), True, "not judged, vendored"),
    # per-train libraries' cubins (bitsandbytes' shape): each its own train, none raising the row's driver
    (T128, [_cubins("pkg/lib_cuda128.so", (12, 8)), _cubins("pkg/lib_cuda130.so", (13, 0))], (PER_TRAIN,), True,
     "the cubins of 2 per-train libraries (CUDA 12.8, 13.0, their toolkit notes) are no newer than the train each "
     "name carries; nothing else carries PTX or a cubin toolkit note; oldest driver it loads on: 525.60.13, CUDA "
     "12's first driver"),
])
def test_ptx_newer_than_the_train_fails(train: Train, libs: list[LibraryInfo], rules: tuple[LibraryRule, ...],
                                        ok: bool, message: str) -> None:
    r = check_device_train(_exp(train, *rules), _wheel(libs))
    assert r.ok is ok, r.details
    assert any(message in d for d in r.details), r.details


def test_cubins_of_a_newer_major_raise_the_oldest_driver() -> None:
    r = check_device_train(_exp(T128), _wheel([_cubins("pkg/_C.so", (13, 0))]))
    assert not r.ok
    assert r.details[-1] == "oldest driver it loads on: 580.65.06, CUDA 13's first driver, for its CUDA 13.0 cubins"
    r = check_device_train(_exp(T126), _wheel([_cubins("pkg/_C.so", (12, 8))]))  # same major: the floor stays
    assert r.details[-1] == "oldest driver it loads on: 525.60.13, CUDA 12's first driver (minor-version compatibility)"


def test_oldest_driver_line() -> None:
    r = check_device_train(_exp(T128), _wheel([_lib("pkg/_C.so", (8, 7))]))
    assert r.details[-1].endswith("oldest driver it loads on: 570.26, CUDA 12.8's, to JIT-compile its PTX ISA 8.7; "
                                  "GPUs its cubins cover load it from 525.60.13, CUDA 12's first driver")
    r = check_device_train(_exp(T128, platform="windows-amd64"), _wheel([_lib("pkg/_C.pyd", (8, 7))]))
    assert r.details[-1].endswith("(Linux x86_64 numbering; Windows drivers are numbered apart)")
    assert oldest_driver([], 13) == ("580.65.06", "CUDA 13's first driver (minor-version compatibility)")


def test_the_tables() -> None:
    """The data (buildrows/data/cuda_trains.toml): PTX ISA -> train, train -> first driver."""
    assert [str(ptx_isa_train(i)) for i in ((7, 8), (8, 0), (8, 7), (8, 8), (9, 0))] == ["11.8", "12.0", "12.8", "12.9",
                                                                                          "13.0"]
    assert ptx_isa_train((9, 9)) is None
    assert newest_ptx_isa(T126) == (8, 5) and newest_ptx_isa(T130) == (9, 0)
    assert train_driver(Train.parse("12.7")) == (T128, "570.26")  # 12.7 was never released
    assert train_of_code([_lib("a.so", (8, 5)), _lib("b.so", (7, 8))]) == (Train.parse("12.5"), "8.5")
    assert cubin_train([_cubins("a.so", (12, 8)), _cubins("b.so", (12, 9), (12, 6))]) == Train.parse("12.9")
    assert cubin_train([_lib("a.so", (8, 5))]) is None


def test_an_untagged_wheel_checked_as_cpu_is_told_the_train_its_cubins_name() -> None:
    """The hint for a CUDA wheel without a +cuXYZ tag: its cubins' toolkit notes where they are newer than its PTX."""
    from buildrows.check.device import check_cuda_libraries

    cpu = Expectation("row", "linux-x86_64", None, None)
    r = check_cuda_libraries(cpu, _wheel([_cubins("pkg/_C.so", (12, 9))]))
    assert not r.ok
    assert "check it with --cuda 12.9 --archs LIST (its cubins' toolkit notes name CUDA 12.9)" in str(r.details)
    both = LibraryInfo(path="pkg/_C.so", format="elf", size=1, cubins=("sm_80",), ptx=("sm_80",), ptx_isa=((8, 7),),
                       cubin_toolkits=((12, 6),))
    r = check_cuda_libraries(cpu, _wheel([both]))  # its PTX is newer: the PTX says it
    assert "check it with --cuda 12.8 --archs LIST (its newest PTX is ISA 8.7, first written by CUDA 12.8)" in str(r.details)

"""The CUDA world as data (issue 36): what each train compiles, the PTX ISA it writes and its driver,
regenerated from NVIDIA's published toolkits by scripts/refresh_cuda_data.py; a policy of the newest
trains loads, and the oldest-driver line agrees with the failure lines through every released 13.x.
Opt-in (BUILDROWS_REFRESH_CUDA_DATA=1): the refresh script itself, against PyPI, must leave the
committed file as it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cuda_tools import cuobjdump_headers, find_cuobjdump

from buildrows.binaries.looseread import read_loose
from buildrows.binaries.wheelread import LibraryInfo, WheelInfo, parse_wheel_filename
from buildrows.check.device_train import check_device_train, oldest_driver
from buildrows.check.judging import Expectation
from buildrows.policy.archs import (
    Train,
    newest_ptx_isa,
    parse_arch_list,
    ptx_isa_train,
    train_driver,
)
from buildrows.policy.trains import _trains_data
from tests.conftest import Result

ROOT = Path(__file__).resolve().parent.parent

POLICY = """[project]
name = "fx"
[python]
versions = ["3.12"]
[cuda]
trains = [{trains}]
[platforms.linux-x86_64]
trains = [{trains}]
{lists}
"""


def _policy(tmp_path: Path, lists: dict[str, str]) -> Path:
    trains = ", ".join(f'"{t}"' for t in lists)
    text = POLICY.format(trains=trains, lists="".join(
        f'[[platforms.linux-x86_64.cuda]]\ntrains = ["{t}"]\narchs = "{a}"\n' for t, a in lists.items()))
    path = tmp_path / "buildrows.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_every_entry_carries_its_date_and_source() -> None:
    data = _trains_data()
    assert data["refresh"]["date"] and "pypi.org" in data["refresh"]["pypi"]
    for table in ("trains", "ptx-isa", "driver", "driver-floor"):
        for name, entry in data[table].items():
            assert entry["date"][:2] == "20" and entry["source"], (table, name)
    # CUDA 13.x is measured from its own nvcc on PyPI, with the date PyPI first published it
    for minor in range(6):
        entry = data["trains"][f"13.{minor}"]
        assert entry["source"].startswith(f"PyPI nvidia-cuda-nvcc 13.{minor}."), entry
        assert entry["nvcc"].startswith(f"13.{minor}.") and entry["released"][:2] == "20"
        assert entry["ptx-isa"] == f"9.{minor}"
    # before 13.0 NVIDIA's nvcc wheels carry ptxas but no nvcc: measured from it, and agreeing with the
    # release notes the earlier hand-entered table came from (11.8 keeps Kepler; 12.9 adds the f variants)
    for name in ("11.8", "12.0", "12.1", "12.2", "12.3", "12.4", "12.5", "12.6", "12.8", "12.9"):
        package = "nvidia-cuda-nvcc-cu11" if name == "11.8" else "nvidia-cuda-nvcc-cu12"
        assert data["trains"][name]["source"].startswith(f"PyPI {package} {name}."), name
    assert data["trains"]["11.8"]["archs"][:2] == ["3.5", "3.7"] and data["trains"]["11.8"]["ptx-isa"] == "7.8"
    assert data["trains"]["12.6"]["ptx-isa"] == "8.5" and data["trains"]["12.9"]["f"] == [
        "10.0", "10.1", "10.3", "12.0", "12.1"]


def test_ptx_isa_and_drivers_through_every_released_13x() -> None:
    for minor in range(6):
        assert ptx_isa_train((9, minor)) == Train(13, minor)
        assert newest_ptx_isa(Train(13, minor)) == (9, minor)
    assert ptx_isa_train((9, 9)) is None
    found = train_driver(Train(13, 0))
    assert found is not None and found[1] == "580.65.06"
    # no number in the data for 13.3: never 13.0's (older) nor a later train's
    assert train_driver(Train(13, 3)) is None
    assert train_driver(Train(12, 7)) == (Train(12, 8), "570.26")  # 12.7 was never released: 12.8's driver


def test_the_13_5_policy_loads_and_its_rows_are_right(tmp_path: Path, cli: Callable[..., Result]) -> None:
    # 10.7 is new in CUDA 13.4 (its nvcc's --list-gpu-code): the row of 13.5 may ask for it
    path = _policy(tmp_path, {"13.5": "8.0 10.7 12.0"})
    r = cli("--config", str(path), "rows")
    assert r.code == 0, r.err
    assert r.out.split() == ["linux-x86_64-cu135-py312", "8.0;10.7;12.0+PTX"]
    r = cli("--config", str(path), "show", "linux-x86_64-cu135-py312")
    assert r.code == 0, r.err
    for line in ("cuda                       13.5", "local_version              +cu135",
                 "80-real;107-real;120-real;120-virtual", "-gencode=arch=compute_107,code=sm_107",
                 "nvidia-cuda-runtime>=13,<14", "nvidia/cu13/lib"):
        assert line in r.out, r.out


def test_a_train_is_held_to_what_its_own_nvcc_compiles(tmp_path: Path, cli: Callable[..., Result]) -> None:
    # CUDA 13.3's nvcc does not list sm_107: the guard the 13.5 row above passes
    r = cli("--config", str(_policy(tmp_path, {"13.3": "8.0 10.7"})), "rows")
    assert r.code == 2
    assert "'10.7': CUDA 13.3 cannot compile this architecture" in r.err, r.err


def _wheel(isa: tuple[int, int]) -> WheelInfo:
    name = "pkg-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    lib = LibraryInfo(path="pkg/_C.so", format="elf", size=1, machine="x86_64", cubins=("sm_80",), ptx=("sm_80",),
                      ptx_isa=(isa,))
    return WheelInfo(Path(name), parse_wheel_filename(name), (), (lib,), (lib.path,))


@pytest.mark.parametrize("minor", [2, 3, 4, 5])
def test_the_oldest_driver_line_agrees_with_the_failure_lines(minor: int) -> None:
    """A wheel of PTX ISA 9.x on a 13.0 row: both lines name CUDA 13.x's driver, never 13.0's 580.65.06."""
    r = check_device_train(Expectation("row", "linux-x86_64", Train(13, 0), parse_arch_list("8.0")),
                           _wheel((9, minor)))
    assert not r.ok
    assert f"PTX ISA 9.{minor} is CUDA 13.{minor}'s, but the row claims CUDA 13.0" in r.details[0]
    assert f"its PTX needs CUDA 13.{minor}'s driver" in r.details[0]
    assert r.details[-1] == (f"oldest driver it loads on: CUDA 13.{minor}'s driver, to JIT-compile its PTX ISA "
                             f"9.{minor} (buildrows' data has no Linux driver number for CUDA 13.{minor}: NVIDIA's "
                             "CUDA release notes list it)")
    assert "580.65.06" not in "\n".join(r.details)
    # on its own train's row it passes, and the line still names its train's driver
    r = check_device_train(Expectation("row", "linux-x86_64", Train(13, minor), parse_arch_list("8.0")),
                           _wheel((9, minor)))
    assert r.ok, r.details
    assert f"oldest driver it loads on: CUDA 13.{minor}'s driver" in r.details[-1]
    assert "GPUs its cubins cover load it from 580.65.06, CUDA 13's first driver" in r.details[-1]


def test_cuda_13_1s_driver_is_nvidias_number() -> None:
    """13.1's driver is in the data (NVIDIA's redistrib_13.1.0.json): both lines give the number."""
    r = check_device_train(Expectation("row", "linux-x86_64", Train(13, 0), parse_arch_list("8.0")), _wheel((9, 1)))
    assert not r.ok
    assert "its PTX needs CUDA 13.1's driver (>= 590.44.01 on Linux)" in r.details[0]
    assert r.details[-1] == "oldest driver it loads on: 590.44.01, CUDA 13.1's, to JIT-compile its PTX ISA 9.1"
    assert train_driver(Train(13, 1)) == (Train(13, 1), "590.44.01")


def test_an_isa_newer_than_the_data_names_no_older_driver() -> None:
    assert oldest_driver([(9, 9)], 13) == (None, "a driver newer than any buildrows knows, to JIT-compile its PTX "
                                                "ISA 9.9 (newer than every ISA in its data)")
    assert oldest_driver([(9, 0)], 13) == ("580.65.06", "CUDA 13's first driver (minor-version compatibility)")
    # an ISA the history does not name, between two it does: not "newer" than anything
    assert oldest_driver([(5, 1)], 13) == (None, "a driver that JIT-compiles its PTX ISA 5.1, which buildrows' data "
                                                "does not list (no CUDA release NVIDIA's PTX ISA history names writes it)")


def test_old_isas_are_their_releases_and_any_driver_of_the_major_jits_them() -> None:
    """numba-cuda's test fixtures are PTX ISA 6.5 (CUDA 10.2's): older than the row's major, never "newer than any
    driver buildrows knows". The history (ISA 1.0 = CUDA 1.0 ... 6.5 = CUDA 10.2) is NVIDIA's release table."""
    assert [ptx_isa_train(i) for i in [(1, 2), (4, 1), (5, 0), (6, 0), (6, 3), (6, 4), (6, 5)]] == [
        Train(2, 0), Train(6, 5), Train(8, 0), Train(9, 0), Train(10, 0), Train(10, 1), Train(10, 2)]
    assert oldest_driver([(6, 5)], 13) == ("580.65.06", "CUDA 13's first driver (minor-version compatibility), which "
                                                        "JIT-compiles its PTX ISA 6.5 (CUDA 10.2's)")
    assert oldest_driver([(6, 0), (7, 8)], 12) == ("525.60.13", "CUDA 12's first driver (minor-version compatibility), "
                                                               "which JIT-compiles its PTX ISA 7.8 (CUDA 11.8's)")


@pytest.mark.skipif(os.environ.get("BUILDROWS_REFRESH_CUDA_DATA") != "1",
                    reason="downloads every CUDA 13.x nvcc from PyPI (BUILDROWS_REFRESH_CUDA_DATA=1)")
def test_the_refresh_script_leaves_the_committed_data_as_it_is() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "refresh_cuda_data.py"), "--check"],
                          capture_output=True, text=True, check=False, timeout=3600)
    assert proc.returncode == 0, proc.stderr
    assert "is up to date" in proc.stderr


# --- real device code of CUDA 13.3 and 13.5 (tests/data/cuda13x, built by their nvcc from PyPI:
# `python scripts/refresh_cuda_data.py --fixtures tests/data/cuda13x`) ---------------------------------

FIXTURES = ROOT / "tests" / "data" / "cuda13x"


@pytest.mark.parametrize("minor", [3, 5])
def test_real_13x_device_code_is_dated_and_told_its_driver(minor: int, cli: Callable[..., Result]) -> None:
    lib = FIXTURES / f"libk13.{minor}.so"
    (info,) = read_loose(lib).libraries
    assert (info.cubins, info.ptx, info.ptx_isa, info.cubin_toolkits) == (("sm_80",), ("sm_80",), ((9, minor),),
                                                                         ((13, minor),))
    tool = find_cuobjdump()
    if tool is not None:  # cuobjdump 13.0 reads them alike
        assert cuobjdump_headers(tool, lib) == (("sm_80",), ("sm_80",), ((9, minor),))
    r = cli("check", str(lib), "--cuda", "13.0", "--archs", "8.0", "--json")
    assert r.code == 5, r.err
    (train,) = [c for c in json.loads(r.out)["checks"] if c["name"] == "device-code-train"]
    assert not train["ok"]
    first, cubins, summary = train["details"]
    assert first.startswith(f"libk13.{minor}.so: PTX ISA 9.{minor} is CUDA 13.{minor}'s, but the row claims CUDA 13.0")
    assert f"its PTX needs CUDA 13.{minor}'s driver;" in first and f"a CUDA 13.{minor} row" in first
    assert cubins.startswith(f"libk13.{minor}.so: its cubins were written by CUDA 13.{minor} (their toolkit note)")
    assert summary.startswith(f"oldest driver it loads on: CUDA 13.{minor}'s driver, to JIT-compile its PTX ISA 9.{minor}")
    # the row the failure suggests loads and passes
    r = cli("check", str(lib), "--cuda", f"13.{minor}", "--archs", "8.0", "--json")
    (train,) = [c for c in json.loads(r.out)["checks"] if c["name"] == "device-code-train"]
    assert train["ok"], train
    assert train["details"][0].startswith(f"PTX ISA 9.{minor} in 1 library and cubins of CUDA 13.{minor}")

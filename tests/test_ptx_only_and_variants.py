"""Issue 27, points 1, 5 and 6, on real device code: one tiny library built here by nvcc 13.0 with an
sm_80 cubin, an arch-specific sm_120a cubin and PTX for compute_120 without a sm_120 cubin (PTX ISA 9.0).

- a PTX-only entry (`12.0-virtual`, or nvcc's `compute_120`) is judged as PTX without a cubin;
- a list that names the plain 12.0 is told what really runs: CC 12.0 GPUs run the sm_120a cubin, 12.1
  GPUs JIT-compile the PTX; and how to promise the a-cubin (`12.0a`);
- the same library claimed as CUDA 12.8 fails: its PTX ISA 9.0 is CUDA 13.0's;
- the check says the oldest driver it loads on.
One build, shared by every test of the module (module-scoped fixture).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from cuda_tools import KERNEL, cuobjdump_headers, find_cuobjdump, find_nvcc, make_wheel

from tests.conftest import Result

pytestmark = pytest.mark.integration

GENCODE = ("-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_120a,code=sm_120a",
           "-gencode=arch=compute_120,code=compute_120")
METADATA = "Metadata-Version: 2.1\nName: fx\nRequires-Dist: nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'\n"


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found on PATH")
    out = tmp_path_factory.mktemp("ptx-only")
    (out / "kernel.cu").write_text(KERNEL, encoding="utf-8")
    lib = out / "libfx.so"
    subprocess.run([nvcc, "-shared", "-Xcompiler", "-fPIC", *GENCODE, "-o", str(lib), str(out / "kernel.cu")],
                   check=True, capture_output=True)
    return lib


@pytest.fixture(scope="module")
def wheel(library: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ptx-only-wheel")
    # No +cu tag, as PyPI's wheels: the train comes from --cuda.
    return make_wheel(out / "fx-1.0-cp312-cp312-manylinux_2_28_x86_64.whl", {"fx/_core.so": library.read_bytes()},
                      metadata=METADATA)


def _checks(cli: Callable[..., Result], wheel: Path, *args: str) -> dict[str, dict[str, object]]:
    r = cli("check", str(wheel), *args, "--json")
    assert r.code in (0, 5), r.err
    return {c["name"]: c for c in json.loads(r.out)["checks"]}


def test_the_reader_sees_what_cuobjdump_sees(library: Path, wheel: Path) -> None:
    from buildrows.binaries.wheelread import read_wheel

    (info,) = read_wheel(wheel).libraries  # streamed from the wheel
    tool = find_cuobjdump()
    if tool is not None:
        elf, ptx, isa = cuobjdump_headers(tool, library)
        assert (info.cubins, info.ptx, info.ptx_isa) == (elf, ptx, isa)
    assert set(info.cubins) == {"sm_80", "sm_120a"} and set(info.ptx) == {"sm_120"}
    assert set(info.ptx_isa) == {(9, 0)}  # nvcc 13.0 writes PTX ISA 9.0
    # ptxas records its toolkit in each (small, so uncompressed) cubin's .note.nv.tkinfo: nvcc's own release
    release = re.search(r"release (\d+)\.(\d+),", subprocess.run([find_nvcc() or "nvcc", "--version"],
                        capture_output=True, text=True, check=True).stdout)
    assert release is not None
    assert len(info.cubin_toolkits) == len(info.cubins)
    assert set(info.cubin_toolkits) == {(int(release.group(1)), int(release.group(2)))} == {(13, 0)}


@pytest.mark.parametrize("archs", ["8.0 12.0a 12.0-virtual", "80-real 120a-real 120-virtual", "sm_80 12.0a compute_120"])
def test_ptx_only_entry_passes(cli: Callable[..., Result], wheel: Path, archs: str) -> None:
    checks = _checks(cli, wheel, "--cuda", "13.0", "--archs", archs)
    device = checks["device-code-covers-row"]
    assert device["ok"], device
    assert device["details"] == ["1 library carries exactly sm_80 sm_120a with PTX sm_120"]
    train = checks["device-code-train"]
    assert train["ok"], train
    assert train["details"] == ["PTX ISA 9.0 in 1 library and cubins of CUDA 13.0 (their toolkit notes) in 1 library: "
                                "no newer than CUDA 13.0 writes; oldest driver it loads on: "
                                "580.65.06, CUDA 13's first driver (minor-version compatibility)"]


def test_plain_entry_is_told_what_really_runs(cli: Callable[..., Result], wheel: Path) -> None:
    checks = _checks(cli, wheel, "--cuda", "13.0", "--archs", "8.0 12.0 12.0-virtual")
    device = checks["device-code-covers-row"]
    assert not device["ok"]
    assert device["details"] == [
        "fx/_core.so: missing device code for sm_120, which the row lists: sm_120 GPUs run its sm_120a cubin "
        "(architecture-specific: it runs on CC 12.0 only); sm_121 GPUs JIT-compile its sm_120 PTX when it first "
        "loads (a slower start)",
        "fx/_core.so: device code for sm_120a, which the row does not list (if the project promises that cubin, "
        "write 12.0a instead of 12.0 in the list)",
    ]
    assert "GPUs JIT-compile its sm_120 PTX when it first loads (a slower start, and no sm_120" not in str(device)


def test_an_a_cubin_beside_the_plain_one_says_how_to_promise_it(cli: Callable[..., Result], wheel: Path) -> None:
    device = _checks(cli, wheel, "--cuda", "13.0", "--archs", "8.0 12.0 12.0a-virtual")["device-code-covers-row"]
    assert not device["ok"]
    assert "fx/_core.so: device code for sm_120a, which the row does not list" in str(device["details"])
    device = _checks(cli, wheel, "--cuda", "13.0", "--archs", "8.0 12.0-virtual")["device-code-covers-row"]
    assert device["details"] == ["fx/_core.so: device code for sm_120a, which the row does not list (if the project "
                                 "promises that cubin, add 12.0a to the list)"]


def test_ptx_the_list_does_not_name_says_how_to_write_it(cli: Callable[..., Result], wheel: Path) -> None:
    device = _checks(cli, wheel, "--cuda", "13.0", "--archs", "8.0 12.0a", "--ptx", "none")["device-code-covers-row"]
    assert not device["ok"]
    assert device["details"] == ["fx/_core.so: PTX for sm_120, which the row does not list as PTX (to promise it, "
                                 "write 12.0-virtual in the list)"]


def test_code_newer_than_the_claimed_train_fails(cli: Callable[..., Result], wheel: Path) -> None:
    """Built by nvcc 13.0 (PTX ISA 9.0), claimed as CUDA 12.8: the check reads the toolkit from the code."""
    train = _checks(cli, wheel, "--cuda", "12.8", "--archs", "8.0 12.0a 12.0-virtual")["device-code-train"]
    assert not train["ok"]
    assert train["details"] == [
        "fx/_core.so: PTX ISA 9.0 is CUDA 13.0's, but the row claims CUDA 12.8 (which writes ISA 8.7 at most): it "
        "was built by a newer toolkit, and its PTX needs CUDA 13.0's driver (>= 580.65.06 on Linux); on the drivers "
        "CUDA 12.8 supports, GPUs without a cubin get CUDA_ERROR_UNSUPPORTED_PTX_VERSION; fix: build it with the "
        "CUDA 12.8 toolkit, or check it against a CUDA 13.0 row",
        "fx/_core.so: its cubins were written by CUDA 13.0 (their toolkit note), but the row claims CUDA 12.8: it was "
        "built by a newer toolkit; its cubins need CUDA 13's driver (>= 580.65.06 on Linux), not the CUDA 12 drivers "
        "the row promises; fix: build it with the CUDA 12.8 toolkit, or check it against a CUDA 13.0 row",
        "oldest driver it loads on: 580.65.06, CUDA 13.0's, to JIT-compile its PTX ISA 9.0",  # 13's first driver too
    ]


def test_untagged_wheel_outside_the_policy_is_offered_cuda(cli: Callable[..., Result], wheel: Path,
                                                            tmp_path: Path) -> None:
    policy = tmp_path / "buildrows.toml"
    policy.write_text('[project]\nname = "fx"\n[python]\nversions = ["3.12"]\n[cuda]\ntrains = ["13.0"]\n'
                      '[platforms.linux-x86_64]\ntrains = ["13.0"]\n[[platforms.linux-x86_64.cuda]]\ntrains = ["13.0"]\n'
                      'archs = "8.0 12.0a 12.0-virtual"\n', encoding="utf-8")
    r = cli("--config", str(policy), "check", str(wheel))
    assert r.code == 3, (r.out, r.err)
    assert ("fix: pass --cuda 13.0 (the train the wheel was built with: its name carries no +cuXYZ tag; the "
            "policy's trains on linux-x86_64: 13.0), or --row ROW, or add the row to the policy") in r.err
    r = cli("--config", str(policy), "check", str(wheel), "--cuda", "13.0", "--json")
    checks = {c["name"]: c for c in json.loads(r.out)["checks"]}
    assert checks["device-code-covers-row"]["ok"], checks


def test_an_untagged_wheel_checked_as_cpu_is_told_its_train(cli: Callable[..., Result], wheel: Path,
                                                             tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no policy here: the untagged name makes it a CPU row
    r = cli("check", str(wheel))
    assert r.code == 5
    assert ("if this is a CUDA wheel whose name carries no +cuXYZ tag, check it with --cuda 13.0 --archs LIST (its "
            "newest PTX is ISA 9.0, first written by CUDA 13.0), or --row ROW") in r.out

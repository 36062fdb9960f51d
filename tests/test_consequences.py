"""What the device-code check says a GPU does when a library lacks what the row lists
(buildrows.check.consequences): a compatible cubin runs, lower PTX is JIT-compiled, and only
otherwise does the GPU get "no kernel image is available"."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cuda_tools import fatbin_container, fatbin_entry, make_elf, make_wheel

from buildrows.check.consequences import compatible_cubin, jit_ptx, missing_code, missing_ptx
from tests.conftest import Result


@pytest.mark.parametrize(
    ("gpu", "cubins", "expected"),
    [
        ("sm_86", ["sm_80"], "sm_80"),
        ("sm_89", ["sm_80", "sm_86"], "sm_86"),
        ("sm_86", ["sm_87"], None),  # a higher minor does not run on a lower one
        ("sm_90", ["sm_80", "sm_86"], None),  # nor across majors
        ("sm_120", ["sm_100"], None),
        ("sm_121", ["sm_120"], "sm_120"),
        ("sm_90", ["sm_90a"], "sm_90a"),  # architecture-specific code runs on exactly its own architecture
        ("sm_121", ["sm_120a"], None),  # and on no other, not even a higher minor
        ("sm_103", ["sm_100f"], "sm_100f"),  # a family cubin runs across its family
    ],
)
def test_which_cubin_a_gpu_runs(gpu: str, cubins: list[str], expected: str | None) -> None:
    assert compatible_cubin(gpu, cubins) == expected


@pytest.mark.parametrize(
    ("gpu", "ptx", "expected"),
    [("sm_86", ["sm_80"], "sm_80"), ("sm_120", ["sm_50", "sm_90"], "sm_90"), ("sm_80", ["sm_90"], None),
     ("sm_100", ["sm_90a"], None)],
)
def test_which_ptx_a_gpu_jit_compiles(gpu: str, ptx: list[str], expected: str | None) -> None:
    assert jit_ptx(gpu, ptx) == expected


@pytest.mark.parametrize(
    ("missing", "cubins", "ptx", "message"),
    [
        (["sm_86"], ["sm_80"], [],
         "lib.so: missing device code for sm_86, which the row lists: sm_86 GPUs run its sm_80 cubin "
         "(binary-compatible within a major), not code built for sm_86"),
        (["sm_90"], ["sm_80"], ["sm_80"],
         "lib.so: missing device code for sm_90, which the row lists: sm_90 GPUs JIT-compile its sm_80 PTX when it "
         "first loads (a slower start, and no sm_90-specific code)"),
        (["sm_86", "sm_90"], ["sm_80"], [],
         "lib.so: missing device code for sm_86, sm_90, which the row lists: sm_86 GPUs run its sm_80 cubin "
         "(binary-compatible within a major), not code built for sm_86; sm_90 GPUs get 'no kernel image is "
         "available'"),
        (["sm_90"], ["sm_75"], [],
         "lib.so: missing device code for sm_90 (a GPU of that architecture gets 'no kernel image is available')"),
    ],
)
def test_missing_code_says_what_the_gpu_does(missing: list[str], cubins: list[str], ptx: list[str],
                                             message: str) -> None:
    assert missing_code("lib.so", missing, cubins, ptx) == message


@pytest.mark.parametrize(
    ("cubins", "ptx", "message"),
    [
        (["sm_50", "sm_120"], ["sm_50"],
         "lib.so: missing PTX for sm_120 (GPUs newer than its cubins JIT-compile the sm_50 PTX it carries instead, "
         "without what sm_120 code would use)"),
        (["sm_70", "sm_80"], [],
         "lib.so: missing PTX for sm_120 (it carries no PTX: a GPU of a newer major than its newest cubin, sm_80, "
         "gets 'no kernel image is available')"),
    ],
)
def test_missing_ptx_says_what_a_newer_gpu_does(cubins: list[str], ptx: list[str], message: str) -> None:
    assert missing_ptx("lib.so", ["sm_120"], cubins, ptx) == message


def test_check_reports_the_true_consequence(tmp_path: Path, cli: Callable[..., Result],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code = fatbin_container([fatbin_entry(2, 80), fatbin_entry(2, 90), fatbin_entry(1, 90)])
    lib = make_elf([(".nv_fatbin", code)], needed=["libcudart.so.13"], runpath="$ORIGIN/../nvidia/cu13/lib")
    wheel = make_wheel(tmp_path / "fx-1.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl", {"fx/_core.so": lib},
                       metadata="Metadata-Version: 2.1\nName: fx\n"
                                "Requires-Dist: nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'\n")
    r = cli("check", str(wheel), "--archs", "8.0 8.6 9.0 10.0")
    assert r.code == 5
    assert ("fx/_core.so: missing device code for sm_86, sm_100, which the row lists: sm_86 GPUs run its sm_80 "
            "cubin (binary-compatible within a major), not code built for sm_86; sm_100 GPUs JIT-compile its sm_90 "
            "PTX when it first loads") in r.out
    assert "missing PTX for sm_100 (GPUs newer than its cubins JIT-compile the sm_90 PTX it carries instead" in r.out


def test_a_library_repeating_an_entry_is_counted_once(tmp_path: Path, cli: Callable[..., Result],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """jax-cuda13-plugin repeats each RPATH entry: 11 libraries were reported as 42."""
    monkeypatch.chdir(tmp_path)
    code = fatbin_container([fatbin_entry(2, 90), fatbin_entry(1, 90)])
    twice = "$ORIGIN/../../nvidia/cu13/lib:$ORIGIN/../nvidia/cu13/lib:$ORIGIN/../../nvidia/cu13/lib"
    members = {f"fx/_{n}.so": make_elf([(".nv_fatbin", code)], needed=["libcudart.so.13"], rpath=twice)
               for n in ("a", "b")}
    wheel = make_wheel(tmp_path / "fx-1.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl", members,
                       metadata="Metadata-Version: 2.1\nName: fx\n"
                                "Requires-Dist: nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'\n")
    r = cli("check", str(wheel), "--archs", "9.0")
    assert ("2 libraries (fx/_a.so, fx/_b.so): '$ORIGIN/../../nvidia/cu13/lib' climbs out of site-packages"
            in r.out), r.out

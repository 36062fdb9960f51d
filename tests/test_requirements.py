"""One rule for the runtime requirements: what `build` declares is what `check` demands."""

from __future__ import annotations

import pytest

from buildrows.binaries.wheelread import WheelInfo, parse_wheel_filename
from buildrows.check.judging import Expectation
from buildrows.check.runtime import check_runtime_declared
from buildrows.errors import BadInput
from buildrows.policy.archs import Train, parse_arch_list
from buildrows.policy.requirements import expected_requirements

CU13 = Train(13, 0)


def wheel(platform_tag: str, *requires: str) -> WheelInfo:
    from pathlib import Path

    name = f"fx-1.0+cu130-cp311-cp311-{platform_tag}.whl"
    return WheelInfo(Path(name), parse_wheel_filename(name), tuple(requires), (), ())


def judge(platform: str, policy: tuple[str, ...], *declared: str) -> tuple[bool, list[str]]:
    exp = Expectation("r", platform, CU13, parse_arch_list("9.0"), policy, "nvidia/cu13/lib")
    tag = "win_amd64" if platform.startswith("windows") else "manylinux_2_28_x86_64"
    r = check_runtime_declared(exp, wheel(tag, *declared))
    return r.ok, r.details


@pytest.mark.parametrize(("platform", "policy", "expected"), [
    ("linux-x86_64", ("nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'",),
     ["nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'"]),
    ("linux-x86_64", ("nvidia-cuda-runtime>=13,<14",), ["nvidia-cuda-runtime>=13,<14"]),
    ("windows-amd64", ("nvidia-cuda-runtime>=13,<14",), []),  # Windows declares no NVIDIA package, marker or not
    ("linux-aarch64", ("nvidia-x>=1; platform_machine == 'x86_64'",), []),
])
def test_expected_requirements(platform: str, policy: tuple[str, ...], expected: list[str]) -> None:
    assert expected_requirements(platform, CU13, policy) == expected
    assert expected_requirements(platform, None, policy) == []


def test_build_and_check_agree_on_windows_without_a_marker() -> None:
    """A markerless policy entry: build declares nothing for Windows, and check accepts exactly that."""
    assert judge("windows-amd64", ("nvidia-cuda-runtime>=13,<14",)) == (True, ["declares exactly: no NVIDIA package"])
    ok, details = judge("windows-amd64", ("nvidia-cuda-runtime>=13,<14",), "nvidia-cuda-runtime>=13,<14")
    assert not ok and "unexpected: 'nvidia-cuda-runtime>=13,<14' is not in the set for CUDA 13.0 on Windows" in details


def test_a_non_nvidia_runtime_name_compares_both_ways() -> None:
    policy = ("cuda-toolkit[cudart]>=13,<14",)
    assert judge("linux-x86_64", policy, "cuda-toolkit[cudart] <14, >=13")[0]
    ok, details = judge("linux-x86_64", policy, "cuda-toolkit>=13,<14")
    assert not ok and "missing: the wheel must declare 'cuda-toolkit[cudart]>=13,<14'" in details


def test_extras_are_part_of_the_comparison() -> None:
    ok, details = judge("linux-x86_64", ("nvidia-cuda-runtime>=13,<14",), "nvidia-cuda-runtime[foo]>=13,<14")
    assert not ok
    assert "unexpected: 'nvidia-cuda-runtime[foo]>=13,<14' is not in the set for CUDA 13.0" in details


def test_ten_combinations_of_train_pin_and_marker() -> None:
    """The seed's table: names normalised, pins in any order, markers tolerated, never by suffix."""
    p13 = ("nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'",)
    p12 = ("nvidia-cuda-runtime-cu12>=12,<13; platform_system == 'Linux'",)
    cases = [
        (p13, ("nvidia-cuda-runtime>=13,<14",), True),
        (p13, ("nvidia_cuda_runtime <14,>=13 ; platform_system == \"Linux\"",), True),
        (p13, ("NVIDIA-CUDA-Runtime>=13,<14",), True),
        (p13, ("nvidia-cuda-runtime-cu11>=11",), False),
        (p13, ("nvidia-cuda-runtime>=13",), False),
        (p13, ("nvidia-cuda-runtime==13.0.96",), False),
        (p13, (), False),
        (p12, ("nvidia-cuda-runtime-cu12<13,>=12",), True),
        (p12, ("nvidia-cuda-runtime>=13,<14",), False),
        (p13, ("nvidia-cuda-runtime>=13,<14", "nvidia-cudnn-cu13>=9"), False),
    ]
    for policy, declared, ok in cases:
        assert judge("linux-x86_64", policy, *declared)[0] is ok, (policy, declared)


def test_an_unparsable_policy_requirement_is_bad_input() -> None:
    with pytest.raises(BadInput, match=r"fix: correct requirements under \[cuda.runtime.13\]"):
        expected_requirements("linux-x86_64", CU13, ("nvidia-cuda-runtime>=>13",))


@pytest.mark.parametrize("platform", ["linux-x86_64", "windows-amd64"])
@pytest.mark.parametrize("policy", [
    ("nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'",),
    ("nvidia-cuda-runtime>=13,<14",),
    ("nvidia-cuda-runtime>=13,<14", "nvidia-y>=1; platform_machine == 'aarch64'"),
])
def test_what_build_declares_passes_check(platform: str, policy: tuple[str, ...]) -> None:
    """drivers.requires_dist (no packaging, for the hook's speed) and the check agree for every row."""
    import dataclasses

    from buildrows.build.drivers import requires_dist
    from buildrows.policy.model import Row, Runtime

    os_, machine = platform.split("-")
    row = Row(name="r", platform=platform, os=os_, machine=machine, cuda=CU13, python="3.11",  # type: ignore[arg-type]
              archs=parse_arch_list("9.0"), runtime=Runtime(policy, "nvidia/cu13/lib", "test"))
    declared = requires_dist(row)
    assert judge(platform, policy, *declared)[0], (declared, judge(platform, policy, *declared))
    assert requires_dist(dataclasses.replace(row, cuda=None)) == []

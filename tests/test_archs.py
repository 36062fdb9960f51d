from __future__ import annotations

import re

import pytest

from buildrows.policy.archs import Arch, ArchError, Train, parse_arch_list

X86_13 = "7.5 8.0 8.6 8.9 9.0 10.0 12.0"


def test_renderings_of_the_seed_list() -> None:
    al = parse_arch_list(X86_13, train=Train(13, 0))
    assert al.torch_cuda_arch_list == "7.5;8.0;8.6;8.9;9.0;10.0;12.0+PTX"
    assert al.cmake_cuda_architectures == (
        "75-real;80-real;86-real;89-real;90-real;100-real;120-real;120-virtual"
    )
    assert al.nvcc_flags[0] == "-gencode=arch=compute_75,code=sm_75"
    assert al.nvcc_flags[-2:] == [
        "-gencode=arch=compute_120,code=sm_120",
        "-gencode=arch=compute_120,code=compute_120",
    ]
    assert al.cubin_names == ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"]
    assert al.ptx_names == ["sm_120"]


@pytest.mark.parametrize(
    "text",
    ["75 80 86 89 90 100 120", "12.0;10.0;9.0;8.9;8.6;8.0;7.5", "7.5,8.0, 8.6 ;8.9 9.0 100 12.0",
     "sm_75 sm_80 sm_86 sm_89 sm_90 sm_100 sm_120"],
)
def test_input_spellings_are_one_canonical_list(text: str) -> None:
    assert parse_arch_list(text) == parse_arch_list(X86_13)


def test_ptx_goes_on_the_numerically_newest_not_the_last_written() -> None:
    al = parse_arch_list("12.0 9.0 10.0")
    assert al.torch_cuda_arch_list == "9.0;10.0;12.0+PTX"


def test_explicit_ptx_and_suffixes() -> None:
    al = parse_arch_list("8.0+PTX 9.0a 10.0f")
    assert al.torch_cuda_arch_list == "8.0+PTX;9.0a;10.0f"
    assert al.cmake_cuda_architectures == "80-real;90a-real;100f-real;80-virtual"
    assert [a.sm for a in al.archs] == ["sm_80", "sm_90a", "sm_100f"]
    # the reader names a family cubin with its f, as `cuobjdump -elf` does (only --list-elf drops it)
    assert al.cubin_names == ["sm_80", "sm_90a", "sm_100f"]
    # PTX goes on the newest plain architecture: a family (f) or specific (a) PTX would not JIT on newer GPUs
    assert parse_arch_list("9.0 10.0f").ptx_names == ["sm_90"]
    assert parse_arch_list("8.0 9.0", ptx="none").torch_cuda_arch_list == "8.0;9.0"
    assert parse_arch_list("8.0 9.0", ptx="8.0").ptx == (Arch(8, 0),)


@pytest.mark.parametrize(
    ("text", "train", "message"),
    [
        ("9.0+ptx", None, "'9.0+ptx': PTX must be written '+PTX' in capitals"),
        ("9.O", None, "'9.O' is not a GPU architecture"),
        ("native", None, "'native' asks CMake or PyTorch to choose"),
        ("all", None, "'all' asks CMake or PyTorch to choose"),
        ("Auto", None, "'Auto' asks CMake or PyTorch to choose"),
        ("sm90", None, "'sm90' is not a GPU architecture"),
        ("8.0 80", None, "'80' duplicates '8.0'"),
        ("", None, "the architecture list is empty"),
        ("7.0 8.0", Train(13, 0), "'7.0': CUDA 13.0 cannot compile this architecture; CUDA 13.0 compiles nothing below 7.5"),
        ("9.0 11.0", Train(12, 6), "'11.0': CUDA 12.6 cannot compile this architecture"),
        ("10.0f", Train(12, 8), "'10.0f': CUDA 12.8 cannot compile"),
        ("9.0 10.0", Train(9, 9), "does not know which architectures CUDA 9.9 compiles"),
        ("8.0+PTX 9.0", None, None),
    ],
)
def test_refusals_name_the_token(text: str, train: Train | None, message: str | None) -> None:
    if message is None:
        parse_arch_list(text, train=train)
        return
    with pytest.raises(ArchError) as e:
        parse_arch_list(text, train=train)
    assert message in str(e.value)


def test_hints() -> None:
    with pytest.raises(ArchError) as e:
        parse_arch_list("9.O")
    assert e.value.hint == "did you mean 9.0?"
    with pytest.raises(ArchError) as e:
        parse_arch_list("8.0 9.0+ptx")
    assert e.value.hint == "write 9.0+PTX"


def test_ptx_choice_conflicts() -> None:
    with pytest.raises(ArchError, match="conflicts with ptx = 'none'"):
        parse_arch_list("8.0+PTX 9.0", ptx="none")
    with pytest.raises(ArchError, match="ptx = '7.5' is not in the row's list"):
        parse_arch_list("8.0 9.0", ptx="7.5")


@pytest.mark.parametrize(("text", "train"), [("13.0", Train(13, 0)), ("cu130", Train(13, 0)), ("cu126", Train(12, 6))])
def test_train_parse(text: str, train: Train) -> None:
    assert Train.parse(text) == train
    assert train.cu == "cu" + train.dotted.replace(".", "")


@pytest.mark.parametrize("text", ["cu13.0", "13", "cuda13", ""])
def test_train_parse_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="is not a CUDA train"):
        Train.parse(text)


@pytest.mark.parametrize(
    ("train", "compiles", "cannot"),
    [
        # NVIDIA's release notes: 11.8 adds 8.9 and 9.0 and keeps Kepler; 12.0 drops 3.5/3.7 and adds 9.0a;
        # 12.8 adds 10.0, 10.1, 12.0; 12.9 adds 10.3, 12.1 and family variants; 13.0 drops below 7.5, 10.1 -> 11.0
        (Train(11, 8), "3.5 3.7 5.0 8.7 8.9 9.0", ["9.0a", "10.0"]),
        (Train(12, 0), "5.0 8.9 9.0 9.0a", ["3.7", "10.0"]),
        (Train(12, 1), "5.0 9.0a", ["10.0"]),
        (Train(12, 2), "5.0 9.0a", ["10.0"]),
        (Train(12, 3), "5.0 9.0a", ["10.0"]),
        (Train(12, 4), "5.0 9.0a", ["10.0"]),
        (Train(12, 5), "5.0 9.0a", ["10.0"]),
        (Train(12, 6), "5.0 9.0a", ["10.0"]),
        (Train(12, 8), "5.0 10.0a 10.1 12.0a", ["10.3", "10.0f"]),
        (Train(12, 9), "5.0 10.3 12.1 10.0f 12.1a", ["11.0"]),
        (Train(13, 0), "7.5 11.0 12.1f", ["7.0", "10.1"]),
        (Train(13, 1), "7.5 11.0", ["7.0"]),
        (Train(13, 2), "7.5 11.0", ["7.0"]),
        (Train(13, 4), "7.5 11.0", ["7.0"]),
    ],
)
def test_every_train_from_11_8_compiles_what_nvidia_says(train: Train, compiles: str, cannot: list[str]) -> None:
    parse_arch_list(compiles, train=train)
    for token in cannot:
        with pytest.raises(ArchError, match=f"'{re.escape(token)}': CUDA {train.dotted} cannot compile"):
            parse_arch_list(f"{compiles} {token}", train=train)

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.policy.archs import Arch, ArchError, Train, parse_arch_list
from tests.conftest import Result

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


# --- PTX without a cubin (issue 27, points 1 and 2) -------------------------------------------------


@pytest.mark.parametrize("text", ["7.5 8.0 12.0-virtual", "75-real;80-real;120-virtual", "sm_75 8.0 compute_120",
                                  "compute_120 80 75"])
def test_ptx_without_a_cubin_every_spelling(text: str) -> None:
    al = parse_arch_list(text, train=Train(13, 0))
    assert al.text == "7.5 8.0 12.0-virtual"  # the canonical spelling, what init and archs --write write
    assert al.cubin_names == ["sm_75", "sm_80"]  # a compute_ token is never a cubin
    assert al.ptx_names == ["sm_120"] and [a.dotted for a in al.ptx_only] == ["12.0"]
    assert al.cmake_cuda_architectures == "75-real;80-real;120-virtual"
    assert al.nvcc_flags == ["-gencode=arch=compute_75,code=sm_75", "-gencode=arch=compute_80,code=sm_80",
                             "-gencode=arch=compute_120,code=compute_120"]
    assert al.torch_cuda_arch_list is None  # it cannot say it (see test_torch_list_cannot_say_ptx_only)


def test_cmake_pairs_and_ptx_beside_a_cubin() -> None:
    al = parse_arch_list("120-real 120-virtual 8.0")
    assert (al.text, al.torch_cuda_arch_list) == ("8.0 12.0+PTX", "8.0;12.0+PTX")
    al = parse_arch_list("8.0+PTX 9.0 12.0-virtual")  # marks are exact: no default PTX on 9.0 besides
    assert al.ptx_names == ["sm_80", "sm_120"] and al.cmake_cuda_architectures == "80-real;90-real;80-virtual;120-virtual"


@pytest.mark.parametrize(("text", "ptx", "message", "hint"), [
    ("12.0+PTX 12.0-virtual", None, "'12.0-virtual' duplicates '12.0+PTX' (both ship compute_120 PTX)",
     "list each architecture's PTX once"),
    ("compute_120 120-virtual", None, "'120-virtual' duplicates 'compute_120'", "list each architecture's PTX once"),
    ("8.0 12.0-virtual", "none", "'12.0-virtual' conflicts with ptx = 'none'",
     "mark PTX in one place only: in the list (+PTX, -virtual) or with the ptx key"),
    ("8.0 120-Virtual", None, "'120-Virtual': CMake's suffix is written '-virtual' in lower case", "write 120-virtual"),
    ("8.0 sm_90+PTX", None, "'sm_90+PTX' mixes two spellings of one entry",
     "write 9.0 (a cubin), 9.0+PTX (a cubin and its PTX) or 9.0-virtual (PTX without a cubin)"),
    ("8.0 12.0-virtual+PTX", None, "'12.0-virtual+PTX' mixes two spellings of one entry", None),
    ("8.0 compute120", None, "'compute120' is not a GPU architecture", "did you mean 12.0-virtual (PTX without a cubin)?"),
])
def test_ptx_only_refusals(text: str, ptx: str | None, message: str, hint: str | None) -> None:
    with pytest.raises(ArchError) as e:
        parse_arch_list(text, ptx=ptx or "newest")
    assert message in str(e.value)
    if hint is not None:
        assert e.value.hint == hint


def test_a_train_must_compile_ptx_only_entries_too() -> None:
    with pytest.raises(ArchError, match="'5.2': CUDA 13.0 cannot compile this architecture"):
        parse_arch_list("8.0 5.2-virtual", train=Train(13, 0))
    assert parse_arch_list("3.5-virtual 8.0", train=Train(11, 8)).ptx_names == ["sm_35"]  # CUDA 11 wheels do this


def test_torch_list_cannot_say_ptx_only() -> None:
    with pytest.raises(ArchError) as e:
        parse_arch_list("8.0 12.0-virtual").require_torch_list()
    assert "'12.0-virtual': TORCH_CUDA_ARCH_LIST cannot say PTX without a cubin" in str(e.value)
    assert e.value.hint == "write 12.0+PTX (the cubin and its PTX) or drop the PTX-only entry for rows PyTorch builds"


POLICY = """[project]
name = "fx"
[python]
versions = ["3.12"]
[cuda]
trains = ["13.0"]
[cuda.runtime.13]
requirements = ["nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'"]
library-dir = "nvidia/cu13/lib"
[platforms.linux-x86_64]
trains = ["13.0"]
[[platforms.linux-x86_64.cuda]]
trains = ["13.0"]
archs = "7.5 8.0 compute_120"
"""
ROW = "linux-x86_64-cu130-py312"


def test_a_ptx_only_row_renders_truthfully(tmp_path: Path, cli: Callable[..., Result]) -> None:
    policy = tmp_path / "buildrows.toml"
    policy.write_text(POLICY, encoding="utf-8")
    r = cli("--config", str(policy), "rows", "--json")
    (row,) = json.loads(r.out)
    assert (row["archs"], row["ptx_only"], row["torch_cuda_arch_list"], row["cmake_cuda_architectures"]) == (
        ["7.5", "8.0"], ["12.0"], None, "75-real;80-real;120-virtual")
    r = cli("--config", str(policy), "show", ROW, "--json")
    assert json.loads(r.out)["nvcc_flags"][-1] == "-gencode=arch=compute_120,code=compute_120"
    r = cli("--config", str(policy), "env", ROW, "--format", "dotenv")
    assert r.code == 0, r.err
    # TORCH_CUDA_ARCH_LIST cleared (a builder image's value cannot contradict); CMake's variables say it all
    assert "TORCH_CUDA_ARCH_LIST=''" in r.out or 'TORCH_CUDA_ARCH_LIST=""' in r.out, r.out
    assert "75-real;80-real;120-virtual" in r.out


@pytest.mark.parametrize("edit", [('library-dir = "nvidia/cu13/lib"', 'library-dir = "nvidia/cu13/lib"\nmode = "torch"'),
                                  ('name = "fx"', 'name = "fx"\ncuda-env = { ARCHS = "{torch_archs}" }')])
def test_a_ptx_only_row_pytorch_builds_is_refused(tmp_path: Path, cli: Callable[..., Result],
                                                  edit: tuple[str, str]) -> None:
    policy = tmp_path / "buildrows.toml"
    text = POLICY.replace(*edit)
    if "torch" in edit[1] and "mode" in edit[1]:
        text = text.replace('requirements = ["nvidia-cuda-runtime>=13,<14; platform_system == \'Linux\'"]\n'
                            'library-dir = "nvidia/cu13/lib"\n', "")
    policy.write_text(text, encoding="utf-8")
    r = cli("--config", str(policy), "rows")
    assert r.code == 3, (r.out, r.err)
    line = text.splitlines().index('archs = "7.5 8.0 compute_120"') + 1
    assert (f"{policy}:{line} [platforms.linux-x86_64.cuda[0].archs]: row linux-x86_64-cu130-py*: '12.0-virtual': "
            "TORCH_CUDA_ARCH_LIST cannot say PTX without a cubin") in r.err, r.err
    assert "fix: write 12.0+PTX (the cubin and its PTX) or drop the PTX-only entry for rows PyTorch builds" in r.err


@pytest.mark.parametrize(("cubins", "ptx", "text", "ptx_none"), [
    ({"sm_52", "sm_60", "sm_70", "sm_80"}, {"sm_120"}, "5.2 6.0 7.0 8.0 12.0-virtual", False),  # forward-compatible PTX
    ({"sm_70", "sm_80"}, {"sm_52", "sm_80"}, "5.2-virtual 7.0 8.0+PTX", False),  # compute_52 beside sm_ cubins
    (set(), {"sm_80"}, "8.0-virtual", False),  # PTX only
    ({"sm_80", "sm_120a"}, {"sm_80"}, "8.0 12.0a", False),  # PTX on the newest plain entry: the default
    ({"sm_80", "sm_100f"}, set(), "8.0 10.0f", True),
    ({"sm_80", "sm_90a"}, {"sm_90a"}, "8.0 9.0a 9.0a-virtual", False),  # arch-specific PTX, deliberately
    ({"sm_100", "sm_100f"}, {"sm_100", "sm_100f"}, "10.0+PTX 10.0f+PTX", False),  # cuequivariance-ops: family PTX
])
def test_lists_read_from_a_wheel_are_written_in_the_canonical_spelling(cubins: set[str], ptx: set[str], text: str,
                                                                       ptx_none: bool) -> None:
    """What `archs --write` and `init --from-wheel` write: loading it gives the same list back."""
    from buildrows.policy.edit import arch_text, archs_from_names

    archs = archs_from_names(cubins, ptx)
    assert arch_text(archs) == (text, ptx_none)
    again = parse_arch_list(text, ptx="none" if ptx_none else "newest")
    assert (set(again.cubin_names), set(again.ptx_names)) == (cubins, ptx)


@pytest.mark.parametrize("given", ["", "  "])
def test_archs_from_an_empty_path_is_refused(given: str, tmp_path: Path, cli: Callable[..., Result],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Path("") is the current directory: an empty argument (an unset shell variable) once scanned it."""
    monkeypatch.chdir(tmp_path)
    r = cli("archs", "--from-wheel", given)
    assert r.code == 2, (r.out, r.err)
    assert ("--from-wheel is empty\n    fix: pass a .whl, a shared library or a directory (write . for the current "
            "directory)") in r.err
    assert r.out == ""


def test_a_or_f_ptx_written_in_the_list_is_what_the_wheel_ships() -> None:
    """NVIDIA's cuequivariance-ops wheel ships family PTX (compute_100f, compute_120f) beside plain PTX: a list
    can say it when written explicitly; the ptx key never picks such a target (test_newcomer)."""
    al = parse_arch_list("9.0 10.0+PTX 10.0f+PTX 12.0 12.0f-virtual", train=Train(13, 0))
    assert al.ptx_names == ["sm_100", "sm_100f", "sm_120f"]
    assert al.cmake_cuda_architectures == "90-real;100-real;100f-real;120-real;100-virtual;100f-virtual;120f-virtual"
    assert al.text == "9.0 10.0+PTX 10.0f+PTX 12.0 12.0f-virtual"
    assert parse_arch_list("8.0 compute_90a").ptx_names == ["sm_90a"]
    assert parse_arch_list("8.0 9.0a 9.0a-virtual").ptx_names == ["sm_90a"]

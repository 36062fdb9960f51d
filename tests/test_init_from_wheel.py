"""`init --from-wheel` on the shapes issue 27 point 8 found wrong: each policy it writes must pass
`check` on its wheel, and none may hide a library the wheel cannot load. Hand-made wheels (no
toolchain): the device code is real fat binary containers in real ELF files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Result
from tests.cuda_tools import fatbin_container, fatbin_entry, make_elf, make_wheel

TAG = "cp311-cp311-manylinux_2_28_x86_64"
ROW13 = "linux-x86_64-cu130-py311"


def _kernel(*sms: int, ptx: tuple[int, ...] = (), needed: tuple[str, ...] = ("libcudart.so.13",),
            rpath: str | None = None) -> bytes:
    entries = [fatbin_entry(2, sm) for sm in sms] + [fatbin_entry(1, sm) for sm in ptx]
    return make_elf([(".nv_fatbin", fatbin_container(entries))], needed=list(needed), rpath=rpath)


def _wheel(where: Path, name: str, version: str, members: dict[str, bytes], requires: tuple[str, ...] = ()) -> Path:
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires)
    where.mkdir(parents=True, exist_ok=True)
    return make_wheel(where / f"{name}-{version}-{TAG}.whl", members, metadata=metadata)


def _init(project: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[Result, str]:
    project.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(project)
    r = cli("init", "--from-wheel", *args)
    text = (project / "buildrows.toml").read_text() if (project / "buildrows.toml").exists() else ""
    return r, text


def test_the_example_shape_is_dynamic_not_preload(tmp_path: Path, cli: Callable[..., Result],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundled example's wheel: RPATH reaches nvidia/cu13/lib and the runtime is declared. Dynamic
    mode (no runtime table), so `check` holds the RPATH; an empty directory gets a placeholder driver."""
    wheel = _wheel(tmp_path / "w", "tx", "1.0+cu130",
                   {"tx/_core.so": _kernel(75, 90, ptx=(90,), rpath="$ORIGIN/../nvidia/cu13/lib")},
                   ("nvidia-cuda-runtime<14,>=13; platform_system == \"Linux\"", "numpy"))
    r, text = _init(tmp_path / "empty", cli, monkeypatch, str(wheel))
    assert r.code == 0, r.err
    assert "cuda.runtime" not in text and 'driver = "setup.py"  # detected from nothing: this directory has no' in text
    assert "mode dynamic: 1 libraries link libcudart and reach site-packages/nvidia/cu13/lib" in r.err
    r = cli("check", str(wheel), "--row", ROW13)
    assert r.code == 0 and "verdict: PASS" in r.out, text + r.out


def test_a_docs_theme_is_no_cuda_package_and_a_missing_cublas_is_not_hidden(
        tmp_path: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    """nvidia-sphinx-theme under extra 'docs' is not a CUDA package; the runtime declared under 'cu13' is.
    The libcublas a library NEEDS, which no declared package carries, is never written as optional: the
    policy says so in a comment and `check` fails naming it. The library the wheel ships itself is not
    optional either, and a binding module named after its library is (cupy's nccl module)."""
    members = {"tx/_core.so": _kernel(80, 90, ptx=(90,), needed=("libcudart.so.13", "libcublas.so.13", "libcufoo.so.1")),
               "tx/lib/libcufoo.so.1": make_elf(),
               "tx/nccl.so": make_elf(needed=["libnccl.so.2"])}
    wheel = _wheel(tmp_path / "w", "tx", "1.0+cu130", members,
                   ("nvidia-sphinx-theme; extra == 'docs'", "nvidia-cuda-runtime==13.*; extra == 'cu13'"))
    r, text = _init(tmp_path / "p", cli, monkeypatch, str(wheel))
    assert r.code == 0, r.err
    assert 'mode = "preload"' in text and 'extra = "cu13"' in text, text
    assert 'optional = ["libnccl.so.*"]' in text and "libcublas" not in text.split("optional =")[1].split("\n")[0]
    assert "# init saw: tx/_core.so NEEDS libcublas.so.13, which no NVIDIA package the wheel declares carries" in text
    assert "NOT HIDDEN: tx/_core.so NEEDS libcublas.so.13" in r.err
    r = cli("check", str(wheel), "--row", ROW13)
    assert r.code == 5
    assert "missing: tx/_core.so NEEDS libcublas.so.13, which none of the NVIDIA packages the wheel declares under extra 'cu13' carries" in r.out
    assert "libcufoo" not in r.out.split("[FAIL] runtime-declared")[1].split("[")[0]


def test_the_train_of_a_major_only_requirement(tmp_path: Path) -> None:
    from buildrows.adopt.rows_choice import train_from_requirements
    from buildrows.policy.archs import train_table

    newest13 = max(t for t in train_table() if t.major == 13)
    newest12 = max(t for t in train_table() if t.major == 12)
    assert train_from_requirements(["nvidia-cuda-runtime==13.*"]) == newest13
    assert train_from_requirements(["nvidia-cuda-runtime-cu12"]) == newest12
    assert train_from_requirements(["cuda-toolkit[cudart]==12.*; platform_system == 'Linux'"]) == newest12
    assert train_from_requirements(["nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime==13.*"]) is None  # two majors
    assert train_from_requirements(["nvidia-cuda-runtime==13.*; extra == 'cu13'"]) is None  # optional: not the wheel's


def test_a_builders_absolute_rpaths_become_one_glob() -> None:
    from buildrows.adopt.wheel_runtime import _absolute_globs

    assert _absolute_globs(["/home/runner/work/p/p/build/lib", "/home/runner/work/p/p/build/temp/lib",
                            "/usr/local/cuda/lib64"]) == ["/home/runner/work/p/p/build/*", "/usr/local/cuda/lib64"]


def test_ptx_without_a_cubin_is_written_as_a_ptx_only_entry() -> None:
    """One function spells it (X.Y-virtual, the parser's spelling); PTX beside its cubin stays +PTX or the default."""
    from buildrows.adopt.wheel_lists import ListGroup, list_text

    only = ListGroup(frozenset({"sm_75", "sm_80", "sm_120"}), frozenset({"sm_52", "sm_120"}), ("x.so",))
    assert list_text(only) == ("5.2-virtual 7.5 8.0 12.0+PTX", False)
    assert list_text(ListGroup(frozenset({"sm_75", "sm_120"}), frozenset({"sm_120"}), ("x.so",))) == ("7.5 12.0", False)
    assert list_text(ListGroup(frozenset({"sm_75", "sm_120"}), frozenset(), ("x.so",))) == ("7.5 12.0", True)


def test_several_wheels_one_per_train(tmp_path: Path, cli: Callable[..., Result],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`init --from-wheel dist/*.whl`: each train's wheel gives that train's list, and check passes on both."""
    w13 = _wheel(tmp_path / "w", "tx", "1.0+cu130", {"tx/_C.so": _kernel(75, 90, 100, ptx=(100,), needed=())})
    w12 = _wheel(tmp_path / "w", "tx", "1.0+cu126", {"tx/_C.so": _kernel(75, 90, ptx=(90,), needed=())})
    r, text = _init(tmp_path / "p", cli, monkeypatch, str(w13), str(w12))
    assert r.code == 0, r.err
    assert 'trains = ["12.6", "13.0"]' in text and 'trains = ["12.6"]\narchs = "7.5 9.0"' in text, text
    for wheel, row in ((w13, ROW13), (w12, "linux-x86_64-cu126-py311")):
        r = cli("check", str(wheel), "--row", row)
        assert r.code == 0 and "verdict: PASS" in r.out, text + r.out


def test_init_reads_no_symbols_of_a_wheel_that_neither_requires_nor_links_torch(
        tmp_path: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    """Where check reads none (no torch mode), init reads none: NVIDIA's 500 MB libraries are never inflated whole."""
    import buildrows.binaries.wheelsymbols as symbols

    def refuse(*_: object) -> None:
        raise AssertionError("init read the libraries' symbols")

    monkeypatch.setattr(symbols, "wheel_imported_symbols", refuse)
    wheel = _wheel(tmp_path / "w", "tx", "1.0+cu130", {"tx/_C.so": _kernel(75, 90, ptx=(90,), needed=())})
    r, _ = _init(tmp_path / "p", cli, monkeypatch, str(wheel))
    assert r.code == 0, r.err
    torch_wheel = _wheel(tmp_path / "t", "tx", "1.0+cu130", {"tx/_C.so": _kernel(75, 90, ptx=(90,), needed=())},
                         ("torch>=2.8",))
    r, _ = _init(tmp_path / "q", cli, monkeypatch, str(torch_wheel))  # the guard trips where init must read them
    assert r.code != 0 and "init read the libraries' symbols" in r.err, r.err


def test_a_host_only_cuda_library(tmp_path: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    """No device code, but a library links the CUDA runtime (cumm's shape: kernels compiled at run time).
    Where the policy can say host-only, init says it and `check` passes; where it cannot, init refuses
    rather than write a policy its check rejects."""
    from buildrows.adopt.wheel_rules import host_only_supported

    wheel = _wheel(tmp_path / "w", "tx", "1.0+cu130", {"tx/_C.so": make_elf(needed=["libcudart.so.13"],
                                                                           rpath="$ORIGIN/../nvidia/cu13/lib")},
                   ("nvidia-cuda-runtime<14,>=13; platform_system == \"Linux\"",))
    r, text = _init(tmp_path / "p", cli, monkeypatch, str(wheel))
    if not host_only_supported():
        assert r.code == 3 and "host-only CUDA code, which this buildrows' policy cannot state" in r.err, r.err
        return
    assert r.code == 0, r.err
    assert 'files = ["tx/_C.so"]\nhost-only = true' in text, text
    r = cli("check", str(wheel), "--row", ROW13)
    assert r.code == 0 and "verdict: PASS" in r.out, text + r.out


def test_a_wheels_own_python_is_among_the_rows(tmp_path: Path, cli: Callable[..., Result],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A cp314 wheel's row is linux-x86_64-cu130-py314: init adds 3.14 to the starting Pythons (an abi3 one adds none)."""
    where = tmp_path / "w"
    where.mkdir()
    wheel = make_wheel(where / "tx-1.0+cu130-cp314-cp314-manylinux_2_28_x86_64.whl",
                       {"tx/_C.so": _kernel(75, 90, ptx=(90,), needed=())},
                       metadata="Metadata-Version: 2.1\nName: tx\nVersion: 1.0+cu130\n")
    r, text = _init(tmp_path / "p", cli, monkeypatch, str(wheel))
    assert r.code == 0, r.err
    assert '"3.14"]' in text.split("versions = ")[1].split("\n")[0], text
    r = cli("check", str(wheel))
    assert r.code == 0 and "row linux-x86_64-cu130-py314" in r.out, r.out


def test_a_binding_module_is_named_after_its_library() -> None:
    from buildrows.adopt.wheel_runtime import _binding_of

    assert _binding_of("cupy_backends/cuda/libs/cutensor.cpython-312-x86_64-linux-gnu.so", "libcutensorMg.so.2")
    assert _binding_of("tx/nccl.so", "libnccl.so.2")
    assert not _binding_of("tx/_core.so", "libcublas.so.13") and not _binding_of("tx/cuda.so", "libcudart.so.13")


def test_kernel_files_are_one_unit_under_their_common_directory() -> None:
    """Where the reader lists kernel files (WheelInfo.kernels), init takes them as one unit, as check judges them."""
    from types import SimpleNamespace

    from buildrows.adopt.wheel_lists import _kernel_unit

    kernels = [SimpleNamespace(path="fi/cubins/a/x_sm100f.cubin", cubins=("sm_100f",), ptx=()),
               SimpleNamespace(path="fi/cubins/b/y.cubin", cubins=("sm_103a",), ptx=()),
               SimpleNamespace(path="fi/cubins/b/z.ptx", cubins=(), ptx=("sm_90",)),
               SimpleNamespace(path="fi/readme.txt", cubins=(), ptx=())]
    unit = _kernel_unit(SimpleNamespace(kernels=kernels))  # type: ignore[arg-type]
    assert unit is not None and unit.paths == ("fi/cubins/*",)
    assert (unit.elf, unit.ptx) == (frozenset({"sm_100f", "sm_103a"}), frozenset({"sm_90"}))
    assert _kernel_unit(SimpleNamespace(libraries=())) is None  # type: ignore[arg-type]  # a reader without kernel files


def test_pytorchs_own_wheel_is_no_extension_of_torch(tmp_path: Path, cli: Callable[..., Result],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """PyTorch 2.14.1's own wheel, in miniature: its libtorch_python.so NEEDS the libtorch_cpu.so the wheel ships,
    and the CUDA libraries come from `cuda-toolkit[cublas,cudart]==13.0.3`. The libtorch it ships is its own code,
    so init writes no torch mode (before: mode torch, and check then failed torch-matches-build asking which torch
    it was built against); the exact toolkit pin carries libcudart and libcublas (before: "another major's
    toolkit", libraries-load failed). The round trip passes; without the toolkit requirement it fails."""
    members = {"torch/lib/libtorch_cpu.so": make_elf(needed=["libcudart.so.13"]),
               "torch/lib/libtorch_cuda.so": _kernel(75, 90, ptx=(90,), needed=("libtorch_cpu.so", "libcudart.so.13",
                                                                              "libcublas.so.13"),
                                                     rpath="$ORIGIN/../../nvidia/cu13/lib:$ORIGIN"),
               "torch/lib/libtorch_python.so": make_elf(needed=["libtorch_cpu.so", "libtorch_cuda.so"], rpath="$ORIGIN")}
    toolkit = 'cuda-toolkit[cublas,cudart]==13.0.3; platform_system == "Linux"'
    wheel = _wheel(tmp_path / "w", "torch", "2.14.1", members, (toolkit, "filelock"))
    r, text = _init(tmp_path / "p", cli, monkeypatch, str(wheel))
    assert r.code == 0, r.err
    assert 'mode = "torch"' not in text and "mode torch" not in r.err, text + r.err
    r = cli("check", str(wheel), "--cuda", "13.0")  # PyPI's name has no +cu130
    assert r.code == 0 and "verdict: PASS" in r.out, text + r.out
    assert "[PASS] libraries-load" in r.out and "torch-matches-build" not in r.out
    broken = _wheel(tmp_path / "broken", "torch", "2.14.1", members, ("filelock",))
    r = cli("check", str(broken), "--cuda", "13.0")
    assert r.code == 5 and "NEEDS libcublas.so.13" in r.out, r.out

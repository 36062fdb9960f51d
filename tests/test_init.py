"""`buildrows init`: a starting policy for an existing project, never over an existing one; then a
first checked wheel from it (the README's "Adopt buildrows in an existing project")."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.policy.load import load_policy
from tests.conftest import REPO, Result

sys.path.insert(0, str(REPO / "scripts"))
import make_check_fixtures as mcf

EXAMPLE = REPO / "examples" / "cuda-extension"
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
PYT = PY.replace(".", "")


def _project(tmp_path: Path) -> Path:
    """The bundled example's sources without its policy: a project that has never seen buildrows."""
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(
        "build", "dist", "CMakeUserPresets.json", "buildrows-presets.json", "__pycache__", "buildrows.toml"))
    return project


@pytest.fixture(scope="module")
def torch_like_wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Wheels with real device code (sm_75, sm_90 + PTX 9.0): tagged +cu130, and untagged."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    out = tmp_path_factory.mktemp("init-wheels")
    lib = mcf.build_library(out, "row", mcf.GOOD_RPATH, mcf._nvcc()).read_bytes()
    made = {}
    # "pypi": PyTorch's PyPI wheel has no +cu130 but requires its train's runtime (issue 21 point 11)
    pypi = ('cuda-toolkit[cublas,cudart]==13.0.2; platform_system == "Linux"',
            'nvidia-cuda-runtime==13.0.96; platform_system == "Linux"', "filelock")
    # "tagged": as PyTorch's own index publishes it, +cu130 and requiring the runtime its libraries NEED
    # (a wheel that NEEDS libcudart and declares none fails libraries-load, issue 36)
    tagged = ('nvidia-cuda-runtime>=13,<14; platform_system == "Linux"',)
    for key, version, requires in (("tagged", "2.0+cu130", tagged), ("untagged", "2.0", ()), ("pypi", "2.0", pypi)):
        (out / key).mkdir()
        wheel = out / key / f"fakelib-{version}-cp311-cp311-manylinux_2_28_x86_64.whl"
        mcf.write_wheel(wheel, "fakelib", version, {"fakelib/_C.so": lib}, requires, "cp311-cp311-manylinux_2_28_x86_64")
        made[key] = wheel
    return made


def test_init_detects_scikit_build_core_and_takes_the_list_from_the_wheel(
        tmp_path: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch,
        torch_like_wheels: dict[str, Path]) -> None:
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    r = cli("init", "--from-wheel", str(torch_like_wheels["tagged"]))
    assert r.code == 0, r.err
    assert r.out.strip() == str(project / "buildrows.toml")
    assert "driver scikit-build-core (pyproject.toml's build-backend scikit_build_core.build)" in r.err
    pol = load_policy(project / "buildrows.toml")
    assert pol.project.driver == "scikit-build-core"
    assert pol.project.cuda_option == "CUDA_EXTENSION_BUILD_CUDA"  # option() in CMakeLists.txt
    row = pol.row(f"linux-x86_64-cu130-py{PYT}")
    assert row is not None and row.archs is not None
    assert row.archs.torch_cuda_arch_list == "7.5;9.0+PTX"
    assert {r.name for r in pol.rows} >= {f"linux-x86_64-cu130-py{v.replace('.', '')}" for v in ("3.10", "3.13")}
    text = (project / "buildrows.toml").read_text()
    assert "# from fakelib-2.0+cu130-cp311-cp311-manylinux_2_28_x86_64.whl" in text


def test_init_never_overwrites_a_policy(tmp_path: Path, cli: Callable[..., Result],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    (project / "buildrows.toml").write_text("# mine\n")
    r = cli("init", "--cuda", "13.0")
    assert r.code == 2 and "buildrows init never overwrites a policy" in r.err
    assert (project / "buildrows.toml").read_text() == "# mine\n"
    (project / "buildrows.toml").unlink()
    pyproject = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(pyproject + "\n[tool.buildrows.python]\nversions = [\"3.12\"]\n")
    r = cli("init", "--cuda", "13.0")
    assert r.code == 2 and "pyproject.toml already holds this project's buildrows policy" in r.err
    assert not (project / "buildrows.toml").exists()


@pytest.mark.parametrize(("files", "driver"), [
    ({"setup.py": "from setuptools import setup\nsetup()\n"}, "setup.py"),
    ({"pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'}, "setup.py"),
    ({"CMakeLists.txt": "project(x)\noption(X_USE_CUDA \"cuda\" OFF)\n", "CMakePresets.json": "{}"}, "cmake-presets"),
])
def test_init_detects_the_driver(tmp_path: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch,
                                 files: dict[str, str], driver: str) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    # a machine without nvcc: CPU rows, and a line saying how to add a train (with nvcc: tests/test_adopt.py)
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDACXX"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    r = cli("init")
    assert r.code == 0, r.err
    assert "no nvcc on this machine: CPU rows only; `buildrows init --cuda 13.0` (any train) adds" in r.err
    pol = load_policy(tmp_path / "buildrows.toml")
    assert pol.project.driver == driver
    assert [r.name for r in pol.rows if r.python == PY] == [f"linux-x86_64-cpu-py{PYT}"]  # CPU rows without CUDA
    if driver == "cmake-presets":
        assert pol.project.cuda_option == "X_USE_CUDA"
        assert "CMakeLists.txt with CMakePresets.json" in r.err


def test_init_in_a_directory_that_is_no_project(tmp_path: Path, cli: Callable[..., Result],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = cli("init")
    assert r.code == 2 and "has no setup.py, pyproject.toml or CMakeLists.txt" in r.err
    assert not (tmp_path / "buildrows.toml").exists()


def test_init_without_a_wheel_gives_a_list_the_train_compiles(tmp_path: Path, cli: Callable[..., Result],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    r = cli("init", "--cuda", "12.6", "--cpu", "--python", "3.11,3.12")
    assert r.code == 0, r.err
    pol = load_policy(project / "buildrows.toml")
    assert [r.name for r in pol.rows] == ["linux-x86_64-cpu-py311", "linux-x86_64-cpu-py312",
                                          "linux-x86_64-cu126-py311", "linux-x86_64-cu126-py312"]
    row = pol.row("linux-x86_64-cu126-py311")
    assert row is not None and row.archs is not None and row.archs.dotted == ["7.5", "8.0", "8.6", "8.9", "9.0"]


def test_init_needs_the_train_of_an_untagged_wheel(tmp_path: Path, cli: Callable[..., Result],
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   torch_like_wheels: dict[str, Path]) -> None:
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    r = cli("init", "--from-wheel", str(torch_like_wheels["untagged"]))
    assert r.code == 2 and "fix: pass --cuda TRAIN" in r.err
    assert not (project / "buildrows.toml").exists()
    r = cli("init", "--from-wheel", str(torch_like_wheels["untagged"]), "--cuda", "12.6")
    assert r.code == 0, r.err
    r = cli("init", "--from-wheel", str(torch_like_wheels["tagged"]), "--cuda", "12.6")
    assert r.code == 2 and "buildrows init never overwrites a policy" in r.err


@pytest.mark.integration
def test_init_then_build_gives_a_first_checked_wheel(tmp_path: Path, cli: Callable[..., Result],
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     torch_like_wheels: dict[str, Path]) -> None:
    """The README's adoption path: init from a wheel, then `buildrows build` on this machine's row."""
    for tool in ("cmake", "ninja"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool} on PATH")
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    for var in ("CU_VERSION", "DESIRED_CUDA", "CUDACXX", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    from buildrows.plan.toolchain import find_cuda_compiler

    comp = find_cuda_compiler(dict(os.environ))
    if comp is None or comp.train is None or comp.train.cu != "cu130":
        pytest.skip("needs nvcc 13.0 for the tagged wheel's train")
    assert cli("init", "--from-wheel", str(torch_like_wheels["tagged"])).code == 0
    r = cli("build")
    assert r.code == 0, r.err
    wheel = project / "dist" / f"cuda_extension-0.1.0+cu130-cp{PYT}-cp{PYT}-linux_x86_64.whl"
    assert wheel.is_file()
    assert f"{wheel}  (" in r.out and f"[linux-x86_64-cu130-py{PYT}: check PASS]" in r.out
    assert "  verdict: PASS" in r.err and "check took " in r.err and "doctor took " in r.err


# init --from-wheel on wheels of the shapes real CUDA projects publish (issue 20): the policy it
# writes must pass `check` on the wheel it was written from. (files: member -> Lib; requires; what
# the policy must say; extra check arguments)
_RT = "nvidia-cuda-runtime>=13,<14"
ROUND_TRIP = {
    "torch-cxx": ({"tx/_C.so": mcf.Lib("torch-cxx")}, ("torch==2.14.*",), 'mode = "torch"', ["--torch", "2.14.1"]),
    "torch-stable": ({"tx/_C.so": mcf.Lib("torch-stable")}, ("torch>=2.10",), 'mode = "torch"', []),
    "torch-runtime": ({"tx/libk_cuda130.so": mcf.Lib("kernel", rpath="/usr/local/cuda-13.0/lib64")}, ("torch>=2.3,<3",),
                      'mode = "torch-runtime"', []),
    "preload": ({"tx/_C.so": mcf.Lib("kernel")}, (_RT,), 'mode = "preload"', []),
    "plugin-two-layouts": ({"tx/_C.so": mcf.Lib("kernel", rpath="$ORIGIN/../../nvidia/cu13/lib:$ORIGIN/../nvidia/cu13/lib")},
                           (f"{_RT}; extra == 'with-cuda'",), "climbs-out = true", []),
    "static": ({"tx/_C.so": mcf.Lib("kernel", cudart="static")}, (), 'mode = "static"', []),
    "per-library-lists": ({"tx/_a.so": mcf.Lib("kernel", rpath=mcf.GOOD_RPATH),
                           "tx/_b.so": mcf.Lib("kernel", rpath=mcf.GOOD_RPATH),
                           "tx/_old.so": mcf.Lib("kernel", "only75", rpath=mcf.GOOD_RPATH)}, (mcf.RUNTIME_13,),
                          'files = ["tx/_old.so"]\narchs = "7.5"', []),
    "vendored-nvidia": ({"tx/_C.so": mcf.Lib("kernel", rpath=mcf.GOOD_RPATH),
                         "tx.libs/libnvjpeg.8dd2b5e6.so.13": mcf.Lib("kernel", "extra")}, (mcf.RUNTIME_13,),
                        'files = ["tx.libs/libnvjpeg.8dd2b5e6.so.13"]\nvendored = true', []),
}


@pytest.mark.parametrize("shape", sorted(ROUND_TRIP))
def test_init_from_wheel_round_trips(shape: str, tmp_path: Path, cli: Callable[..., Result],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    files, requires, says, check_args = ROUND_TRIP[shape]
    work = tmp_path / "work"
    work.mkdir()
    wheel = tmp_path / "tx-1.0+cu130-cp311-cp311-manylinux_2_28_x86_64.whl"
    mcf.write_wheel(wheel, "tx", "1.0+cu130", {m: mcf.build_lib(work, lib, mcf._nvcc()).read_bytes()
                                               for m, lib in files.items()}, requires, "cp311-cp311-manylinux_2_28_x86_64")
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    r = cli("init", "--from-wheel", str(wheel))
    assert r.code == 0, r.err
    text = (project / "buildrows.toml").read_text()
    assert says in text, text
    r = cli("check", str(wheel), "--row", "linux-x86_64-cu130-py311", *check_args)
    assert r.code == 0, text + r.out + r.err
    assert "verdict: PASS" in r.out


def test_init_from_wheel_writes_a_per_train_rule_for_one_library_per_train(
        tmp_path: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    """bitsandbytes' shape: one kernel library per CUDA train. init writes every train with the list its
    library carries and a per-train rule, so each library's device code AND soname majors are held to its
    own train (an `archs` rule would leave libk_cuda128.so's libcudart.so.12 failing on the 13.0 row)."""
    from cuda_tools import fatbin_container, fatbin_entry, make_elf, make_wheel

    def kernel(needed: str, *sms: int) -> bytes:
        return make_elf([(".nv_fatbin", fatbin_container([fatbin_entry(2, sm) for sm in sms]))], needed=[needed])

    metadata = "Metadata-Version: 2.1\nName: tx\nVersion: 1.0+cu130\nRequires-Dist: torch>=2.3,<3\n"
    wheel = make_wheel(tmp_path / "tx-1.0+cu130-cp311-cp311-manylinux_2_28_x86_64.whl",
                       {"tx/libk_cuda128.so": kernel("libcudart.so.12", 80, 90),
                        "tx/libk_cuda130.so": kernel("libcudart.so.13", 90, 100)}, metadata=metadata)
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    r = cli("init", "--from-wheel", str(wheel))
    assert r.code == 0, r.err
    text = (project / "buildrows.toml").read_text()
    assert 'files = ["tx/libk_cuda{cu}.so"]\nper-train = true' in text, text
    assert 'trains = ["12.8", "13.0"]' in text and 'trains = ["12.8"]\narchs = "8.0 9.0"' in text, text
    r = cli("check", str(wheel), "--row", "linux-x86_64-cu130-py311")
    assert r.code == 0, text + r.out + r.err
    assert "tx/libk_cuda128.so (CUDA 12.8)" in r.out and "1 library carries exactly sm_80 sm_90: CUDA 12.8's list" in r.out
    # an `archs` rule holds the device code but not the train: the 12.8 library's runtime fails the 13.0 row
    (project / "buildrows.toml").write_text(text.replace('files = ["tx/libk_cuda{cu}.so"]\nper-train = true',
                                                         'files = ["tx/libk_cuda*.so"]\narchs = "8.0 9.0 10.0"\nptx = "none"'))
    r = cli("check", str(wheel), "--row", "linux-x86_64-cu130-py311")
    assert r.code == 5
    assert "tx/libk_cuda128.so: links libcudart.so.12 (cudart (the CUDA runtime) of CUDA 12), but the row is CUDA 13.0" in r.out


def test_init_reads_the_train_of_pytorchs_pypi_wheel_from_its_runtime_requirements(
        tmp_path: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch,
        torch_like_wheels: dict[str, Path]) -> None:
    from buildrows.adopt.rows_choice import train_from_requirements

    project = _project(tmp_path)
    monkeypatch.chdir(project)
    r = cli("init", "--from-wheel", str(torch_like_wheels["pypi"]))
    assert r.code == 0, r.err
    pol = load_policy(project / "buildrows.toml")
    assert [t.dotted for t in pol.trains] == ["13.0"]
    assert train_from_requirements(["nvidia-cuda-runtime-cu12==12.6.77"]) is not None
    assert train_from_requirements(["nvidia-cuda-runtime-cu12==12.6.77", "cuda-toolkit==13.0.2"]) is None  # two trains
    assert train_from_requirements(["numpy>=2"]) is None

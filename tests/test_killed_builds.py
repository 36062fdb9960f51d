"""Wheels placed atomically across processes; disk full, SIGTERM and SIGKILL leave no unchecked wheel
where a user looks, and the next run cleans what they left (issue 37, items 5, 7 and 8; SPEC §9).

- Two processes placing same-named wheels into one directory, round after round: no wheel lost
  (scripts/wheel_race.py; 200 rounds here, 1,000 in the script).
- A real `buildrows build` stopped by SIGTERM while its CMake step runs: the step's process group
  stopped, the summary printed, exit 143, nothing left in the wheel directory. After SIGKILL the
  row's staging directory stays, with whatever wheel it held; the next build removes it, unplaced.
- A full disk (a small tmpfs, mounted as root) under the wheel directory, BUILDROWS_CACHE and the
  project's build/: a message naming the path and exit 4, or, for the cache, a build without it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from buildrows.build import wheeldir
from buildrows.build.stamp import stamp_wheel
from buildrows.process.diskfull import DiskFull
from tests.conftest import REPO, Result

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
CPU = f"linux-x86_64-cpu-py{PY.replace('.', '')}"
WHEEL = f"stoppable-0.1.0-cp{PY.replace('.', '')}-cp{PY.replace('.', '')}-linux_x86_64.whl"
needs_cmake = pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("ninja") is None,
                                 reason="needs cmake and ninja")


# --- the race ---------------------------------------------------------------------------------

def test_two_processes_placing_same_named_wheels_never_lose_one() -> None:
    """Before: 3 of 200 rounds (40 of 1,000) lost a wheel while both processes reported success."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from wheel_race import race  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(REPO / "scripts"))
    lost, errors, took = race(REPO, 200)
    print(f"\n200 rounds, two processes: {lost} lost, {errors} errors, {took:.1f} s")
    assert (lost, errors) == (0, 0)


def test_place_never_replaces_a_file(tmp_path: Path) -> None:
    (tmp_path / "a.whl").write_text("a")
    (tmp_path / "b.whl").write_text("b")
    with wheeldir.placing(tmp_path):
        assert wheeldir.place(tmp_path / "a.whl", tmp_path / "b.whl") is False
    assert (tmp_path / "a.whl").read_text() == "a" and (tmp_path / "b.whl").read_text() == "b"
    assert wheeldir.place(tmp_path / "a.whl", tmp_path / "c.whl") is True
    assert not (tmp_path / "a.whl").exists() and (tmp_path / "c.whl").read_text() == "a"


# --- owned working directories ----------------------------------------------------------------------

HOLD = ("import sys, time\nfrom pathlib import Path\nfrom buildrows.build.wheeldir import owned_dir\n"
        "o = owned_dir(Path(sys.argv[1]), 'row-')\n(o.path / 'row-0.1.0-py3-none-any.whl').write_bytes(b'complete')\n"
        "print(o.path, flush=True)\ntime.sleep(600)\n")


def test_only_a_killed_processs_directory_is_removed(tmp_path: Path) -> None:
    staging = tmp_path / ".buildrows-staging"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(staging)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        held = Path(holder.stdout.readline().strip())
        assert wheeldir.clean(tmp_path) == []  # its process works in it
        mine = wheeldir.owned_dir(staging, "mine-")  # this process's
        kept = staging / "refused-x"  # left on purpose: no .owner (a refused wheel its error names)
        kept.mkdir()
        (kept / "w.whl").write_bytes(b"x")
        holder.kill()
        holder.wait()
        assert wheeldir.clean(tmp_path) == [held]
        assert not held.exists() and mine.path.is_dir() and (kept / "w.whl").is_file()
        mine.release()
        assert wheeldir.clean(tmp_path) == [] and mine.path.is_dir()  # released: left on purpose now
    finally:
        holder.kill()
        holder.wait()


# --- a real build, stopped -------------------------------------------------------------------------

CMAKELISTS = """cmake_minimum_required(VERSION 3.25)
project(stoppable LANGUAGES NONE)
if(EXISTS "${CMAKE_SOURCE_DIR}/SLEEP")
  # A compiler that takes its time, in the step's process group: its pid for the test.
  execute_process(COMMAND sh -c "echo $$ > '${CMAKE_SOURCE_DIR}/sleeper.pid'; exec sleep 120")
endif()
install(FILES stoppable.py DESTINATION .)
"""


def stoppable_project(root: Path) -> Path:
    """A scikit-build-core project whose configure sleeps while SLEEP exists; its policy."""
    project = root / "stoppable"
    project.mkdir(parents=True)
    (project / "CMakeLists.txt").write_text(CMAKELISTS, encoding="utf-8")
    (project / "stoppable.py").write_text("", encoding="utf-8")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["scikit-build-core"]\nbuild-backend = "scikit_build_core.build"\n'
        '[project]\nname = "stoppable"\nversion = "0.1.0"\n', encoding="utf-8")
    policy = project / "buildrows.toml"
    policy.write_text(
        f'[project]\nname = "stoppable"\ndriver = "scikit-build-core"\n[python]\nversions = ["{PY}"]\n'
        '[cuda]\ntrains = ["13.0"]\n[platforms.linux-x86_64]\ntrains = ["13.0"]\ncpu = true\n'
        '[[platforms.linux-x86_64.cuda]]\ntrains = ["13.0"]\narchs = "9.0"\n', encoding="utf-8")
    return policy


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _started(policy: Path, dist: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], int]:
    """`buildrows build` in a process of its own, once its step's sleeper runs; (process, sleeper pid)."""
    pid_file = policy.parent / "sleeper.pid"
    proc = subprocess.Popen([sys.executable, "-m", "buildrows", "--config", str(policy), "build", CPU, "--no-check",
                             "--wheel-dir", str(dist)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while not (pid_file.is_file() and pid_file.read_text().strip()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    return proc, int(pid_file.read_text())


@pytest.fixture
def build_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "BUILDROWS_CACHE_"))}
    return {**env, "BUILDROWS_CACHE": str(tmp_path / "cache")}


@pytest.mark.integration
@needs_cmake
def test_sigterm_stops_the_steps_prints_the_summary_and_exits_143(tmp_path: Path, build_env: dict[str, str]) -> None:
    """Before: exit 143 from Python's default handler, no summary, the step's processes running on."""
    policy = stoppable_project(tmp_path)
    (policy.parent / "SLEEP").write_text("")
    dist = tmp_path / "dist"
    proc, sleeper = _started(policy, dist, build_env)
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    print(f"\nSIGTERM to exit: {time.monotonic() - start:.1f} s")
    assert proc.returncode == 143, out + err
    assert "stopped by SIGTERM after" in err, err
    assert f"{CPU} " in out and "interrupted" in out, out  # the summary's row
    deadline = time.monotonic() + 10
    while _alive(sleeper) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(sleeper), "the step's process outlived the build"
    assert not dist.exists() or list(dist.iterdir()) == []  # no staging directory, no wheel


@pytest.mark.integration
@needs_cmake
def test_after_sigkill_the_next_build_waits_for_the_orphaned_steps_then_removes_their_unchecked_wheel(
        tmp_path: Path, build_env: dict[str, str]) -> None:
    """Before: the next build started beside the killed one's still-running compilers (it got the
    tree's lock at once), and the staging directory, with the wheel they finished, stayed for good."""
    policy = stoppable_project(tmp_path)
    (policy.parent / "SLEEP").write_text("")
    dist = tmp_path / "dist"
    killed, sleeper = _started(policy, dist, build_env)
    killed.kill()
    killed.communicate()
    (left,) = (dist / ".buildrows-staging").iterdir()
    assert (left / ".owner").is_file()
    (policy.parent / "SLEEP").unlink()
    log = tmp_path / "next.err"
    with log.open("w") as err:
        nxt = subprocess.Popen([sys.executable, "-m", "buildrows", "--config", str(policy), "build", CPU, "--no-check",
                                "--wheel-dir", str(dist)], env=build_env, stdout=subprocess.DEVNULL, stderr=err, text=True)
    try:
        deadline = time.monotonic() + 60
        while "waiting: the buildrows that built" not in log.read_text():
            assert nxt.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert "was killed, and the steps it started still run, holding its lock" in log.read_text()
        assert left.is_dir()  # its steps still write there: not removed under them
        os.kill(sleeper, signal.SIGKILL)  # the orphaned step now finishes its wheel in the killed build's staging
        assert nxt.wait(timeout=120) == 0, log.read_text()
    finally:
        if nxt.poll() is None:
            nxt.kill()
    text = log.read_text()
    assert f"removed {left}: a killed build's unfinished wheel (never checked, never placed)" in text, text
    assert not left.exists()
    assert sorted(p.name for p in dist.iterdir()) == [WHEEL]
    (placed,) = [ln for ln in text.splitlines() if ln.startswith("  wheel: ") and ".buildrows-staging" in ln]
    assert str(left) not in placed  # the wheel placed is this build's own


# --- disk full ---------------------------------------------------------------------------------------

@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[str, int], Path]]:
    """Mount a small tmpfs (root only) at tmp_path/NAME; unmounted after."""
    mounted: list[Path] = []

    def mount(name: str, kb: int) -> Path:
        where = tmp_path / name
        where.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kb}k", "tmpfs", str(where)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (root and CAP_SYS_ADMIN needed): {done.stderr.strip()}")
        mounted.append(where)
        return where

    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    try:
        yield mount
    finally:
        for where in reversed(mounted):
            subprocess.run(["umount", "-l", str(where)], check=False)


def fill(where: Path, leave_kb: int) -> None:
    """Fill the file system of `where` until about `leave_kb` KB are free."""
    st = os.statvfs(where)
    free = st.f_bavail * st.f_frsize
    if free > leave_kb * 1024:
        (where / ".filler").write_bytes(b"\0" * (free - leave_kb * 1024))


def _random_wheel(path: Path, kb: int) -> Path:
    """A valid wheel with `kb` KB of incompressible content (stored, so stamping copies it whole)."""
    from wheel.wheelfile import WheelFile

    with WheelFile(path, "w") as w:
        w.writestr("blob/data.bin", os.urandom(kb * 1024))
        w.writestr("blob-0.1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: blob\nVersion: 0.1.0\n")
        w.writestr("blob-0.1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                   "Tag: py3-none-any\n")
    return path


def test_stamping_into_a_full_wheel_directory_leaves_the_wheel_and_no_scratch(
        tmpfs: Callable[[str, int], Path], cli: Callable[..., Result]) -> None:
    """Before: `internal error: OSError: [Errno 28]`, exit 1, no path, and a `.buildrows-stamp-*`
    directory holding a half-written wheel left in the wheel directory for good."""
    dist = tmpfs("dist", 256)
    wheel = _random_wheel(dist / "blob-0.1.0-py3-none-any.whl", 100)
    fill(dist, 20)  # the 12-22 KB free
    before = wheel.read_bytes()
    with pytest.raises(DiskFull) as e:
        stamp_wheel(wheel, local_tag="cu130", requirements=(), record=None, metadata=True)
    assert str(e.value).startswith(f"no space left on the device while stamping {wheel.name}: {dist} (")
    assert wheel.read_bytes() == before
    assert sorted(p.name for p in dist.iterdir()) == [".filler", wheel.name]  # no scratch left
    policy = REPO / "examples" / "cuda-extension" / "buildrows.toml"
    r = cli("--config", str(policy), "stamp", str(wheel), "--row", "linux-x86_64-cu130-py311")
    assert r.code == 4, r.err
    assert f"buildrows: disk full: no space left on the device while stamping {wheel.name}: {dist} (" in r.err
    assert str(dist) in r.err and "free on its file system" in r.err
    assert "this is a bug" not in r.err
    assert sorted(p.name for p in dist.iterdir()) == [".filler", wheel.name]


def test_a_killed_stamps_scratch_is_removed_by_the_next_build(tmp_path: Path) -> None:
    scratch = tmp_path / ".buildrows-stamp-abc"
    scratch.mkdir()
    (scratch / wheeldir.OWNER).write_text("")  # its process is gone: nobody holds the lock
    (scratch / "half.whl").write_bytes(b"PK")
    assert wheeldir.clean(tmp_path) == [scratch] and not scratch.exists()


@pytest.mark.integration
@needs_cmake
def test_a_full_build_directory_or_cache_is_a_clear_message_or_a_build_without_the_cache(
        tmpfs: Callable[[str, int], Path], tmp_path: Path, build_env: dict[str, str]) -> None:
    policy = stoppable_project(tmp_path)
    dist = tmp_path / "dist"

    def build(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "buildrows", "--config", str(policy), "build", CPU, "--no-check",
                               "--wheel-dir", str(dist)], env=env, capture_output=True, text=True, check=False)

    # BUILDROWS_CACHE full: the build goes on without the compiler cache, and says so.
    cache = tmpfs("cache", 256)
    first = build({**build_env, "BUILDROWS_CACHE": str(cache)})  # fills what the cache needs to start
    assert first.returncode == 0, first.stderr
    shutil.rmtree(cache / "ccache", ignore_errors=True)
    fill(cache, 0)
    (dist / WHEEL).unlink()
    full = build({**build_env, "BUILDROWS_CACHE": str(cache)})
    print("\n" + full.stderr[-1500:])
    assert full.returncode == 0, full.stderr
    assert "cannot be written (no space left on its device): building without the compiler cache" in full.stderr
    assert (dist / WHEEL).is_file()

    # build/ full: exit 4, the path named, not "a bug in buildrows".
    shutil.rmtree(policy.parent / "build")
    tree = tmpfs("stoppable/build", 64)
    fill(tree, 0)
    r = build(build_env)
    print(r.stderr[-1500:])
    assert r.returncode == 4, r.stderr
    assert "disk full: no space left on the device" in r.stderr and str(tree) in r.stderr
    assert "this is a bug" not in r.stderr and "internal error" not in r.stderr

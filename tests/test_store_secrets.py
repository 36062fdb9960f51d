"""The store's secrets are never printed and never reach a step that does not write (issue 37,
items 1 and 2; SPEC §9).

1. A secret holding `/` (or `#`, `?`) broke its URL once expanded, and the parser's message
   (`Port could not be cast to integer value as 'Leak3dPrefix'`) printed its first part. The URL is
   now parsed with its `${VAR}` placeholders; a secret that breaks it is one warning naming the
   variable, and a trusted job falls back to the reader.
2. `BUILDROWS_CACHE_REMOTE=off`, `=URL` and `--no-compiler-cache` left the writer's secret in the
   build's environment. A real build of a CMake project whose CMakeLists.txt runs `env` shows
   what the build saw.

Every check greps everything: what buildrows printed, its logs, the env files (BUILD_ENV_FILE,
GITHUB_ENV), the build tree, the wheel directory and BUILDROWS_CACHE, for any 5 characters of the
secret in a row. A push job with the writer is the control: there the writer's secret must be in
the build's environment (ccache expands it), so the grep is shown to find it.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from buildrows.build import compiler_cache as cc
from buildrows.build import remote_cache as rc
from buildrows.build import store_probe as sp
from tests.conftest import REPO, Result
from tests.redis_store import RedisServer
from tests.test_env import read_back_bash

#: Secrets with a character that ends a URL's credential; random enough that 5 characters of one
#: never occur in buildrows' own output by chance.
BROKEN_WRITER = "Kq7Zx/Vw9Jp3Ty"
WRITER = "Wm8Qv2Rt6Yn4Gh"
READER = "Rd4Mn7Bc8Lp2Hs"
BROKEN_READER = "Fj3Kd#Pw8Zq5Xc"
ALL = (BROKEN_WRITER, WRITER, READER, BROKEN_READER)
ACL = """\
user default on nopass ~ccache:* resetchannels -@all +get
user ccache-reader on >{reader} ~ccache:* resetchannels -@all +get
user ccache-writer on >{writer} ~ccache:* resetchannels -@all +get +set
"""
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
CPU = f"linux-x86_64-cpu-py{PY.replace('.', '')}"


def leaks(text: str, secrets: tuple[str, ...] = ALL, n: int = 5) -> list[str]:
    """Every run of `n` characters of a secret found in `text`."""
    return sorted({s[i:i + n] for s in secrets for i in range(len(s) - n + 1) if s[i:i + n] in text})


def leaks_under(root: Path, secrets: tuple[str, ...] = ALL, skip: tuple[Path, ...] = ()) -> dict[str, list[str]]:
    """Every file under `root` (but `skip`) that holds part of a secret."""
    found = {}
    for p in root.rglob("*"):
        if p.is_file() and not any(p.is_relative_to(s) for s in skip):
            hits = leaks(p.read_bytes().decode("utf-8", errors="replace"), secrets)
            if hits:
                found[str(p.relative_to(root))] = hits
    return found


# --- the probe: a secret that breaks its URL ---------------------------------------------------------

@pytest.mark.parametrize("char", ["/", "#", "?"])
def test_a_secret_that_breaks_its_url_is_named_never_shown(char: str) -> None:
    secret = f"Leak3dPrefix{char}Rest9Tail"
    url = "redis://ccache-writer:${BR_PW}@127.0.0.1:16379"
    kind, why = sp.probe(url, {"BR_PW": secret}) or ("", "")
    assert kind == "malformed"
    assert why == ("once BR_PW is expanded, the URL no longer names the same store (a `/`, `#` or `?` in the "
                   "value ends the URL's credential early), so ccache could not use it")
    assert not leaks(why, (secret,), 4)


def test_a_secret_that_fits_its_url_is_not_malformed() -> None:
    assert sp.malformed("redis://ccache-writer:${BR_PW}@127.0.0.1:16379", {"BR_PW": "a%2Fb-c.d_e~f"}) is None
    assert sp.malformed("http://${BR_USER}:${BR_PW}@cache:8080/ccache", {"BR_USER": "u", "BR_PW": "p"}) is None


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        pytest.skip("needs redis-server (apt-get install redis-server)")
    server = RedisServer(tmp_path / "redis", users=ACL.format(reader=READER, writer=WRITER)).start()
    try:
        yield server
    finally:
        server.stop()


def _policy(root: Path, store: RedisServer, reader: str | None, writer: str | None) -> Path:
    """A copy of the example's policy whose [compiler-cache] names `store` with these credentials."""
    project = root / "project"
    if not project.exists():
        shutil.copytree(REPO / "examples" / "cuda-extension", project,
                        ignore=shutil.ignore_patterns("build", "dist", "__pycache__"))
    policy = project / "buildrows.toml"
    base = (REPO / "examples" / "cuda-extension" / "buildrows.toml").read_text(encoding="utf-8")
    table = f'\n[compiler-cache]\nremote = "redis://ccache-reader:${{{reader}}}@127.0.0.1:{store.port}"\n' if reader \
        else f'\n[compiler-cache]\nremote = "redis://127.0.0.1:{store.port}"\n'
    if writer:
        table += f'write-remote = "redis://ccache-writer:${{{writer}}}@127.0.0.1:{store.port}"\n'
    policy.write_text(base + table, encoding="utf-8")
    return policy


needs_ccache = pytest.mark.skipif(cc.find_ccache(dict(os.environ)) is None, reason=f"needs ccache ({cc.INSTALL_HINT})")

#: The overrides a job may have, as (name, extra environment).
OVERRIDES: list[tuple[str, dict[str, str]]] = [
    ("push", {"GITHUB_EVENT_NAME": "push", "GITHUB_REF": "refs/heads/main"}),
    ("pull_request", {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_REF": "refs/pull/7/merge"}),
    ("remote-off", {"GITHUB_EVENT_NAME": "push", "GITHUB_REF": "refs/heads/main", rc.REMOTE_VAR: "off"}),
    ("remote-url", {"GITHUB_EVENT_NAME": "push", "GITHUB_REF": "refs/heads/main", rc.REMOTE_VAR: "STORE"}),
    ("write-remote", {"GITHUB_EVENT_NAME": "push", "GITHUB_REF": "refs/heads/main",
                      rc.WRITE_REMOTE_VAR: "redis://ccache-writer:${BR_WRITER_PW}@127.0.0.1:PORT"}),
]


def _job(monkeypatch: pytest.MonkeyPatch, tmp: Path, store: RedisServer, extra: dict[str, str],
         secrets: dict[str, str]) -> tuple[Path, Path]:
    """A CI job's environment: its env files, its fresh local cache, its secrets and overrides."""
    tmp.mkdir(parents=True)
    for var in ("CUDACXX", "CUDA_HOME", "CMAKE_ARGS", rc.REMOTE_VAR, rc.WRITE_REMOTE_VAR):
        monkeypatch.delenv(var, raising=False)
    env_file, github_env = tmp / "build.env", tmp / "github.env"
    github_env.write_text("", encoding="utf-8")
    monkeypatch.setenv("BUILD_ENV_FILE", str(env_file))
    monkeypatch.setenv("GITHUB_ENV", str(github_env))
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp / "cache"))
    monkeypatch.setenv("CU_VERSION", "cpu")
    for k, v in {**secrets, **extra}.items():
        monkeypatch.setenv(k, v.replace("STORE", store.url).replace("PORT", str(store.port)))
    return env_file, github_env


@needs_ccache
@pytest.mark.parametrize(("name", "extra"), OVERRIDES, ids=[n for n, _ in OVERRIDES])
def test_the_hook_never_prints_a_secret_whatever_the_override(
        cli: Callable[..., Result], store: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        name: str, extra: dict[str, str]) -> None:
    """The writer's secret holds `/`: a trusted job warns once, naming the variable, and reads
    with the reader's credential (before: the store was lost and a prefix of the secret printed)."""
    policy = _policy(tmp_path, store, "BR_READER_PW", "BR_WRITER_PW")
    env_file, github_env = _job(monkeypatch, tmp_path / name, store, extra,
                                {"BR_READER_PW": READER, "BR_WRITER_PW": BROKEN_WRITER})
    r = cli("--config", str(policy), "hook", "--python", "3.11", "--platform", "linux-x86_64")
    assert r.code == 0, r.err
    assert not leaks(r.out + r.err)
    assert not leaks(github_env.read_text(encoding="utf-8") + env_file.read_text(encoding="utf-8"))
    assert not leaks_under(tmp_path / name)  # and every other file the job wrote: ccache's configuration
    if name in ("push", "write-remote"):
        assert r.err.count("warning:") == 1, r.err
        assert ("cannot be used: once BR_WRITER_PW is expanded, the URL no longer names the same store (a `/`, `#` or "
                "`?` in the value ends the URL's credential early), so ccache could not use it: this job reads "
                "the store with the reader's credential and writes nothing") in r.err
        assert "fix: give the credential a value without `/`, `#`, `?`, `@` or `%`" in r.err
        storage = read_back_bash(env_file, ["CCACHE_REMOTE_STORAGE"])["CCACHE_REMOTE_STORAGE"].decode()
        assert storage.startswith(f"redis://ccache-reader:${{BR_READER_PW}}@127.0.0.1:{store.port}|read-only|")
    elif name == "remote-off":
        assert "CCACHE_REMOTE_STORAGE" not in env_file.read_text(encoding="utf-8")


@needs_ccache
def test_a_readers_secret_that_breaks_its_url_is_one_warning_and_a_local_build(
        cli: Callable[..., Result], store: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    policy = _policy(tmp_path, store, "BR_READER_PW", None)
    env_file, _ = _job(monkeypatch, tmp_path / "job", store, dict(OVERRIDES[1][1]), {"BR_READER_PW": BROKEN_READER})
    r = cli("--config", str(policy), "hook", "--python", "3.11", "--platform", "linux-x86_64")
    assert r.code == 0, r.err
    assert r.err.count("warning:") == 1, r.err
    assert (f"the remote compiler cache redis://***@127.0.0.1:{store.port} cannot be used: once BR_READER_PW is "
            "expanded, the URL no longer names the same store") in r.err
    assert not leaks(r.out + r.err) and not leaks_under(tmp_path / "job")
    assert "CCACHE_REMOTE_STORAGE" not in env_file.read_text(encoding="utf-8")


# --- the build's own environment ---------------------------------------------------------------

CMAKELISTS = """cmake_minimum_required(VERSION 3.25)
project(leaky LANGUAGES NONE)
# What a project's build may do with its environment: print it, keep it in a file.
execute_process(COMMAND env)
execute_process(COMMAND env OUTPUT_FILE ${CMAKE_BINARY_DIR}/build-env.txt)
install(FILES leaky.py DESTINATION .)
"""


def _leaky_project(root: Path, store: RedisServer) -> tuple[Path, Path]:
    """A scikit-build-core project whose CMakeLists.txt runs `env`; its policy and env dump path."""
    project = root / "leaky"
    project.mkdir(parents=True)
    (project / "CMakeLists.txt").write_text(CMAKELISTS, encoding="utf-8")
    (project / "leaky.py").write_text("", encoding="utf-8")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["scikit-build-core"]\nbuild-backend = "scikit_build_core.build"\n'
        '[project]\nname = "leaky"\nversion = "0.1.0"\n', encoding="utf-8")
    policy = project / "buildrows.toml"
    policy.write_text(
        f'[project]\nname = "leaky"\ndriver = "scikit-build-core"\n[python]\nversions = ["{PY}"]\n'
        '[cuda]\ntrains = ["13.0"]\n[platforms.linux-x86_64]\ntrains = ["13.0"]\ncpu = true\n'
        '[[platforms.linux-x86_64.cuda]]\ntrains = ["13.0"]\narchs = "9.0"\n'
        f'[compiler-cache]\nremote = "redis://ccache-reader:${{BR_READER_PW}}@127.0.0.1:{store.port}"\n'
        f'write-remote = "redis://ccache-writer:${{BR_WRITER_PW}}@127.0.0.1:{store.port}"\n', encoding="utf-8")
    return policy, project / "build" / f"skbuild-{CPU}" / "build-env.txt"


BUILDS: list[tuple[str, dict[str, str], tuple[str, ...]]] = [
    # (name, environment, arguments): the control first, then every job that does not write
    ("push", dict(OVERRIDES[0][1]), ()),
    ("pull_request", dict(OVERRIDES[1][1]), ()),
    ("remote-off", dict(OVERRIDES[2][1]), ()),
    ("remote-url", dict(OVERRIDES[3][1]), ()),
    ("no-compiler-cache", dict(OVERRIDES[0][1]), ("--no-compiler-cache",)),
    ("broken-writer", {**OVERRIDES[0][1], "BR_WRITER_PW": BROKEN_WRITER}, ()),
]


@pytest.mark.integration
@needs_ccache
@pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("ninja") is None, reason="needs cmake and ninja")
def test_the_writers_secret_never_reaches_the_build_of_a_job_that_does_not_write(
        cli: Callable[..., Result], store: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, extra, args in BUILDS:
        root = tmp_path / name
        policy, dump = _leaky_project(root, store)
        secrets = {"BR_READER_PW": READER, "BR_WRITER_PW": WRITER}
        _job(monkeypatch, root / "job", store, {**secrets, **extra}, {})
        r = cli("--config", str(policy), "build", CPU, "--no-check", "--wheel-dir", str(root / "dist"), *args)
        assert r.code == 0, r.out + r.err
        seen = dump.read_text(encoding="utf-8")
        assert "BR_READER_PW" in seen or name in ("remote-off", "no-compiler-cache", "remote-url"), seen
        writer = extra.get("BR_WRITER_PW", WRITER)
        if name == "push":  # the control: a job that writes has it, and the grep finds it
            assert f"BR_WRITER_PW={WRITER}" in seen
            assert leaks(seen, (WRITER,))
            continue
        assert "BR_WRITER_PW" not in seen, f"{name}: {seen}"
        assert not leaks(r.out + r.err, (writer,)), name
        assert not leaks_under(root, (writer,)), name  # logs, the build tree, the wheel, env files, the cache
        assert not leaks(r.out + r.err, (BROKEN_WRITER,) if name == "broken-writer" else ()), name

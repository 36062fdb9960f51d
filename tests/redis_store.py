"""A real Redis server for the remote compiler cache tests: Debian's redis-server, started on a
free loopback port in a temporary directory (no persistence) and stopped after. `.ci/run` installs
it; without it the tests that need it are skipped, saying so."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One redis-server process; `url` is what a policy or BUILDROWS_CACHE_REMOTE names."""

    #: The tests' own administrator when the server has ACL users (DBSIZE, KEYS, CONFIG SET).
    ADMIN = ("buildrows-admin", "admin-secret-for-tests")

    def __init__(self, directory: Path, port: int | None = None, password: str | None = None,
                 users: str | None = None) -> None:
        """`users`: ACL lines (`user NAME on >PASSWORD ~KEYS +COMMANDS`, `user default ...`) for an
        ACL file; the server then also has ADMIN, which `command` authenticates as."""
        self.directory = directory
        self.port = port or free_port()
        self.password = password
        self.users = users
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> RedisServer:
        exe = shutil.which("redis-server")
        assert exe is not None
        self.directory.mkdir(parents=True, exist_ok=True)
        argv = [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(self.directory)]
        if self.password:
            argv += ["--requirepass", self.password]
        if self.users is not None:
            acl = self.directory / "users.acl"
            acl.write_text(self.users.strip() + f"\nuser {self.ADMIN[0]} on >{self.ADMIN[1]} ~* &* +@all\n",
                           encoding="utf-8")
            argv += ["--aclfile", str(acl)]
        log = (self.directory / "redis.log").open("ab")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                self.command("PING")
                return self
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"redis-server exited: {(self.directory / 'redis.log').read_text()}") from None
                time.sleep(0.05)
        raise RuntimeError("redis-server did not answer within 10 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def command(self, *args: str) -> bytes:
        """One command in Redis' protocol (RESP); the raw reply line. A password goes first."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            f = s.makefile("rb")
            auth = [("AUTH", *self.ADMIN)] if self.users is not None else [("AUTH", self.password)] if self.password else []
            sends = [*auth, args]
            for cmd in sends:
                s.sendall(f"*{len(cmd)}\r\n".encode() + b"".join(
                    f"${len(a.encode())}\r\n{a}\r\n".encode() for a in cmd))
                reply = f.readline()
            return reply.rstrip(b"\r\n")

    def contents(self) -> dict[str, bytes]:
        """Every key and its value (the tests' stores hold a few objects)."""
        out: dict[str, bytes] = {}
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            f = s.makefile("rb")

            def send(*cmd: str) -> bytes:
                s.sendall(f"*{len(cmd)}\r\n".encode() + b"".join(
                    f"${len(a.encode())}\r\n{a}\r\n".encode() for a in cmd))
                return f.readline().rstrip(b"\r\n")
            if self.users is not None:
                send("AUTH", *self.ADMIN)
            elif self.password:
                send("AUTH", self.password)
            header = send("KEYS", "*")
            keys = []
            for _ in range(int(header[1:])):
                n = int(f.readline()[1:])
                keys.append(f.read(n + 2)[:-2].decode())
            for key in keys:
                n = int(send("GET", key)[1:])
                out[key] = f.read(n + 2)[:-2]
        return out

    def dbsize(self) -> int:
        reply = self.command("DBSIZE")
        assert reply.startswith(b":"), reply
        return int(reply[1:])


@pytest.fixture
def redis_store(tmp_path: Path) -> Iterator[RedisServer]:
    """A fresh, empty Redis server for one test, stopped after it."""
    if shutil.which("redis-server") is None:
        pytest.skip("needs redis-server (apt-get install redis-server; .ci/run installs it as root)")
    server = RedisServer(tmp_path / "redis").start()
    try:
        yield server
    finally:
        server.stop()

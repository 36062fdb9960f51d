"""A store that misbehaves, on loopback: a real socket server in a process of its own, answering
whatever it is sent the way a broken or hostile store would (issue 37, items 3 and 4).

    python tests/hostile_store.py MODE      # prints the port, then serves until killed

Modes: `huge-bulk` (`$99999999999\\r\\n`: a Redis bulk reply announcing 100 GB), `drip` (one byte
every 1.5 s, never a newline), `flood` (400 MB without a newline), `garbage` (bytes no store
sends, control characters included), `silent` (reads, never answers), `close` (closes at once),
`echo` (refuses with an error that repeats what it was sent: the credential, if it was sent one).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MODES = ("huge-bulk", "drip", "flood", "garbage", "silent", "close", "echo")
FLOOD_MB = 400


def _serve(conn: socket.socket, mode: str) -> None:
    with conn:
        try:
            if mode == "close":
                return
            got = conn.recv(65536)
            if mode == "echo":
                conn.sendall(b"-ERR you sent " + got.replace(b"\r\n", b" ") + b"\r\n")
            elif mode == "huge-bulk":
                conn.sendall(b"$99999999999\r\n")
            elif mode == "garbage":
                conn.sendall(b"\x00\xff\xfe\x1b[31mNOT A STORE\x07\r\n")
            elif mode == "drip":
                conn.sendall(b"+")
                while True:
                    time.sleep(1.5)
                    conn.sendall(b"O")
            elif mode == "flood":
                chunk = b"A" * (1 << 20)
                for _ in range(FLOOD_MB):
                    conn.sendall(chunk)
            while conn.recv(65536):  # silent, and the others once done: keep the connection open
                pass
        except OSError:
            pass


def main(mode: str) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    print(server.getsockname()[1], flush=True)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=_serve, args=(conn, mode), daemon=True).start()


@contextmanager
def hostile_store(mode: str) -> Iterator[int]:
    """The port of a store misbehaving as `mode`, for the body."""
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), mode], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main(sys.argv[1])

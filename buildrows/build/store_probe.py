"""The one exchange with a remote compiler-cache store before a build, bounded and secret-safe.

A store is a server someone else runs, and it can answer anything: a Redis reply announcing
100 GB (`$99999999999`), one byte every second and a half, 400 MB without a newline, garbage.
The probe meets all of them with the same result, one warning and a build without the store:

- **one deadline** (``DEADLINE_S``) for the whole exchange, connect included: a slow store cannot
  stretch it, however it drips its bytes;
- **a size bound** (``MAX_LINE`` bytes) on every answer: the probe reads one reply line per
  command and never the value a reply announces;
- **every answer validated** against what the protocol allows at that point (AUTH: ``+OK`` or an
  error; GET: a null or a bulk length within Redis' own 512 MB; HTTP: a status line).

The secret: a URL names its credential as ``${VAR}``. It is parsed with the placeholder in it, and
the value is substituted only into the user and password the probe sends, so no parser message can
carry a part of it. The expanded URL (what ccache will parse) must name the same store; a secret
that breaks it (a ``/``, ``#`` or ``?`` in a password) is reported by the variable's name.
Whatever a store answers is shown with every secret's value masked, truncated, printable only.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Mapping
from typing import Literal
from urllib.parse import SplitResult, unquote, urlsplit

#: Seconds for the whole probe: connect, AUTH and GET (or the HTTP request), whatever the store does.
DEADLINE_S = 2.0
#: Bytes of one answer line (a Redis reply line, an HTTP status line); longer is not a store.
MAX_LINE = 1024
#: Redis' own limit on a value (proto-max-bulk-len): a larger announced length is not Redis.
MAX_BULK = 512 * 1024 * 1024
#: Characters of a store's answer shown in a warning.
SHOWN = 120

ProbeKind = Literal["unreachable", "refused", "malformed"]
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


class _Misbehaves(Exception):
    """The store answered outside its protocol, too much, or too late."""


def expand(text: str, env: Mapping[str, str]) -> str:
    """`text` with its ${VAR} expanded from `env` (`$$` is a literal `$`) - never shown."""
    return _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), ""), text.replace("$$", "\0")).replace("\0", "$")


def secrets(url: str, env: Mapping[str, str]) -> tuple[str, ...]:
    """The values of the variables the URL names, longest first (what a message must never show)."""
    names = {m.group(1) or m.group(2) for m in _VAR.finditer(url.replace("$$", ""))}
    return tuple(sorted({env[n] for n in names if env.get(n)}, key=len, reverse=True))


def scrub(text: str, hidden: tuple[str, ...]) -> str:
    """A store's answer as a warning may show it: each secret masked, printable characters only,
    at most SHOWN characters."""
    for value in hidden:
        text = text.replace(value, "***")
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= SHOWN else text[:SHOWN] + "..."


def _store(parts: SplitResult, env: Mapping[str, str]) -> tuple[str, str, int | None, str]:
    """(scheme, host, port, path) of a parsed URL, each part expanded on its own."""
    try:
        port = parts.port
    except ValueError:
        port = -1  # not a number: matches nothing
    return parts.scheme, expand(parts.hostname or "", env).lower(), port, expand(parts.path, env)


def malformed(url: str, env: Mapping[str, str]) -> str | None:
    """Why the URL, once its variables are expanded as ccache expands them, no longer names the
    store it names with them as placeholders (a secret holding `/`, `#` or `?`), or None. The
    answer names the variables, never their values; no parser message is passed on."""
    placeholder = urlsplit(url)
    want = _store(placeholder, env)
    try:
        got: tuple[str, str, int | None, str] | None = _store(urlsplit(expand(url, env)), env)
    except ValueError:
        got = None
    if got == want:
        return None
    userinfo = placeholder.netloc.rsplit("@", 1)[0] if "@" in placeholder.netloc else ""
    names = [m.group(1) or m.group(2) for m in _VAR.finditer(userinfo)] or \
            [m.group(1) or m.group(2) for m in _VAR.finditer(url)]
    which = ", ".join(dict.fromkeys(names)) or "its variables"
    return (f"once {which} {'is' if len(names) == 1 else 'are'} expanded, the URL no longer names the same store "
            "(a `/`, `#` or `?` in the value ends the URL's credential early), so ccache could not use it")


def probe(url: str, env: Mapping[str, str], deadline_s: float = DEADLINE_S) -> tuple[ProbeKind, str] | None:
    """One exchange with the store before the build, as ccache would start one: connect, present
    the URL's credential and read one key that is not there, within `deadline_s` in all. None when
    that works; else ("malformed", why) for a secret that breaks the URL, ("refused", what the store
    answered: a wrong password, an ACL without GET, a 401), or ("unreachable", why: no connection,
    no answer in time, an answer no store gives). No text returned holds a secret's value."""
    problem = malformed(url, env)
    if problem is not None:
        return "malformed", problem
    hidden = secrets(url, env)
    parts = urlsplit(url)
    deadline = time.monotonic() + deadline_s
    try:
        sock = _connect(parts, env, deadline_s)
    except (OSError, ValueError) as e:
        return "unreachable", scrub(str(e) or type(e).__name__, hidden)
    try:
        with sock:
            user = unquote(expand(parts.username or "", env))
            password = unquote(expand(parts.password or "", env))
            answers = _Answers(sock, deadline, deadline_s)
            if parts.scheme.startswith("redis"):
                answer = _redis(sock, answers, user, password)
            else:
                answer = _http(sock, answers, parts, user, password, env)
    except TimeoutError:
        return "unreachable", f"no complete answer within {deadline_s:g} s"
    except _Misbehaves as e:
        return "unreachable", scrub(str(e), hidden)
    except (OSError, ValueError, UnicodeError) as e:
        return "unreachable", f"no answer to the probe ({scrub(str(e) or type(e).__name__, hidden)})"
    return None if answer is None else ("refused", scrub(answer, hidden))


def _connect(parts: SplitResult, env: Mapping[str, str], timeout: float) -> socket.socket:
    if parts.scheme == "redis+unix":
        if not hasattr(socket, "AF_UNIX"):
            raise OSError("this platform has no Unix sockets")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(expand(parts.path, env))
        except OSError:
            sock.close()
            raise
        return sock
    port = parts.port or (6379 if parts.scheme == "redis" else 80)
    return socket.create_connection((expand(parts.hostname or "", env), port), timeout=timeout)


class _Answers:
    """The store's answer lines, each at most MAX_LINE bytes, all before the one deadline."""

    def __init__(self, sock: socket.socket, deadline: float, deadline_s: float) -> None:
        self.sock, self.deadline, self.deadline_s = sock, deadline, deadline_s
        self.buffer = b""

    def line(self, what: str) -> bytes:
        while True:
            end = self.buffer.find(b"\n")
            if end >= 0:
                line, self.buffer = self.buffer[:end].rstrip(b"\r"), self.buffer[end + 1:]
                if len(line) > MAX_LINE:
                    break
                return line
            if len(self.buffer) > MAX_LINE + 1:  # its \r aside
                break
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self.sock.settimeout(left)
            chunk = self.sock.recv(4096)  # socket.timeout is TimeoutError
            if not chunk:
                raise _Misbehaves(f"the store closed the connection before answering {what}")
            self.buffer += chunk
        raise _Misbehaves(f"the store's answer to {what} is a line longer than {MAX_LINE} bytes: not a store's answer")


def _send(sock: socket.socket, *args: str) -> None:
    sock.sendall(f"*{len(args)}\r\n".encode() + b"".join(
        b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in args))


def _redis(sock: socket.socket, answers: _Answers, user: str, password: str) -> str | None:
    """AUTH (when the URL has a credential) and a GET, as ccache's Redis backend sends them; the
    store's error reply, or None. A reply Redis cannot give at that point is a misbehaving store."""
    if password or user:
        _send(sock, *(("AUTH", user, password) if password and user else ("AUTH", password or user)))
        reply = answers.line("AUTH")
        if reply.startswith(b"-"):
            return f"AUTH: {reply[1:].decode(errors='replace')}"
        if reply != b"+OK":
            raise _Misbehaves(f"the store answered AUTH with {_shown(reply)}, which Redis never does: not a Redis store")
    _send(sock, "GET", "ccache:buildrows-probe")
    reply = answers.line("GET")
    if reply.startswith(b"-"):
        return f"GET: {reply[1:].decode(errors='replace')}"
    if reply in (b"$-1", b"_"):  # no such key (RESP2, RESP3)
        return None
    if re.fullmatch(rb"\$\d{1,10}", reply) and int(reply[1:]) <= MAX_BULK:
        return None  # a value is there; the probe does not read it
    raise _Misbehaves(f"the store answered GET with {_shown(reply)}, which Redis never does"
                      + (f" (a value over Redis' {MAX_BULK // 2**20} MB)" if re.fullmatch(rb"\$\d+", reply) else "")
                      + ": not a Redis store")


def _http(sock: socket.socket, answers: _Answers, parts: SplitResult, user: str, password: str,
          env: Mapping[str, str]) -> str | None:
    """A GET of an object that is not there, with the URL's credential (basic auth, as ccache's
    HTTP backend sends it); the status when the server refuses it (401, 403), or None."""
    import base64

    path = expand(parts.path, env).rstrip("/") + "/buildrows-probe"
    host = expand(parts.hostname or "", env)
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}", "User-Agent: buildrows", "Connection: close"]
    if user or password:
        credential = f"{user}:{password}" if parts.password is not None else user
        lines.append("Authorization: Basic " + base64.b64encode(credential.encode()).decode())
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    status = answers.line("the HTTP request")
    m = re.fullmatch(rb"HTTP/\d\.\d (\d{3})(?: (.*))?", status)
    if m is None:
        raise _Misbehaves(f"the store answered {_shown(status)}: not an HTTP status line")
    if m.group(1) in (b"401", b"403"):
        return f"GET {path}: {status.split(b' ', 1)[1].decode(errors='replace')}"
    return None


def _shown(reply: bytes) -> str:
    return repr(reply[:60].decode("latin-1")) + ("..." if len(reply) > 60 else "")


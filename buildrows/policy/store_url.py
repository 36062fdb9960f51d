"""A compiler-cache store's URL as the policy writes it, checked at load: a scheme ccache serves, a
host, and no credential written into it (a password or token only as ``${VAR}``); whether two URLs
name one store; and the URL masked for a log line. Pure text: `buildrows.build.remote_cache`
decides what a job does with the store, this only reads the URL."""

from __future__ import annotations

import re
from functools import cache
from typing import Any
from urllib.parse import unquote, urlsplit

#: The schemes ccache's built-in backends serve (HTTPS is not supported by its HTTP backend).
SCHEMES = ("redis", "redis+unix", "http")


@cache
def _var() -> re.Pattern[str]:
    return re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def variables(url: str) -> tuple[str, ...]:
    """The environment variables a URL names (`$VAR` or `${VAR}`; `$$` is a literal `$`)."""
    out: list[str] = []
    for m in _var().finditer(url.replace("$$", "")):
        name = m.group(1) or m.group(2)
        if name not in out:
            out.append(name)
    return tuple(out)


def masked(url: str) -> str:
    """The URL as a log line may show it: any user or password replaced by ***."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return parts._replace(netloc="***@" + host).geturl()


def url_problem(url: str) -> str | None:
    """What is wrong with a store URL, or None: a scheme ccache serves, a host, and no credential
    written into it (a password or token must be `${VAR}`, read from the environment)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in SCHEMES:
        why = " (ccache's HTTP backend does not do HTTPS: put a TLS proxy on the runner's side)" if parts.scheme == "https" else ""
        return f"{url!r}: the scheme must be one of {', '.join(SCHEMES)}{why}"
    if any(c.isspace() for c in url.strip()) or "|" in url:
        return f"{url!r}: a store URL has no spaces or `|` (buildrows adds ccache's attributes itself)"
    if parts.scheme == "redis+unix":
        if not parts.path:
            return f"{url!r}: redis+unix needs a socket path, e.g. redis+unix:/run/redis.sock"
    elif not parts.hostname:
        return f"{url!r}: the URL names no host"
    if "@" in parts.netloc:
        userinfo = parts.netloc.rsplit("@", 1)[0]
        secret = userinfo.split(":", 1)[1] if ":" in userinfo else userinfo
        if secret and not _var().fullmatch(unquote(secret)):
            return (f"{masked(url)!r}: the URL carries a credential; a password or token must come from the "
                    "environment as ${VAR}, never from a file")
    return None


def same_store(a: str, b: str) -> bool:
    """Whether two store URLs name one store (scheme, host, port and path; credentials aside)."""
    pa, pb = urlsplit(a.strip()), urlsplit(b.strip())

    def port(p: Any) -> int | None:
        try:
            return int(p.port or {"redis": 6379, "http": 80}.get(p.scheme, 0)) or None
        except ValueError:
            return None
    return (pa.scheme, (pa.hostname or "").lower(), port(pa), pa.path.rstrip("/")) == \
        (pb.scheme, (pb.hostname or "").lower(), port(pb), pb.path.rstrip("/"))

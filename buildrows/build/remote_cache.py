"""The compiler cache past one machine (SPEC §11): ccache's remote storage (Redis or HTTP), and who
may write to it.

A shared cache is a way into release wheels: an object a pull request's job put there would be
linked into the next release. So the store is read-only unless the job is a trusted one - a push
(or a manual or scheduled run) of a ref the policy lists in ``write-refs`` - and a policy can name
refs (release tags) that build hermetically, without reading the store at all. Pull requests,
above all from forks, never write, whatever their ref says (``pull_request_target`` runs with
the base branch as its ref).

Credentials come only from the environment: the URL names them as ``${VAR}``, which stays literal
in everything buildrows writes (the env files, its log lines); ccache expands it at compile time.
An unset variable would make every compile fail (ccache refuses the whole configuration), so a
store whose variables are not all set is left out with a warning. ``ccache --show-config`` prints
the expanded secret: buildrows never runs it.

An unreachable store costs each compile its timeout (ccache remembers a failed store only within
one process), so the store is probed once before the build, and the connect and operation
timeouts are short; a store that goes away during the build shows as remote errors in the row's
report, and the compiles run locally. Never a failure.

This module decides; `buildrows.build.orchestrate` (for `build`) and `buildrows.ci.hook` (for
test-infra's build step) use the decision.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

from buildrows.policy.model import CompilerCacheSettings
from buildrows.ui import UI

#: The schemes ccache's built-in backends serve (HTTPS is not supported by its HTTP backend).
SCHEMES = ("redis", "redis+unix", "http")
#: Overrides the policy's store (a URL, or "off" for none), for a developer or another CI.
REMOTE_VAR = "BUILDROWS_CACHE_REMOTE"
#: GitHub events whose jobs run a ref's own code as the repository's maintainers pushed it. Every
#: other event (pull_request, pull_request_target, issue_comment, ...) only reads.
TRUSTED_EVENTS = ("push", "workflow_dispatch", "schedule", "release")
#: Short timeouts: ccache's default operation timeout (10 s) would be paid by every compile of a
#: build whose store stopped answering.
CONNECT_TIMEOUT_MS = 500
OPERATION_TIMEOUT_MS = 3000
PROBE_TIMEOUT_S = 2.0

Mode = Literal["read-write", "read-only", "off"]
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def variables(url: str) -> tuple[str, ...]:
    """The environment variables a URL names (`$VAR` or `${VAR}`; `$$` is a literal `$`)."""
    out: list[str] = []
    for m in _VAR.finditer(url.replace("$$", "")):
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
        if secret and not _VAR.fullmatch(unquote(secret)):
            return (f"{masked(url)!r}: the URL carries a credential; a password or token must come from the "
                    "environment as ${VAR}, never from a file")
    return None


@dataclass(frozen=True)
class Remote:
    """The decision for this job: the store (as ccache is to read it), the mode and why."""

    url: str | None
    mode: Mode
    reason: str

    @property
    def storage(self) -> str | None:
        """ccache's remote_storage value (credentials still `${VAR}`), or None when off."""
        if self.url is None or self.mode == "off":
            return None
        attrs = [f"connect-timeout={CONNECT_TIMEOUT_MS}", f"operation-timeout={OPERATION_TIMEOUT_MS}"]
        if self.mode == "read-only":
            attrs.insert(0, "read-only")
        # The `|` form: ccache 4.14 reads it as its `prop @attr` syntax, and older 4.x read it too.
        return "|".join([self.url, *attrs])

    def describe(self) -> str:
        if self.url is None:
            return f"no remote store ({self.reason})"
        return f"remote store {masked(self.url)}: {self.mode} ({self.reason})"


def _matches(ref: str, globs: Sequence[str]) -> str | None:
    return next((g for g in globs if fnmatch.fnmatchcase(ref, g)), None)


def decide(settings: CompilerCacheSettings, env: Mapping[str, str]) -> Remote:
    """The store and mode for a job in `env` (no probing; see `usable`). Raises ValueError with the
    problem when BUILDROWS_CACHE_REMOTE holds a URL that cannot be used."""
    url, whence = settings.url, settings.source
    override = env.get(REMOTE_VAR, "").strip()
    if override.lower() in ("off", "none"):
        return Remote(None, "off", f"{REMOTE_VAR}={override}")
    if override:
        problem = url_problem(override)
        if problem is not None:
            raise ValueError(f"{REMOTE_VAR}: {problem}")
        url, whence = override, REMOTE_VAR
    if not url:
        return Remote(None, "off", "none configured")
    ref, event = env.get("GITHUB_REF", ""), env.get("GITHUB_EVENT_NAME", "")
    hermetic = _matches(ref, settings.hermetic_refs) if ref else None
    if hermetic is not None:
        return Remote(None, "off", f"hermetic: {ref} matches hermetic-refs {hermetic!r} in {settings.source or 'the policy'}")
    if not event:
        return Remote(url, "read-only", f"from {whence}; not a CI job of a trusted ref (GITHUB_EVENT_NAME is unset)")
    if event not in TRUSTED_EVENTS:
        return Remote(url, "read-only", f"from {whence}; a {event} job never writes")
    allowed = _matches(ref, settings.write_refs)
    if allowed is None:
        return Remote(url, "read-only", f"from {whence}; {ref or 'no ref'} is not in write-refs "
                                         f"({', '.join(settings.write_refs) or 'none'})")
    return Remote(url, "read-write", f"from {whence}; a {event} of {ref}, which write-refs allows ({allowed!r})")


def unset_variables(url: str, env: Mapping[str, str]) -> tuple[str, ...]:
    """The variables the URL names that `env` lacks (ccache would fail every compile)."""
    return tuple(v for v in variables(url) if v not in env)


def probe(url: str, env: Mapping[str, str], timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """One connection to the store before the build: None when it answers, else why not. Only
    connects (credentials are ccache's business; a wrong password shows as remote errors)."""
    import socket  # here: the hook and `env` import this module, and never probe

    parts = urlsplit(_expand(url, env))
    try:
        if parts.scheme == "redis+unix":
            if not hasattr(socket, "AF_UNIX"):
                return "this platform has no Unix sockets"
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(timeout)
                s.connect(parts.path)
            return None
        port = parts.port or (6379 if parts.scheme == "redis" else 80)
        with socket.create_connection((parts.hostname or "", port), timeout=timeout):
            return None
    except (OSError, ValueError) as e:
        return str(e) or type(e).__name__


def _expand(url: str, env: Mapping[str, str]) -> str:
    """The URL with its variables expanded - for the probe's own connection only, never shown."""
    return _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), ""), url.replace("$$", "\0")).replace("\0", "$")


def usable(remote: Remote, env: Mapping[str, str]) -> tuple[Remote, str | None]:
    """The decision after checking what the job has: every variable the URL names is set, and the
    store answers. Returns the remote to use (off when not) and a warning to show, if any."""
    if remote.url is None or remote.mode == "off":
        return remote, None
    missing = unset_variables(remote.url, env)
    if missing:
        names = ", ".join(missing)
        return (Remote(None, "off", f"{names} unset"),
                f"the remote compiler cache {masked(remote.url)} names {names}, which this job's environment does not "
                f"set: building without it (ccache would fail every compile)\n    fix: export {missing[0]} "
                "(a CI secret), or leave the credential out of the URL")
    problem = probe(remote.url, env)
    if problem is not None:
        return (Remote(None, "off", "unreachable"),
                f"the remote compiler cache {masked(remote.url)} does not answer ({problem}): building with the "
                f"local cache only\n    fix: check the store is running and reachable from this machine, or "
                f"export {REMOTE_VAR}=off")
    return remote, None


def resolve(settings: CompilerCacheSettings, env: Mapping[str, str], ui: UI) -> Remote | None:
    """The remote compiler cache for this job: decided from the policy, BUILDROWS_CACHE_REMOTE and
    the job's ref and event, then checked (its variables set, the store answering) once. A store
    that cannot be used is a warning and a local build, never a failure; None when none is set."""
    from buildrows.build.compiler_cache import without_ccache_settings
    from buildrows.errors import BadInput

    try:
        remote = decide(settings, env)
    except ValueError as e:
        raise BadInput(f"{e}\n    fix: export {REMOTE_VAR}=redis://HOST:6379 (credentials as ${{VAR}}), "
                       "or =off") from e
    if remote.url is None:
        if remote.reason != "none configured":
            ui.info(f"compiler cache: {remote.describe()}")
        return None
    # The build runs without CCACHE_* variables, so a credential must not be one of them.
    remote, warning = usable(remote, without_ccache_settings(env))
    if warning is not None:
        ui.warn(warning)
        return None
    ui.info(f"compiler cache: {remote.describe()}")
    return remote

"""The compiler cache past one machine (SPEC §11): ccache's remote storage (Redis or HTTP), and who
may write to it.

A shared cache is a way into release wheels: an object a pull request's job put there would be
linked into the next release. So the store is read-only unless the job is a trusted one - a push
(or a manual or scheduled run) of a ref the policy lists in ``write-refs`` - and a policy can name
refs (release tags) that build hermetically, without reading the store at all. Pull requests,
above all from forks, never write, whatever their ref says (``pull_request_target`` runs with
the base branch as its ref).

A client setting cannot enforce that: a pull request from a branch of the same repository runs its
own copy of the workflow and could drop ``read-only``. So the policy names two credentials for one
store: ``remote`` (a reader, or none where the store allows anonymous reads) for every job, and
``write-remote`` (the writer) for trusted jobs only. The store refuses a reader's write (Redis ACLs,
a WebDAV server's auth on PUT); only a trusted job is given the writer, and its secret lives where
only trusted refs reach (a protected GitHub environment). ``read-only`` stays in the client's
setting as well, so a reader's job does not even try.

Credentials come only from the environment: the URL names them as ``${VAR}``, which stays literal
in everything buildrows writes (the env files, its log lines); ccache expands it at compile time.
An unset variable would make every compile fail (ccache refuses the whole configuration), so a
store whose variables are not all set is left out with a warning. ``ccache --show-config`` prints
the expanded secret: buildrows never runs it.

An unreachable store costs each compile its timeout (ccache remembers a failed store only within
one process), so the store is probed once before the build, and the connect and operation
timeouts are short; a store that goes away during the build shows as remote errors in the row's
report, and the compiles run locally. Never a failure.

This module decides; `buildrows.build.rows_plan` and `row_steps` (for `build`) and `buildrows.ci.hook` (for
test-infra's build step) use the decision.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from typing import Literal

from buildrows.frozen import Frozen, frozen_dataclass
from buildrows.policy.model import CompilerCacheSettings
from buildrows.policy.store_url import SCHEMES as SCHEMES
from buildrows.policy.store_url import masked as masked
from buildrows.policy.store_url import same_store as same_store
from buildrows.policy.store_url import url_problem as url_problem
from buildrows.policy.store_url import variables as variables
from buildrows.ui import UI

#: Overrides the policy's store (a URL, or "off" for none), for a developer or another CI.
REMOTE_VAR = "BUILDROWS_CACHE_REMOTE"
#: Overrides the policy's writer (the same store with the writer's credential).
WRITE_REMOTE_VAR = "BUILDROWS_CACHE_WRITE_REMOTE"
#: GitHub events whose jobs run a ref's own code as the repository's maintainers pushed it. Every
#: other event (pull_request, pull_request_target, issue_comment, ...) only reads.
TRUSTED_EVENTS = ("push", "workflow_dispatch", "schedule", "release")
#: Short timeouts: ccache's default operation timeout (10 s) would be paid by every compile of a
#: build whose store stopped answering.
CONNECT_TIMEOUT_MS = 500
OPERATION_TIMEOUT_MS = 3000
#: One deadline for the whole probe (connect, credential, read), whatever the store does.
PROBE_TIMEOUT_S = 2.0
#: A secret that breaks its URL: what to do (ccache expands ${VAR} before it parses the URL).
SECRET_FIX = ("give the credential a value without `/`, `#`, `?`, `@` or `%` (ccache puts it into the URL as it is), "
              "or export BUILDROWS_CACHE_REMOTE=off")

Mode = Literal["read-write", "read-only", "off"]
#: Which credential a job uses: the writer, the reader (write-remote is set), or the one URL of a
#: policy without write-remote ("shared").
Credential = Literal["writer", "reader", "shared"]


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Remote(Frozen):
    """The decision for this job: the store (as ccache is to read it), the mode and why."""

    url: str | None
    mode: Mode
    reason: str
    #: Which of the policy's credentials `url` carries.
    credential: Credential = "shared"
    #: The reader's URL, for a trusted job that turns out not to have the writer's secret.
    reader: str | None = None
    #: The writer's variables, which a job that does not write never passes to its build.
    withheld: tuple[str, ...] = ()

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


def _writer_override(url: str, env: Mapping[str, str]) -> str | None:
    """BUILDROWS_CACHE_WRITE_REMOTE, checked against the store it must share with `url`."""
    write = env.get(WRITE_REMOTE_VAR, "").strip()
    if not write:
        return None
    problem = url_problem(write)
    if problem is not None:
        raise ValueError(f"{WRITE_REMOTE_VAR}: {problem}")
    if not same_store(url, write):
        raise ValueError(f"{WRITE_REMOTE_VAR}: {masked(write)!r} names another store than {masked(url)!r}: trusted "
                         "jobs would write where no job reads")
    return write


def writer_variables(settings: CompilerCacheSettings, env: Mapping[str, str]) -> tuple[str, ...]:
    """The variables the writer's URLs name (the policy's write-remote, BUILDROWS_CACHE_WRITE_REMOTE):
    what the build of a job that does not write with them must not see."""
    found = variables(settings.write_url or "") + variables(env.get(WRITE_REMOTE_VAR, ""))
    return tuple(dict.fromkeys(found))


def without_writer(settings: CompilerCacheSettings, env: Mapping[str, str], why: str) -> Remote | None:
    """The decision of a build that uses no store at all (--no-compiler-cache, no ccache): none,
    and the writer's variables withheld from its build; None when there are none."""
    writers = writer_variables(settings, env)
    return Remote(None, "off", why, withheld=writers) if writers else None


def decide(settings: CompilerCacheSettings, env: Mapping[str, str]) -> Remote:
    """The store and mode for a job in `env` (no probing; see `usable`). Raises ValueError with the
    problem when BUILDROWS_CACHE_REMOTE or BUILDROWS_CACHE_WRITE_REMOTE holds a URL that cannot be used."""
    url, whence = settings.url, settings.source
    write_url, write_whence = settings.write_url, settings.write_source
    # Every writer's variable, whatever the overrides: a job that does not write with it never passes
    # it to its build (BUILDROWS_CACHE_REMOTE=off or =URL leave the policy's writer's secret set).
    writers = writer_variables(settings, env)
    override = env.get(REMOTE_VAR, "").strip()
    if override.lower() in ("off", "none"):
        return Remote(None, "off", f"{REMOTE_VAR}={override}", withheld=writers)
    if override:
        problem = url_problem(override)
        if problem is not None:
            raise ValueError(f"{REMOTE_VAR}: {problem}")
        # Another store: the policy's writer is not for it.
        url, whence, write_url, write_whence = override, REMOTE_VAR, None, ""
    if not url:
        return Remote(None, "off", "none configured", withheld=writers)
    written = _writer_override(url, env)
    if written is not None:
        write_url, write_whence = written, WRITE_REMOTE_VAR
    credential: Credential = "reader" if write_url else "shared"
    # The writer's variables that the reader does not also name: a job that does not write never
    # passes them on to its build.
    withheld = tuple(v for v in writers if v not in variables(url))
    ref, event = env.get("GITHUB_REF", ""), env.get("GITHUB_EVENT_NAME", "")
    hermetic = _matches(ref, settings.hermetic_refs) if ref else None
    if hermetic is not None:
        return Remote(None, "off", f"hermetic: {ref} matches hermetic-refs {hermetic!r} in {settings.source or 'the policy'}",
                      withheld=withheld)
    if not event:
        return Remote(url, "read-only", f"from {whence}; not a CI job of a trusted ref (GITHUB_EVENT_NAME is unset)",
                      credential, withheld=withheld)
    if event not in TRUSTED_EVENTS:
        return Remote(url, "read-only", f"from {whence}; a {event} job never writes", credential, withheld=withheld)
    allowed = _matches(ref, settings.write_refs)
    if allowed is None:
        return Remote(url, "read-only", f"from {whence}; {ref or 'no ref'} is not in write-refs "
                                         f"({', '.join(settings.write_refs) or 'none'})", credential, withheld=withheld)
    trusted = f"a {event} of {ref}, which write-refs allows ({allowed!r})"
    if write_url:
        return Remote(write_url, "read-write", f"from {write_whence}, the writer's credential; {trusted}", "writer",
                      reader=url)
    return Remote(url, "read-write", f"from {whence}; {trusted}", withheld=withheld)  # another store: not the writer's


def unset_variables(url: str, env: Mapping[str, str]) -> tuple[str, ...]:
    """The variables the URL names that `env` lacks (ccache would fail every compile)."""
    return tuple(v for v in variables(url) if v not in env)


ProbeKind = Literal["unreachable", "refused", "malformed"]


def probe(url: str, env: Mapping[str, str], timeout: float = PROBE_TIMEOUT_S) -> tuple[ProbeKind, str] | None:
    """One exchange with the store before the build, bounded in time and size, the secret never in
    what it returns (buildrows.build.store_probe)."""
    # Imported here: the hook and `env` import this module, and most jobs have no store to probe.
    from buildrows.build import store_probe

    return store_probe.probe(url, env, timeout)


def usable(remote: Remote, env: Mapping[str, str]) -> tuple[Remote, list[str]]:
    """The decision after checking what the job has: every variable the URL names is set, and the
    store answers and takes the credential. Returns the remote to use (off when not) and the
    warnings to show. A trusted job without the writer's secret reads with the reader's."""
    warnings: list[str] = []
    if remote.url is None or remote.mode == "off":
        return remote, warnings
    if remote.credential == "writer" and remote.reader is not None:
        missing = unset_variables(remote.url, env)
        refused = None if missing else probe(remote.url, env)
        if missing or (refused is not None and refused[0] in ("refused", "malformed")):
            if missing:
                why = f"names {', '.join(missing)}, which this job's environment does not set"
                fix = "give trusted jobs the writer's secret (a protected environment's secret; see the guide's compiler cache page)"
            elif refused is not None and refused[0] == "malformed":
                why, fix = f"cannot be used: {refused[1]}", SECRET_FIX
            else:
                why = f"was refused by the store ({refused[1] if refused else ''})"
                fix = "give trusted jobs the writer's secret (a protected environment's secret; see the guide's compiler cache page)"
            warnings.append(f"the writer's credential for the remote compiler cache {masked(remote.url)} {why}: this "
                            f"job reads the store with the reader's credential and writes nothing\n    fix: {fix}")
            writer_vars = tuple(v for v in variables(remote.url) if v not in variables(remote.reader))
            remote = Remote(remote.reader, "read-only", f"{remote.reason}; without the writer's secret", "reader",
                            withheld=writer_vars)
        elif refused is not None:
            return _off_unreachable(remote, refused[1], warnings)
        else:
            return remote, warnings
    url = remote.url
    assert url is not None  # the reader's URL, or the job's own
    missing = unset_variables(url, env)
    if missing:
        names = ", ".join(missing)
        warnings.append(f"the remote compiler cache {masked(url)} names {names}, which this job's environment "
                        f"does not set: building without it (ccache would fail every compile)\n    fix: export "
                        f"{missing[0]} (a CI secret), or leave the credential out of the URL where the store allows "
                        "anonymous reads")
        return Remote(None, "off", f"{names} unset", withheld=remote.withheld), warnings
    problem = probe(url, env)
    if problem is None:
        return remote, warnings
    kind, why = problem
    if kind == "malformed":
        warnings.append(f"the remote compiler cache {masked(url)} cannot be used: {why}: building with the local cache "
                        f"only\n    fix: {SECRET_FIX}")
        return Remote(None, "off", "its secret breaks the URL", withheld=remote.withheld), warnings
    if kind == "refused":
        warnings.append(f"the remote compiler cache {masked(url)} refused this job's credential ({why}): "
                        "building with the local cache only\n    fix: check the secret the URL names and the "
                        "store's rules for it (Redis: ACL GETUSER; HTTP: the server's auth), or export "
                        f"{REMOTE_VAR}=off")
        return Remote(None, "off", "refused", withheld=remote.withheld), warnings
    return _off_unreachable(remote, why, warnings)


def _off_unreachable(remote: Remote, why: str, warnings: list[str]) -> tuple[Remote, list[str]]:
    warnings.append(f"the remote compiler cache {masked(remote.url or '')} does not answer ({why}): building with the "
                    f"local cache only\n    fix: check the store is running and reachable from this machine, or "
                    f"export {REMOTE_VAR}=off")
    return Remote(None, "off", "unreachable", withheld=remote.withheld), warnings


def withhold(remote: Remote | None, env: Mapping[str, str]) -> dict[str, str]:
    """The environment a job's build runs in: without the writer's variables unless it writes with
    them (a pull request's build scripts never see the writer's secret, should the job have it)."""
    if remote is None or not remote.withheld:
        return dict(env)
    return {k: v for k, v in env.items() if k not in remote.withheld}


def resolve(settings: CompilerCacheSettings, env: Mapping[str, str], ui: UI) -> Remote | None:
    """The remote compiler cache for this job: decided from the policy, BUILDROWS_CACHE_REMOTE and
    the job's ref and event, then checked (its variables set, the store answering and taking the
    credential) once. A store that cannot be used is a warning and a local build, never a failure;
    None when none is set. A job that uses no store but must withhold the writer's variables gets a
    Remote whose url is None (its `storage` is None too)."""
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
        return remote if remote.withheld else None
    # The build runs without CCACHE_* variables, so a credential must not be one of them.
    remote, warnings = usable(remote, without_ccache_settings(env))
    for warning in warnings:
        ui.warn(warning)
    if remote.url is None:
        return remote if remote.withheld else None
    ui.info(f"compiler cache: {remote.describe()}")
    return remote

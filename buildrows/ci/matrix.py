"""The release gate: narrow the shared generator's matrix to what the policy publishes (SPEC §7).

Pure logic: text in, a `Narrowed` result or an error out. The command module does the I/O.

The generator is pytorch/test-infra's generate_binary_build_matrix; its rows look like
`{"python_version": "3.12", "gpu_arch_type": "cuda", "gpu_arch_version": "13.0",
"desired_cuda": "cu130", "container_image": ..., "build_name": ..., ...}`.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from buildrows.errors import BadInput, Problem, Refused, raise_problems
from buildrows.policy.model import Policy, Row
from buildrows.policy.trains import Train

_PY = re.compile(r"^3\.\d{1,2}t?\Z", re.ASCII)
_CU = re.compile(r"^cu(\d{1,2})(\d)\Z", re.ASCII)
# gpu_arch_version: "13.0", or "13.0-aarch64" on the aarch64 generator.
_GPU_VERSION = re.compile(r"^(\d{1,2})\.(\d)(?:-(aarch64))?\Z", re.ASCII)
# Accelerators buildrows does not manage; their rows are dropped (never kept, never errors).
_OTHER_ACCEL = re.compile(r"^(rocm\d+(\.\d+)*|xpu)\Z", re.ASCII)

# A broken generator can make every one of thousands of rows wrong; a log needs the first few.
_MAX_REPORTED = 20

# The label the shared generator honours to build the whole matrix on a pull request.
FULL_MATRIX_LABEL = "ciflow/binaries/all"


@dataclass(frozen=True)
class Offered:
    """One generator row, validated: where it was, what it asks for, and the row itself."""

    index: int
    label: str  # "row 3 (manywheel-py3_12-cuda13_0)" - how messages name it
    python: str
    train: Train | None  # None: a CPU row
    raw: Mapping[str, Any]

    @property
    def accel(self) -> str:
        return self.train.cu if self.train else "cpu"


@dataclass(frozen=True)
class Dropped:
    label: str
    reason: str


@dataclass(frozen=True)
class Narrowed:
    """The filter's result: the rows to build, and what was dropped and why."""

    include: list[dict[str, Any]]
    rows: list[Row]  # the policy row of each kept entry, in the same order
    dropped: list[Dropped] = field(default_factory=list)
    offered: int = 0

    def as_json(self) -> str:
        """One line: what `matrix=` in $GITHUB_OUTPUT and the build job's fromJSON read."""
        return json.dumps({"include": self.include}, separators=(",", ":"))


def parse_generator_output(text: str, source: str) -> list[object]:
    """The `include` list of the generator's JSON; BadInput on anything else."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadInput(
            f"{source}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}\n"
            "    fix: pass the generator's `matrix` output unchanged (a JSON object with an include list)"
        ) from None
    except (ValueError, RecursionError) as e:  # a number over int's digit limit; nesting past the recursion limit
        raise BadInput(
            f"{source}: JSON the filter will not read: {type(e).__name__}: {str(e)[:200]}\n"
            "    fix: pass the generator's `matrix` output unchanged (a JSON object with an include list)"
        ) from None
    if not isinstance(doc, dict):
        raise BadInput(
            f"{source}: the top level is a JSON {_json_type(doc)}, not an object\n"
            '    fix: pass the generator\'s output as it is: {"include": [rows]}'
        )
    if "include" not in doc:
        keys = ", ".join(sorted(doc)) or "none"
        raise BadInput(
            f"{source}: no `include` list (keys: {keys})\n"
            '    fix: pass the generator\'s output as it is: {"include": [rows]}'
        )
    rows = doc["include"]
    if not isinstance(rows, list):
        raise BadInput(f"{source}: `include` is a JSON {_json_type(rows)}, not a list\n"
                       '    fix: pass {"include": [rows]}')
    return rows


def _json_type(v: object) -> str:
    if v is None:
        return "null"
    return {bool: "boolean", int: "number", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(v), type(v).__name__)


def _made_for(raw: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(os, machine) as the generator marks a row, None where it does not say.

    aarch64 rows carry `cpu-aarch64` / `13.0-aarch64`; Windows rows run on `windows.*` runners.
    """
    t, v, runner = raw.get("gpu_arch_type"), raw.get("gpu_arch_version"), raw.get("validation_runner")
    machine = "aarch64" if any(isinstance(x, str) and x.endswith("-aarch64") for x in (t, v)) else None
    os_ = None
    if isinstance(runner, str) and runner:
        os_ = "windows" if runner.lower().startswith("windows") else "linux"
    return os_, machine


def validate_rows(rows: Sequence[object], source: str) -> list[Offered]:
    """Check every row's fields and types; one BadInput listing every problem."""
    problems: list[Problem] = []
    out: list[Offered] = []
    for i, raw in enumerate(rows):
        if not isinstance(raw, dict):
            problems.append(Problem(f"is a JSON {_json_type(raw)}, not an object", file=source, row=f"{i}",
                                    hint="each entry of include is one generator row (an object)"))
            continue
        name = raw.get("build_name")
        label = f"{i} ({name})" if isinstance(name, str) and name else f"{i}"
        before = len(problems)

        def bad(fld: str, msg: str, hint: str, label: str = label) -> None:
            problems.append(Problem(msg, file=source, row=label, field=fld, hint=hint))

        for fld in ("python_version", "desired_cuda"):
            if fld not in raw:
                close = difflib.get_close_matches(fld, [k for k in raw if isinstance(k, str)], n=1)
                bad(fld, f"missing {fld!r}",
                    f"did you mean {close[0]!r}? rename it" if close else
                    "the generator always writes it; pass its output unchanged")
            elif not isinstance(raw[fld], str):
                bad(fld, f"{fld!r} is a JSON {_json_type(raw[fld])} ({raw[fld]!r}), not a string",
                    f'write it as a string, e.g. "{"3.12" if fld == "python_version" else "cu130"}"')
        for fld in ("gpu_arch_type", "gpu_arch_version", "container_image", "build_name"):
            if fld in raw and not isinstance(raw[fld], str):
                bad(fld, f"{fld!r} is a JSON {_json_type(raw[fld])} ({raw[fld]!r}), not a string",
                    "write it as a string")
        if len(problems) > before:
            continue
        py = raw["python_version"]
        if not _PY.match(py):
            bad("python_version", f"{py!r} is not a Python version", "write it as '3.12' (or '3.13t' for free-threaded)")
        desired = raw["desired_cuda"]
        train: Train | None = None
        other = False
        m = _CU.match(desired)
        if desired == "cpu":
            pass
        elif m:
            train = Train(int(m.group(1)), int(m.group(2)))
        elif _OTHER_ACCEL.match(desired):
            other = True
        else:
            fixed = re.sub(r"[^0-9]", "", desired)
            hint = (f"write 'cu{fixed}' (no dot), as the generator does" if desired.startswith("cu") and fixed
                    else "write 'cpu' or a CUDA train such as 'cu130'")
            bad("desired_cuda", f"{desired!r} is not a CUDA train", hint)
        if len(problems) > before:
            continue
        # The generator writes the train twice; when they disagree, either value may be the wrong wheel.
        kind = raw.get("gpu_arch_type")
        version = raw.get("gpu_arch_version")
        if isinstance(kind, str) and not other:
            is_cuda_kind = kind.startswith("cuda")
            is_cpu_kind = kind.startswith("cpu")
            if (train is not None and not is_cuda_kind) or (train is None and not is_cpu_kind):
                bad("gpu_arch_type", f"gpu_arch_type {kind!r} disagrees with desired_cuda {desired!r}",
                    "the generator's output was edited or mixed; regenerate it")
        if isinstance(version, str) and not other:
            vm = _GPU_VERSION.match(version)
            if train is None and version:
                bad("gpu_arch_version", f"gpu_arch_version {version!r} on a CPU row (desired_cuda 'cpu')",
                    "a CPU row has an empty gpu_arch_version; regenerate the matrix")
            elif train is not None and (vm is None or Train(int(vm.group(1)), int(vm.group(2))) != train):
                bad("gpu_arch_version", f"gpu_arch_version {version!r} disagrees with desired_cuda {desired!r}",
                    f"both name the same train: gpu_arch_version '{train.dotted}' with desired_cuda '{train.cu}'")
        if len(problems) > before or other:
            continue
        out.append(Offered(i, label, py, train, raw))
    if len(problems) > _MAX_REPORTED:
        rest = len(problems) - _MAX_REPORTED
        problems = [*problems[:_MAX_REPORTED],
                    Problem(f"... and {rest} more problem(s) like these, not shown", file=source)]
    raise_problems(problems, f"{source}: malformed generator matrix")
    return out


def _check_made_for(offered: Sequence[Offered], platform: str, source: str) -> None:
    """A matrix generated for another platform would be relabelled, not filtered: refuse it."""
    want_os = platform.split("-")[0]
    want_machine = "aarch64" if platform.endswith("-aarch64") else None
    for o in offered:
        os_, machine = _made_for(o.raw)
        if machine != want_machine:
            mark = o.raw.get("gpu_arch_type") or o.raw.get("gpu_arch_version")
            wrong = f"gpu_arch_type {mark!r} comes from {'an aarch64' if machine else 'an x86_64'} generator"
        elif os_ is not None and os_ != want_os:
            wrong = f"validation_runner {o.raw.get('validation_runner')!r} is a {os_} runner"
        else:
            continue
        raise BadInput(
            f"{source}: row {o.label}: {wrong}, but --platform is {platform}\n"
            f"    fix: pass the matrix generated for {platform} (generator input `os`), "
            "or the --platform this matrix was generated for"
        )


def policy_rows(policy: Policy, platform: str) -> dict[tuple[str, Train | None], Row]:
    """The rows the policy publishes on PLATFORM, keyed by (python, train); declared-empty rows and
    rows of build-only trains excluded."""
    return {(r.python, r.cuda): r for r in policy.rows if r.platform == platform and policy.publishes(r)}


def check_platform(policy: Policy, platform: str) -> None:
    if platform not in policy.platforms:
        close = difflib.get_close_matches(platform, policy.platforms, n=1)
        hint = f"did you mean {close[0]}?" if close else "use one of: " + ", ".join(policy.platforms)
        raise BadInput(f"--platform {platform!r} is not a platform of {policy.path}\n    fix: {hint}")


def jetpack_refusal(policy: Policy, platform: str) -> Refused:
    """Asking for the JetPack rows: refuse with the declared reason, never the generic empty message."""
    rows = [r for r in policy.rows if r.platform == platform and "jetpack" in r.name]
    if not rows:
        return Refused(
            f"--jetpack: {policy.path} declares no JetPack row for {platform}\n"
            f"    fix: declare one, e.g. [empty.{platform}-jetpack] with its reason, or drop --jetpack"
        )
    empty = [r for r in rows if r.empty_reason is not None]
    lines = [f"row {r.name} is declared empty: {r.empty_reason}" for r in empty]
    return Refused(
        "--jetpack: no JetPack wheel is built\n    " + "\n    ".join(lines)
        + f"\n    fix: this is deliberate (see [empty.{empty[0].name}] in {policy.path}); "
        "remove --jetpack, or give the row architectures once a wheel could run on the device"
    )


def narrow(
    policy: Policy,
    platform: str,
    text: str,
    *,
    source: str = "<matrix>",
    pull_request: bool = False,
) -> Narrowed:
    """Apply SPEC §7: allowlists, missing combinations, one row for a pull request, no empty result."""
    check_platform(policy, platform)
    offered = validate_rows(parse_generator_output(text, source), source)
    _check_made_for(offered, platform, source)
    published = policy_rows(policy, platform)
    trains = {t for (_, t) in published}
    excluded = dict(policy.excluded_pythons)

    kept: list[tuple[Offered, Row]] = []
    dropped: list[Dropped] = []
    first: dict[tuple[str, Train | None], Offered] = {}
    dup_problems: list[Problem] = []
    for o in offered:
        key = (o.python, o.train)
        if o.python not in policy.pythons:
            why = excluded.get(o.python)
            dropped.append(Dropped(o.label, f"python {o.python} is not on the allowlist" + (f" ({why})" if why else "")))
            continue
        if o.train not in trains:
            if o.train is None:
                dropped.append(Dropped(o.label, f"the policy has no CPU rows for {platform}"))
            elif o.train in policy.build_only_trains:
                dropped.append(Dropped(o.label, f"CUDA {o.train.dotted} is build-only in the policy (built from "
                                                "source, not published)"))
            else:
                dropped.append(Dropped(o.label, f"the policy does not publish CUDA {o.train.dotted} for {platform}"))
            continue
        row = published.get(key)
        if row is None:  # python and train are each allowed, but not together (a partial policy)
            dropped.append(Dropped(o.label, f"the policy has no row for python {o.python} with {o.accel} on {platform}"))
            continue
        if key in first:
            dup_problems.append(Problem(
                f"offers {row.name} again (first offered by row {first[key].label})",
                file=source, row=o.label, field="desired_cuda, python_version",
                hint="a wheel is built once; regenerate the matrix or remove the duplicate"))
            continue
        first[key] = o
        kept.append((o, row))
    raise_problems(dup_problems, f"{source}: duplicate rows in the generator matrix")

    if not kept:
        offered_desc = _describe(offered)
        wanted = ", ".join(sorted({r.accel for r in published.values()}, key=_accel_key)) or "nothing"
        pythons = ", ".join(policy.pythons)
        raise Refused(
            f"the narrowed matrix for {platform} is empty: the generator offered {len(offered)} row(s) "
            f"({offered_desc}) and none is a row the policy publishes (python {pythons}; {wanted}); "
            "an empty matrix would run no build job and read as a green check\n"
            "    fix: check the generator inputs (with-cuda: enable, python-versions, os) and the policy's "
            f"trains for {platform}",
            [Problem("empty matrix", refusal=True)],
        )

    if pull_request:
        # One representative row: the most preferred train on offer (the policy's pull-request order,
        # then its fallback rule), never an exact combination that may silently be absent.
        best = max(kept, key=lambda kr: (_preference(policy.pull_request_trains, kr[0].train),
                                         _fallback(policy, kr[0].train), _python_rank(policy, kr[0].python)))
        kept_now = [best]
        for o, _ in kept:
            if o is not best[0]:
                dropped.append(Dropped(o.label, f"a pull request builds one row ({best[1].name})"))
    else:
        have = set(first)
        missing = [r for k, r in published.items() if k not in have]
        if missing:
            missing.sort(key=lambda r: (_train_key(r.cuda), _py_key(r.python)))
            lines = [f"{r.name} (python {r.python}, {'CUDA ' + r.cuda.dotted if r.cuda else 'CPU'})" for r in missing]
            raise Refused(
                f"the generator offered no row for {len(missing)} combination(s) the policy publishes on "
                f"{platform}; a release would silently publish fewer wheels:\n    "
                + "\n    ".join(lines)
                + "\n    fix: make the generator offer them (with-cuda: enable, python-versions, its CUDA list), "
                f"or stop publishing them in {policy.path}",
                [Problem(f"missing {r.name}", row=r.name, refusal=True) for r in missing],
            )
        kept_now = kept

    include: list[dict[str, Any]] = []
    for o, row in kept_now:
        entry = dict(o.raw)
        if row.image is not None:
            entry["container_image"] = row.image
        include.append(entry)
    return Narrowed(include, [r for _, r in kept_now], dropped, len(offered))


def _preference(order: tuple[Train, ...], t: Train | None) -> int:
    """Higher for trains listed earlier in the policy's preference; 0 for trains not listed."""
    return len(order) - order.index(t) if t in order else 0


def _fallback(policy: Policy, t: Train | None) -> tuple[int, int, int]:
    """Rank of a train no preference names. "newest": the newest. "closest" (ExecuTorch's
    filter_cuda_matrix.py): at or below the first preferred train the nearest ranks highest, above
    it the nearest newer, and every older train outranks every newer one ("a newer one never
    outranks an older one a machine here can actually run")."""
    key = _train_key(t)
    if policy.pull_request_fallback != "closest" or not policy.pull_request_trains or t is None:
        return (0, *key) if t is not None else (-1, *key)
    want = _train_key(policy.pull_request_trains[0])
    if key <= want:
        return (1, *key)
    return (0, -key[0], -key[1])


def _python_rank(policy: Policy, py: str) -> tuple[int, int]:
    """"newest" (default): the newest Python on offer. "first": the earliest of [python] versions
    (ExecuTorch's PR_PYTHON_VERSION = SUPPORTED_PYTHON_VERSIONS[0])."""
    if policy.pull_request_python == "first" and py in policy.pythons:
        return (-policy.pythons.index(py), 0)
    return _py_key(py)


def _train_key(t: Train | None) -> tuple[int, int]:
    return (t.major, t.minor) if t else (-1, -1)


def _py_key(py: str) -> tuple[int, int]:
    minor = py.split(".")[1]
    # a free-threaded build sorts below its plain one: prefer the plain build when both are allowed
    return (int(minor.rstrip("t")), 0 if minor.endswith("t") else 1)


def _accel_key(a: str) -> tuple[int, int]:
    m = _CU.match(a)
    return (int(m.group(1)), int(m.group(2))) if m else (-1, -1)


def _describe(offered: Sequence[Offered]) -> str:
    if not offered:
        return "none"
    pys = sorted({o.python for o in offered}, key=_py_key)
    accels = sorted({o.accel for o in offered}, key=_accel_key)
    return f"python {', '.join(pys)}; {', '.join(accels)}"


def summarize_dropped(dropped: Sequence[Dropped]) -> list[str]:
    """One line per reason, with a count: what a log reader needs, without 30 near-identical lines."""
    counts: dict[str, int] = {}
    for d in dropped:
        counts[d.reason] = counts.get(d.reason, 0) + 1
    return [f"dropped {n} row{'s' if n != 1 else ''}: {reason}" for reason, n in counts.items()]

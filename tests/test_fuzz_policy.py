"""Property-based tests of the text parsers: the policy loader, architecture lists, CUDA trains and the
generator's JSON (SPEC §9). Whatever the input, buildrows ends with its own error or a clean result.

The budget here is modest (CI); scripts/fuzz_all.py runs the same mutators 100,000+ times.
"""

from __future__ import annotations

import contextlib
import copy
import json
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from buildrows.ci.matrix import narrow, parse_generator_output, validate_rows
from buildrows.errors import BuildrowsError
from buildrows.policy.archs import ArchError, Train, parse_arch_list
from buildrows.policy.load import load_policy, policy_from_dict
from buildrows.policy.model import Policy
from tests.fuzz_tools import EXAMPLE_POLICY, GENERATOR_DIR, mutate_doc, mutate_text, random_value

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from tests.conftest import Result

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
EXAMPLE_TEXT = EXAMPLE_POLICY.read_text(encoding="utf-8")
EXAMPLE_DOC = tomllib.loads(EXAMPLE_TEXT)
EXAMPLE = policy_from_dict(copy.deepcopy(EXAMPLE_DOC), str(EXAMPLE_POLICY))
GENERATOR = {p.name: p.read_text(encoding="utf-8") for p in sorted(GENERATOR_DIR.glob("*.json"))}


def _listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary cwd; the test fails if anything is written outside it (the repo is watched too)."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    before_repo = _listing(EXAMPLE_POLICY.parent)
    yield work
    assert _listing(EXAMPLE_POLICY.parent) == before_repo, "a parser wrote next to the example policy"


def _expect_own_error(fn: Callable[[], object], *allowed: type[BaseException]) -> object:
    """Run fn; it returns, or raises one of buildrows' own errors. Anything else fails the test."""
    try:
        return fn()
    except (BuildrowsError, *allowed):
        return None


# --- the policy loader -------------------------------------------------------------------------

@FUZZ
@given(st.randoms(use_true_random=False))
def test_mutated_policy_documents_load_or_fail_with_bad_input(rng: random.Random) -> None:
    doc = mutate_doc(EXAMPLE_DOC, rng)
    result = _expect_own_error(lambda: policy_from_dict(doc, "fuzz.toml"))
    assert result is None or isinstance(result, Policy)


@FUZZ
@given(st.randoms(use_true_random=False))
def test_random_policy_documents_fail_with_bad_input(rng: random.Random) -> None:
    doc = random_value(rng)
    if not isinstance(doc, dict):
        doc = {"python": doc, "platforms": random_value(rng)}
    _expect_own_error(lambda: policy_from_dict(doc, "fuzz.toml"))


_toml_scalars = st.one_of(st.text(max_size=20), st.integers(), st.booleans(), st.floats(allow_nan=False))
_toml_values = st.recursive(
    _toml_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=20,
)


@FUZZ
@given(st.dictionaries(st.sampled_from(["project", "python", "cuda", "platforms", "empty", "x"]), _toml_values, max_size=5))
def test_hypothesis_policy_documents_fail_with_bad_input(doc: dict[str, Any]) -> None:
    _expect_own_error(lambda: policy_from_dict(doc, "fuzz.toml"))


@FUZZ
@given(st.randoms(use_true_random=False))
def test_mutated_policy_text_loads_or_fails_with_bad_input(sandbox: Path, rng: random.Random) -> None:
    p = sandbox / "buildrows.toml"
    p.write_text(mutate_text(EXAMPLE_TEXT, rng), encoding="utf-8")
    before = p.read_bytes()
    _expect_own_error(lambda: load_policy(p))
    assert p.read_bytes() == before
    assert _listing(sandbox) == {"buildrows.toml"}


@FUZZ
@given(st.binary(max_size=2000))
def test_policy_bytes_load_or_fail_with_bad_input(sandbox: Path, data: bytes) -> None:
    p = sandbox / "buildrows.toml"
    p.write_bytes(data)
    _expect_own_error(lambda: load_policy(p))


@FUZZ
@given(st.randoms(use_true_random=False))
def test_pyproject_policies_load_or_fail_with_bad_input(sandbox: Path, rng: random.Random) -> None:
    text = EXAMPLE_TEXT.replace("\n[", "\n[tool.buildrows.").replace("\n[[", "\n[[tool.buildrows.")
    text = text.replace("[tool.buildrows.[", "[[tool.buildrows.")
    p = sandbox / "pyproject.toml"
    p.write_text("[project]\nname = 'x'\n" + mutate_text(text, rng), encoding="utf-8")
    _expect_own_error(lambda: load_policy(p))


def test_the_pyproject_form_of_the_example_loads(sandbox: Path) -> None:
    text = EXAMPLE_TEXT.replace("\n[[", "\n[[tool.buildrows.").replace("\n[", "\n[tool.buildrows.")
    text = text.replace("[tool.buildrows.[tool.buildrows.", "[[tool.buildrows.")
    p = sandbox / "pyproject.toml"
    p.write_text(text, encoding="utf-8")
    assert len(load_policy(p).rows) == len(EXAMPLE.rows)


# Each of these once escaped the loader as another exception type.
REGRESSIONS: list[tuple[str, Any]] = [
    ("cuda.runtime.²", lambda d: d["cuda"]["runtime"].update({"²": {"requirements": ["x"], "library-dir": "a"}})),
    ("python.versions 3.12\\n", lambda d: d["python"].update(versions=["3.12\n"])),
    ("python.versions arabic digit", lambda d: d["python"].update(versions=["3.1٣"])),
    ("cuda.trains arabic digits", lambda d: d["cuda"].update(trains=["١٣.٠"])),
]


@pytest.mark.parametrize(("label", "edit"), REGRESSIONS, ids=[r[0] for r in REGRESSIONS])
def test_loader_regressions_are_bad_input(label: str, edit: Callable[[dict[str, Any]], None]) -> None:
    doc = copy.deepcopy(EXAMPLE_DOC)
    edit(doc)
    with pytest.raises(BuildrowsError):
        policy_from_dict(doc, "fuzz.toml")


# --- architecture lists and trains ----------------------------------------------------------------

_arch_alphabet = st.sampled_from(list("0123456789.;, +PTXptxafsmcu_\tO") + ["١", "²", "\n", "sm_", "compute_", "+PTX"])
_arch_text = st.lists(_arch_alphabet, max_size=30).map("".join)
_good_token = st.builds(
    lambda major, minor, suffix, dot: f"{major}{'.' if dot else ''}{minor}{suffix}",
    st.integers(1, 12), st.integers(0, 9), st.sampled_from(["", "", "a", "f"]), st.booleans(),
)


@FUZZ
@given(_arch_text, st.sampled_from(["newest", "none", None, "9.0", "bogus", ""]))
def test_arch_lists_parse_or_raise_arch_error(text: str, ptx: str | None) -> None:
    try:
        out = parse_arch_list(text, ptx=ptx)
    except ArchError as e:
        assert isinstance(e.token, str)
        return
    assert out.archs and list(out.archs) == sorted(set(out.archs), key=lambda a: (a.number, a.suffix))


@FUZZ
@given(st.lists(_good_token, min_size=1, max_size=8, unique=True), st.sampled_from([" ", ";", ",", " ; "]))
def test_valid_lists_round_trip_and_put_ptx_on_the_newest(tokens: list[str], sep: str) -> None:
    try:
        first = parse_arch_list(sep.join(tokens))
    except ArchError:  # e.g. '9.0' and '90' together are a duplicate; or only a/f entries (no portable PTX)
        assert any(t[-1] in "af" for t in tokens) or len({t.replace(".", "") for t in tokens}) < len(tokens)
        return
    # PTX on the newest plain architecture: an a/f entry's PTX would not JIT on newer GPUs
    plain = [a for a in first.archs if not a.suffix]
    assert plain and first.ptx == (max(plain, key=lambda a: a.number),)
    again = parse_arch_list(first.torch_cuda_arch_list, ptx=None)
    assert again == first
    shuffled = parse_arch_list(list(reversed(tokens)))
    assert shuffled == first


@FUZZ
@given(st.one_of(st.text(max_size=10), st.integers(), st.none(), st.lists(st.text(max_size=4), max_size=3)))
def test_train_parse_raises_only_value_error(value: Any) -> None:
    try:
        t = Train.parse(value)
    except ValueError:
        return
    assert Train.parse(t.dotted) == t == Train.parse(t.cu)


@FUZZ
@given(st.lists(st.one_of(st.text(max_size=6), st.integers(), st.none()), max_size=4))
def test_arch_lists_of_non_strings_raise_arch_error(items: list[Any]) -> None:
    with contextlib.suppress(ArchError):
        parse_arch_list(items)


# --- generator JSON ------------------------------------------------------------------------------

def _fixture_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(GENERATOR["linux-release-prfalse.json"])["include"]
    return rows


@FUZZ
@given(st.randoms(use_true_random=False), st.booleans())
def test_mutated_generator_rows_narrow_or_fail_with_our_error(rng: random.Random, pr: bool) -> None:
    doc = mutate_doc({"include": _fixture_rows()}, rng, rounds=4)
    text = json.dumps(doc)
    out = _expect_own_error(lambda: narrow(EXAMPLE, "linux-x86_64", text, source="fuzz.json", pull_request=pr))
    if out is not None:
        data = json.loads(out.as_json())  # type: ignore[attr-defined]
        assert data["include"]


@FUZZ
@given(st.randoms(use_true_random=False))
def test_mutated_generator_text_narrows_or_fails_with_our_error(rng: random.Random) -> None:
    name = rng.choice(sorted(GENERATOR))
    text = mutate_text(GENERATOR[name], rng)
    platform = rng.choice(["linux-x86_64", "linux-aarch64", "windows-amd64"])
    _expect_own_error(lambda: narrow(EXAMPLE, platform, text, source=name))


_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=16), inner, max_size=5)),
    max_leaves=25,
)
_row_keys = st.sampled_from(["python_version", "desired_cuda", "gpu_arch_type", "gpu_arch_version",
                             "container_image", "build_name", "validation_runner"])


@FUZZ
@given(st.lists(st.dictionaries(_row_keys, st.one_of(_json, st.sampled_from(
    ["3.12", "3.13t", "cu130", "cu126", "cpu", "cuda", "13.0", "13.0-aarch64", "windows.4xlarge", "rocm6.4", "xpu"])),
    max_size=7), max_size=6))
def test_generated_generator_rows_narrow_or_fail_with_our_error(rows: list[dict[str, Any]]) -> None:
    text = json.dumps({"include": rows})
    _expect_own_error(lambda: validate_rows(parse_generator_output(text, "g.json"), "g.json"))
    _expect_own_error(lambda: narrow(EXAMPLE, "linux-x86_64", text, source="g.json", pull_request=True))


@pytest.mark.parametrize("text", [
    "[" * 100_000,
    '{"include": [' + "1" * 5000 + "]}",
    '{"include": [{"python_version": "3.12", "desired_cuda": "cu130", "x": ' + "9" * 5000 + "}]}",
    '{"include": [{"python_version": "3.1٣", "desired_cuda": "cu١٣٠"}]}',
    '{"include": [{"python_version": "3.12\\n", "desired_cuda": "cu130\\n"}]}',
    "\ud800",
])
def test_generator_regressions_are_bad_input(text: str) -> None:
    with pytest.raises(BuildrowsError):
        narrow(EXAMPLE, "linux-x86_64", text, source="g.json")


# --- the same through the CLI: exit code 2/3, no traceback, nothing written ------------------------

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False))
def test_cli_matrix_on_mutated_input_exits_with_our_codes(sandbox: Path, cli: Callable[..., Result], rng: random.Random) -> None:
    name = rng.choice(sorted(GENERATOR))
    src = sandbox / "m.json"
    src.write_text(mutate_text(GENERATOR[name], rng) if rng.random() < 0.5 else
                   json.dumps(mutate_doc(json.loads(GENERATOR[name]), rng)), encoding="utf-8")
    r = cli("--config", str(EXAMPLE_POLICY), "matrix", "--platform", "linux-x86_64", "--from", str(src))
    assert r.code in (0, 2, 3), r.err
    assert "Traceback" not in r.err and "internal error" not in r.err
    assert _listing(sandbox) == {"m.json"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False), st.sampled_from(["rows", "show", "env", "schema"]))
def test_cli_on_mutated_policies_exits_with_our_codes(
    sandbox: Path, cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch, rng: random.Random, command: str
) -> None:
    monkeypatch.setenv("BUILDROWS_HOST_OS", "linux")
    p = sandbox / "buildrows.toml"
    p.write_text(mutate_text(EXAMPLE_TEXT, rng), encoding="utf-8")
    args = {"rows": ["rows"], "show": ["show", "linux-x86_64-cu130-py312"], "schema": ["schema"],
            "env": ["env", "linux-*-cu130-py312", "--no-toolchain-check"]}[command]
    r = cli("--config", str(p), *args)
    assert r.code in (0, 2, 3), r.err
    assert "Traceback" not in r.err and "internal error" not in r.err
    assert _listing(sandbox) == {"buildrows.toml"}

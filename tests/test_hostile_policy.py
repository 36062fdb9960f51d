"""Issue 37, items 11 and 12 on the policy side: limits a hostile or mistaken policy meets, each
refused with the file, the place and the limit (docs/policy.md, "Limits"). Cost: about 2 s."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Result
from tests.hostile_wheels import dotted_key_policy, nested_array_policy

BASE = ('[project]\nname = "x"\ndriver = "setup.py"\n{extra}\n[python]\nversions = [{pythons}]\n'
        '[cuda]\ntrains = ["13.0"]\n[platforms.linux-x86_64]\ntrains = ["13.0"]\ncpu = true\n'
        '[[platforms.linux-x86_64.cuda]]\ntrains = ["13.0"]\narchs = "8.0 9.0"\n{tail}')


def _policy(tmp_path: Path, extra: str = "", pythons: str = '"3.12"', tail: str = "") -> Path:
    pol = tmp_path / "buildrows.toml"
    pol.write_text(BASE.format(extra=extra, pythons=pythons, tail=tail), encoding="utf-8")
    return pol


def test_a_huge_policy_value_is_refused_with_the_limit(cli: Callable[..., Result], tmp_path: Path) -> None:
    """A 100 KB value made CMAKE_ARGS 300 KB: every program after `source $BUILD_ENV_FILE` failed
    with "Argument list too long". Refused (exit 2), since nothing could run after it."""
    big = "v" * 140_000
    pol = _policy(tmp_path, f'[project.cpu-cache]\nMYPROJ_BLOB = "{big}"\n')
    r = cli("--config", str(pol), "env", "linux-x86_64-cpu-py312", "--format", "dotenv")
    assert r.code == 2, r.out + r.err
    assert "CMAKE_ARGS would be" in r.err and "more than the 131072 bytes Linux allows one environment variable " \
        "(MAX_ARG_STRLEN): every program started after it would fail with 'Argument list too long'" in r.err, r.err
    assert "its longest part is 140014 bytes: '-DMYPROJ_BLOB=vvvv" in r.err
    assert "fix: shorten that value in the policy" in r.err
    # 100 KB fits one variable (Linux's limit is per string): it passes, and the env file holds it whole.
    pol = _policy(tmp_path, f'[project.cpu-cache]\nMYPROJ_BLOB = "{"v" * 100_000}"\n')
    r = cli("--config", str(pol), "env", "linux-x86_64-cpu-py312", "--format", "dotenv")
    assert r.code == 0, r.err
    assert "-DMYPROJ_BLOB=" + "v" * 100_000 in r.out


@pytest.mark.parametrize("name", ["linux-x86_64-a\nlinux-x86_64-cu130-py312", "linux-x86_64-x\ry", "linux-x86_64-a b"])
def test_a_row_name_with_a_newline_is_refused(cli: Callable[..., Result], tmp_path: Path, name: str) -> None:
    escaped = name.replace("\n", "\\n").replace("\r", "\\r")
    pol = _policy(tmp_path, tail=f'\n[empty."{escaped}"]\nplatform = "linux-x86_64"\nreason = "not built"\n')
    r = cli("--config", str(pol), "rows")
    assert r.code == 2, r.out + r.err
    assert f"the name {name!r} has characters a row name cannot have (a newline would print as a row of its own" in r.err
    assert "use letters, digits and . _ + - only" in r.err


def test_free_threaded_before_313_is_refused(cli: Callable[..., Result], tmp_path: Path) -> None:
    r = cli("--config", str(_policy(tmp_path, pythons='"3.11t"')), "rows")
    assert r.code == 2, r.out + r.err
    assert "'3.11t' does not exist: free-threaded CPython starts at 3.13 (PEP 703)" in r.err
    assert "write '3.11', or '3.13t' for a free-threaded build" in r.err
    r = cli("--config", str(_policy(tmp_path, pythons='"3.13t"')), "rows")
    assert r.code == 0, r.err
    assert "linux-x86_64-cpu-py313t" in r.out


@pytest.mark.parametrize(("text", "message"), [
    (dotted_key_policy(20_000), "a dotted key of more than 64 parts"),
    (dotted_key_policy(100_000), "a dotted key of more than 64 parts"),
    (nested_array_policy(1_000), "arrays or inline tables nested more than 64 deep"),
    (nested_array_policy(65), "arrays or inline tables nested more than 64 deep"),
    (b'[project]\nname = "' + b"x" * (1 << 20) + b'"\n', "more than the 1 MiB a policy may be"),
])
def test_policies_past_a_parser_limit_are_bad_input_quickly(cli: Callable[..., Result], tmp_path: Path,
                                                            text: bytes, message: str) -> None:
    pol = tmp_path / "buildrows.toml"
    pol.write_bytes(text)
    start = time.monotonic()
    r = cli("--config", str(pol), "rows")
    took = time.monotonic() - start
    print(f"{message}: {took:.3f} s")
    assert r.code == 2, r.out + r.err
    assert str(pol) in r.err and message in r.err, r.err


@pytest.mark.parametrize("text", [nested_array_policy(64).decode(), dotted_key_policy(63).decode()])
def test_the_limits_themselves_still_parse(cli: Callable[..., Result], tmp_path: Path, text: str) -> None:
    """At the limit the policy reaches the schema (which names the unknown key), not the bounds."""
    pol = tmp_path / "buildrows.toml"
    pol.write_text(text, encoding="utf-8")
    r = cli("--config", str(pol), "rows")
    assert "nested more than" not in r.err and "dotted key of more than" not in r.err, r.err


def test_a_deeply_nested_build_record_is_malformed_not_a_crash(tmp_path: Path) -> None:
    """`{"a":{"a":...` 100,000 deep was a RecursionError (a bug, exit 1): the wheel's build record, the
    build tree's record and the source-outputs record are malformed instead (a record of ours is never that)."""
    from buildrows.build.buildtree import read_record
    from buildrows.build.source_outputs import _read
    from buildrows.check.record import BuildRecordError, parse_record
    from tests.hostile_wheels import nested_json

    deep = nested_json(100_000)
    with pytest.raises(BuildRecordError, match="x.whl: buildrows.json: nested too deeply to be a build record"):
        parse_record(deep, "x.whl: buildrows.json")
    from buildrows.build import buildtree, source_outputs

    (tmp_path / "build").mkdir()
    (tmp_path / "build" / buildtree.RECORD).write_bytes(deep)
    (tmp_path / "build" / source_outputs.RECORD).write_bytes(deep)
    assert read_record(tmp_path / "build") is None
    assert _read(tmp_path) == {}

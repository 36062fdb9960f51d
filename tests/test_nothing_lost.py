"""Nothing lost (issue 7): rendering never overwrites a user's presets; `archs --write` changes only the
edited list and nothing when it refuses; a failed or refused command leaves every file as it was."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from buildrows.errors import BuildrowsError
from buildrows.policy.archs import parse_arch_list
from buildrows.policy.edit import write_archs
from buildrows.policy.load import load_policy
from buildrows.policy.rows import select
from buildrows.render.presets import MODULE_FILE, PRESETS_FILE, USER_PRESETS, render_presets
from tests.conftest import EXAMPLE_POLICY, Result
from tests.cuda_tools import fatbin_container, fatbin_entry, make_elf, make_wheel
from tests.test_env import fake_nvcc, tool_env

ROW = "linux-x86_64-cu130-py312"
ENV = {"BUILDROWS_HOST_OS": "linux"}


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every path under root with its bytes (or what it is), symlinks as links."""
    out: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")):
        key = str(p.relative_to(root))
        if p.is_symlink():
            out[key] = "-> " + os.readlink(p)
        elif p.is_file():
            out[key] = p.read_bytes() + f" mode={p.stat().st_mode & 0o7777:o}".encode()
        else:
            out[key] = "dir"
    return out


def _render(project: Path, rows: tuple[str, ...] = (ROW,)) -> None:
    pol = load_policy(EXAMPLE_POLICY)
    render_presets(pol, select(pol, list(rows)), project, ENV, check_toolchain=False)


# --- render keeps the user's presets ---------------------------------------------------------------

USER_DOC: dict[str, Any] = {
    "version": 8,
    "include": ["other.json"],
    "configurePresets": [{"name": "mine", "displayName": "Mine ✓ é", "generator": "Ninja", "binaryDir": "b",
                          "cacheVariables": {"X": {"type": "BOOL", "value": "ON"}}}],
    "buildPresets": [{"name": "mine-build", "configurePreset": "mine"}],
    "vendor": {"example.com/tool": {"n": 1.5, "big": 12345678901234567890, "list": [None, True, "x"]}},
}


def test_render_keeps_every_user_preset_and_only_adds_the_include(tmp_path: Path) -> None:
    user = tmp_path / USER_PRESETS
    user.write_text(json.dumps(USER_DOC, ensure_ascii=False, indent=4), encoding="utf-8")
    _render(tmp_path)
    after = json.loads(user.read_text(encoding="utf-8"))
    assert after == {**USER_DOC, "include": ["other.json", PRESETS_FILE]}
    text = user.read_bytes()
    _render(tmp_path, (ROW, "linux-x86_64-cu126-py312"))  # again, with other rows: idempotent for the user file
    assert user.read_bytes() == text
    assert {p["name"] for p in json.loads((tmp_path / PRESETS_FILE).read_text())["configurePresets"]
            if not p.get("hidden")} == {ROW, "linux-x86_64-cu126-py312"}


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False),
              st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=15,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["version", "include", "configurePresets", "buildPresets", "vendor", "x", ""]),
                       json_values, max_size=5))
def test_any_user_document_is_kept_or_left_byte_identical(tmp_path_factory: pytest.TempPathFactory,
                                                          doc: dict[str, Any]) -> None:
    project = tmp_path_factory.mktemp("proj")
    user = project / USER_PRESETS
    user.write_text(json.dumps(doc), encoding="utf-8")
    before = snapshot(project)
    try:
        _render(project)
    except BuildrowsError:
        assert snapshot(project) == before, "a refused render changed a file"
        return
    after = json.loads(user.read_text(encoding="utf-8"))
    includes = doc.get("include", [])
    assert after.pop("include") == [*includes, PRESETS_FILE] if PRESETS_FILE not in includes else includes
    expected = {k: v for k, v in doc.items() if k != "include"}
    if not isinstance(doc.get("version"), int) or doc["version"] < 4:
        expected["version"] = 4  # `include` needs schema 4; only the version is raised, and render says so
    assert after == expected


BAD_USER_FILES: list[tuple[str, Callable[[Path], None]]] = [
    ("not JSON", lambda d: (d / USER_PRESETS).write_text('{"version": 6, // a comment\n}')),
    ("duplicate keys", lambda d: (d / USER_PRESETS).write_text(
        '{"version": 6, "configurePresets": [{"name": "a", "generator": "Ninja"}], "configurePresets": []}')),
    ("NaN", lambda d: (d / USER_PRESETS).write_text('{"version": 6, "x": NaN}')),
    ("1e400", lambda d: (d / USER_PRESETS).write_text('{"version": 6, "x": 1e400}')),
    ("not an object", lambda d: (d / USER_PRESETS).write_text("[1, 2]")),
    ("include not a list", lambda d: (d / USER_PRESETS).write_text('{"version": 6, "include": "x.json"}')),
    ("BOM", lambda d: (d / USER_PRESETS).write_bytes(b'\xef\xbb\xbf{"version": 6}')),
    ("not UTF-8", lambda d: (d / USER_PRESETS).write_bytes(b'{"version": 6, "x": "\xff"}')),
    ("a directory", lambda d: (d / USER_PRESETS).mkdir()),
    ("deep nesting", lambda d: (d / USER_PRESETS).write_text('{"x": ' + "[" * 100000 + "]" * 100000 + "}")),
    ("foreign buildrows-presets.json", lambda d: (d / PRESETS_FILE).write_text('{"version": 6, "mine": true}')),
    ("name clash", lambda d: (d / "CMakePresets.json").write_text(
        json.dumps({"version": 6, "configurePresets": [{"name": ROW, "generator": "Ninja"}]}))),
]


@pytest.mark.parametrize(("label", "setup"), BAD_USER_FILES, ids=[b[0] for b in BAD_USER_FILES])
def test_render_refuses_and_leaves_the_project_as_it_was(tmp_path: Path, cli: Callable[..., Result],
                                                        monkeypatch: pytest.MonkeyPatch, label: str,
                                                        setup: Callable[[Path], None]) -> None:
    monkeypatch.setenv("BUILDROWS_HOST_OS", "linux")
    project = tmp_path / "proj"
    project.mkdir()
    (project / "CMakeLists.txt").write_text("project(x)\n")
    setup(project)
    before = snapshot(project)
    r = cli("--config", str(EXAMPLE_POLICY), "render", ROW, "--project", str(project), "--no-toolchain-check")
    assert r.code in (2, 3), r.err
    assert "internal error" not in r.err
    assert snapshot(project) == before


def test_render_writes_through_a_symlinked_user_file_and_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    target = shared / "presets.json"
    target.write_text(json.dumps(USER_DOC), encoding="utf-8")
    target.chmod(0o600)
    project = tmp_path / "proj"
    project.mkdir()
    (project / USER_PRESETS).symlink_to(target)
    _render(project)
    assert (project / USER_PRESETS).is_symlink()
    assert json.loads(target.read_text())["include"] == ["other.json", PRESETS_FILE]
    assert target.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in project.iterdir()) == sorted([USER_PRESETS, PRESETS_FILE, MODULE_FILE])


# --- archs --write: only the edited list changes ------------------------------------------------------

OLD = 'archs = "7.5 8.0 8.6 8.9 9.0"'
NEW_LIST = "8.0 9.0"
LAYOUTS: list[tuple[str, str, str]] = [
    # (label, how the cu126 list is written, how it must read afterwards)
    ("plain", OLD, f'archs = "{NEW_LIST}"'),
    ("inline comment", OLD + "   # from torch 2.9", f'archs = "{NEW_LIST}"   # from torch 2.9'),
    ("literal string", "archs = '7.5 8.0 8.6 8.9 9.0'", f"archs = '{NEW_LIST}'"),  # the user's quoting kept
    ("tabs", 'archs\t=\t"7.5 8.0 8.6 8.9 9.0"', f'archs\t=\t"{NEW_LIST}"'),
    ("array over lines", 'archs = [\n  "7.5",  # turing\n  "8.0",\n  "8.6 8.9 9.0",\n]  # end',
     f'archs = "{NEW_LIST}"  # end'),
    ("explicit ptx", OLD + '\nptx = "8.0"  # not the newest', f'archs = "{NEW_LIST}"'),
]


def _wheel(tmp_path: Path, sms: tuple[int, ...] = (80, 90), ptx: tuple[int, ...] = (90,)) -> Path:
    fatbin = fatbin_container([*(fatbin_entry(2, sm) for sm in sms), *(fatbin_entry(1, sm) for sm in ptx)])
    lib = make_elf([(".nv_fatbin", fatbin)])
    return make_wheel(tmp_path / "demo-1.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl", {"demo/_core.so": lib})


@pytest.mark.parametrize("eol", ["\n", "\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize("final_newline", [True, False], ids=["final-nl", "no-final-nl"])
@pytest.mark.parametrize(("label", "before", "after"), LAYOUTS, ids=[x[0] for x in LAYOUTS])
def test_archs_write_changes_only_the_edited_list(tmp_path: Path, cli: Callable[..., Result], label: str,
                                                  before: str, after: str, eol: str, final_newline: bool) -> None:
    text = EXAMPLE_POLICY.read_text(encoding="utf-8")
    assert text.count(OLD) == 1
    original = text.replace(OLD, before)
    expected = text.replace(OLD, after)
    if not final_newline:
        original, expected = original.rstrip("\n"), expected.rstrip("\n")
    policy = tmp_path / "buildrows.toml"
    policy.write_bytes(original.replace("\n", eol).encode())
    r = cli("--config", str(policy), "archs", "--from-wheel", str(_wheel(tmp_path)), "--write", "linux-x86_64-cu126-*")
    assert r.code == 0, r.err
    assert policy.read_bytes() == expected.replace("\n", eol).encode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["buildrows.toml", _wheel(tmp_path).name]


def test_archs_write_into_pyproject_changes_only_the_list(tmp_path: Path) -> None:
    text = EXAMPLE_POLICY.read_text(encoding="utf-8")
    body = text.replace("\n[[", "\n[[tool.buildrows.").replace("\n[", "\n[tool.buildrows.")
    body = body.replace("[tool.buildrows.[tool.buildrows.", "[[tool.buildrows.")
    head = '[build-system]\nrequires = ["scikit-build-core"]  # keep\n\n'
    p = tmp_path / "pyproject.toml"
    p.write_text(head + body, encoding="utf-8")
    pol = load_policy(p)
    write_archs(pol, select(pol, ["linux-x86_64-cu126-*"]), parse_arch_list(NEW_LIST))
    assert p.read_text(encoding="utf-8") == head + body.replace(OLD, f'archs = "{NEW_LIST}"')
    assert sorted(x.name for x in tmp_path.iterdir()) == ["pyproject.toml"]


@pytest.mark.parametrize(("selector", "sms", "message"), [
    ("linux-x86_64-cu130-*", (80, 90), "shared with CUDA 13.2"),  # the list is shared with 13.2
    ("linux-aarch64-cu126-*", (80, 90, 100), "cannot compile"),  # 12.6 cannot compile 10.0
    ("linux-x86_64-cu999-*", (80, 90), "no row of"),
    ("linux-x86_64-cpu-*", (80, 90), ""),
])
def test_refused_archs_write_leaves_the_policy_untouched(tmp_path: Path, cli: Callable[..., Result], selector: str,
                                                         sms: tuple[int, ...], message: str) -> None:
    policy = tmp_path / "buildrows.toml"
    policy.write_bytes(EXAMPLE_POLICY.read_bytes())
    wheel = _wheel(tmp_path, sms, ptx=(sms[-1],))
    before = snapshot(tmp_path)
    r = cli("--config", str(policy), "archs", "--from-wheel", str(wheel), "--write", selector)
    assert r.code in (2, 3), r.err
    assert message.lower() in r.err.lower()
    assert ".buildrows-" not in r.err, "the message named the staged copy instead of the policy"
    assert snapshot(tmp_path) == before


# --- every failed or refused command leaves every file as it was ----------------------------------------

FAILING: list[tuple[str, list[str], dict[str, str]]] = [
    ("hook: unknown train", ["hook", "--python", "3.11", "--platform", "linux-x86_64"], {"CU_VERSION": "cu999"}),
    ("hook: wrong toolkit", ["hook", "--python", "3.11", "--platform", "linux-x86_64"], {"CU_VERSION": "cu126"}),
    ("hook: malformed train", ["hook", "--python", "3.11", "--platform", "linux-x86_64"], {"CU_VERSION": "cu13.0"}),
    ("hook: NUL in CMAKE_ARGS-bound policy", ["hook", "--python", "3.11", "--platform", "linux-x86_64"],
     {"CU_VERSION": "cu130", "_POLICY_NUL": "1"}),
    ("env: no such row", ["env", "linux-x86_64-cu999-py312", "--github-env", "--build-env-file"], {}),
    ("env: other OS", ["env", "windows-amd64-cu130-py312", "--github-env", "--build-env-file",
                       "--no-toolchain-check"], {}),
    ("env: GITHUB_ENV unset", ["env", ROW, "--github-env", "--build-env-file"], {"GITHUB_ENV": ""}),
    ("render: other OS", ["render", "windows-amd64-cu130-py312", "--project", "{project}"], {}),
    ("render: wrong toolkit", ["render", "linux-x86_64-cu126-py312", "--project", "{project}"], {}),
    ("render: no such project", ["render", ROW, "--project", "{project}/missing"], {}),
    ("matrix: malformed", ["matrix", "--platform", "linux-x86_64", "--from", "{project}/bad.json", "--github-output"], {}),
    ("matrix: empty", ["matrix", "--platform", "linux-x86_64", "--from", "{project}/empty.json", "--github-output"], {}),
    ("check: not a wheel", ["check", "{project}/bad.json"], {}),
    ("archs: truncated wheel", ["archs", "--from-wheel", "{project}/broken-1.0-py3-none-any.whl", "--write", "linux-*"], {}),
    ("unknown option", ["env", ROW, "--frobnicate"], {}),
]


@pytest.mark.parametrize(("label", "argv", "env"), FAILING, ids=[f[0] for f in FAILING])
def test_failed_commands_leave_every_file_as_it_was(tmp_path: Path, cli: Callable[..., Result],
                                                    monkeypatch: pytest.MonkeyPatch, label: str, argv: list[str],
                                                    env: dict[str, str]) -> None:
    tool_env(monkeypatch, tmp_path / "bin")
    fake_nvcc(tmp_path / "bin")
    root = tmp_path / "root"
    project = root / "project"
    project.mkdir(parents=True)
    monkeypatch.chdir(project)
    policy = project / "buildrows.toml"
    text = EXAMPLE_POLICY.read_text(encoding="utf-8")
    if env.pop("_POLICY_NUL", None):
        text = text.replace('source-dir = "."', 'source-dir = "."\ncache = { X = "a\\u0000b" }')
    policy.write_text(text, encoding="utf-8")
    (project / "CMakeLists.txt").write_text("project(x)\n")
    (project / USER_PRESETS).write_text(json.dumps(USER_DOC, indent=1))
    (project / "bad.json").write_text('{"include": [{"python_version": 3.12}]}')
    (project / "empty.json").write_text('{"include": []}')
    (project / "broken-1.0-py3-none-any.whl").write_bytes(b"PK\x03\x04 truncated")
    for var, name, content in (("GITHUB_ENV", "github.env", "EARLIER=yes"), ("BUILD_ENV_FILE", "build.env",
                                                                            "export EARLIER='yes'\n"),
                               ("GITHUB_OUTPUT", "github.out", "x=1\n")):
        (root / name).write_text(content)
        monkeypatch.setenv(var, str(root / name))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    before = snapshot(root)
    r = cli("--config", str(policy), *(a.replace("{project}", str(project)) for a in argv))
    assert r.code in (2, 3, 4, 5), (r.code, r.err)
    assert "internal error" not in r.err and "Traceback" not in r.err
    assert snapshot(root) == before

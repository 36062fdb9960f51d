"""Environment files under attack (SPEC §5, issue 7): values from the policy or the CI environment that
carry quotes, `$()`, backticks, newlines, `=` and GitHub's delimiter syntax.

- sourcing the shell file in bash runs nothing and yields each value exactly;
- the GitHub file parses, by the runner's rules (reference parser below), to exactly the intended variables;
- two hooks appending to the same files at once lose nothing.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from buildrows.errors import BadInput
from buildrows.render.envfile import append_file, format_env
from tests.conftest import EXAMPLE_POLICY, REPO, Result
from tests.test_env import fake_nvcc, tool_env

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

HOSTILE = [
    "$(touch PWNED)", "`touch PWNED`", "'$(touch PWNED)'", '"$(touch PWNED)"', "';touch PWNED;'",
    "\"; touch PWNED; \"", "a\nexport EVIL=$(touch PWNED)", "x=y", "=", "==", "NAME=value", "a<<b", "<<EOF",
    "EOF", "BUILDROWS_EOF", "line\nBUILDROWS_EOF\nEVIL=1", "ghadelimiter_1234", "x\nghadelimiter_1234\nEVIL=1",
    "\nEVIL<<EOF\nboom\nEOF\n", "${HOME}", "$HOME", "\\", "\\'", "'\\''", "trailing\n", "\n", "\n\n", "",
    " leading and trailing ", "\t", "!!", "!$", "$((1+1))", "*", "~", "#comment", "-DX=1 -DY=\"a b\"",
    "é ünïcödé ✓ 中文", "\u2028\u2029", "\r", "a\r\nb", "multi\nline\nvalue",
]

# Values that never appear in an environment variable: no NUL (refused, tested below). Lone surrogates
# are not text anyone can write to a file as UTF-8.
value_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
hostile_value = st.one_of(st.sampled_from(HOSTILE), value_text,
                          st.lists(st.sampled_from(HOSTILE), min_size=1, max_size=4).map("".join))
# Prefixed: bash gives `_`, `RANDOM`, `PWD`, ... values of its own whatever a file assigns.
names = st.from_regex(r"V_[A-Za-z0-9_]{0,12}", fullmatch=True)


# --- GitHub's documented rules, as the runner implements them ----------------------------------

class GithubEnvError(ValueError):
    pass


def parse_github_env_file(text: str, *, windows: bool = False) -> list[tuple[str, str]]:
    """The runner's GITHUB_ENV parser (actions/runner FileCommandManager): every (name, value) in order.

    Lines end at `\\n` (also `\\r\\n` on Windows runners). A line is `NAME=value` when `=` comes before
    any `<<`, else `NAME<<DELIM` and the value is every line up to one equal to DELIM, joined by the
    newlines that separated them. A missing delimiter, a last line without its newline, or a line
    with neither form is an error the runner reports (and the job fails)."""
    out: list[tuple[str, str]] = []
    pos = 0

    def read_line() -> tuple[str | None, str | None]:
        nonlocal pos
        if pos >= len(text):
            return None, None
        lf = text.find("\n", pos)
        if lf < 0:
            line, pos = text[pos:], len(text)
            return line, None
        if windows:
            crlf = text.find("\r\n", pos)
            if 0 <= crlf < lf:
                line, pos = text[pos:crlf], crlf + 2
                return line, "\r\n"
        line, pos = text[pos:lf], lf + 1
        return line, "\n"

    line, _ = read_line()
    while line is not None:
        if line:
            eq, hd = line.find("="), line.find("<<")
            if eq >= 0 and (hd < 0 or eq < hd):
                name, value = line.split("=", 1)
            elif hd >= 0 and (eq < 0 or hd < eq):
                name, delim = line.split("<<", 1)
                start = end = pos
                body, newline = read_line()
                while body != delim:
                    if body is None:
                        raise GithubEnvError(f"matching delimiter not found {delim!r}")
                    if newline is None:
                        raise GithubEnvError("EOF marker missing new line")
                    end = pos - len(newline)
                    body, newline = read_line()
                value = text[start:end] if end > start else ""
            else:
                raise GithubEnvError(f"invalid format {line!r}")
            if not name:
                raise GithubEnvError(f"empty name in {line!r}")
            out.append((name, value))
        line, _ = read_line()
    return out


def test_reference_parser_follows_the_runner() -> None:
    assert parse_github_env_file("A=1\n\nB<<EOF\nx\ny\nEOF\nC=a<<b\nD<<E=F\nq\nE=F\n") == [
        ("A", "1"), ("B", "x\ny"), ("C", "a<<b"), ("D", "q")]
    assert parse_github_env_file("A<<EOF\n\nEOF\n") == [("A", "")]
    assert parse_github_env_file("A<<EOF\n\n\nEOF\n") == [("A", "\n")]
    with pytest.raises(GithubEnvError):
        parse_github_env_file("A<<EOF\nno end\n")
    with pytest.raises(GithubEnvError):
        parse_github_env_file("A<<EOF\nx")
    with pytest.raises(GithubEnvError):
        parse_github_env_file("just text\n")


def read_back_bash(path: Path, names: list[str], cwd: Path) -> dict[str, str]:
    script = 'set -e; source "$1"; shift; for n in "$@"; do printf "%s\\0" "${!n}"; done'
    proc = subprocess.run(["bash", "-c", script, "bash", str(path), *names], capture_output=True, cwd=cwd,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd)})
    assert proc.returncode == 0, proc.stderr
    parts = proc.stdout.split(b"\0")[:-1]
    return dict(zip(names, (p.decode("utf-8", "surrogateescape") for p in parts), strict=True))


ATTACK = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@ATTACK
@given(st.dictionaries(names, hostile_value, min_size=1, max_size=6))
def test_sourcing_the_shell_file_runs_nothing_and_yields_exact_values(tmp_path_factory: pytest.TempPathFactory,
                                                                     values: dict[str, str]) -> None:
    work = tmp_path_factory.mktemp("sh")
    env_file = work / "build.env"
    append_file(env_file, format_env(values, "shell"))
    got = read_back_bash(env_file, list(values), work)
    assert got == values
    assert sorted(p.name for p in work.iterdir()) == ["build.env"], "sourcing ran a command"


@ATTACK
@given(st.dictionaries(names, hostile_value, min_size=1, max_size=6))
def test_github_file_parses_to_exactly_the_intended_variables(values: dict[str, str]) -> None:
    text = format_env(values, "github")
    assert parse_github_env_file(text) == list(values.items())
    # A value that holds no carriage return reads the same on a Windows runner.
    if not any("\r" in v for v in values.values()):
        assert parse_github_env_file(text, windows=True) == list(values.items())


@ATTACK
@given(st.lists(st.dictionaries(names, hostile_value, min_size=1, max_size=4), min_size=1, max_size=4),
       st.sampled_from(["", "EARLIER=yes", "EARLIER=yes\n", "X<<EOF\nfirst\nEOF\n"]))
def test_appended_blocks_keep_earlier_lines_and_each_other(tmp_path_factory: pytest.TempPathFactory,
                                                         blocks: list[dict[str, str]], earlier: str) -> None:
    work = tmp_path_factory.mktemp("gh")
    gh = work / "github.env"
    gh.write_text(earlier, encoding="utf-8", newline="")
    expected = parse_github_env_file(earlier + ("\n" if earlier and not earlier.endswith("\n") else ""))
    for b in blocks:
        append_file(gh, format_env(b, "github"))
        expected += list(b.items())
    assert parse_github_env_file(gh.read_bytes().decode("utf-8")) == expected


@pytest.mark.parametrize("fmt", ["github", "shell", "powershell", "dotenv"])
def test_a_nul_is_refused_not_silently_cut(fmt: str) -> None:
    with pytest.raises(BadInput, match="NUL"):
        format_env({"X": "a\x00b"}, fmt)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["X\n", "X\nEVIL", "X=Y", "X<<EOF", "1X", "", "É"])
def test_names_that_would_inject_are_refused(name: str) -> None:
    with pytest.raises(BadInput):
        format_env({name: "v"}, "github")


def test_undecodable_bytes_from_the_ci_environment_are_written_back_exactly(tmp_path: Path) -> None:
    value = b"-DX=\xff\xfe".decode("utf-8", "surrogateescape")  # what os.environ holds for those bytes
    f = tmp_path / "build.env"
    append_file(f, format_env({"CMAKE_ARGS": value}, "shell"))
    assert read_back_bash(f, ["CMAKE_ARGS"], tmp_path) == {"CMAKE_ARGS": value}


# --- the real commands, with hostile values from the policy and from CI -----------------------------

def _hostile_policy(tmp_path: Path) -> Path:
    text = EXAMPLE_POLICY.read_text(encoding="utf-8")
    # A cache value (it lands in CMAKE_ARGS) and a CUDA option name full of shell and GitHub syntax.
    text = text.replace('source-dir = "."', 'source-dir = "."\n[project.cache]\n'
                        'EVIL = "$(touch PWNED) `touch PWNED` \'\\"\\nEVIL2<<EOF\\nboom\\nEOF\\nghadelimiter_x\\n="\n'
                        '"A B" = "it\'s"\n', 1)
    p = tmp_path / "buildrows.toml"
    p.write_text(text, encoding="utf-8")
    return p


@pytest.fixture
def hostile_ci(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    tool_env(monkeypatch, tmp_path / "bin")
    fake_nvcc(tmp_path / "bin")
    monkeypatch.setenv("CMAKE_ARGS", "-DFROM_CI='x' \"$(touch PWNED)\"\nBUILDROWS_EOF\nEVIL=1 `id`")
    monkeypatch.setenv("CU_VERSION", "cu130")
    be, gh = tmp_path / "build.env", tmp_path / "github.env"
    be.write_text("export EARLIER='yes'\n")
    gh.write_text("EARLIER=yes\n")
    monkeypatch.setenv("BUILD_ENV_FILE", str(be))
    monkeypatch.setenv("GITHUB_ENV", str(gh))
    return work, be, gh


@pytest.mark.parametrize("command", ["hook", "env"])
def test_hostile_policy_and_ci_values_reach_both_files_exactly(cli: Callable[..., Result], tmp_path: Path,
                                                              hostile_ci: tuple[Path, Path, Path], command: str) -> None:
    work, be, gh = hostile_ci
    policy = _hostile_policy(tmp_path)
    argv = (["hook", "--python", "3.11", "--platform", "linux-x86_64"] if command == "hook" else
            ["env", "linux-x86_64-cu130-py311", "--github-env", "--build-env-file"])
    r = cli("--config", str(policy), *argv)
    assert r.code == 0, r.err
    github = parse_github_env_file(gh.read_bytes().decode("utf-8"))
    assert github[0] == ("EARLIER", "yes")
    values = dict(github)
    assert len(values) == len(github), "a variable was written twice"
    assert values["CMAKE_ARGS"].startswith(os.environ["CMAKE_ARGS"] + " ")  # extended, not replaced
    assert shlex.quote("-DA B=it's") in values["CMAKE_ARGS"]  # one token again under shlex.split
    assert "EVIL2" not in values and "EVIL" not in values
    shell = read_back_bash(be, list(values), work)
    assert shell == values
    assert list(work.iterdir()) == [], "sourcing or rendering ran a command"


WORKER = r"""
import io, os, sys
from buildrows.cli import main
from buildrows.ui import UI
w, n, policy = sys.argv[1], int(sys.argv[2]), sys.argv[3]
for i in range(n):
    os.environ["CMAKE_ARGS"] = f"-DMARK=w{w}-i{i}\nBUILDROWS_EOF\n$(touch PWNED)"
    code = main(["--config", policy, "hook", "--python", "3.11", "--platform", "linux-x86_64"],
                UI(out=io.StringIO(), err=io.StringIO()))
    assert code == 0, code
"""


def test_two_hooks_appending_at_once_lose_nothing(tmp_path: Path, hostile_ci: tuple[Path, Path, Path]) -> None:
    work, be, gh = hostile_ci
    n = 50
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(w), str(n), str(EXAMPLE_POLICY)], env=env,
                              cwd=work, stderr=subprocess.PIPE) for w in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    pairs = parse_github_env_file(gh.read_bytes().decode("utf-8"))
    assert pairs[0] == ("EARLIER", "yes")
    pairs = pairs[1:]
    first = [k for k, _ in pairs[: pairs.index(next(p for p in pairs if p[0] == "CMAKE_ARGS")) + 1]]
    size = len(set(k for k, _ in pairs))
    assert len(pairs) == 2 * n * size, "a block was lost or split"
    blocks = [dict(pairs[i:i + size]) for i in range(0, len(pairs), size)]
    assert all(len(b) == size for b in blocks), "two blocks interleaved"
    marks = sorted(b["CMAKE_ARGS"].split("\n")[0] for b in blocks)
    assert marks == sorted(f"-DMARK=w{w}-i{i}" for w in range(2) for i in range(n))
    assert first  # blocks start with the same names in the same order
    # The shell file: exactly the 100 blocks, each whole, in some order, after the earlier line.
    text = be.read_bytes().decode("utf-8")
    assert text.startswith("export EARLIER='yes'\n")
    pos, remaining = len("export EARLIER='yes'\n"), {format_env(b, "shell") for b in blocks}
    while pos < len(text):
        match = next((c for c in remaining if text.startswith(c, pos)), None)
        assert match is not None, f"garbled shell file at byte {pos}: {text[pos:pos + 120]!r}"
        remaining.discard(match)
        pos += len(match)
    assert not remaining
    assert list(work.iterdir()) == []

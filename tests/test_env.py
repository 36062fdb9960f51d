"""Environment files: exact quoting in every format, appends in one write, and `buildrows env`."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.render import envfile
from buildrows.render.envfile import append_file, format_env
from tests.conftest import EXAMPLE_POLICY, REPO, Result

ROW = "linux-x86_64-cu130-py311"

NASTY = {
    "PLAIN": "7.5;8.0;12.0+PTX",
    "SPACES": "  leading and trailing  ",
    "SINGLE": "it's 'quoted'",
    "DOUBLE": 'say "hi"',
    "DOLLAR": "$HOME ${PATH} $(echo no) $$",
    "BACKTICK": "`echo no` \\` back\\slash\\",
    "NEWLINES": "line one\nline two\n\nend\n",
    "CRLF": "a\r\nb",
    "MIXED": "'\"$`\\\n\t*?[a]~!#;&|<>",
    "EMPTY": "",
    "UNICODE": "µ ‘smart’ “quotes” ✓",
    "DELIM": "BUILDROWS_EOF\nstill the value",
}


def fake_nvcc(directory: Path, release: str = "13.0", full: str = "13.0.88", name: str = "nvcc") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    p = directory / name
    p.write_text("#!/bin/sh\n"
                 f'echo "Cuda compilation tools, release {release}, V{full}"\n', encoding="utf-8")
    p.chmod(0o755)
    return p


def tool_env(monkeypatch: pytest.MonkeyPatch, bindir: Path) -> None:
    """A PATH with only the fake nvcc plus the system tools; no CUDA variables."""
    for var in ("CUDACXX", "CUDA_HOME", "CUDA_PATH", "CMAKE_ARGS", "BUILDROWS_HOST_OS", "CU_VERSION",
                "DESIRED_CUDA", "GITHUB_ENV", "BUILD_ENV_FILE", "CUDAFLAGS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}/usr/bin{os.pathsep}/bin")


def read_back_bash(path: Path, names: list[str]) -> dict[str, bytes]:
    script = 'set -e; source "$1"; shift; for n in "$@"; do printf "%s\\0" "${!n}"; done'
    out = subprocess.run(["bash", "-c", script, "bash", str(path), *names], capture_output=True, check=True).stdout
    parts = out.split(b"\0")[:-1]
    return dict(zip(names, parts, strict=True))


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_shell_quoting_round_trips_byte_for_byte(tmp_path: Path) -> None:
    f = tmp_path / "env.sh"
    f.write_text(format_env(NASTY, "shell"), encoding="utf-8", newline="")
    got = read_back_bash(f, list(NASTY))
    for name, value in NASTY.items():
        assert got[name] == value.encode("utf-8"), name


def parse_github_env(text: str) -> dict[str, str]:
    """GitHub's runner parser for GITHUB_ENV (NAME=value, or NAME<<DELIM ... DELIM)."""
    out: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            body: list[str] = []
            while lines[i] != delim:
                body.append(lines[i])
                i += 1
            i += 1
            out[name] = "\n".join(body)
        else:
            name, value = line.split("=", 1)
            out[name] = value
    return out


def test_github_format_round_trips_and_delimiter_is_absent_from_values() -> None:
    text = format_env(NASTY, "github")
    assert parse_github_env(text) == NASTY
    for line in text.split("\n"):
        if line.startswith("DELIM<<"):
            delim = line.split("<<", 1)[1]
            assert delim not in NASTY["DELIM"]
    assert "PLAIN=7.5;8.0;12.0+PTX\n" in text  # single-line values keep the plain form


def test_powershell_format_round_trips() -> None:
    text = format_env(NASTY, "powershell")
    # A verbatim string: only quote characters (ASCII and typographic) are special, doubled.
    import re

    quotes = "'\u2018\u2019\u201a\u201b"
    pat = re.compile(r"^\$env:(\w+) = '((?:[^" + quotes + r"]|[" + quotes + r"]{2})*)'\n", re.S | re.M)
    got = {m.group(1): re.sub("([" + quotes + "])\\1", r"\1", m.group(2)) for m in pat.finditer(text)}
    assert got == NASTY
    if shutil.which("pwsh"):
        pytest.skip("pwsh is present: the parse above is the reference; run by hand to compare")


def test_dotenv_format_round_trips_with_python_dotenv() -> None:
    dotenv = pytest.importorskip("dotenv")
    text = format_env(NASTY, "dotenv")
    # python-dotenv expands ${NAME} even in single quotes and has no escape for it; the format is
    # exact for readers that do not interpolate (docker compose's single quotes, interpolate=False).
    got = dotenv.dotenv_values(stream=io.StringIO(text), interpolate=False)
    assert got == NASTY


@pytest.mark.parametrize("name", ["1ABC", "A-B", "A B", ""])
def test_bad_variable_names_are_refused(name: str) -> None:
    from buildrows.errors import BadInput

    with pytest.raises(BadInput, match="not a valid environment variable name"):
        format_env({name: "x"}, "shell")


def test_append_keeps_lines_adds_missing_newline_and_writes_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "github.env"
    f.write_bytes(b"EXISTING=1")  # no trailing newline
    calls: list[int] = []
    real_write = os.write

    def counting_write(fd: int, data: bytes) -> int:
        calls.append(len(data))
        return real_write(fd, data)

    monkeypatch.setattr(envfile.os, "write", counting_write)
    append_file(f, "A=1\nB=2\n")
    assert f.read_bytes() == b"EXISTING=1\nA=1\nB=2\n"
    assert len(calls) == 1
    append_file(f, "C=3\n")
    assert f.read_bytes() == b"EXISTING=1\nA=1\nB=2\nC=3\n"


def test_append_works_without_pread_as_on_windows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(envfile.os, "pread", raising=False)  # Windows has no os.pread
    f = tmp_path / "github.env"
    f.write_bytes(b"EXISTING=1")  # no trailing newline: the last byte must be read
    append_file(f, "A=1\n")
    append_file(f, "B=2\n")
    assert f.read_bytes() == b"EXISTING=1\nA=1\nB=2\n"


def test_env_command_writes_the_same_values_everywhere_and_extends_cmake_args(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool_env(monkeypatch, tmp_path / "bin")
    fake_nvcc(tmp_path / "bin")
    gh, be, out = tmp_path / "gh", tmp_path / "be", tmp_path / "out.ps1"
    gh.write_text("OLD=kept\n")
    be.write_text("export OLD=kept\n")
    monkeypatch.setenv("GITHUB_ENV", str(gh))
    monkeypatch.setenv("BUILD_ENV_FILE", str(be))
    monkeypatch.setenv("CMAKE_ARGS", "-DUSER_THING=1 -DOTHER='a'")
    r = cli("--config", str(EXAMPLE_POLICY), "env", ROW, "--github-env", "--build-env-file",
            "--output", str(out), "--format", "powershell")
    assert r.code == 0, r.err
    assert gh.read_text().startswith("OLD=kept\n")
    assert be.read_text().startswith("export OLD=kept\n")
    github = parse_github_env(gh.read_text())
    shell = {k: v.decode() for k, v in read_back_bash(be, [k for k in github if k != "OLD"]).items()}
    assert {k: v for k, v in github.items() if k != "OLD"} == shell
    assert shell["TORCH_CUDA_ARCH_LIST"] == "7.5;8.0;8.6;8.9;9.0;10.0;12.0+PTX"
    assert shell["CU_VERSION"] == "cu130"
    assert shell["BUILDROWS_LOCAL_VERSION"] == "+cu130"
    assert shell["CMAKE_GENERATOR"] == "Ninja"
    assert shell["CUDACXX"] == str(tmp_path / "bin" / "nvcc")
    assert shell["CMAKE_ARGS"].startswith("-DUSER_THING=1 -DOTHER='a' ")  # extended, not replaced
    assert "-DEXECUTORCH_BUILD_CUDA=ON" in shell["CMAKE_ARGS"]
    assert "-DCMAKE_CUDA_ARCHITECTURES=75-real;80-real;86-real;89-real;90-real;100-real;120-real;120-virtual" in shell["CMAKE_ARGS"]
    assert "$env:TORCH_CUDA_ARCH_LIST = '7.5;8.0;8.6;8.9;9.0;10.0;12.0+PTX'" in out.read_text()


def test_env_refuses_before_writing_any_file_when_one_cannot_be_opened(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tool_env(monkeypatch, tmp_path / "bin")
    fake_nvcc(tmp_path / "bin")
    gh = tmp_path / "be.txt"
    gh.write_text("OLD=kept\n")
    monkeypatch.setenv("GITHUB_ENV", str(gh))
    bad = tmp_path / "nodir" / "x.env"
    r = cli("--config", str(EXAMPLE_POLICY), "env", ROW, "--github-env", "--output", str(bad))
    assert r.code == 2, r.err
    assert f"{bad}: cannot open the environment file" in r.err
    assert gh.read_bytes() == b"OLD=kept\n"


def test_append_files_removes_a_file_it_created_when_a_later_one_fails(tmp_path: Path) -> None:
    new = tmp_path / "new.env"
    with pytest.raises(envfile.BadInput, match="nodir"):
        envfile.append_files([(new, "A=1\n"), (tmp_path / "nodir" / "x", "A=1\n")])
    assert not new.exists()


def test_append_files_to_the_same_file_twice_writes_both(tmp_path: Path) -> None:
    f = tmp_path / "same.env"
    envfile.append_files([(f, "A=1"), (f, "B=2\n")])  # one lock per file: no self-deadlock
    assert f.read_bytes() == b"A=1\nB=2\n"


def test_env_leaves_cudacxx_alone_when_the_user_set_it(cli: Callable[..., Result], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    tool_env(monkeypatch, tmp_path / "bin")
    nvcc = fake_nvcc(tmp_path / "bin")
    monkeypatch.setenv("CUDACXX", f"{nvcc} -allow-unsupported-compiler")
    r = cli("--config", str(EXAMPLE_POLICY), "env", ROW, "--format", "dotenv")
    assert r.code == 0, r.err
    assert "CUDACXX" not in r.out
    assert "CMAKE_CUDA_COMPILER" not in r.out


@pytest.mark.parametrize(("argv", "setup", "code", "message"), [
    (["--github-env"], {}, 2, "--github-env was given but $GITHUB_ENV is not set"),
    (["--build-env-file"], {}, 2, "--build-env-file was given but $BUILD_ENV_FILE is not set"),
    ([], {"release": "12.6"}, 3, "is CUDA 13.0, but the toolkit found is CUDA 12.6.77"),
    ([], {"no_nvcc": "1"}, 3, "needs a CUDA 13.0 compiler and none was found"),
    ([], {"CUDACXX": "/nonexistent/nvcc -allow-unsupported-compiler"}, 2, "names '/nonexistent/nvcc', which does not exist"),
])
def test_env_guards(cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                    argv: list[str], setup: dict[str, str], code: int, message: str) -> None:
    tool_env(monkeypatch, tmp_path / "bin")
    if "no_nvcc" not in setup:
        fake_nvcc(tmp_path / "bin", setup.get("release", "13.0"), setup.get("release", "13.0") + ".77"
                  if "release" in setup else "13.0.88")
    if "CUDACXX" in setup:
        monkeypatch.setenv("CUDACXX", setup["CUDACXX"])
    r = cli("--config", str(EXAMPLE_POLICY), "env", ROW, *argv)
    assert r.code == code, r.err
    assert message in r.err


def test_env_of_a_cpu_row_has_no_cuda(cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      policy_copy: Callable[..., Path]) -> None:
    tool_env(monkeypatch, tmp_path / "bin")
    fake_nvcc(tmp_path / "bin")  # a toolkit is present, and must not be used
    pol = policy_copy('[platforms.linux-x86_64]\n', '[platforms.linux-x86_64]\ncpu = true\n')
    r = cli("--config", str(pol), "env", "linux-x86_64-cpu-py311", "--format", "dotenv")
    assert r.code == 0, r.err
    assert "CUDACXX" not in r.out
    # Written empty, not left out: a builder's inherited list must not reach a CPU row's build.
    for name in ("TORCH_CUDA_ARCH_LIST", "CUDAARCHS", "CMAKE_CUDA_ARCHITECTURES"):
        assert f"\n{name}=''\n" in r.out
    assert "CU_VERSION='cpu'" in r.out
    assert "-DEXECUTORCH_BUILD_CUDA=OFF" in r.out and "-DBUILDROWS_CUDA=OFF" in r.out


CUDA_EXAMPLE = REPO / "examples" / "cuda-extension" / "buildrows.toml"


def test_env_carries_the_wheels_metadata_like_build_does(cli: Callable[..., Result], tmp_path: Path) -> None:
    """CI builds from `env`/the hook: the example's metadata provider reads BUILDROWS_REQUIRES_DIST,
    so without it a CI-built wheel declares no runtime and fails its check."""
    r = cli("--config", str(CUDA_EXAMPLE), "env", "linux-x86_64-cu130-py311", "--no-toolchain-check",
            "--format", "shell")
    assert r.code == 0, r.err
    f = tmp_path / "cu.sh"
    f.write_text(r.out)
    got = read_back_bash(f, ["BUILDROWS_REQUIRES_DIST", "BUILDROWS_LOCAL_VERSION"])
    assert got["BUILDROWS_REQUIRES_DIST"] == b"nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'"
    assert got["BUILDROWS_LOCAL_VERSION"] == b"+cu130"
    r = cli("--config", str(CUDA_EXAMPLE), "env", "linux-x86_64-cpu-py311", "--format", "github")
    assert r.code == 0, r.err
    github = parse_github_env(r.out)
    assert github["BUILDROWS_REQUIRES_DIST"] == "" and github["BUILDROWS_LOCAL_VERSION"] == ""
    assert github["TORCH_CUDA_ARCH_LIST"] == github["CUDAARCHS"] == github["CMAKE_CUDA_ARCHITECTURES"] == ""


@pytest.mark.parametrize("value", [
    "C:/Program Files/x", 'say "hi"', "it's", "a;b;c", "$HOME and ${X}", "back\\slash", "tab\there",
    "mixed 'single' and \"double\"; $v", "75-real;80-real",
])
def test_cmake_args_define_survives_shlex_split(value: str) -> None:
    import shlex

    tokens = [envfile._define("A", value), envfile._define("B", "plain")]
    assert shlex.split(" ".join(tokens)) == [f"-DA={value}", "-DB=plain"]
    assert envfile._define("C", "75-real;80-real") == "-DC=75-real;80-real"  # bare when nothing needs quoting

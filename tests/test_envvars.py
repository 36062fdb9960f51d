"""The environment-variable table (buildrows/envvars.py) is held to the code: every BUILDROWS_*
name the package, its templates or its scripts use is in it, and every variable the package reads
from its own process environment is listed as read. FORCE_COLOR and NO_COLOR follow their
conventions."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from buildrows import cli, envvars
from buildrows.ui import wants_color

REPO = Path(__file__).resolve().parents[1]

#: BUILDROWS_* strings that are not variables: markers a child process prints on stdout for
#: buildrows to parse (torch's version, a build tree's interpreter) and heredoc delimiters.
NOT_VARIABLES = {"BUILDROWS_TORCH", "BUILDROWS_TREE", "BUILDROWS_EOF", "BUILDROWS_EOF_"}

_NAME = re.compile(r"\bBUILDROWS_[A-Z0-9_]*[A-Z0-9]\b|\bBUILDROWS_EOF_")
_PROCESS_READ = re.compile(r"""os\.(?:environ\.get\(|environ\[|getenv\()\s*["']([A-Z][A-Z0-9_]+)["']""")


def _sources() -> list[Path]:
    files = [p for p in (REPO / "buildrows").rglob("*") if p.suffix in (".py", ".toml", ".json")]
    files += [p for p in (REPO / "presets").rglob("*") if p.is_file()]
    files += [p for p in (REPO / "scripts").iterdir() if p.suffix in (".sh", ".ps1")]
    files += [p for p in (REPO / "cmake").rglob("*") if p.is_file()]
    return files


def test_every_buildrows_name_in_the_code_is_in_the_table() -> None:
    known = {name for name, _d, _doc in envvars.READ} | {name for name, _doc in envvars.SET} | NOT_VARIABLES
    found: dict[str, str] = {}
    for path in _sources():
        for name in _NAME.findall(path.read_text(errors="replace")):
            found.setdefault(name, str(path.relative_to(REPO)))
    missing = {name: where for name, where in found.items() if name not in known}
    assert not missing, f"add these to buildrows/envvars.py (READ or SET), then run scripts/gen_reference.py: {missing}"


def test_every_variable_read_from_the_process_is_listed() -> None:
    read = {name for name, _d, _doc in envvars.READ}
    passed_through = {"COLUMNS"}  # argparse's width, as argparse itself reads it
    missing = {}
    for path in (REPO / "buildrows").rglob("*.py"):
        for name in _PROCESS_READ.findall(path.read_text()):
            if name not in read and name not in passed_through:
                missing[name] = str(path.relative_to(REPO))
    assert not missing, f"add these to buildrows/envvars.py READ: {missing}"


def test_the_table_is_sorted_and_documented() -> None:
    names = [name for name, _d, _doc in envvars.READ]
    assert names == sorted(names)
    assert all(doc.strip() and default.strip() for _n, default, doc in envvars.READ)


def test_help_names_every_variable_read(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name, _d, _doc in envvars.READ:
        assert name in text
    assert "docs/reference/environment.md" in text


class _Tty(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(("environ", "tty", "github", "expected"), [
    ({}, True, False, True),                                  # a terminal: colour
    ({}, False, False, False),                                # a pipe: none
    ({"NO_COLOR": "1"}, True, False, False),                  # no-color.org
    ({"NO_COLOR": ""}, True, False, True),                    # "present and not an empty string"
    ({"FORCE_COLOR": "1"}, False, False, True),               # force-color.org: into a pipe
    ({"FORCE_COLOR": "1"}, False, True, True),                # and into GitHub's log
    ({"FORCE_COLOR": ""}, False, False, False),               # empty is unset
    ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, True, False, False),  # NO_COLOR wins, as in CPython
    ({"TERM": "dumb"}, True, False, False),
    ({}, True, True, False),                                  # GitHub Actions without FORCE_COLOR
])
def test_color_conventions(environ: dict[str, str], tty: bool, github: bool, expected: bool) -> None:
    assert wants_color(_Tty(tty), environ, github) is expected

"""The documentation cannot drift: the reference pages are what the code generates, every page
under docs/ is reachable from the README, and every relative link and anchor resolves."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from buildrows.policy import schema
from tests.conftest import REPO


def _generator() -> ModuleType:
    path = REPO / "scripts" / "gen_reference.py"
    spec = importlib.util.spec_from_file_location("gen_reference", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_reference"] = module
    spec.loader.exec_module(module)
    return module


gen = _generator()


# --- generated pages ---------------------------------------------------------------------------


def test_the_reference_pages_are_what_the_code_generates() -> None:
    stale = gen.stale(REPO)
    assert not stale, (
        "stale generated documentation: " + ", ".join(str(p) for p in stale)
        + f"\n    fix: run `{gen.REGENERATE}` from the repository root and commit the result"
    )


def test_a_page_that_differs_from_its_render_is_stale(tmp_path: Path) -> None:
    for rel, text in gen.pages().items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    assert gen.stale(tmp_path) == []
    (tmp_path / gen.POLICY_PAGE).write_text(gen.pages()[gen.POLICY_PAGE].replace("`driver`", "`drivr`"),
                                            encoding="utf-8")
    (tmp_path / gen.COMMANDS_PAGE).unlink()
    assert gen.stale(tmp_path) == [gen.POLICY_PAGE, gen.COMMANDS_PAGE]


def test_check_mode_names_the_stale_page_and_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(gen, "REPO", tmp_path)
    assert gen.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "docs/reference/policy.md is stale: regenerate it with `python scripts/gen_reference.py`" in err
    assert gen.main([]) == 0
    assert gen.main(["--check"]) == 0
    assert (tmp_path / gen.COMMANDS_PAGE).read_text(encoding="utf-8") == gen.commands_reference()


def test_every_policy_key_is_in_the_reference_with_its_type_default_and_description() -> None:
    page = gen.policy_reference()
    assert "| `driver` | one of `\"cmake-presets\"`, `\"scikit-build-core\"`, `\"setup.py\"` | `\"cmake-presets\"` | The build driver. |" in page
    assert "| `versions` | a list of strings | **required** |" in page
    assert "## [[platforms.PLATFORM.cuda]]" in page and "## [cuda.runtime.MAJOR]" in page

    def keys(node: schema.Node) -> list[str]:
        out: list[str] = []
        if isinstance(node, schema.Table):
            for k, sub in node.fields.items():
                out += [k, *keys(sub)]
        elif isinstance(node, schema.MapOf):
            out += keys(node.value)
        elif isinstance(node, schema.ArrayOf):
            out += keys(node.item)
        return out

    headings = re.findall(r"^## \[\[?([^\]]+)\]", page, re.M)
    sections = {part for h in headings for part in h.split(".")}
    missing = [k for k in keys(schema.POLICY) if f"| `{k}` |" not in page and k not in sections]
    assert not missing


def test_a_key_added_to_the_schema_reaches_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """Engineers add keys in schema.py only; the generator must pick them up without edits."""
    project = schema.POLICY.fields["project"]
    assert isinstance(project, schema.Table)
    grown = dataclasses.replace(project, fields={**project.fields,
                                                 "remote-cache": schema.Str("Where rows share objects.", default='""')})
    monkeypatch.setattr(schema, "POLICY", dataclasses.replace(schema.POLICY,
                                                              fields={**schema.POLICY.fields, "project": grown}))
    assert '| `remote-cache` | a string | `""` | Where rows share objects. |' in gen.policy_reference()


def test_an_option_added_to_a_command_reaches_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    from buildrows.commands import rows

    original = rows.add_arguments

    def grown(p: argparse.ArgumentParser) -> None:
        original(p)
        p.add_argument("--strict", action="store_true", help="fail when wheels of sibling rows differ")

    monkeypatch.setattr(rows, "add_arguments", grown)
    page = gen.commands_reference()
    assert "buildrows rows [SELECTOR ...] [--json] [--coverage] [--strict]" in page
    assert "| `--strict` | - | fail when wheels of sibling rows differ |" in page


def test_every_command_and_option_is_in_the_reference() -> None:
    from buildrows.cli import COMMANDS, build_parser

    page = gen.commands_reference()
    parser = build_parser(None)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in COMMANDS:
        assert f"## buildrows {name}\n" in page
        for action in sub.choices[name]._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help", "--config"):
                    assert f"`{flag}" in page, (name, flag)


# --- links ---------------------------------------------------------------------------------------

DOCS = REPO / "docs"
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """A page without code blocks, code spans and comments: where links are links."""
    return _CODE.sub("", _COMMENT.sub("", _FENCE.sub("", text)))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in _FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"^#{1,6}\s+(.*)$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(page: Path) -> list[str]:
    """Each relative link of `page` whose file or anchor does not exist, as 'page: target'."""
    bad: list[str] = []
    for target in _LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z]+:", target):  # https:, mailto: - not ours to check
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{page.relative_to(REPO)}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    return bad


def _pages() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


def _linked_from(page: Path) -> set[Path]:
    return {(page.parent / t.partition("#")[0]).resolve() for t in _LINK.findall(_prose(page.read_text(encoding="utf-8")))}


def test_every_docs_page_is_linked_from_the_index() -> None:
    index = DOCS / "index.md"
    linked = _linked_from(index)
    unlinked = [str(p.relative_to(REPO)) for p in sorted(DOCS.rglob("*.md")) if p != index and p.resolve() not in linked]
    assert not unlinked, f"pages not linked from docs/index.md: {unlinked}\n    fix: add each to docs/index.md"
    assert index.resolve() in _linked_from(REPO / "README.md"), "README.md must link docs/index.md"


def test_relative_links_and_anchors_resolve() -> None:
    bad = [b for page in _pages() for b in broken_links(page)]
    assert not bad, "\n".join(bad)


def test_a_broken_link_or_anchor_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    (tmp_path / "b.md").write_text("# The `env` command: A row's environment\n\n## Twice\n\n## Twice\n", encoding="utf-8")
    page = tmp_path / "a.md"
    page.write_text(
        "[ok](b.md) [ok](b.md#the-env-command-a-rows-environment) [ok](b.md#twice-1) [web](https://example.com)\n"
        "[gone](c.md) [bad anchor](b.md#environment) `[in code](d.md)`\n"
        "```\n[in a block](e.md)\n```\n<!-- [in a comment](f.md) -->\n",
        encoding="utf-8",
    )
    assert broken_links(page) == ["a.md: c.md (no such file)", "a.md: b.md#environment (no such heading)"]


def test_the_readme_stays_short() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines < 150, f"README.md has {lines} lines\n    fix: move detail into a page under docs/ and link it"


# --- examples in the guide ------------------------------------------------------------------------

_TOML_BLOCK = re.compile(r"^```toml\n(.*?)^```", re.S | re.M)


def policy_snippet_problems(page: Path) -> list[str]:
    """Each policy key of a ```toml block in `page` that the schema does not know, or of the wrong
    type. Blocks are fragments, so missing required keys are fine; a block that opens with a
    `# pyproject.toml` comment is another file's and is skipped."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib

    out: list[str] = []
    for i, block in enumerate(_TOML_BLOCK.findall(page.read_text(encoding="utf-8"))):
        if block.startswith("# pyproject.toml"):
            continue
        try:
            docs = [tomllib.loads(block)]
        except tomllib.TOMLDecodeError:
            # A block may show one key several ways (archs = "..." then archs = [...]): a line each.
            try:
                docs = [tomllib.loads(line) for line in block.splitlines() if line.strip()]
            except tomllib.TOMLDecodeError as e:
                out.append(f"{page.name} block {i + 1}: not TOML: {e}")
                continue
        for raw in docs:
            if "archs" in raw and not any(k in schema.POLICY.fields for k in raw):
                raw = {"platforms": {"linux-x86_64": {"cuda": [raw]}}}  # a list shown on its own
            problems = schema.validate(raw, page.name, lambda _path: None)
            out += [f"{page.name} block {i + 1}: {p.field}: {p.message}" for p in problems
                    if not p.message.startswith("missing required key")]
    return out


def test_the_guides_policy_examples_use_keys_the_schema_knows() -> None:
    bad = [b for page in sorted(DOCS.glob("*.md")) for b in policy_snippet_problems(page)]
    assert not bad, "\n".join(bad)


def test_a_misspelt_key_in_a_guide_example_is_found(tmp_path: Path) -> None:
    page = tmp_path / "guide.md"
    page.write_text('```toml\n[project]\ndriver = "setup.py"\nenv-switch = ["FORCE_CUDA"]\n```\n'
                    '```toml\n# pyproject.toml\n[project]\ndynamic = ["version"]\n```\n', encoding="utf-8")
    assert policy_snippet_problems(page) == ["guide.md block 1: project.env-switch: unknown key 'env-switch'"]


# --- the design page's package map ----------------------------------------------------------------


def package_map_problems(design: str, package: Path) -> list[str]:
    """Each module (and data file) under `package` that docs/design.md's package table does not
    name in its package's row: `buildrows/NAME/` rows name modules as `module`, the top-level row
    names files as `cli.py`, and the data row names its files. Commands are one module per command
    (their row says so, and the command reference lists them)."""
    rows: dict[str, set[str]] = {}
    top: set[str] = set()
    for line in design.splitlines():
        m = re.match(r"\| `buildrows/([\w.]+)/?` \|(.*)", line)
        if m:
            rows[m.group(1)] = set(re.findall(r"`([\w.]+)`", m.group(2)))
        elif line.startswith("| `") and "cli.py" in line:
            top = set(re.findall(r"`([\w.]+)`", line.split("|")[1]))
    out: list[str] = []
    for path in sorted(package.iterdir()):
        if path.name.startswith(("_", ".")) or path.name == "py.typed":
            continue
        if path.is_file() and path.suffix == ".py":
            if path.name not in top and path.stem not in rows and path.name not in rows:
                out.append(f"buildrows/{path.name}: not in docs/design.md's package table")
            continue
        if not path.is_dir() or path.name == "commands":
            continue
        if path.name not in rows:
            out.append(f"buildrows/{path.name}/: no row of its own in docs/design.md's package table")
            continue
        for child in sorted(path.iterdir()):
            if child.name.startswith(("_", ".")):
                continue
            name = child.name if path.name == "data" or child.suffix != ".py" else child.stem
            if name not in rows[path.name]:
                out.append(f"buildrows/{path.name}/{child.name}: not named in the `buildrows/{path.name}/` row of "
                           f"docs/design.md's package table")
    return out


def test_the_design_pages_package_map_names_every_module() -> None:
    bad = package_map_problems((DOCS / "design.md").read_text(encoding="utf-8"), REPO / "buildrows")
    assert not bad, "\n".join(bad) + "\n    fix: say in docs/design.md's table what each does, as `module`"


def test_a_module_missing_from_the_package_map_is_found(tmp_path: Path) -> None:
    pkg = tmp_path / "buildrows"
    (pkg / "check").mkdir(parents=True)
    (pkg / "data").mkdir()
    for name in ("check/__init__.py", "check/judges.py", "check/tags.py", "data/cuda_trains.toml", "cli.py",
                 "metadata.py", "new.py"):
        (pkg / name).write_text("", encoding="utf-8")
    design = ("| `buildrows/check/` | the judges (`judges`) | x |\n"
              "| `buildrows/data/` | `cuda_trains.toml` | x |\n"
              "| `buildrows/metadata.py` | the provider | x |\n"
              "| `cli.py`, `errors.py` | the entry point | x |\n")
    assert package_map_problems(design, pkg) == [
        "buildrows/check/tags.py: not named in the `buildrows/check/` row of docs/design.md's package table",
        "buildrows/new.py: not in docs/design.md's package table",
    ]


def test_a_hidden_option_is_described_not_shown_as_suppress(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "==SUPPRESS==" not in gen.commands_reference()
    assert "| `--write` | - | developers only, hidden from `--help`" in gen.commands_reference()
    # A new hidden option without a description stops the generator, naming what to add.
    monkeypatch.setattr(gen, "HIDDEN_HELP", {})
    with pytest.raises(SystemExit, match=r"(?s)buildrows schema --write is hidden from --help .*HIDDEN_HELP"):
        gen.commands_reference()


def opt_in_variables(tests: Path) -> set[str]:
    """The variables that switch on tests left out of the default run (`environ.get("X") == "1"`)."""
    pattern = re.compile(r'environ\.get\("(BUILDROWS_[A-Z0-9_]+)"\)\s*[!=]=\s*"1"')
    return {m for path in sorted(tests.glob("*.py")) for m in pattern.findall(path.read_text(encoding="utf-8"))}


def test_the_readme_names_every_opt_in_test_variable() -> None:
    found = opt_in_variables(REPO / "tests")
    assert "BUILDROWS_REAL_PROJECTS" in found
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    missing = sorted(v for v in found if f"`{v}=1`" not in readme)
    assert not missing, f"opt-in variables the README's Tests section does not name: {missing}"


def test_an_unnamed_opt_in_variable_is_found(tmp_path: Path) -> None:
    line = 'if os.environ.get("BUILDROWS_' + 'NEW_THING") != "1": skip()\n'  # split: this file is scanned too
    (tmp_path / "test_x.py").write_text(line, encoding="utf-8")
    assert opt_in_variables(tmp_path) == {"BUILDROWS_NEW_THING"}

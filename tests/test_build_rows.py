"""`buildrows build` over many rows: the summary table, --keep-going, and the worst exit code."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.build.report import _outcome_of_error
from buildrows.build.rows_plan import _stop_reason
from buildrows.build.summary import RowOutcome, render_markdown, render_table, totals, worst_exit
from buildrows.errors import CheckFailed, ExternalFailure, Refused
from buildrows.policy.load import load_policy

REPO = Path(__file__).resolve().parent.parent
EXECUTORCH = REPO / "tests" / "data" / "policies" / "executorch" / "buildrows.toml"

BUILT = RowOutcome("linux-x86_64-cu130-py311", "built", 0, "x-0.1+cu130-cp311-cp311-linux_x86_64.whl",
                   3_000_000, True, 12.34, "1/2 hits")


@pytest.mark.parametrize(("codes", "worst"), [
    ((), 0),
    ((0, 0), 0),
    ((0, 3), 3),
    ((3, 5), 5),        # a failed check is worse than a refusal
    ((5, 4), 4),        # a failed build step is worse than a failed check
    ((2, 3), 2),        # bad input is worse than a refusal
    ((4, 1, 5), 1),     # a bug in buildrows outranks everything
    ((4, 130), 130),    # a code outside SPEC §9 (interrupted) is never hidden
])
def test_worst_exit_code(codes: tuple[int, ...], worst: int) -> None:
    outcomes = [RowOutcome(f"r{i}", "built" if c == 0 else "failed", c) for i, c in enumerate(codes)]
    assert worst_exit(outcomes) == worst


def test_summary_table_lists_every_row_with_wheel_size_check_time_and_cache() -> None:
    refused = RowOutcome("linux-x86_64-cu132-py311", "refused", 3, reason="refused: no CUDA 13.2 compiler")
    skipped = RowOutcome("linux-x86_64-cu132-py312", "skipped", reason="stopped after linux-x86_64-cu132-py311 was refused")
    lines = render_table([BUILT, refused, skipped])
    assert lines[0].split() == ["row", "wheel", "size", "check", "time", "compiler", "cache"]
    assert set(lines[1]) == {"-", " "}
    assert lines[2].split() == ["linux-x86_64-cu130-py311", BUILT.wheel, "3.0", "MB", "PASS", "12.3s", "1/2", "hits"]
    assert "refused: no CUDA 13.2 compiler" in lines[3] and "REFUSED" in lines[3]
    assert "stopped after" in lines[4] and "not built" in lines[4]
    assert lines[0].index("check") == lines[2].index("PASS") == lines[3].index("REFUSED")  # aligned


def test_summary_cuts_a_long_reason_in_text_but_not_in_markdown() -> None:
    long = RowOutcome("r", "failed", 4, reason="step failed: " + "x" * 200)
    (line,) = render_table([long])[2:]
    assert "..." in line and len(line) < 200
    assert "x" * 200 in render_markdown([long])


def test_markdown_escapes_pipes() -> None:
    md = render_markdown([RowOutcome("r", "failed", 4, reason="a | b")])
    assert "a \\| b" in md and md.splitlines()[1] == "|---|---|---|---|---|---|"


def test_totals_say_what_happened_and_the_exit_code() -> None:
    bad_check = RowOutcome("r2", "built", 5, "w.whl", 1, False)
    text = totals([BUILT, bad_check, RowOutcome("r3", "refused", 3), RowOutcome("r4", "skipped")])
    assert text == "4 rows: 2 built (1 failed the check), 1 refused, 1 not built; exit code 5"


def test_stop_at_the_first_failure_unless_keep_going() -> None:
    ok = {"a": BUILT}
    assert _stop_reason(ok, keep_going=False) == ""
    failed = {"a": BUILT, "b": RowOutcome("b", "failed", 4)}
    assert _stop_reason(failed, keep_going=False) == "stopped after b failed (--keep-going builds the rest)"
    assert _stop_reason({"c": RowOutcome("c", "refused", 3)}, keep_going=False).startswith("stopped after c was refused")
    assert _stop_reason(failed, keep_going=True) == ""


def test_an_error_becomes_the_rows_outcome_with_its_exit_code() -> None:
    row = load_policy(EXECUTORCH).row("linux-x86_64-cu130-py311")
    assert row is not None
    o = _outcome_of_error(row, Refused(f"row {row.name} cannot be built on this machine (1 problem):\n"
                                       "  [MISSING] nvcc: none\n    fix: install it"))
    assert (o.status, o.exit_code) == ("refused", 3)
    assert o.reason == "refused: cannot be built on this machine (1 problem): [MISSING] nvcc: none"
    assert _outcome_of_error(row, ExternalFailure("step 'build' failed")).status == "failed"
    assert _outcome_of_error(row, CheckFailed("bad")).exit_code == 5


def test_refused_rows_are_reported_and_the_others_still_tried(cli: Callable[..., object]) -> None:
    # An empty row and a row of another machine: both refused, both in the summary, exit 3.
    r = cli("--config", str(EXECUTORCH), "build", "linux-aarch64-jetpack*", "linux-aarch64-cu130-py311",
            "--keep-going", "--no-compiler-cache")
    assert r.code == 3, r.err  # type: ignore[attr-defined]
    out = r.out  # type: ignore[attr-defined]
    assert "row" in out.splitlines()[1] and "compiler cache" in out
    assert "linux-aarch64-jetpack" in out and "declared empty" in out
    assert "linux-aarch64-cu130-py311" in out
    assert sum(1 for line in out.splitlines() if "REFUSED" in line.split()) == 2
    assert "2 rows: 0 built, 2 refused; exit code 3" in out
    assert "declared empty" in r.err and "built on linux-aarch64" in r.err  # type: ignore[attr-defined]


def test_without_keep_going_a_refusal_stops_before_any_build(cli: Callable[..., object], tmp_path: Path) -> None:
    # The example's policy with an empty row added: the CPU row passes doctor, and is not built.
    example = REPO / "examples" / "cuda-extension"
    text = (example / "buildrows.toml").read_text(encoding="utf-8").replace(
        'source-dir = "."', f'source-dir = "{example.as_posix()}"')
    policy = tmp_path / "buildrows.toml"
    policy.write_text(text + '\n[empty.linux-x86_64-gpu9]\nplatform = "linux-x86_64"\ncuda = "13.0"\n'
                      'python = "3.10"\nreason = "no such GPU"\n', encoding="utf-8")
    r = cli("--config", str(policy), "build", "linux-x86_64-gpu9", "linux-x86_64-cpu-py3*")
    assert r.code == 3, r.err  # type: ignore[attr-defined]
    out = r.out  # type: ignore[attr-defined]
    assert "stopped after linux-x86_64-gpu9 was refused (--keep-going builds the rest)" in out
    assert "not built" in out and "linux-x86_64-cpu-py310" in out
    assert "=== row" not in r.err  # type: ignore[attr-defined]


def test_each_row_gets_a_group_on_github_actions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import io

    from buildrows.ui import UI

    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    err = io.StringIO()
    ui = UI(out=io.StringIO(), err=err)
    with ui.section("row 1/2: linux-x86_64-cu130-py311"):
        ui.info("inside")
    assert err.getvalue() == "::group::row 1/2: linux-x86_64-cu130-py311\ninside\n::endgroup::\n"
    monkeypatch.delenv("GITHUB_ACTIONS")
    err = io.StringIO()
    with UI(out=io.StringIO(), err=err).section("row 1/2: x"):
        pass
    assert err.getvalue() == "=== row 1/2: x ===\n"


def test_github_step_summary_gets_the_markdown_table(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import io

    from buildrows.cli import main
    from buildrows.ui import UI

    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code = main(["--config", str(EXECUTORCH), "build", "linux-aarch64-jetpack*", "--no-compiler-cache"],
                UI(out=io.StringIO(), err=io.StringIO()))
    assert code == 3
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n### buildrows build\n")  # appended, the earlier content kept
    assert "| linux-aarch64-jetpack |" in text and "| REFUSED |" in text


def test_a_bug_in_one_row_is_that_rows_exit_1_and_the_summary_still_prints(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from buildrows.build import orchestrate as build
    from buildrows.cli import main
    from buildrows.ui import UI

    def provide(pol, row, env, host, args, ui):  # type: ignore[no-untyped-def]
        if row.name.endswith("py311"):
            raise KeyError("boom")
        raise Refused(f"row {row.name} cannot be built here\n    fix: elsewhere")

    monkeypatch.setattr(build, "provide", provide)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    out, err = io.StringIO(), io.StringIO()
    code = main(["--config", str(EXECUTORCH), "build", "linux-x86_64-cu130-py31[12]", "--keep-going"],
                UI(out=out, err=err))
    assert code == 1
    text = out.getvalue()
    assert "internal error: KeyError: 'boom'" in text and "REFUSED" in text
    assert "2 rows: 0 built, 1 failed, 1 refused; exit code 1" in text
    assert "this is a bug in buildrows" in err.getvalue()
    # One ::group:: per row, never nested (GitHub Actions does not nest groups).
    depth = 0
    for line in err.getvalue().splitlines():
        if line.startswith("::group::"):
            depth += 1
            assert depth == 1, line
        elif line == "::endgroup::":
            depth -= 1
    assert depth == 0
    assert "::group::prepare linux-x86_64-cu130-py311" in err.getvalue()

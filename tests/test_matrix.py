"""The release gate (SPEC §7): every rule has an input that must trip it, with its message asserted."""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from buildrows.ci.matrix import narrow
from buildrows.errors import BadInput, Refused
from buildrows.policy.load import load_policy
from tests.conftest import EXAMPLE_POLICY, Result

DATA = Path(__file__).parent / "data" / "generator"
LINUX = DATA / "linux-release-prfalse.json"
LINUX_PR = DATA / "linux-release-prtrue.json"
AARCH64 = DATA / "linux-aarch64-release-prfalse.json"
NIGHTLY = DATA / "linux-nightly-prfalse.json"
WINDOWS = DATA / "windows-release-prfalse.json"

PYTHONS = ["3.10", "3.11", "3.12", "3.13"]
LINUX_TRAINS = ["cu126", "cu130", "cu132"]


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def rows_of(r: Result) -> list[dict[str, Any]]:
    assert r.code == 0, r.err
    return json.loads(r.out)["include"]  # type: ignore[no-any-return]


@pytest.fixture
def matrix(cli: Callable[..., Result], tmp_path: Path) -> Callable[..., Result]:
    """matrix(doc_or_path, *flags, platform=..., config=...): run `buildrows matrix` on a document."""

    def run(doc: dict[str, Any] | list[Any] | str | Path, *flags: str, platform: str = "linux-x86_64",
            config: Path = EXAMPLE_POLICY) -> Result:
        if isinstance(doc, Path):
            src = doc
        else:
            src = tmp_path / "matrix.json"
            src.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
        return cli("--config", str(config), "matrix", "--platform", platform, "--from", str(src), *flags)

    return run


# --- what a good input gives -------------------------------------------------------------------


def test_linux_release_narrows_to_the_twelve_published_rows(matrix: Callable[..., Result]) -> None:
    rows = rows_of(matrix(LINUX))
    got = sorted((r["python_version"], r["desired_cuda"]) for r in rows)
    assert got == sorted((p, t) for p in PYTHONS for t in LINUX_TRAINS)
    # each kept row is the generator's row, unchanged where the policy does not correct it
    original = {r["build_name"]: r for r in load(LINUX)["include"]}
    for r in rows:
        assert r == original[r["build_name"]]


def test_pull_request_gets_exactly_one_row_the_preferred_train(matrix: Callable[..., Result]) -> None:
    """ExecuTorch's policy prefers 13.0 (its test machines run it): 13.2 on offer never outranks it."""
    rows = rows_of(matrix(LINUX_PR, "--pull-request"))
    assert len(rows) == 1
    assert rows[0]["desired_cuda"] == "cu130"
    assert rows[0]["build_name"] == "manywheel-py3_10-cuda13_0"


def test_pull_request_on_the_full_matrix_is_still_one_row(matrix: Callable[..., Result]) -> None:
    rows = rows_of(matrix(LINUX, "--pull-request"))
    assert [(r["python_version"], r["desired_cuda"]) for r in rows] == [("3.13", "cu130")]


def test_pull_request_falls_back_to_the_newest_train(matrix: Callable[..., Result]) -> None:
    doc = load(LINUX_PR)
    doc["include"] = [r for r in doc["include"] if r["desired_cuda"] != "cu130"]
    rows = rows_of(matrix(doc, "--pull-request"))
    assert [r["desired_cuda"] for r in rows] == ["cu132"]
    doc["include"] = [r for r in doc["include"] if r["desired_cuda"] == "cu126"]
    assert [r["desired_cuda"] for r in rows_of(matrix(doc, "--pull-request"))] == ["cu126"]


def test_pull_request_without_a_preference_takes_the_newest(matrix: Callable[..., Result],
                                                              policy_copy: Callable[..., Path]) -> None:
    config = policy_copy('pull-request = ["13.0"]\n', "")
    rows = rows_of(matrix(LINUX_PR, "--pull-request", config=config))
    assert [r["desired_cuda"] for r in rows] == ["cu132"]
    config = policy_copy('pull-request = ["13.0"]', 'pull-request = ["12.6", "13.0"]')
    assert [r["desired_cuda"] for r in rows_of(matrix(LINUX_PR, "--pull-request", config=config))] == ["cu126"]


def test_pull_request_does_not_require_every_combination(matrix: Callable[..., Result]) -> None:
    # the PR fixture has one python; a release on it fails, a pull request does not
    assert matrix(LINUX_PR).code == 3
    assert matrix(LINUX_PR, "--pull-request").code == 0


def test_aarch64_rows_keep_the_release_builder_image(matrix: Callable[..., Result],
                                                      policy_copy: Callable[..., Path]) -> None:
    """SPEC §7: the shared build setup expects conda in the release's image; the example overrides none."""
    rows = rows_of(matrix(AARCH64, platform="linux-aarch64"))
    assert len(rows) == 12
    original = {r["build_name"]: r for r in load(AARCH64)["include"]}
    for r in rows:
        assert r["container_image"] == original[r["build_name"]]["container_image"]
        assert r["container_image"].startswith("pytorch/manylinuxaarch64-builder:cuda")
    assert {r["desired_cuda"] for r in rows} == set(LINUX_TRAINS)  # cu134 dropped silently
    # an override only where a policy says so explicitly
    config = policy_copy('[platforms.linux-aarch64]\n', '[platforms.linux-aarch64]\nimage = "example/aarch64:cuda{cuda}"\n')
    for r in rows_of(matrix(AARCH64, platform="linux-aarch64", config=config)):
        assert r["container_image"] == f"example/aarch64:cuda{r['gpu_arch_version'].split('-')[0]}"


def test_trains_the_policy_does_not_publish_are_dropped_silently(matrix: Callable[..., Result]) -> None:
    r = matrix(NIGHTLY)  # offers cu134, 3.15 and 3.15t as well
    rows = rows_of(r)
    assert len(rows) == 12
    assert "cu134" not in {x["desired_cuda"] for x in rows}
    assert "warning" not in r.err and "error" not in r.err


@pytest.mark.parametrize("python", ["3.9", "3.14", "3.14t", "3.15t"])
def test_python_is_an_allowlist(matrix: Callable[..., Result], python: str) -> None:
    doc = load(LINUX)
    extra = copy.deepcopy(next(r for r in doc["include"] if r["desired_cuda"] == "cu130"))
    extra.update(python_version=python, build_name=f"manywheel-py{python.replace('.', '_')}-cuda13_0")
    doc["include"].append(extra)
    r = matrix(doc)
    assert python not in {x["python_version"] for x in rows_of(r)}
    assert f"python {python} is not on the allowlist" in r.err


def test_cuda_train_is_an_allowlist(matrix: Callable[..., Result]) -> None:
    doc = load(LINUX)
    extra = copy.deepcopy(doc["include"][1])
    extra.update(desired_cuda="cu118", gpu_arch_version="11.8", build_name="manywheel-py3_10-cuda11_8")
    doc["include"].append(extra)
    r = matrix(doc)
    assert "cu118" not in {x["desired_cuda"] for x in rows_of(r)}
    assert "the policy does not publish CUDA 11.8 for linux-x86_64" in r.err


def test_cpu_rows_are_dropped_when_the_policy_has_none(matrix: Callable[..., Result]) -> None:
    r = matrix(LINUX)
    assert "cpu" not in {x["desired_cuda"] for x in rows_of(r)}
    assert "dropped 4 rows: the policy has no CPU rows for linux-x86_64" in r.err


def test_cpu_rows_are_kept_when_the_policy_has_them(matrix: Callable[..., Result], policy_copy: Callable[..., Path]) -> None:
    cfg = policy_copy('[platforms.linux-x86_64]\ntrains = ["12.6", "13.0", "13.2"]',
                      '[platforms.linux-x86_64]\ntrains = ["12.6", "13.0", "13.2"]\ncpu = true')
    rows = rows_of(matrix(LINUX, config=cfg))
    assert len(rows) == 16
    assert sorted(x["python_version"] for x in rows if x["desired_cuda"] == "cpu") == PYTHONS
    # and a release then needs the CPU rows as well
    doc = load(LINUX)
    doc["include"] = [x for x in doc["include"] if not (x["desired_cuda"] == "cpu" and x["python_version"] == "3.11")]
    r = matrix(doc, config=cfg)
    assert r.code == 3
    assert "linux-x86_64-cpu-py311 (python 3.11, CPU)" in r.err


# --- must-fail: a release missing a combination --------------------------------------------------


@pytest.mark.parametrize("python", PYTHONS)
@pytest.mark.parametrize("train", LINUX_TRAINS)
def test_release_fails_naming_each_missing_combination(matrix: Callable[..., Result], python: str, train: str) -> None:
    doc = load(LINUX)
    doc["include"] = [x for x in doc["include"] if (x["python_version"], x["desired_cuda"]) != (python, train)]
    r = matrix(doc)
    assert r.code == 3, r.out
    dotted = f"{train[2:-1]}.{train[-1]}"
    assert f"linux-x86_64-{train}-py{python.replace('.', '')} (python {python}, CUDA {dotted})" in r.err
    assert "offered no row for 1 combination(s)" in r.err
    assert r.out == ""


def test_release_names_every_missing_combination_at_once(matrix: Callable[..., Result]) -> None:
    r = matrix(WINDOWS, platform="windows-amd64")  # the generator offers no 13.4, which Windows publishes
    assert r.code == 3
    for py in ("310", "311", "312", "313"):
        assert f"windows-amd64-cu134-py{py} (python 3.{py[1:]}, CUDA 13.4)" in r.err
    assert "offered no row for 4 combination(s)" in r.err


# --- must-fail: empty and JetPack ------------------------------------------------------------------


def test_empty_result_fails_with_its_own_message(matrix: Callable[..., Result]) -> None:
    doc = load(LINUX)
    doc["include"] = [x for x in doc["include"] if x["desired_cuda"] == "cpu"]  # e.g. with-cuda: enabled
    for flags in ((), ("--pull-request",)):
        r = matrix(doc, *flags)
        assert r.code == 3
        assert "the narrowed matrix for linux-x86_64 is empty" in r.err
        assert "with-cuda: enable" in r.err
        assert r.out == ""
    r = matrix({"include": []})
    assert r.code == 3
    assert "offered 0 row(s) (none)" in r.err


def test_jetpack_fails_with_the_declared_reason(matrix: Callable[..., Result]) -> None:
    r = matrix(AARCH64, "--jetpack", platform="linux-aarch64")
    assert r.code == 3
    assert "linux-aarch64-jetpack is declared empty: published PyTorch carries no device code" in r.err
    assert "is empty:" not in r.err  # not the generic empty-matrix message
    r = matrix(LINUX, "--jetpack")
    assert r.code == 3
    assert "declares no JetPack row for linux-x86_64" in r.err


# --- must-fail: malformed input --------------------------------------------------------------------


def _with(change: Callable[[dict[str, Any]], None], index: int = 1) -> dict[str, Any]:
    doc = load(LINUX)
    change(doc["include"][index])
    return doc


MALFORMED: list[tuple[str, Any, list[str]]] = [
    ("bad json", '{"include": [', ["not valid JSON", "line 1 column 14"]),
    ("top level a list", [], ["the top level is a JSON array, not an object"]),
    ("no include", {"matrix": []}, ["no `include` list (keys: matrix)"]),
    ("include not a list", {"include": {"a": 1}}, ["`include` is a JSON object, not a list"]),
    ("row not an object", {"include": ["cu130"]}, ["row 0: is a JSON string, not an object"]),
    ("no desired_cuda", _with(lambda r: r.pop("desired_cuda")),
     ["row 1 (manywheel-py3_10-cuda12_6)", "[desired_cuda]", "missing 'desired_cuda'"]),
    ("no python_version", _with(lambda r: r.pop("python_version")),
     ["row 1 (manywheel-py3_10-cuda12_6)", "[python_version]", "missing 'python_version'"]),
    ("misspelled field", _with(lambda r: r.update(desired_cud=r.pop("desired_cuda"))),
     ["missing 'desired_cuda'", "did you mean 'desired_cud'?"]),
    ("train with a dot", _with(lambda r: r.update(desired_cuda="cu13.0", gpu_arch_version="13.0")),
     ["[desired_cuda]", "'cu13.0' is not a CUDA train", "write 'cu130'"]),
    ("train as a number", _with(lambda r: r.update(desired_cuda=130)),
     ["[desired_cuda]", "is a JSON number (130), not a string"]),
    ("python as a number", _with(lambda r: r.update(python_version=3.1)),
     ["[python_version]", "is a JSON number (3.1), not a string"]),
    ("python garbage", _with(lambda r: r.update(python_version="py3.12")),
     ["[python_version]", "'py3.12' is not a Python version"]),
    ("image not a string", _with(lambda r: r.update(container_image=None)),
     ["[container_image]", "is a JSON null"]),
    ("versions disagree", _with(lambda r: r.update(gpu_arch_version="13.0")),
     ["[gpu_arch_version]", "gpu_arch_version '13.0' disagrees with desired_cuda 'cu126'"]),
    ("type disagrees", _with(lambda r: r.update(gpu_arch_type="cpu")),
     ["[gpu_arch_type]", "gpu_arch_type 'cpu' disagrees with desired_cuda 'cu126'"]),
    ("cpu row with a version", _with(lambda r: r.update(gpu_arch_version="12.6"), index=0),
     ["[gpu_arch_version]", "gpu_arch_version '12.6' on a CPU row"]),
]


@pytest.mark.parametrize(("doc", "expected"), [(d, e) for _, d, e in MALFORMED], ids=[n for n, _, _ in MALFORMED])
def test_malformed_input_names_the_row_and_field(matrix: Callable[..., Result], doc: Any, expected: list[str]) -> None:
    r = matrix(doc)
    assert r.code == 2, r.err
    for text in expected:
        assert text in r.err
    assert "Traceback" not in r.err
    assert "fix:" in r.err
    assert r.out == ""


def test_every_malformed_row_is_reported_at_once(matrix: Callable[..., Result]) -> None:
    doc = load(LINUX)
    doc["include"][2].pop("desired_cuda")
    doc["include"][5]["desired_cuda"] = "cu13.2"
    r = matrix(doc)
    assert r.code == 2
    assert "(2 problems)" in r.err
    assert "row 2 (manywheel-py3_10-cuda13_0)" in r.err
    assert "row 5 (manywheel-py3_11-cuda12_6)" in r.err


def test_duplicate_rows_are_refused(matrix: Callable[..., Result]) -> None:
    doc = load(LINUX)
    doc["include"].append(copy.deepcopy(doc["include"][1]))
    r = matrix(doc)
    assert r.code == 2
    assert "row 24 (manywheel-py3_10-cuda12_6): offers linux-x86_64-cu126-py310 again (first offered by row 1" in r.err


def test_duplicates_of_dropped_rows_do_not_matter(matrix: Callable[..., Result]) -> None:
    doc = load(LINUX)
    doc["include"].append(copy.deepcopy(doc["include"][0]))  # a second cpu py3.10 row, dropped anyway
    assert len(rows_of(matrix(doc))) == 12


def test_a_matrix_for_another_platform_is_refused(matrix: Callable[..., Result]) -> None:
    r = matrix(LINUX, platform="linux-aarch64")
    assert r.code == 2
    assert "comes from an x86_64 generator, but --platform is linux-aarch64" in r.err
    r = matrix(AARCH64, platform="linux-x86_64")
    assert r.code == 2
    assert "comes from an aarch64 generator, but --platform is linux-x86_64" in r.err
    r = matrix(WINDOWS, platform="linux-x86_64")
    assert r.code == 2
    assert "validation_runner 'windows.4xlarge' is a windows runner" in r.err
    r = matrix(LINUX, platform="windows-amd64")
    assert r.code == 2
    assert "is a linux runner, but --platform is windows-amd64" in r.err


def test_unknown_platform(matrix: Callable[..., Result]) -> None:
    r = matrix(LINUX, platform="linux-x86-64")
    assert r.code == 2
    assert "did you mean linux-x86_64?" in r.err


def test_other_accelerators_are_dropped_not_errors(matrix: Callable[..., Result]) -> None:
    doc = load(LINUX)
    rocm = copy.deepcopy(doc["include"][1])
    rocm.update(gpu_arch_type="rocm", gpu_arch_version="6.4", desired_cuda="rocm6.4", build_name="manywheel-py3_10-rocm6_4")
    doc["include"].append(rocm)
    assert len(rows_of(matrix(doc))) == 12


# --- I/O: stdin, $GITHUB_OUTPUT ----------------------------------------------------------------------


def test_reads_stdin_and_appends_to_github_output(cli: Callable[..., Result], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "github_output"
    out.write_text("earlier=1\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    monkeypatch.setattr("sys.stdin", io.StringIO(LINUX_PR.read_text(encoding="utf-8")))
    r = cli("--config", str(EXAMPLE_POLICY), "matrix", "--platform", "linux-x86_64", "--from", "-",
            "--pull-request", "--github-output")
    assert r.code == 0, r.err
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "earlier=1"
    assert len(lines) == 2 and lines[1].startswith("matrix=")
    assert json.loads(lines[1][len("matrix="):]) == json.loads(r.out)


def test_github_output_unset_is_bad_input(cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    r = cli("--config", str(EXAMPLE_POLICY), "matrix", "--platform", "linux-x86_64", "--from", str(LINUX),
            "--github-output")
    assert r.code == 2
    assert "$GITHUB_OUTPUT is not set" in r.err


def test_unwritable_github_output_is_bad_input(cli: Callable[..., Result], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nodir" / "github_output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(missing))  # was FileNotFoundError, an internal error (exit 1)
    r = cli("--config", str(EXAMPLE_POLICY), "matrix", "--platform", "linux-x86_64", "--from", str(LINUX),
            "--github-output")
    assert r.code == 2, r.err
    assert f"{missing}: cannot open the environment file" in r.err


def test_github_output_without_a_final_newline_gets_matrix_on_its_own_line(
        cli: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "github_output"
    out.write_bytes(b"earlier=1")
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    r = cli("--config", str(EXAMPLE_POLICY), "matrix", "--platform", "linux-x86_64", "--from", str(LINUX),
            "--github-output")
    assert r.code == 0, r.err
    assert out.read_text(encoding="utf-8").splitlines()[0] == "earlier=1"


def test_unreadable_file(matrix: Callable[..., Result], tmp_path: Path) -> None:
    r = matrix(tmp_path / "nope.json")
    assert r.code == 2
    assert "cannot read the matrix" in r.err


def test_github_annotations_on_refusal(matrix: Callable[..., Result], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    r = matrix(LINUX_PR)
    assert r.code == 3
    assert "::error title=buildrows refused::" in r.err


# --- the library function, without the CLI ----------------------------------------------------------


def test_narrow_is_pure_and_raises_typed_errors() -> None:
    pol = load_policy(EXAMPLE_POLICY)
    res = narrow(pol, "linux-x86_64", LINUX.read_text(encoding="utf-8"))
    assert [r.name for r in res.rows][:3] == ["linux-x86_64-cu126-py310", "linux-x86_64-cu130-py310",
                                              "linux-x86_64-cu132-py310"]
    assert res.offered == 24
    with pytest.raises(Refused):
        narrow(pol, "linux-x86_64", LINUX_PR.read_text(encoding="utf-8"))
    with pytest.raises(BadInput):
        narrow(pol, "linux-x86_64", "[]")


def test_a_flood_of_problems_is_capped(matrix: Callable[..., Result]) -> None:
    doc = load(LINUX)
    for r in doc["include"]:
        r["desired_cuda"] = "cu13.0"
    r = matrix(doc)
    assert r.code == 2
    assert r.err.count("is not a CUDA train") == 20
    assert "... and 4 more problem(s) like these, not shown" in r.err

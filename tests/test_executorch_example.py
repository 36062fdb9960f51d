"""examples/executorch/buildrows.toml against the sources it names (issue 22).

Each expected value below is copied from its source, cited as the example's comments cite it:
ET@cff6f4dd32 is pytorch/executorch at cff6f4dd32e630945b7188512c1f2b4f102b05ad; the WIN seed is
shared/seeds/executorch-windows-cuda-wheel.md (the latest text; it governs where it says more). The
collected values and line numbers are in notes/issue22-facts.md.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.ci.matrix import narrow
from buildrows.ci.workflow import plan
from buildrows.policy.load import load_policy
from buildrows.policy.model import Policy
from buildrows.policy.trains import Train
from tests.conftest import REPO, Result

EXAMPLE = REPO / "examples" / "executorch" / "buildrows.toml"
GENERATOR = REPO / "tests" / "data" / "generator"

# ET@cff6f4dd32 .github/scripts/filter_cuda_matrix.py l.64 SUPPORTED_PYTHON_VERSIONS
SUPPORTED_PYTHON_VERSIONS = ["3.10", "3.11", "3.12", "3.13", "3.14"]
# filter_cuda_matrix.py l.40 DISABLED_PYTHON_VERSIONS
DISABLED_PYTHON_VERSIONS = ["3.13t", "3.14t", "3.15", "3.15t"]
# WIN seed l.20: "today cu132 and cu134; main stopped publishing cu130 in #23380"
PUBLISHED = ["13.2", "13.4"]
# WIN seed l.20 ("install_utils.py's list also has 12.6 for source builds"), l.30 ("13.0 is no
# longer published (#23380) but still builds from source")
BUILD_ONLY = ["12.6", "13.0"]
# ET@cff6f4dd32 .ci/scripts/wheel/cuda_arch_list.sh: l.34-35 (x86_64 cu130/cu132), l.39-40
# (aarch64 cu130/cu132), l.62 (x86_64 cu126), l.63 (aarch64 cu126); WIN seed l.36-37 (cu134 =
# the 13.x list; Windows = x86_64: "sm_80/86/89/90/100/120, plus sm_120 PTX")
ARCHS = {
    ("linux-x86_64", "12.6"): ["8.0", "8.6", "8.9", "9.0"],
    ("linux-x86_64", "13.0"): ["8.0", "8.6", "8.9", "9.0", "10.0", "12.0"],
    ("linux-x86_64", "13.2"): ["8.0", "8.6", "8.9", "9.0", "10.0", "12.0"],
    ("linux-x86_64", "13.4"): ["8.0", "8.6", "8.9", "9.0", "10.0", "12.0"],
    ("linux-aarch64", "12.6"): ["8.0", "8.7", "9.0"],
    ("linux-aarch64", "13.0"): ["8.0", "9.0", "10.0", "11.0", "12.0"],
    ("linux-aarch64", "13.2"): ["8.0", "9.0", "10.0", "11.0", "12.0"],
    ("linux-aarch64", "13.4"): ["8.0", "9.0", "10.0", "11.0", "12.0"],  # inferred: no source gives it
    ("windows-amd64", "13.0"): ["8.0", "8.6", "8.9", "9.0", "10.0", "12.0"],
    ("windows-amd64", "13.2"): ["8.0", "8.6", "8.9", "9.0", "10.0", "12.0"],
    ("windows-amd64", "13.4"): ["8.0", "8.6", "8.9", "9.0", "10.0", "12.0"],
}
# backends/cuda/CMakeLists.txt @cff6f4dd32: PTX for the numerically newest entry only
# filter_cuda_matrix.py l.74-75: PR_PYTHON_VERSION = SUPPORTED_PYTHON_VERSIONS[0], PR_CUDA_VERSION = "cu130"
PR_CUDA, PR_PYTHON = "13.0", "3.10"


@pytest.fixture(scope="module")
def pol() -> Policy:
    return load_policy(EXAMPLE)


def test_pythons_follow_the_newer_source(pol: Policy) -> None:
    assert list(pol.pythons) == SUPPORTED_PYTHON_VERSIONS
    assert sorted(dict(pol.excluded_pythons)) == sorted(DISABLED_PYTHON_VERSIONS)
    assert "CUDA dependencies are not published" in dict(pol.excluded_pythons)["3.14t"]


def test_published_and_build_only_trains(pol: Policy) -> None:
    assert [t.dotted for t in pol.build_only_trains] == BUILD_ONLY
    assert sorted(t.dotted for t in pol.trains) == sorted(PUBLISHED + BUILD_ONLY)
    for platform in pol.platforms:
        published = sorted({r.cuda.dotted for r in pol.rows
                            if r.platform == platform and r.cuda and pol.publishes(r)})
        assert published == PUBLISHED, platform


@pytest.mark.parametrize(("platform", "train"), sorted(ARCHS))
def test_architecture_lists(pol: Policy, platform: str, train: str) -> None:
    for py in SUPPORTED_PYTHON_VERSIONS:
        row = pol.row(f"{platform}-cu{train.replace('.', '')}-py{py.replace('.', '')}")
        assert row is not None and row.archs is not None
        assert row.archs.dotted == ARCHS[(platform, train)]
        assert [a.dotted for a in row.archs.ptx] == [ARCHS[(platform, train)][-1]]


def test_build_only_rows_stay_buildable_but_leave_the_release(pol: Policy) -> None:
    """12.6 and 13.0 rows exist for build, doctor and the hook; the release matrix drops them."""
    assert pol.row("linux-x86_64-cu126-py312") is not None and pol.row("linux-x86_64-cu130-py312") is not None
    text = (GENERATOR / "linux-nightly-prfalse.json").read_text(encoding="utf-8")
    out = narrow(pol, "linux-x86_64", text, source="nightly")
    assert sorted({r.cuda.dotted for r in out.rows if r.cuda}) == PUBLISHED
    assert len(out.rows) == len(PUBLISHED) * len(SUPPORTED_PYTHON_VERSIONS)
    assert any("CUDA 13.0 is build-only in the policy (built from source, not published)" in d.reason
               for d in out.dropped)
    gen = dict(plan(pol, root=REPO, out_dir=REPO / ".github" / "workflows")[0].generator_inputs)
    assert gen["python-versions"] == '["3.10", "3.11", "3.12", "3.13", "3.14"]'


def _rank_like_executorch(offered: list[str], pythons: list[tuple[str, str]]) -> tuple[str, str]:
    """filter_cuda_matrix.py l.119-152, transcribed: distance by position in the published list,
    the preferred train, then older nearest first, then newer nearest first; then the preferred Python."""
    supported = ["cu" + t.replace(".", "") for t in PUBLISHED]

    def rank_of(cuda: str) -> int:
        return supported.index(cuda) if cuda in supported else -1

    wanted = rank_of("cu" + PR_CUDA.replace(".", ""))

    def rank(item: tuple[str, str]) -> tuple[int, bool]:
        offered_rank = rank_of(item[0])
        closeness = offered_rank if offered_rank <= wanted else wanted - offered_rank
        return (closeness, item[1] == PR_PYTHON)

    return max([p for p in pythons if p[0] in offered], key=rank)


@pytest.mark.parametrize("fixture", ["linux-release-prtrue.json", "linux-nightly-prfalse.json"])
def test_pull_request_row_follows_executorchs_closeness_rule(pol: Policy, fixture: str) -> None:
    import json

    text = (GENERATOR / fixture).read_text(encoding="utf-8")
    out = narrow(pol, "linux-x86_64", text, source=fixture, pull_request=True)
    (row,) = out.rows
    data = json.loads(text)
    items = [(r["desired_cuda"], r["python_version"]) for r in (data["include"] if isinstance(data, dict) else data)]
    cuda, python = _rank_like_executorch(["cu132", "cu134"], items)
    assert (row.accel, row.python) == (cuda, python) == ("cu132", "3.10")


def test_the_rule_prefers_older_over_newer_and_the_preferred_when_offered(tmp_path: Path) -> None:
    """The same rule with 13.0 published: 13.0 itself; without it the nearest older (12.6) before the
    nearer newer (13.2), as filter_cuda_matrix.py's negative closeness says."""
    text = EXAMPLE.read_text(encoding="utf-8").replace('build-only = ["12.6", "13.0"]', 'build-only = []')
    cfg = tmp_path / "buildrows.toml"
    cfg.write_text(text, encoding="utf-8")
    nightly = (GENERATOR / "linux-nightly-prfalse.json").read_text(encoding="utf-8")
    (row,) = narrow(load_policy(cfg), "linux-x86_64", nightly, pull_request=True).rows
    assert (row.cuda, row.python) == (Train(13, 0), "3.10")
    # 13.0 not on offer: the nearest older train (12.6) outranks the nearer newer one (13.2)
    (row,) = narrow(load_policy(cfg), "linux-x86_64", _drop_train(nightly, "cu130"), pull_request=True).rows
    assert (row.cuda, row.python) == (Train(12, 6), "3.10")


def _drop_train(text: str, cu: str) -> str:
    import json

    data = json.loads(text)
    rows = data["include"] if isinstance(data, dict) else data
    kept = [r for r in rows if r["desired_cuda"] != cu]
    return json.dumps({"include": kept} if isinstance(data, dict) else kept)


def test_the_hook_finds_a_build_only_row(pol: Policy) -> None:
    from buildrows.ci.hook import find_row

    assert find_row(pol, {"CU_VERSION": "cu126"}, "3.12", "linux-x86_64").name == "linux-x86_64-cu126-py312"
    assert find_row(pol, {"DESIRED_CUDA": "cu130"}, "3.14", "windows-amd64").name == "windows-amd64-cu130-py314"


@pytest.mark.parametrize(("edit", "message"), [
    ('build-only = ["12.6", "13.0"]', 'build-only = ["12.8"]'),
    ('build-only = ["12.6", "13.0"]', 'build-only = ["12.6", "13.0", "13.2", "13.4"]'),
    ('build-only = ["12.6", "13.0"]', 'build-only = ["12.6", "12.6"]'),
    ('pull-request-fallback = "closest"', 'pull-request-fallback = "nearest"'),
])
def test_build_only_and_pull_request_keys_are_checked(tmp_path: Path, edit: str, message: str) -> None:
    from buildrows.errors import BadInput

    cfg = tmp_path / "buildrows.toml"
    cfg.write_text(EXAMPLE.read_text(encoding="utf-8").replace(edit, message), encoding="utf-8")
    with pytest.raises(BadInput) as e:
        load_policy(cfg)
    text = str(e.value)
    want = {
        'build-only = ["12.8"]': "CUDA 12.8 is build-only but not on the train allowlist",
        'build-only = ["12.6", "13.0", "13.2", "13.4"]': "every train is build-only, so the policy publishes no CUDA wheel",
        'build-only = ["12.6", "12.6"]': "'12.6' is listed twice",
        'pull-request-fallback = "nearest"': "pull-request-fallback",
    }[message]
    assert want in text, text


def test_rows_marks_build_only_rows(cli: Callable[..., Result]) -> None:
    import json

    r = cli("--config", str(EXAMPLE), "rows", "linux-x86_64-cu1[23][04]-py310")
    assert r.code == 0, r.err
    assert r.out.splitlines() == [
        "linux-x86_64-cu130-py310         8.0;8.6;8.9;9.0;10.0;12.0+PTX  (build-only: not published)",
        "linux-x86_64-cu134-py310         8.0;8.6;8.9;9.0;10.0;12.0+PTX"]
    r = cli("--config", str(EXAMPLE), "rows", "linux-x86_64-cu1[23][04]-py310", "--json")
    assert [row["published"] for row in json.loads(r.out)] == [False, True]

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_POLICY, REPO, Result

X86_13 = ["7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0"]
EXPECTED = {
    ("linux-x86_64", "13.0"): X86_13,
    ("linux-x86_64", "13.2"): X86_13,
    ("linux-x86_64", "12.6"): ["7.5", "8.0", "8.6", "8.9", "9.0"],
    ("linux-aarch64", "13.0"): ["9.0", "10.0", "11.0"],
    ("linux-aarch64", "13.2"): ["9.0", "10.0", "11.0"],
    ("linux-aarch64", "12.6"): ["8.0", "9.0"],
    ("windows-amd64", "13.0"): ["8.0", "8.6", "8.9", "9.0", "10.0", "12.0"],
    ("windows-amd64", "13.2"): ["8.0", "8.6", "8.9", "9.0", "10.0", "12.0"],
    ("windows-amd64", "13.4"): ["8.0", "8.6", "8.9", "9.0", "10.0", "12.0"],
}


def test_example_rows_are_the_seed_rows(cli: Callable[..., Result]) -> None:
    r = cli("--config", str(EXAMPLE_POLICY), "rows", "--json")
    assert r.code == 0, r.err
    rows = json.loads(r.out)
    built = [x for x in rows if "empty_reason" not in x]
    assert len(built) == 9 * 4
    for x in built:
        assert x["python"] in {"3.10", "3.11", "3.12", "3.13"}
        assert x["archs"] == EXPECTED[(x["platform"], x["cuda"])]
        assert x["ptx"] == x["archs"][-1]
        assert x["torch_cuda_arch_list"] == ";".join(x["archs"][:-1] + [x["archs"][-1] + "+PTX"])
        assert x["cmake_cuda_architectures"].endswith(
            x["archs"][-1].replace(".", "") + "-real;" + x["archs"][-1].replace(".", "") + "-virtual"
        )
        assert x["name"] == f"{x['platform']}-cu{x['cuda'].replace('.', '')}-py{x['python'].replace('.', '')}"
        assert x["os"] == x["platform"].split("-")[0]
        assert x["machine"] == x["platform"].split("-")[1]
    empty = [x for x in rows if "empty_reason" in x]
    assert [x["name"] for x in empty] == ["linux-aarch64-jetpack"]
    assert "published PyTorch carries no device code" in empty[0]["empty_reason"]


def test_globs_select_rows(cli: Callable[..., Result]) -> None:
    r = cli("--config", str(EXAMPLE_POLICY), "rows", "linux-*-cu13*-py312", "--json")
    names = [x["name"] for x in json.loads(r.out)]
    assert names == [
        "linux-x86_64-cu130-py312", "linux-x86_64-cu132-py312",
        "linux-aarch64-cu130-py312", "linux-aarch64-cu132-py312",
    ]
    r = cli("--config", str(EXAMPLE_POLICY), "rows", "linux-x86_64-cu130-py3l2")
    assert r.code == 2
    assert "did you mean linux-x86_64-cu130-py312" in r.err


def test_pyproject_tool_table(tmp_path: Path, example_text: str, cli: Callable[..., Result]) -> None:
    body = example_text.replace("[project]", "[tool.buildrows.project]")
    for head in ("[python", "[cuda", "[platforms", "[[platforms", "[empty"):
        body = body.replace("\n" + head, "\n" + head[: head.index("[") + (2 if head.startswith("[[") else 1)] + "tool.buildrows." + head.lstrip("["))
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "1"\n\n' + body)
    r = cli("--config", str(tmp_path), "rows", "--json")
    assert r.code == 0, r.err
    assert len(json.loads(r.out)) == 37


MISSING_LIST = ('trains = ["12.6"]\narchs = "8.0 9.0"\n', 'trains = ["12.6"]\n')


@pytest.mark.parametrize("command", [("rows",), ("show", "linux-x86_64-cu130-py312"), ("render", "linux-x86_64-cu130-py312"),
                                     ("env", "linux-x86_64-cu130-py312"), ("hook",), ("build", "linux-x86_64-cu130-py312"),
                                     ("doctor", "linux-x86_64-cu130-py312"), ("matrix", "--platform", "linux-x86_64", "--from", "-")])
def test_missing_list_refuses_every_loading_command(command: tuple[str, ...], policy_copy: Callable[..., Path],
                                                    cli: Callable[..., Result]) -> None:
    p = policy_copy(*MISSING_LIST)
    r = cli("--config", str(p), *command)
    assert r.code == 3, r.err
    for py in ("310", "311", "312", "313"):
        assert f"linux-aarch64-cu126-py{py}" in r.err
    assert "CUDA 12.6 has no architecture list" in r.err
    assert "fall back to the builder's GPU" in r.err


def test_empty_list_refused(policy_copy: Callable[..., Path], cli: Callable[..., Result]) -> None:
    p = policy_copy('archs = "8.0 9.0"', 'archs = ""')
    r = cli("--config", str(p), "rows")
    assert r.code == 3
    assert "CUDA 12.6 has an empty architecture list; rows linux-aarch64-cu126-py310" in r.err


def test_train_without_any_group_refused(policy_copy: Callable[..., Path], cli: Callable[..., Result]) -> None:
    p = policy_copy('[[platforms.linux-aarch64.cuda]]\ntrains = ["12.6"]\narchs = "8.0 9.0"\n', "")
    r = cli("--config", str(p), "rows")
    assert r.code == 3
    assert "[platforms.linux-aarch64.trains]: CUDA 12.6 has no architecture list" in r.err


@pytest.mark.parametrize(
    ("edit", "code", "message"),
    [
        (('archs = "8.0 9.0"', 'archs = "8.0 9.0+ptx"'), 2,
         "[platforms.linux-aarch64.cuda[1].archs]: '9.0+ptx': PTX must be written '+PTX' in capitals"),
        (('archs = "9.0 10.0 11.0"', 'archs = "9.O 10.0 11.0"'), 2,
         "[platforms.linux-aarch64.cuda[0].archs]: '9.O' is not a GPU architecture\n    fix: did you mean 9.0?"),
        (('archs = "9.0 10.0 11.0"', 'archs = "native"'), 2, "'native' asks CMake or PyTorch to choose"),
        (('archs = "9.0 10.0 11.0"', 'archs = "9.0 90 11.0"'), 2, "'90' duplicates '9.0'"),
        (('archs = "9.0 10.0 11.0"', 'archs = "7.0 9.0"'), 2,
         "row linux-aarch64-cu130-py*: '7.0': CUDA 13.0 cannot compile this architecture"),
        (('[platforms.linux-x86_64]\ntrains = ["12.6", "13.0", "13.2"]', '[platforms.linux-x86_64]\ntrains = ["12.6", "13.0", "13.2", "12.8"]'), 3,
         "CUDA 12.8 is not on the train allowlist\n    fix: add \"12.8\" to cuda.trains"),
        (('cuda-option =', 'cuda-opton ='), 2, "unknown key 'cuda-opton'\n    fix: did you mean 'cuda-option'?"),
        (('[platforms.windows-amd64]', '[platforms.windows-amd46]'), 2, "unknown name 'windows-amd46'\n    fix: did you mean 'windows-amd64'?"),
        (('versions = ["3.10",', 'versions = ["3.9.1",'), 2, "'3.9.1' is not a Python version"),
        (('trains = ["12.6", "13.0", "13.2", "13.4"]', 'trains = ["12.6", "cu13.0", "13.2", "13.4"]'), 2,
         "'cu13.0' is not a CUDA train"),
        (('driver = "setup.py"', 'driver = "make"'), 2, "expected one of 'cmake-presets', 'scikit-build-core', 'setup.py', got 'make'"),
        (('generator = "Ninja"\n', 'generator = "Visual Studio 17 2022"\n'), 2,
         "[platforms.linux-x86_64.generator]: 'Visual Studio 17 2022' is a Windows generator, and linux-x86_64 is not Windows"),
        (('[platforms.windows-amd64]\n', '[platforms.windows-amd64]\ngenerator = "Unix Makefiles"\n'), 2,
         "[platforms.windows-amd64.generator]: 'Unix Makefiles' does not build with the MSVC tools of windows-amd64"),
        (('generator = "Ninja"\n', 'generator = "Ninja Multi"\n'), 2,
         "expected one of 'Ninja', 'Ninja Multi-Config', 'Unix Makefiles'"),
        (('cuda-option =', 'env-switches = ["FORCE_CUDA", "FORCE-CUDA"]\ncuda-option ='), 2,
         "[project.env-switches[1]]: 'FORCE-CUDA' is not an environment variable name"),
        # the check's promises (SPEC §8, real projects)
        (('[cuda.runtime.13]\nmode = "dynamic"', '[cuda.runtime.13]\nmode = "shared"'), 2,
         "[cuda.runtime.13.mode]: expected one of 'dynamic', 'static', 'none', 'torch', 'preload', 'torch-runtime', got 'shared'"),
        (('[cuda.runtime.13]\nmode = "dynamic"', '[cuda.runtime.13]\nmode = "preloaded"'), 2,
         "fix: write mode = \"preload\""),
        # the modes that say the project loads CUDA itself need their reason (issue 20)
        (('[cuda.runtime.13]\nmode = "dynamic"\nrequirements = ["nvidia-cuda-runtime>=13,<14; platform_system == \'Linux\'"]\n'
          'library-dir = "nvidia/cu13/lib"', '[cuda.runtime.13]\nmode = "preload"'), 2,
         "[cuda.runtime.13.reason]: mode 'preload' needs a reason"),
        (('[cuda.runtime.13]\nmode = "dynamic"\nrequirements = ["nvidia-cuda-runtime>=13,<14; platform_system == \'Linux\'"]\n'
          'library-dir = "nvidia/cu13/lib"', '[cuda.runtime.13]\nmode = "torch-runtime"\nreason = " "'), 2,
         "[cuda.runtime.13.reason]: mode 'torch-runtime' needs a reason"),
        (('[cuda.runtime.13]\nmode = "dynamic"', '[cuda.runtime.13]\nmode = "dynamic"\nextra = "with-cuda"'), 2,
         "[cuda.runtime.13.extra]: extra is only used when mode is \"preload\" (here 'dynamic')"),
        (('[cuda.runtime.13]\nmode = "dynamic"', '[cuda.runtime.13]\nmode = "dynamic"\noptional = "libnccl*"'), 2,
         "[cuda.runtime.13.optional]: expected a list of strings"),
        (('[cuda.runtime.13]\nmode = "dynamic"', '[cuda.runtime.13]\nmode = "dynamic"\nreasons = "x"'), 2,
         "unknown key 'reasons'\n    fix: did you mean 'reason'?"),
        (('reaches = "torch/lib"', 'reaches = "torch/lib"\nclimbs-out = true'), 2,
         "[check.rpath-exceptions[0].climbs-out]: climbs-out accepts entries as written, so it needs entry"),
        (('reaches = "torch/lib"', 'reaches = "torch/lib"\nclimbs_out = true'), 2,
         "unknown key 'climbs_out'\n    fix: did you mean 'climbs-out'?"),
        (('[cuda.runtime.13]\nmode = "dynamic"', '[cuda.runtime.13]\nmode = "static"'), 2,
         "library-dir is only used when mode is \"dynamic\" (here 'static')\n    fix: remove library-dir"),
        (('pull-request = ["13.0"]', 'pull-request = ["13.1"]'), 2,
         "CUDA 13.1 is preferred for pull requests but not on the train allowlist"),
        (('reaches = "torch/lib"', 'reaches = "torch/lib"\nentry = "/x"'), 2,
         "[check.rpath-exceptions[0]]: an RPATH exception names either entry or reaches"),
        (('reaches = "torch/lib"', 'reaches = "../torch/lib"'), 2,
         "'../torch/lib' is not a directory relative to site-packages"),
        (('entry = "/lib/intel64"\nreason = "arrives', 'entry = "/lib/intel64"\nreason = " "\nwhy = "arrives'), 2,
         "unknown key 'why'"),
        (('[[check.required]]\nrows = ["linux-*-cu*"]', '[[check.required]]\nrows = ["linux-*-cuda*"]'), 2,
         "rows = 'linux-*-cuda*' (check.required[0]"),
        (('allow = ["nvcuda.dll"]', 'allow = "nvcuda.dll"'), 2,
         "[check.no-cuda[1].allow]: expected a list of strings, got 'nvcuda.dll'"),
        (('files = ["executorch/extension/pybindings/_C.*"]', 'files = []'), 2,
         "[check.no-cuda[0].files]: files must list at least one non-empty glob"),
        (('[[check.no-cuda]]\nrows = ["windows-*-cu*"]\nfiles = ["executorch/extension',
          '[[check.no-cuda]]\nrows = ["windows-*-cu*"]\nfile = ["executorch/extension'), 2,
         "unknown key 'file'\n    fix: did you mean 'files'?"),
    ],
)
def test_policy_errors_table(edit: tuple[str, str], code: int, message: str, policy_copy: Callable[..., Path],
                             cli: Callable[..., Result]) -> None:
    p = policy_copy(*edit)
    r = cli("--config", str(p), "rows")
    assert r.code == code, r.err
    assert message in r.err
    assert str(p) in r.err
    assert "Traceback" not in r.err


def test_every_error_of_a_file_at_once_with_lines(policy_copy: Callable[..., Path], cli: Callable[..., Result]) -> None:
    p = policy_copy('archs = "8.0 9.0"', 'archs = "8.0 9.0+ptx"', "cuda-option =", "cuda-opton =", "9.0 10.0 11.0", "9.O 10.0 11.0")
    r = cli("--config", str(p), "rows")
    assert r.code == 2
    assert "(3 problems)" in r.err
    lines = p.read_text().splitlines()
    line_of_key = next(i for i, s in enumerate(lines, 1) if s.startswith("cuda-opton"))
    assert f"{p}:{line_of_key} [project.cuda-opton]" in r.err


def test_invalid_toml_and_missing_file(tmp_path: Path, cli: Callable[..., Result]) -> None:
    bad = tmp_path / "buildrows.toml"
    bad.write_text("[python\nversions = 1\n")
    r = cli("--config", str(bad), "rows")
    assert r.code == 2 and "not valid TOML" in r.err
    r = cli("--config", str(tmp_path / "nope.toml"), "rows")
    assert r.code == 2 and "no such policy file" in r.err
    empty = tmp_path / "empty"
    empty.mkdir()
    r = cli("--config", str(empty), "rows")
    assert r.code == 2 and "no buildrows policy in" in r.err


def test_show_gives_provenance(cli: Callable[..., Result]) -> None:
    r = cli("--config", str(EXAMPLE_POLICY), "show", "linux-aarch64-cu130-py311", "--json")
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["torch_cuda_arch_list"] == "9.0;10.0;11.0+PTX"
    assert data["image"] is None  # the release's builder image is kept (SPEC §7)
    assert data["provenance"]["image"] == "default: the generator's image"
    assert data["provenance"]["archs"].startswith("platforms.linux-aarch64.cuda[0].archs (buildrows.toml:")
    assert data["provenance"]["ptx"] == "default: the newest architecture"
    assert data["cache"] == {"EXECUTORCH_BUILD_CUDA": "ON"}
    r = cli("--config", str(EXAMPLE_POLICY), "show", "linux-aarch64-cu130-py311")
    assert "platforms.linux-aarch64.cuda[0].archs" in r.out
    assert "nvcc_flags" in r.out


def test_schema_is_current() -> None:
    from buildrows.commands.schema import render

    checked_in = (REPO / "buildrows" / "data" / "buildrows.schema.json").read_text()
    assert checked_in == render(), "the schema is stale: regenerate it with `buildrows schema --write`"


def test_example_policy_validates_against_the_json_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    import tomllib

    schema = json.loads((REPO / "buildrows" / "data" / "buildrows.schema.json").read_text())
    jsonschema.validate(tomllib.loads(EXAMPLE_POLICY.read_text()), schema)
    for real in sorted((REPO / "tests" / "data" / "real-wheels").glob("*.toml")):
        if real.name != "wheels.toml":  # the pinned wheel list, not a policy
            jsonschema.validate(tomllib.loads(real.read_text()), schema)


def test_parser_build_imports_nothing_heavy() -> None:
    """The hook runs on every CI job: building the CLI must not import the heavy libraries."""
    import subprocess
    import sys

    code = ("import sys; from buildrows.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('jinja2','packaging','elftools','pefile','tomlkit','zipfile') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert out.strip() == "[]"


def test_byte_order_mark_is_accepted(tmp_path: Path, example_text: str, cli: Callable[..., Result]) -> None:
    p = tmp_path / "buildrows.toml"
    p.write_bytes(b"\xef\xbb\xbf" + example_text.encode())
    r = cli("--config", str(p), "rows", "--json")
    assert r.code == 0, r.err
    assert len(json.loads(r.out)) == 37


def test_help_lists_every_command_and_each_command_parses_its_own_options(cli: Callable[..., Result],
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from buildrows.cli import COMMANDS

    r = cli("--help")
    assert r.code == 0
    top = capsys.readouterr().out
    for name in COMMANDS:
        assert name in top
    r = cli("--config", str(EXAMPLE_POLICY), "check", "--help")
    assert r.code == 0
    assert "--archs LIST" in capsys.readouterr().out
    r = cli("rows", "--config", str(EXAMPLE_POLICY), "--bogus")
    assert r.code == 2


@pytest.mark.parametrize("command", [
    ("render", "linux-x86_64-cu130-py311"),
    ("env", "linux-x86_64-cu130-py311", "--format", "shell"),
    ("hook", "--python", "3.11", "--platform", "linux-x86_64"),
    ("doctor", "linux-x86_64-cu130-py311"),
    ("build", "linux-x86_64-cu130-py311"),
])
def test_a_listless_cuda_row_that_slipped_past_the_loader_is_refused_by_each_command(
        command: tuple[str, ...], cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Defence in depth: even a row built in code (not loaded) never reaches detection."""
    import dataclasses

    import buildrows.policy.load as policy_mod

    real = policy_mod.load_policy

    def bare_load(path: object = None) -> object:
        pol = real(EXAMPLE_POLICY)
        rows = tuple(dataclasses.replace(r, archs=None) if r.name == "linux-x86_64-cu130-py311" else r for r in pol.rows)
        return dataclasses.replace(pol, rows=rows)

    monkeypatch.setattr(policy_mod, "load_policy", bare_load)
    monkeypatch.setenv("CU_VERSION", "cu130")
    monkeypatch.setenv("BUILD_ENV_FILE", str(tmp_path / "be"))
    monkeypatch.chdir(tmp_path)
    r = cli(*command)
    assert r.code == 3, r.out + r.err
    assert "linux-x86_64-cu130-py311 is a CUDA 13.0 row with no architecture list" in r.err
    assert "will not fall back to detecting the builder's GPU" in r.err
    assert not (tmp_path / "be").exists()


def test_a_policy_that_publishes_nothing_is_refused(tmp_path: Path, cli: Callable[..., Result]) -> None:
    p = tmp_path / "buildrows.toml"
    p.write_text('[python]\nversions = ["3.12"]\n\n[platforms.linux-x86_64]\ntrains = []\n')
    r = cli("--config", str(p), "rows")
    assert r.code == 2
    assert "[platforms]: the policy publishes no row" in r.err
    assert "`trains = [...]` with their architecture lists, or `cpu = true`" in r.err


@pytest.mark.parametrize(("ptx", "message"), [
    ('"9.0+PTX"', "'9.0+PTX': name one architecture here (8.0, 9.0a), without +PTX or -virtual"),
    ('"9.0-virtual"', "'9.0-virtual': name one architecture here"),
    ('"7.5"', "ptx = '7.5' is not in the row's list"),
])
def test_a_bad_ptx_choice_is_reported_at_ptx(ptx: str, message: str, policy_copy: Callable[..., Path],
                                               cli: Callable[..., Result]) -> None:
    p = policy_copy('archs = "8.0 9.0"', f'archs = "8.0 9.0"\nptx = {ptx}')
    r = cli("--config", str(p), "rows")
    assert r.code == 2
    line = p.read_text().splitlines().index(f"ptx = {ptx}") + 1
    assert f"{p}:{line} [platforms.linux-aarch64.cuda[1].ptx]: {message}" in r.err


def test_show_lists_the_checks_promises(cli: Callable[..., Result]) -> None:
    """`show` gives the runtime mode and every exception, required file and no-CUDA rule with its reason."""
    r = cli("--config", str(EXAMPLE_POLICY), "show", "windows-amd64-cu130-py312", "--json")
    assert r.code == 0, r.err
    check = json.loads(r.out)["check"]
    assert check["runtime_mode"] == "dynamic"
    assert {"reaches": "torch/lib"}.items() <= check["rpath_exceptions"][0].items()
    assert check["rpath_exceptions"][2]["entry"] == "/lib/intel64"
    assert [r["files"][0] for r in check["required"]] == ["executorch/lib/executorch_backend_cuda.dll"]
    assert [r["allow"] for r in check["no_cuda"]] == [[], ["nvcuda.dll"]]
    assert all(x["reason"] and x["source"] for x in check["rpath_exceptions"] + check["required"] + check["no_cuda"])
    r = cli("--config", str(EXAMPLE_POLICY), "show", "linux-x86_64-cu130-py312")
    assert "check.required" in r.out and "executorch/lib/libexecutorch_backend_cuda.so" in r.out
    assert "check.rpath_exception      entry /lib/intel64: arrives from PyTorch's exported link interface" in r.out
    assert "check.runtime_mode         dynamic" in r.out


OLD_TRAINS = """[project]
name = "fx"
[python]
versions = ["3.12"]
[cuda]
trains = [{trains}]
pull-request = ["{pr}"]
[platforms.linux-x86_64]
trains = [{trains}]
[platforms.linux-aarch64]
trains = [{trains}]
{lists}
"""


def _old_trains_policy(tmp_path: Path, trains: list[str], pr: str) -> Path:
    quoted = ", ".join(f'"{t}"' for t in trains)
    lists = "".join(f'[[platforms.{p}.cuda]]\ntrains = ["{t}"]\narchs = "8.0 9.0"\n'
                    for p in ("linux-x86_64", "linux-aarch64") for t in trains)
    path = tmp_path / "buildrows.toml"
    path.write_text(OLD_TRAINS.format(trains=quoted, pr=pr, lists=lists))
    return path


def test_every_train_from_11_8_makes_rows(tmp_path: Path, cli: Callable[..., Result]) -> None:
    trains = ["11.8", "12.0", "12.1", "12.2", "12.3", "12.4", "12.5", "12.6", "12.8", "12.9", "13.0"]
    r = cli("--config", str(_old_trains_policy(tmp_path, trains, "12.4")), "rows")
    assert r.code == 0, r.err
    for t in trains:
        assert f"linux-x86_64-cu{t.replace('.', '')}-py312" in r.out


@pytest.mark.parametrize(
    ("trains", "pr", "messages"),
    [
        # one unknown train, named in cuda.trains, two platforms' trains, two lists and pull-request: one error
        (["12.7", "12.8"], "12.7", ["[cuda.trains[0]]: buildrows does not know which architectures CUDA 12.7 compiles\n"
                                    "    fix: use a train buildrows knows: 11.8, 12.0, 12.1, 12.2, 12.3, 12.4, 12.5, "
                                    "12.6, 12.8, 12.9, 13.0, 13.1, 13.2, 13.3, 13.4, 13.5"]),
        # three mistakes, three errors
        (["10.2", "11.7", "cu12.8"], "cu12.8", ["[cuda.trains[0]]: buildrows does not know which architectures CUDA 10.2",
                                              "[cuda.trains[1]]: buildrows does not know which architectures CUDA 11.7",
                                              "[cuda.trains[2]]: 'cu12.8' is not a CUDA train"]),
    ],
)
def test_one_error_per_train_mistake(trains: list[str], pr: str, messages: list[str], tmp_path: Path,
                                     cli: Callable[..., Result]) -> None:
    r = cli("--config", str(_old_trains_policy(tmp_path, trains, pr)), "rows")
    assert r.code == 2, r.err
    assert f"({len(messages)} problem{'s' if len(messages) > 1 else ''})" in r.err, r.err
    for m in messages:
        assert m in r.err
    assert "not on the train allowlist" not in r.err and "does not publish" not in r.err


def test_show_lists_the_new_check_rules(cli: Callable[..., Result]) -> None:
    """The reason of a preload/torch-runtime mode, climbs-out exceptions and library rules (issue 20)."""
    real = REPO / "tests" / "data" / "real-wheels"
    r = cli("--config", str(real / "bitsandbytes.toml"), "show", "linux-x86_64-cu128-py312")
    assert r.code == 0, r.err
    assert "check.runtime_mode         torch-runtime (bitsandbytes/cextension.py loads" in r.out
    assert ("check.libraries            bitsandbytes/libbitsandbytes_cuda{cu}.so: its train's list: one kernel library "
            "per CUDA train") in r.out
    r = cli("--config", str(real / "bitsandbytes.toml"), "show", "linux-x86_64-cu118-py312")  # its 11.8 row
    assert r.code == 0, r.err
    assert "check.runtime_mode         torch-runtime (bitsandbytes/cextension.py loads" in r.out
    r = cli("--config", str(real / "jax-cuda12-plugin.toml"), "show", "linux-x86_64-cu129-py312", "--json")
    check = json.loads(r.out)["check"]
    assert check["rpath_exceptions"][0]["climbs_out"] is True
    assert check["runtime_reason"].startswith("the plugin dlopens")
    r = cli("--config", str(real / "torchvision.toml"), "show", "linux-x86_64-cu128-py312", "--json")
    assert json.loads(r.out)["check"]["libraries"][0]["vendored"] is True

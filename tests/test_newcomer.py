"""Issue 15, a newcomer's first hour: advice that, followed literally, works; output people can read.

Each fix-line test trips a guard, takes the advice exactly as printed (a TOML block, an assignment),
applies it to the file, and loads the policy again.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from buildrows.policy.archs import ArchError, parse_arch_list
from buildrows.policy.load import load_policy
from tests.conftest import REPO, Result

SMALL = """\
[project]
driver = "scikit-build-core"

[python]
versions = ["3.12"]

[cuda]
trains = ["13.0"]

[platforms.linux-x86_64]
trains = ["13.0"]

[[platforms.linux-x86_64.cuda]]
trains = ["13.0"]
archs = "8.0 9.0 12.0"
"""
#: SMALL, with CUDA 12.6 published and no list for it.
MISSING_12_6 = SMALL.replace('trains = ["13.0"]\n\n[platforms', 'trains = ["12.6", "13.0"]\n\n[platforms').replace(
    'trains = ["13.0"]\n\n[[', 'trains = ["12.6", "13.0"]\n\n[[')


def _block(advice: str) -> str:
    """The indented TOML lines of a `fix: add this table ...` advice, dedented."""
    lines = [ln.strip() for ln in advice.splitlines() if ln.startswith("        ")]
    assert lines, advice
    return "\n".join(lines) + "\n"


def _assignment(advice: str, key: str) -> str:
    m = re.search(rf"write ({key} = \"[^\"]*\")", advice)
    assert m, advice
    return m.group(1)


# --- 1. fix lines that can be followed --------------------------------------------------------


def test_a_missing_cuda_12_6_list_suggests_a_list_12_6_compiles(tmp_path: Path, cli: Callable[..., Result]) -> None:
    """It suggested archs = "8.0 9.0 12.0", which CUDA 12.6 cannot compile."""
    policy = tmp_path / "buildrows.toml"
    policy.write_text(MISSING_12_6)
    r = cli("--config", str(policy), "rows")
    assert r.code == 3 and "CUDA 12.6 has no architecture list" in r.err
    assert "12.0" not in _block(r.err)
    assert "`buildrows archs --from-wheel TORCH_WHEEL --write 'linux-x86_64-cu126-*'`" in r.err
    policy.write_text(MISSING_12_6 + "\n" + _block(r.err))  # the advice, pasted as printed
    again = cli("--config", str(policy), "rows", "linux-x86_64-cu126-*")
    assert again.code == 0, again.err
    assert "linux-x86_64-cu126-py312         7.5;8.0;8.6;8.9;9.0+PTX" in again.out


def test_an_empty_list_gets_an_assignment_valid_for_the_train(tmp_path: Path, cli: Callable[..., Result]) -> None:
    text = MISSING_12_6.replace('trains = ["13.0"]\narchs = "8.0 9.0 12.0"', 'trains = ["12.6", "13.0"]\narchs = ""')
    policy = tmp_path / "buildrows.toml"
    policy.write_text(text)
    r = cli("--config", str(policy), "rows")
    assert r.code == 3 and "has an empty architecture list" in r.err
    fix = _assignment(r.err, "archs")
    assert fix == 'archs = "7.5 8.0 8.6 8.9 9.0"'  # valid for 12.6 and 13.0 alike
    policy.write_text(text.replace('archs = ""', fix))
    assert cli("--config", str(policy), "rows").code == 0


def test_an_invalid_driver_says_what_to_write(tmp_path: Path, cli: Callable[..., Result]) -> None:
    """It said "fix: The build driver." (the schema's description)."""
    policy = tmp_path / "buildrows.toml"
    policy.write_text(SMALL.replace('driver = "scikit-build-core"', 'driver = "scikit-build"'))
    r = cli("--config", str(policy), "rows")
    assert r.code == 2
    assert "fix: The build driver." not in r.err
    fix = _assignment(r.err, "driver")
    assert fix == 'driver = "scikit-build-core"'  # the closest of the three
    policy.write_text(SMALL.replace('driver = "scikit-build-core"', fix))
    assert cli("--config", str(policy), "rows").code == 0


def test_a_type_error_says_what_the_key_must_be(tmp_path: Path, cli: Callable[..., Result]) -> None:
    policy = tmp_path / "buildrows.toml"
    policy.write_text(SMALL.replace('trains = ["13.0"]\n\n[[', 'trains = ["13.0"]\ncpu = "yes"\n\n[['))
    r = cli("--config", str(policy), "rows")
    assert "[platforms.linux-x86_64.cpu]: expected true or false, got 'yes'" in r.err
    assert "fix: cpu must be true or false: Publish CPU rows (CUDA off) for this platform." in r.err


def test_inside_pyproject_keys_and_fixes_carry_the_tool_buildrows_prefix(tmp_path: Path,
                                                                         cli: Callable[..., Result]) -> None:
    body = MISSING_12_6.replace('driver = "scikit-build-core"', 'driver = "setup"')
    text = '[project]\nname = "x"\n\n' + re.sub(r"^\[(\[?)", r"[\1tool.buildrows.", body, flags=re.MULTILINE)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(text)
    r = cli("--config", str(pyproject), "rows")
    assert r.code == 2
    assert "[tool.buildrows.project.driver]: expected one of" in r.err
    assert "[tool.buildrows.platforms.linux-x86_64.trains]: CUDA 12.6 has no architecture list" in r.err
    block = _block(r.err)
    assert block.startswith("[[tool.buildrows.platforms.linux-x86_64.cuda]]\n")
    pyproject.write_text(text.replace('driver = "setup"', _assignment(r.err, "driver")) + "\n" + block)
    again = cli("--config", str(pyproject), "rows")
    assert again.code == 0, again.err


def test_check_on_a_file_that_is_not_a_wheel_does_not_say_rebuild(cli: Callable[..., Result]) -> None:
    r = cli("check", str(REPO / "README.md"))
    assert r.code == 2
    assert "rebuild the wheel" not in r.err
    assert "fix: pass a built wheel (NAME-VERSION-PYTHON-ABI-PLATFORM.whl)" in r.err


def test_check_on_a_renamed_file_says_it_is_not_a_zip(tmp_path: Path, cli: Callable[..., Result]) -> None:
    fake = tmp_path / "x-1.0-py3-none-any.whl"
    fake.write_text("not a zip")
    r = cli("check", str(fake))
    assert r.code == 2 and "fix: this file is not a zip archive, so not a wheel" in r.err


# --- 3. output people can read ----------------------------------------------------------------


def test_top_level_help_describes_buildrows_for_users(cli: Callable[..., Result],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("--help").code == 0
    out = capsys.readouterr().out
    assert "main(argv)" not in out and "buildrows/commands" not in out
    assert "Declare the wheels a C++/CUDA Python project publishes" in out
    assert "buildrows init" in out and "Exit codes" in out


def test_show_prints_values_not_python_reprs(cli: Callable[..., Result]) -> None:
    r = cli("--config", str(REPO / "tests" / "data" / "policies" / "executorch" / "buildrows.toml"), "show", "linux-x86_64-cu126-py312")
    assert r.code == 0
    for repr_ in ("None", "['", "{'", "': '"):
        assert repr_ not in r.out, (repr_, r.out)
    assert re.search(r"^  archs +7\.5 8\.0 8\.6 8\.9 9\.0 +<- ", r.out, re.MULTILINE)
    assert re.search(r"^  cache +EXECUTORCH_BUILD_CUDA=ON +<- ", r.out, re.MULTILINE)
    assert re.search(r"^  image +- +<- default", r.out, re.MULTILINE)
    assert re.search(r"^  runtime_requirements +nvidia-cuda-runtime-cu12>=12,<13; platform_system == 'Linux'", r.out,
                     re.MULTILINE)
    assert re.search(r"^  runtime_library_dir +nvidia/cuda_runtime/lib", r.out, re.MULTILINE)


def test_schema_write_is_a_developer_option(cli: Callable[..., Result], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """`schema --write` rewrote the installed package's own file and was listed for users."""
    cli("schema", "--help")
    shown = capsys.readouterr().out
    assert "--write" not in shown and "--output FILE" in shown
    out = tmp_path / "schema.json"
    r = cli("schema", "--output", str(out))
    assert r.code == 0 and out.read_text() == (REPO / "buildrows" / "data" / "buildrows.schema.json").read_text()


def test_schema_write_refuses_in_an_installed_copy(tmp_path: Path) -> None:
    """An installed buildrows (no source checkout around it) does not rewrite its own files."""
    import shutil

    site = tmp_path / "site-packages"
    shutil.copytree(REPO / "buildrows", site / "buildrows", ignore=shutil.ignore_patterns("__pycache__"))
    before = (site / "buildrows" / "data" / "buildrows.schema.json").read_bytes()
    r = subprocess.run([sys.executable, "-c", "import sys; from buildrows.cli import main; sys.exit(main(['schema', '--write']))"],
                       capture_output=True, text=True, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
                       cwd=tmp_path, check=False)
    assert r.returncode == 2
    assert "this buildrows is an installed copy, whose files are not yours to rewrite" in r.stderr
    assert "fix: buildrows schema --output buildrows.schema.json" in r.stderr
    assert (site / "buildrows" / "data" / "buildrows.schema.json").read_bytes() == before


# --- 4. rows ----------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["show", "linux-x86_64-cu126-py314"], ["rows", "linux-*-py314"],
                                     ["env", "linux-x86_64-cu130-py314", "--format", "shell"],
                                     ["doctor", "linux-x86_64-cu130-py314"]])
def test_an_excluded_python_is_refused_with_the_policys_reason(cli: Callable[..., Result], command: list[str]) -> None:
    """`show linux-x86_64-cu126-py314` answered "did you mean ...py313"."""
    r = cli("--config", str(REPO / "tests" / "data" / "policies" / "executorch" / "buildrows.toml"), *command)
    assert r.code == 3, r
    assert "did you mean" not in r.err
    assert "Python 3.14 is excluded by" in r.err and "(python.excluded): the CPU rows already fail on 3.14" in r.err
    assert "fix: choose a Python the policy builds (3.10, 3.11, 3.12, 3.13)" in r.err


def test_show_lists_the_policys_exclusions(cli: Callable[..., Result]) -> None:
    r = cli("--config", str(REPO / "tests" / "data" / "policies" / "executorch" / "buildrows.toml"), "show", "linux-x86_64-cu130-py312")
    assert re.search(r"^  excluded python 3\.14 +the CPU rows already fail on 3\.14", r.out, re.MULTILINE)


def test_an_arch_specific_newest_entry_is_not_the_ptx_target() -> None:
    """9.0a became the PTX target (90a-virtual), which newer GPUs cannot JIT-compile."""
    archs = parse_arch_list("8.0 8.6 9.0a")
    assert archs.torch_cuda_arch_list == "8.0;8.6+PTX;9.0a"
    assert archs.cmake_cuda_architectures == "80-real;86-real;90a-real;86-virtual"
    assert parse_arch_list("9.0 9.0a 10.0f").ptx_names == ["sm_90"]


@pytest.mark.parametrize(("archs", "ptx", "message", "fixed_archs", "fixed_ptx"), [
    ("9.0a", None, "every entry is architecture-specific or family-specific", "9.0 9.0a", None),
    ("9.0a", None, "every entry is architecture-specific or family-specific", "9.0a", "none"),
    ("8.0 9.0a", "9.0a", "PTX of an architecture-specific or family target (compute_90a) runs only on that architecture",
     "8.0 9.0a", "8.0"),
])
def test_a_specific_ptx_target_is_refused_and_the_fix_works(tmp_path: Path, cli: Callable[..., Result], archs: str,
                                                            ptx: str | None, message: str, fixed_archs: str,
                                                            fixed_ptx: str | None) -> None:
    def policy(a: str, p: str | None) -> Path:
        text = SMALL.replace('archs = "8.0 9.0 12.0"', f'archs = "{a}"' + (f'\nptx = "{p}"' if p else ""))
        path = tmp_path / "buildrows.toml"
        path.write_text(text)
        return path

    r = cli("--config", str(policy(archs, ptx)), "rows")
    assert r.code == 2 and message in r.err
    fix = r.err.split("fix: ")[1]
    if fixed_ptx is not None:
        assert f'ptx = "{fixed_ptx}"' in fix
    else:
        assert "add the plain 9.0 to the list" in fix
    again = cli("--config", str(policy(fixed_archs, fixed_ptx)), "rows")
    assert again.code == 0, again.err


def test_inline_ptx_on_a_specific_entry_is_refused() -> None:
    with pytest.raises(ArchError, match=r"9\.0a\+PTX: PTX of an architecture-specific") as e:
        parse_arch_list("8.0 9.0a+PTX")
    assert e.value.hint == ("write 9.0a without +PTX and mark a plain architecture instead (8.0+PTX) (if the wheel ships "
                            "that PTX on purpose, write 9.0a 9.0a-virtual)")
    assert parse_arch_list("8.0 9.0a 9.0a-virtual").text == "8.0 9.0a 9.0a-virtual"  # deliberate: accepted
    assert parse_arch_list("8.0+PTX 9.0a").ptx_names == ["sm_80"]


def test_example_policies_still_load() -> None:
    for p in (REPO / "examples").glob("*/buildrows.toml"):
        load_policy(p)


EXCLUDES_3_11 = """\
[python]
versions = ["3.12"]
[python.excluded]
"3.11" = "our C API use breaks on 3.11"
[platforms.linux-x86_64]
cpu = true
"""


def test_this_machines_row_of_an_excluded_python_says_why(tmp_path: Path, cli: Callable[..., Result],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from buildrows.plan.host import host_python

    text = EXCLUDES_3_11.replace("3.11", host_python()) if host_python() != "3.12" else EXCLUDES_3_11
    if host_python() == "3.12":
        text = text.replace('versions = ["3.12"]', 'versions = ["3.13"]').replace('"3.11"', '"3.12"')
    policy = tmp_path / "buildrows.toml"
    policy.write_text(text)
    monkeypatch.setenv("CU_VERSION", "cpu")
    r = cli("--config", str(policy), "doctor")
    assert r.code == 3 and f"Python {host_python()} is excluded by {policy} (python.excluded): our C API use" in r.err


def test_check_of_a_wheel_for_an_excluded_python_says_why(tmp_path: Path, cli: Callable[..., Result]) -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    import make_check_fixtures as mcf

    wheel = tmp_path / "fx-1.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    mcf.write_wheel(wheel, "fx", "1.0", {}, (), "cp311-cp311-manylinux_2_28_x86_64")
    policy = tmp_path / "buildrows.toml"
    policy.write_text(EXCLUDES_3_11)
    r = cli("--config", str(policy), "check", str(wheel))
    assert r.code == 3 and "Python 3.11 is excluded by" in r.err and "our C API use breaks on 3.11" in r.err

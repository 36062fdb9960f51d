"""Stamping (SPEC §8): a real wheel built by setuptools without the row's local version or runtime
requirement is rewritten with them and its build record; the result installs with pip, its RECORD
verifies, the project's own dependencies are kept. A damaged wheel is refused untouched."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from buildrows.binaries.wheelread import read_wheel
from buildrows.build.stamp import edit_metadata, plan_metadata, stamp_wheel
from buildrows.check.record import BuildRecord, parse_record
from buildrows.errors import BadInput
from tests.conftest import Result

RUNTIME = "nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'"
RECORD = BuildRecord(row="linux-x86_64-cu130-py311", cuda="13.0", torch="2.14.1", torch_cuda="13.0")


def build_tiny(tmp_path: Path, version: str = "1.2.3") -> Path:
    """A real wheel from setuptools: a package with data files, an own dependency, no local tag."""
    src = tmp_path / "src"
    (src / "tiny").mkdir(parents=True)
    (src / "tiny" / "__init__.py").write_text("ANSWER = 42\n")
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "tiny-ext"\nversion = "{version}"\ndependencies = ["packaging>=20"]\n'
        'description = "a wheel to stamp"\nreadme = {text = "Long\\n\\ndescription, kept.", content-type = "text/plain"}\n'
        '[tool.setuptools]\npackages = ["tiny"]\n')
    out = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
                    str(src)], check=True, capture_output=True)
    (wheel,) = out.glob("*.whl")
    return wheel


def test_stamped_wheel_installs_and_keeps_the_projects_own(tmp_path: Path) -> None:
    wheel = build_tiny(tmp_path)
    stamped = stamp_wheel(wheel, local_tag="+cu130", requirements=[RUNTIME], record=RECORD, metadata=True)
    assert stamped.wheel.name == "tiny_ext-1.2.3+cu130-py3-none-any.whl"
    assert not wheel.exists()  # replaced, not left beside it
    assert stamped.added_requirements == (RUNTIME,)
    info = read_wheel(stamped.wheel)
    assert sorted(str(Requirement(r)) for r in info.requires_dist) == sorted(
        str(Requirement(r)) for r in ("packaging>=20", RUNTIME))
    with zipfile.ZipFile(stamped.wheel) as z:
        names = z.namelist()
        assert all(not n.startswith("tiny_ext-1.2.3.dist-info/") for n in names)
        meta = z.read("tiny_ext-1.2.3+cu130.dist-info/METADATA").decode()
        record = parse_record(z.read("tiny_ext-1.2.3+cu130.dist-info/buildrows.json"), "test")
    assert "Version: 1.2.3+cu130\n" in meta and "Long\n\ndescription, kept." in meta
    assert record == BuildRecord(row=RECORD.row, cuda="13.0", torch="2.14.1", torch_cuda="13.0",
                                 buildrows=record.buildrows)
    # pip installs it (checking RECORD's hashes), and the installed metadata is the stamped one.
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target),
                    str(stamped.wheel)], check=True)
    code = ("import importlib.metadata as m, json; d = m.distribution('tiny-ext'); "
            "print(json.dumps([d.version, d.requires]))")
    got = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(target)}, capture_output=True,
                         text=True, check=True).stdout
    version, requires = json.loads(got)
    assert version == "1.2.3+cu130" and "packaging>=20" in requires and len(requires) == 2


def test_stamping_twice_changes_nothing_more(tmp_path: Path) -> None:
    wheel = stamp_wheel(build_tiny(tmp_path), local_tag="+cu130", requirements=[RUNTIME], record=None,
                        metadata=True).wheel
    again = stamp_wheel(wheel, local_tag="+cu130", requirements=[RUNTIME], record=None, metadata=True)
    assert again.wheel == wheel and again.changes == ()


def test_cpu_row_gets_only_the_build_record(tmp_path: Path) -> None:
    wheel = build_tiny(tmp_path)
    cpu = BuildRecord(row="linux-x86_64-cpu-py311")
    stamped = stamp_wheel(wheel, local_tag="", requirements=[], record=cpu, metadata=True)
    assert stamped.wheel == wheel and stamped.version == "1.2.3"
    with zipfile.ZipFile(wheel) as z:
        assert parse_record(z.read("tiny_ext-1.2.3.dist-info/buildrows.json"), "t").row == cpu.row


def test_another_local_label_is_never_relabelled() -> None:
    mp = plan_metadata("2.0+cpu", [], "+cu130", [RUNTIME])
    assert mp.version == "2.0+cpu" and mp.add == (RUNTIME,)
    # A requirement the project already declares for that distribution is kept as written.
    mp = plan_metadata("2.0", ["nvidia-cuda-runtime==13.0.96", "numpy; extra == 'test'"], "+cu130", [RUNTIME])
    assert mp.version == "2.0+cu130" and mp.add == ()


def test_a_torch_pin_joins_the_projects_own_torch_requirement() -> None:
    """torchsort declares torch>=1.7.1: the pin keeps that bound and adds the built-against minor."""
    from buildrows.build.stamp import torch_pin
    from buildrows.check.torchpin import pin_problem

    pin = torch_pin("2.14.1+cu130")
    # the parenthesised PEP 508 form: test-infra's smoke test greps for `Requires-Dist: torch (==.*)`
    assert pin == "torch (==2.14.*)"
    mp = plan_metadata("0.1.10", ["torch>=1.7.1"], "+cu130", [], [pin])
    ((old, new),) = mp.tighten
    assert old == "torch>=1.7.1" and pin_problem(Requirement(new).specifier, "2.14.1") is None
    assert Requirement(new).specifier.contains("2.14.1") and not Requirement(new).specifier.contains("2.15.0")
    assert plan_metadata("1.0", [], "+cu130", [], [pin]).add == (pin,)  # none declared: added
    assert plan_metadata("1.0", ["torch (==2.14.*)"], "+cu130", [], [pin]).tighten == ()  # already pinned
    # pinned but written without parentheses: rewritten (same specifier) so test-infra's grep finds it
    assert plan_metadata("1.0", ["torch==2.14.*"], "+cu130", [], [pin]).tighten == (("torch==2.14.*", "torch (==2.14.*)"),)
    assert new.startswith("torch (==2.14.*,")
    meta = "Name: x\nVersion: 1.0\nRequires-Dist: torch>=1.7.1\n\nbody"
    assert edit_metadata(meta, "1.0+cu130", [], [("torch>=1.7.1", new)]) == (
        f"Name: x\nVersion: 1.0+cu130\nRequires-Dist: {new}\n\nbody")


def test_edit_metadata_keeps_every_other_byte() -> None:
    text = "Metadata-Version: 2.1\nName: x\nVersion: 1.0\nRequires-Dist: a\nSummary: s\n\nBody\n\nVersion: not a header\n"
    out = edit_metadata(text, "1.0+cu130", ["b>=1"])
    assert out == ("Metadata-Version: 2.1\nName: x\nVersion: 1.0+cu130\nRequires-Dist: a\nRequires-Dist: b>=1\n"
                   "Summary: s\n\nBody\n\nVersion: not a header\n")


def test_a_damaged_wheel_is_refused_untouched(tmp_path: Path) -> None:
    """A member that no longer matches RECORD: stamping would re-sign it, so it refuses."""
    wheel = build_tiny(tmp_path)
    damaged = tmp_path / "damaged" / wheel.name
    damaged.parent.mkdir()
    with zipfile.ZipFile(wheel) as zin, zipfile.ZipFile(damaged, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            zout.writestr(info, b"ANSWER = 41\n" if info.filename == "tiny/__init__.py" else data)
    before = damaged.read_bytes()
    with pytest.raises(BadInput, match="cannot stamp this wheel: .*tiny/__init__.py"):
        stamp_wheel(damaged, local_tag="+cu130", requirements=[RUNTIME], record=RECORD, metadata=True)
    assert damaged.read_bytes() == before
    assert sorted(p.name for p in damaged.parent.iterdir()) == [wheel.name]  # no scratch left behind


def _test_infra_torch_grep() -> str:
    """The line test-infra's Linux smoke test runs on the unpacked wheel, from its own file."""
    text = (Path(__file__).parent / "data" / "test-infra" / ".github" / "workflows" / "build_wheels_linux.yml").read_text()
    (line,) = [ln.strip() for ln in text.splitlines() if ln.strip().startswith('grep "Requires-Dist: torch')]
    return line


@pytest.mark.parametrize(("pins", "passes"), [(["torch (==2.14.*)"], True), ([], False)])
def test_test_infras_smoke_grep_on_a_stamped_pytorch_extension(tmp_path: Path, pins: list[str], passes: bool) -> None:
    """run-smoke-test is rendered on for PyTorch extensions: their stamped pin is what test-infra's
    grep (under set -e) reads. Without the pin the same grep fails the job."""
    from buildrows.build.stamp import torch_pin

    wheel = build_tiny(tmp_path)
    if pins:
        assert pins == [torch_pin("2.14.1+cu130")]
    stamped = stamp_wheel(wheel, local_tag="+cu130", requirements=[], record=RECORD, metadata=True, pins=pins)
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(stamped.wheel) as z:
        z.extractall(unpacked)
    res = subprocess.run(["bash", "-euo", "pipefail", "-c", _test_infra_torch_grep()], cwd=unpacked,
                         capture_output=True, text=True, check=False)
    assert (res.returncode == 0) == passes, res.stdout + res.stderr
    if passes:
        assert "METADATA:Requires-Dist: torch (==2.14.*)" in res.stdout


def test_stamp_command_gives_a_ci_built_wheel_what_build_gives(tmp_path: Path, cli: Callable[..., Result],
                                                             policy_copy: Callable[..., Path]) -> None:
    """The CI post-script's first step after test-infra's build: the record always, the row's local
    version and runtime requirement with [project] stamp; stdout is the wheel's new path."""
    cfg = policy_copy('[project]\n', '[project]\nstamp = true\n')
    wheel = build_tiny(tmp_path)
    r = cli("--config", str(cfg), "stamp", "--row", "linux-x86_64-cu130-py311", str(wheel))
    assert r.code == 0, r.err
    out = Path(r.out.strip())
    assert out.name == "tiny_ext-1.2.3+cu130-py3-none-any.whl" and out.is_file() and not wheel.exists()
    info = read_wheel(out)
    assert RUNTIME in info.requires_dist
    assert info.build_record is not None and parse_record(info.build_record, "r").row == "linux-x86_64-cu130-py311"
    assert "version 1.2.3 -> 1.2.3+cu130 (the row's local tag)" in r.err


def test_stamp_command_refuses_a_row_the_policy_lacks(tmp_path: Path, cli: Callable[..., Result],
                                                     policy_copy: Callable[..., Path]) -> None:
    cfg = policy_copy('[project]\n', '[project]\nstamp = true\n')
    wheel = build_tiny(tmp_path)
    r = cli("--config", str(cfg), "stamp", "--row", "linux-x86_64-cu999-py311", str(wheel))
    assert r.code == 2 and "no row of" in r.err and "matches 'linux-x86_64-cu999-py311'" in r.err
    assert wheel.is_file()

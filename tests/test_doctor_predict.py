"""Doctor predicts the check from what init knew (issue 35 point 5): a scikit-build-core project
after `init`, before the edits init printed, is refused before any compile with init's fix, and
passes doctor once the edits are made. Default-suite cost: about 10 s (three inits and doctors,
no compile)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from buildrows.build.doctor_predict import CHECK, predict
from buildrows.check.tags import local_tag_problem
from buildrows.policy.load import load_policy
from tests.test_adopt import (
    CPU_C,
    KERNEL_CU,
    MODULE_C,
    ROW,
    SK_CMAKELISTS,
    SK_PYPROJECT,
    _cli,
    _write,
    apply_pyproject_advice,
)

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="init writes a CUDA row for this machine's nvcc")


def _project(tmp_path: Path) -> tuple[Path, str]:
    project = tmp_path / "tiny-sk"
    _write(project, {"pyproject.toml": SK_PYPROJECT, "CMakeLists.txt": SK_CMAKELISTS, "csrc/module.c": MODULE_C,
                     "csrc/cpu.c": CPU_C, "csrc/kernel.cu": KERNEL_CU,
                     "src/tiny_sk/__init__.py": "from ._core import devices\n"})
    r = _cli("init", cwd=project)
    assert r.returncode == 0, r.stderr
    return project, r.stderr


def test_doctor_refuses_before_the_compile_what_init_said_and_passes_once_it_is_done(tmp_path: Path) -> None:
    project, said = _project(tmp_path)
    r = _cli("doctor", ROW, cwd=project)
    out = r.stdout + r.stderr
    assert r.returncode == 3, out
    assert "everything the row needs is here" not in out
    assert (f"[REFUSED] {CHECK}: pyproject.toml names no metadata provider and the policy does not stamp: the wheel "
            f"of {ROW} would lack its local version (+cu130) and runtime requirement") in out
    assert "fail local-version-tag, runtime-declared after the compile" in out
    # The fix is init's, its edits line for line (init's first line said "init wrote it" of the provider).
    assert "init never edits pyproject.toml; make these changes:" in out
    edits = said.split("make these changes:", 1)[1].splitlines()
    for line in edits:
        if line.startswith("  ") and "INSTALL_RPATH" not in line and line.strip():
            assert line.strip() in out, line
    assert f"[REFUSED] {CHECK}: the wheel of {ROW} would fail runtime-reached: CMakeLists.txt sets no INSTALL_RPATH" \
        in out
    # Made as init said: the pyproject lines, then the RPATH line; each finding goes with its edit.
    (project / "pyproject.toml").write_text(apply_pyproject_advice(SK_PYPROJECT, said), encoding="utf-8")
    r = _cli("doctor", ROW, cwd=project)
    assert "local-version-tag" not in r.stdout and "runtime-reached" in r.stdout, r.stdout + r.stderr
    m = re.search(r'add set_target_properties\(TARGET PROPERTIES INSTALL_RPATH "([^"]+)"\)', said)
    assert m, said
    with open(project / "CMakeLists.txt", "a", encoding="utf-8") as f:
        f.write(f'set_target_properties(_core PROPERTIES INSTALL_RPATH "{m.group(1)}")\n')
    r = _cli("doctor", ROW, cwd=project)
    assert CHECK not in r.stdout, r.stdout
    assert r.returncode == 0 and f"{ROW}: everything the row needs is here" in r.stdout + r.stderr, r.stdout + r.stderr


def test_stamping_or_the_in_tree_provider_answers_it_and_buildrows_metadata_only_without_isolation(
        tmp_path: Path) -> None:
    project, _ = _project(tmp_path)
    pol = load_policy(project / "buildrows.toml")
    row = next(r for r in pol.rows if r.name == ROW)
    assert [f.check for f in predict(pol, row, project, "scikit-build-core")] == [CHECK, CHECK]
    # Stamping gives the wheel its version and requirement after the build: nothing foretold of them.
    policy_file = project / "buildrows.toml"
    text = policy_file.read_text(encoding="utf-8")
    policy_file.write_text(text.replace("[project]\n", "[project]\nstamp = true\n", 1), encoding="utf-8")
    stamped = load_policy(policy_file)
    srow = next(r for r in stamped.rows if r.name == ROW)
    assert [f for f in predict(stamped, srow, project, "scikit-build-core") if "local-version-tag" in f.seen] == []
    policy_file.write_text(text, encoding="utf-8")
    # A static CUDA runtime (CMake's default) needs no RPATH into the runtime wheel: not foretold.
    cmakelists = project / "CMakeLists.txt"
    cmakelists.write_text(SK_CMAKELISTS.replace("  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)\n", ""), encoding="utf-8")
    assert [f.seen for f in predict(pol, row, project, "scikit-build-core") if "runtime-reached" in f.seen] == []
    cmakelists.write_text(SK_CMAKELISTS, encoding="utf-8")
    cpu = next((r for r in pol.rows if not r.is_cuda), None)
    if cpu is not None:
        assert predict(pol, cpu, project, "scikit-build-core") == []
    text = SK_PYPROJECT + ('\n[tool.scikit-build.metadata.version]\nprovider = "buildrows.metadata"\n'
                           'base = "0.2.0"\n')
    (project / "pyproject.toml").write_text(text, encoding="utf-8")
    named = [f for f in predict(pol, row, project, "scikit-build-core") if "provider" in f.seen]
    assert named == []  # buildrows' own environment imports it
    isolated = [f for f in predict(pol, row, project, "scikit-build-core", isolation=True) if "provider" in f.seen]
    assert len(isolated) == 1 and "which an isolated build cannot import" in isolated[0].seen
    assert 'provider = "buildrows_version", provider-path = "build_support"' in isolated[0].fix
    # The check's own fix text names the in-tree provider, never buildrows.metadata (which fails there).
    problem = local_tag_problem(row, "tiny_sk-0.2.0-cp311-cp311-linux_x86_64.whl")
    assert problem is not None and "buildrows.metadata" not in problem and "build_support/buildrows_version.py" in problem


def test_with_no_check_the_prediction_is_a_note_and_the_row_is_not_refused(tmp_path: Path) -> None:
    """`build --no-check` judges no wheel: what doctor foretells of the check is said, not refused."""
    import io

    from buildrows.build.prepare import BuildOptions, doctor_row
    from buildrows.errors import Refused
    from buildrows.plan.host import host_os
    from buildrows.ui import UI

    project, _ = _project(tmp_path)
    pol = load_policy(project / "buildrows.toml")
    row = next(r for r in pol.rows if r.name == ROW)
    env = dict(os.environ)
    out = io.StringIO()
    with pytest.raises(Refused):
        doctor_row(pol, row, env, host_os(env), BuildOptions(selectors=(ROW,), config=str(pol.path)), UI(out=out, err=out))
    assert f"[REFUSED] {CHECK}:" in out.getvalue()
    out = io.StringIO()
    doctor_row(pol, row, env, host_os(env), BuildOptions(selectors=(ROW,), config=str(pol.path), no_check=True),
               UI(out=out, err=out))
    assert f"[note   ] {CHECK}:" in out.getvalue() and f"{ROW}: everything the row needs is here" in out.getvalue()

"""Issue 21, points 7-13: the smaller guards, each with the input that tripped it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from buildrows.build.doctor import FRONTEND, check_requirements
from tests.conftest import Result

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
PYT = PY.replace(".", "")


# --- point 10: --isolation alone was refused with a fix saying to use --isolation ----------------

def test_with_isolation_the_frontends_fix_does_not_offer_isolation() -> None:
    (f,) = check_requirements("/py/bin/python", [FRONTEND], {"build": None}, isolation=True)
    assert f.failed and "--isolation, which fetches" not in f.fix
    assert f.fix == (f"/py/bin/python -m pip install '{FRONTEND}' (the PEP 517 frontend runs in the row's Python, "
                     "with --isolation too)")
    (f,) = check_requirements("/py/bin/python", [FRONTEND], {"build": None})
    assert "or build with --isolation, which fetches it from the registry" in f.fix


def _skbuild_project(root: Path, cmake_dir: str | None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if cmake_dir is not None:
        (root / cmake_dir).mkdir(parents=True, exist_ok=True)
        (root / cmake_dir / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.24)\nproject(x)\n")
    pol = root / "buildrows.toml"
    pol.write_text(f'[project]\nname = "x"\ndriver = "scikit-build-core"\n[python]\nversions = ["{PY}"]\n'
                   '[cuda]\ntrains = ["13.0"]\n[platforms.linux-x86_64]\ntrains = ["13.0"]\ncpu = true\n'
                   '[[platforms.linux-x86_64.cuda]]\ntrains = ["13.0"]\narchs = "9.0"\n', encoding="utf-8")
    return pol


def test_render_prints_cmake_workflow_only_where_a_cmakelists_is(cli: Callable[..., Result], tmp_path: Path) -> None:
    row = f"linux-x86_64-cpu-py{PYT}"
    for name, where in (("subdir", "native"), ("none", None)):
        pol = _skbuild_project(tmp_path / name, where)
        r = cli("--config", str(pol), "render", row, "--no-toolchain-check")
        assert r.code == 0, r.err
        text = r.out + r.err
        assert "cmake --workflow --preset" not in text.replace("`cmake --workflow` cannot", "")
        assert f"{tmp_path / name} has no CMakeLists.txt, so `cmake --workflow` cannot build there; build the row " \
               f"with: buildrows --config {pol} build {row}" in text
    pol = _skbuild_project(tmp_path / "root", ".")
    r = cli("--config", str(pol), "render", row, "--no-toolchain-check")
    assert f"run: cmake --workflow --preset {row}" in r.out + r.err

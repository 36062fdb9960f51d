"""The pull-request path filter's default: the build files and the sources they name (buildrows.ci.paths)."""

from __future__ import annotations

import shutil
from pathlib import Path

from buildrows.ci.paths import named_sources
from buildrows.ci.workflow import plan
from buildrows.policy.load import load_policy
from tests.conftest import REPO


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def test_cmake_sources_subdirectories_and_includes(tmp_path: Path) -> None:
    root = _write(tmp_path, {
        "CMakeLists.txt": "project(x)\n# add_subdirectory(commented_out)\ninclude(cmake/Deps.cmake)\n"
                          "add_subdirectory(kernels)\nadd_library(x MODULE csrc/a.cu \"csrc/b.cpp\" ${GEN}/c.cu)\n",
        "cmake/Deps.cmake": "", "csrc/a.cu": "", "csrc/b.cpp": "", "commented_out/CMakeLists.txt": "",
        "kernels/CMakeLists.txt": "target_sources(x PRIVATE impl/k.cu ../third_party/y.h)\n",
        "kernels/impl/k.cu": "", "third_party/y.h": "",
    })
    assert sorted(named_sources(root, "scikit-build-core")) == [
        "cmake/**", "csrc/**", "kernels/**", "third_party/**"]


def test_setup_py_and_pyproject_strings(tmp_path: Path) -> None:
    root = _write(tmp_path, {
        "setup.py": "from setuptools import setup\nsetup(ext_modules=[Ext('m', ['src/m.cpp', 'does/not/exist.cu'])],\n"
                    "      package_dir={'': 'python'})\n",
        "src/m.cpp": "", "python/pkg/__init__.py": "",
        "pyproject.toml": "[tool.setuptools]\npackage-dir = {'' = 'python'}\n",
    })
    assert named_sources(root, "setup.py") == ["python/**", "src/**"]
    # setup.py is read only when it is the driver
    assert named_sources(root, "scikit-build-core") == ["python/**"]


def test_the_bundled_example_names_its_kernel_without_ci_paths() -> None:
    assert named_sources(REPO / "examples" / "cuda-extension", "scikit-build-core") == [
        "csrc/**", "src/cuda_extension/**", "build_support/**"]


def test_a_kernel_only_change_reaches_the_filter_and_ci_paths_add(tmp_path: Path) -> None:
    """Without [ci] paths the filter holds csrc/** (a pull request that changes only a kernel
    builds); [ci] paths adds to it and removes nothing."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "examples" / "cuda-extension", repo, ignore=shutil.ignore_patterns("build", "dist"))
    (repo / "tools" / "buildrows").mkdir(parents=True)
    (repo / "tools" / "buildrows" / "pyproject.toml").write_text("[project]\nname = 'buildrows'\n", encoding="utf-8")
    cfg = repo / "buildrows.toml"
    text = cfg.read_text(encoding="utf-8").replace('install = "../.."', 'install = "./tools/buildrows"')
    cfg.write_text(text, encoding="utf-8")
    (p, *_) = plan(load_policy(cfg), root=repo, out_dir=repo / ".github" / "workflows")
    assert {"csrc/**", "src/cuda_extension/**", "build_support/**", "CMakeLists.txt", "pyproject.toml",
            "tools/buildrows/**"} <= set(p.paths)
    cfg.write_text(text.replace("\n[ci]\n", '\n[ci]\npaths = ["docs/kernels.md"]\n'), encoding="utf-8")
    (q, *_) = plan(load_policy(cfg), root=repo, out_dir=repo / ".github" / "workflows")
    assert set(q.paths) == set(p.paths) | {"docs/kernels.md"}

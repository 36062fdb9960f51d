"""buildrows.metadata, the scikit-build-core provider: it adds the row's requirement to the
project's own dependencies (never replacing them) and the row's local label to the version,
through both of scikit-build-core's provider interfaces; one real build through the 1.x one."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from buildrows.metadata import dynamic_metadata, row_dependencies, row_version

RUNTIME = "nvidia-cuda-runtime>=13,<14; platform_system == 'Linux'"
ROW_ENV = {"BUILDROWS_LOCAL_VERSION": "+cu130", "BUILDROWS_REQUIRES_DIST": RUNTIME}


def test_adds_never_replaces() -> None:
    assert row_dependencies(["numpy>=1.24", "torch==2.14.*"], ROW_ENV) == ["numpy>=1.24", "torch==2.14.*", RUNTIME]
    # The project already depends on the runtime: its own requirement stays, none is added.
    assert row_dependencies(["NVIDIA_cuda.runtime==13.0.96"], ROW_ENV) == ["NVIDIA_cuda.runtime==13.0.96"]
    assert row_dependencies(["numpy"], {}) == ["numpy"]  # a CPU row adds nothing


def test_version() -> None:
    assert row_version("0.1.0", ROW_ENV) == "0.1.0+cu130"
    assert row_version("0.1.0", {"BUILDROWS_LOCAL_VERSION": ""}) == "0.1.0"
    with pytest.raises(ValueError, match="not a PEP 440 local version label"):
        row_version("0.1.0", {"BUILDROWS_LOCAL_VERSION": "+cu 130"})
    with pytest.raises(ValueError, match="already has a local label"):
        row_version("0.1.0+cpu", ROW_ENV)


def test_legacy_interface(monkeypatch: pytest.MonkeyPatch) -> None:
    """[tool.scikit-build.metadata.FIELD]: the project's own dependencies come as `requires`."""
    for k, v in ROW_ENV.items():
        monkeypatch.setenv(k, v)
    assert dynamic_metadata("version", {"base": "2.0"}) == "2.0+cu130"
    assert dynamic_metadata("dependencies", {"requires": ["numpy"]}, {}) == ["numpy", RUNTIME]
    with pytest.raises(ValueError, match="set `base`"):
        dynamic_metadata("version", {})
    with pytest.raises(ValueError, match="not readme"):
        dynamic_metadata("readme", {})


def test_fragment_interface(monkeypatch: pytest.MonkeyPatch) -> None:
    """[[tool.dynamic-metadata]]: a fragment; scikit-build-core appends it to the static dependencies."""
    for k, v in ROW_ENV.items():
        monkeypatch.setenv(k, v)
    project = {"dynamic": ["version", "dependencies"], "dependencies": ["numpy", "nvidia-cuda-runtime"]}
    assert dynamic_metadata({"base": "1.0"}, project) == {"version": "1.0+cu130", "dependencies": []}
    project = {"dynamic": ["dependencies"], "dependencies": ["numpy"]}
    assert dynamic_metadata({}, project) == {"dependencies": [RUNTIME]}


def test_real_scikit_build_core_build_keeps_the_static_dependencies(tmp_path: Path) -> None:
    """A scikit-build-core project (no compiled code) with static dependencies and the provider:
    the wheel declares both its own dependency and the row's, and carries +cu130."""
    load = pytest.importorskip("scikit_build_core.builder._load_provider")
    if not hasattr(load, "process_dynamic_metadata"):
        pytest.skip("this scikit-build-core has no [[tool.dynamic-metadata]] (1.x)")
    src = tmp_path / "proj"
    (src / "src" / "plain").mkdir(parents=True)
    (src / "src" / "plain" / "__init__.py").write_text("")
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["scikit-build-core"]\nbuild-backend = "scikit_build_core.build"\n'
        '[project]\nname = "plain"\ndependencies = ["packaging>=20"]\ndynamic = ["version", "dependencies"]\n'
        '[[tool.dynamic-metadata]]\nprovider = "buildrows"\nbase = "0.3.0"\n'
        '[tool.scikit-build]\nwheel.cmake = false\nexperimental = true\n')
    env = {**__import__("os").environ, **ROW_ENV}
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "dist"),
                    str(src)], check=True, capture_output=True, env=env)
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert wheel.name.startswith("plain-0.3.0+cu130-")
    with zipfile.ZipFile(wheel) as z:
        meta = z.read("plain-0.3.0+cu130.dist-info/METADATA").decode()
    requires = [line.split(": ", 1)[1] for line in meta.splitlines() if line.startswith("Requires-Dist: ")]
    assert requires[0] == "packaging>=20" and len(requires) == 2 and requires[1].startswith("nvidia-cuda-runtime")


IN_TREE = ("buildrows/data/buildrows_version.py", "examples/cuda-extension/build_support/buildrows_version.py")


def test_the_example_carries_the_provider_init_writes() -> None:
    from tests.conftest import REPO

    written, carried = (REPO / p for p in IN_TREE)
    assert carried.read_bytes() == written.read_bytes(), (
        f"{carried} differs from {written}\n    fix: cp {written} {carried}")


@pytest.mark.parametrize("path", IN_TREE)
def test_the_in_tree_provider_agrees_with_buildrows_metadata(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """The provider `init` writes into a project (and the example carries) runs where buildrows is
    not importable (CI's isolated build): it must give what buildrows.metadata gives."""
    import builtins
    import importlib.util

    from tests.conftest import REPO

    real_import = builtins.__import__

    def no_buildrows(name: str, *a: object, **k: object) -> object:
        if name.startswith("buildrows"):
            raise ImportError(name)
        return real_import(name, *a, **k)  # type: ignore[arg-type]

    spec = importlib.util.spec_from_file_location("buildrows_version_in_tree", REPO / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setattr(builtins, "__import__", no_buildrows)
    spec.loader.exec_module(module)
    monkeypatch.setattr(builtins, "__import__", real_import)
    assert module.dynamic_metadata is not dynamic_metadata
    cases = [{}, {"BUILDROWS_LOCAL_VERSION": "+cu130", "BUILDROWS_REQUIRES_DIST": RUNTIME},
             {"BUILDROWS_LOCAL_VERSION": "cu126", "BUILDROWS_REQUIRES_DIST": f"{RUNTIME}\nnumpy>=2\n"}]
    for env in cases:
        for k in ("BUILDROWS_LOCAL_VERSION", "BUILDROWS_REQUIRES_DIST"):
            monkeypatch.delenv(k, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        for own in ([], ["numpy>=1.24"], ["NVIDIA_cuda_runtime==13.0.96"]):
            assert module.dynamic_metadata("dependencies", {"requires": own}) == dynamic_metadata(
                "dependencies", {"requires": own})
            project = {"dynamic": ["version", "dependencies"], "dependencies": own}
            assert module.dynamic_metadata({"base": "1.0"}, project) == dynamic_metadata({"base": "1.0"}, project)
        assert module.dynamic_metadata("version", {"base": "0.1.0"}) == dynamic_metadata("version", {"base": "0.1.0"})
    with pytest.raises(ValueError, match="set `base`"):
        module.dynamic_metadata("version", {})
    monkeypatch.setenv("BUILDROWS_LOCAL_VERSION", "+cu 130")
    with pytest.raises(ValueError, match="not a PEP 440 local version label"):
        module.dynamic_metadata("version", {"base": "0.1.0"})

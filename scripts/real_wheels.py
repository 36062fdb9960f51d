#!/usr/bin/env python3
"""Hold real CUDA wheels from PyPI to their policies (tests/data/real-wheels/wheels.toml).

    python scripts/real_wheels.py [--cache DIR] [NAME ...]   # prints a markdown table

For each wheel, pinned by URL and sha256 and downloaded into the cache (default
$BUILDROWS_REAL_WHEELS_CACHE, else ~/.cache/buildrows/real-wheels; never into the repository):
`check` under its policy passes; the policy with one promise broken fails with its message;
`init --from-wheel` writes a policy under which `check` passes; the device code buildrows reads
equals cuobjdump's on every library cuobjdump can read; and the peak RSS of the check process.
tests/test_real_wheels.py (BUILDROWS_REAL_WHEELS=1) asserts the same through these functions.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "real-wheels"
# Runs buildrows in a fresh process and reports that process's peak RSS (KiB) on stderr: VmHWM,
# the high-water mark of this process's own memory (getrusage's ru_maxrss survives exec, so it
# would report the parent's peak when that was larger).
_RUNNER = ("import re, sys\nfrom buildrows.cli import main\ntry:\n    rc = main(sys.argv[1:])\n"
           "except SystemExit as e:\n    rc = int(e.code or 0)\n"
           "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())\n"
           "sys.stderr.write(f'\\nPEAK_RSS_KB {hwm.group(1) if hwm else 0}\\n')\nsys.exit(rc)\n")


@dataclass(frozen=True)
class RealWheel:
    shape: str
    file: str
    url: str
    sha256: str
    policy: str
    cuda: str  # the train: published wheels carry no +cuXYZ tag, so `check --cuda` states it
    message: str
    args: tuple[str, ...] = ()
    broken: tuple[str, str] | None = None
    broken_args: tuple[str, ...] = ()
    row: str | None = None  # only for a wheel whose tags do not name its row
    # The wheel's own gap, which the honest policy states and `check` must fail on (with this message);
    # init's policy must fail on it too (it never hides a missing library). None: check passes.
    expect_fail: str | None = None
    broken_all: bool = False  # the broken edit replaces every occurrence (a train named in three tables)
    waits: tuple[str, ...] = ()  # branches whose features the policy's spelling or the pass needs
    waits_why: str = ""
    # False: no shared library carries device code, or cuobjdump cannot read it (CUDA 11's Kepler code,
    # refused by cuobjdump 12 and later): nothing to compare with
    cuobjdump: bool = True
    size_mb: float = 0.0
    # init's policy fails where the honest one passes, on purpose: init writes what it cannot tell is optional
    # (a dlopened codec) as required, never hiding it. The message it must fail with; None: it passes too.
    init_expect_fail: str | None = None

    def target(self) -> list[str]:
        """How `check` is told the row: inferred from the tags with --cuda, or --row where they cannot say."""
        return ["--row", self.row, "--cuda", self.cuda] if self.row else ["--cuda", self.cuda]


def wheels() -> list[RealWheel]:
    raw = tomllib.loads((DATA / "wheels.toml").read_text(encoding="utf-8"))
    return [RealWheel(w["shape"], w["file"], w["url"], w["sha256"], w["policy"], w["cuda"], w["message"],
                      tuple(w.get("args", ())), (w["broken"][0], w["broken"][1]) if "broken" in w else None,
                      tuple(w.get("broken-args", ())), w.get("row"), w.get("expect-fail"), w.get("broken-all", False),
                      tuple(w.get("waits", ())), w.get("waits-why", ""), w.get("cuobjdump", True),
                      float(w.get("size-mb", 0.0)), w.get("init-expect-fail")) for w in raw["wheel"]]


def unmerged(wheel: RealWheel) -> list[str]:
    """The branches a wheel waits on that this checkout does not contain yet (git's answer; none
    outside a git checkout, so a release tree holds every wheel to its expectation)."""
    out = []
    for branch in wheel.waits:
        p = subprocess.run(["git", "-C", str(REPO), "merge-base", "--is-ancestor", branch, "HEAD"],
                           capture_output=True, text=True, check=False)
        if p.returncode == 1:  # 128: no such branch or no git: treated as merged
            out.append(branch)
    return out


def cache_dir() -> Path:
    return Path(os.environ.get("BUILDROWS_REAL_WHEELS_CACHE") or Path.home() / ".cache" / "buildrows" / "real-wheels")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def ensure(wheel: RealWheel, cache: Path) -> Path:
    """The wheel in the cache, downloaded if absent; refused if its sha256 is not the pinned one."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / wheel.file
    if not path.exists():
        with (tempfile.NamedTemporaryFile(dir=cache, delete=False, suffix=".part") as tmp,
              urllib.request.urlopen(wheel.url, timeout=120) as resp):
            shutil.copyfileobj(resp, tmp)
        os.chmod(tmp.name, 0o644)
        Path(tmp.name).replace(path)
    got = _sha256(path)
    if got != wheel.sha256:
        raise SystemExit(f"{path}: sha256 {got} is not the pinned {wheel.sha256}; delete it and run again")
    return path


@dataclass
class Run:
    code: int
    out: str
    err: str
    peak_kb: int


def buildrows(*argv: str, cwd: Path | None = None) -> Run:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", _RUNNER, *argv], capture_output=True, text=True, cwd=cwd, env=env,
                       check=False)
    m = re.search(r"\nPEAK_RSS_KB (\d+)\n", p.stderr)
    return Run(p.returncode, p.stdout, p.stderr[: m.start()] if m else p.stderr, int(m.group(1)) if m else 0)


def broken_policy(wheel: RealWheel, where: Path) -> Path:
    text = (DATA / wheel.policy).read_text(encoding="utf-8")
    if wheel.broken is not None:
        old, new = wheel.broken
        assert old in text, f"{wheel.policy}: the broken edit's target {old!r} is not in the policy"
        text = text.replace(old, new) if wheel.broken_all else text.replace(old, new, 1)
    out = where / wheel.policy
    out.write_text(text, encoding="utf-8")
    return out


def cuobjdump() -> str | None:
    found = shutil.which("cuobjdump")
    if found:
        return found
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        for cand in Path(base).glob("cu*/bin/cuobjdump"):
            return str(cand)
    return None


_REFUSED = re.compile(r"Support for 'sm_(\d+)' has been removed")


def _renamed(data: bytes, refused: set[int]) -> tuple[bytes, dict[str, str]]:
    """A copy of ``data`` whose fat binary entries of the architectures cuobjdump refuses (CUDA 11's
    sm_35/sm_37: "Support for 'sm_35' has been removed") name an architecture the file does not
    carry, so cuobjdump reads every other byte; and the names to map back. Only the entry header's
    SM field changes (located with buildrows' header reader; cuobjdump parses everything else). Enough
    where the refused code is PTX (catboost's compute_35); a cubin names its architecture in its own
    ELF header too, and cuobjdump still refuses it (nvjpeg-cu11's sm_35 cubins)."""
    from buildrows.binaries.fatbin import FATBIN_MAGIC, FatbinError, iter_entries

    buf = bytearray(data)
    magic = struct.pack("<IHH", FATBIN_MAGIC, 1, 16)
    headers: list[tuple[int, int]] = []  # (offset of the SM field, sm)
    pos = buf.find(magic)
    while pos >= 0:
        try:
            size = struct.unpack_from("<Q", buf, pos + 8)[0]
            headers += [(pos + e.offset + 28, e.sm) for e in iter_entries(memoryview(buf)[pos : pos + 16 + size])]
            pos = buf.find(magic, pos + 16 + size)
        except (FatbinError, struct.error):
            pos = buf.find(magic, pos + 4)
    spare = [sm for sm in (52, 53, 62, 72, 87, 88, 101, 110) if sm not in {s for _, s in headers}]
    mapping = dict(zip(sorted(refused), spare, strict=False))  # beyond the spares: cuobjdump refuses again
    for at, sm in headers:
        if sm in mapping:
            struct.pack_into("<I", buf, at, mapping[sm])
    return bytes(buf), {f"sm_{new}": f"sm_{old}" for old, new in mapping.items()}


def cuobjdump_lists(tool: str, data: bytes) -> tuple[set[str], set[str]] | None:
    """(elf, ptx) architectures as cuobjdump lists them, or None where cuobjdump cannot read the file.

    Where cuobjdump refuses an architecture it no longer supports, it reads a copy whose entries of
    that architecture are renamed (:func:`_renamed`), and the names are mapped back."""
    if data[:2] == b"MZ":  # a Windows DLL: cuobjdump reads no PE file, but reads its fat binaries alone
        return _pe_lists(tool, data)
    refused: set[int] = set()
    while True:
        body, back = _renamed(data, refused) if refused else (data, {})
        with tempfile.NamedTemporaryFile(suffix=".so") as f:
            f.write(body)
            f.flush()
            out: list[set[str]] = []
            for flag in ("--list-elf", "--list-ptx"):
                p = subprocess.run([tool, flag, f.name], capture_output=True, text=True, check=False)
                if p.returncode != 0:
                    break
                out.append({back.get(n, n) for n in re.findall(r"\.(sm_\d+[a-z]?)\.(?:cubin|ptx)", p.stdout)})
        if len(out) == 2:
            return out[0], out[1]
        more = {int(sm) for sm in _REFUSED.findall(p.stderr)} - refused
        if not more or len(refused) >= 4:
            return None
        refused |= more


def _pe_lists(tool: str, data: bytes) -> tuple[set[str], set[str]] | None:
    """(elf, ptx) as cuobjdump lists them for each fat binary container a DLL carries, written to a
    .fatbin file of its own (found by its header's magic; cuobjdump parses the rest); None if it reads none."""
    from buildrows.binaries.fatbin import FATBIN_MAGIC

    magic = struct.pack("<IHH", FATBIN_MAGIC, 1, 16)
    elf: set[str] = set()
    ptx: set[str] = set()
    read = 0
    pos = data.find(magic)
    while pos >= 0:
        size = struct.unpack_from("<Q", data, pos + 8)[0]
        with tempfile.NamedTemporaryFile(suffix=".fatbin") as f:
            f.write(data[pos : pos + 16 + size])
            f.flush()
            got = [subprocess.run([tool, flag, f.name], capture_output=True, text=True, check=False)
                   for flag in ("--list-elf", "--list-ptx")]
        if all(p.returncode == 0 for p in got):
            read += 1
            elf |= set(re.findall(r"\.(sm_\d+[a-z]?)\.cubin", got[0].stdout))
            ptx |= set(re.findall(r"\.(sm_\d+[a-z]?)\.ptx", got[1].stdout))
        pos = data.find(magic, pos + 16 + max(size, 1))
    return (elf, ptx) if read else None


@dataclass
class Outcome:
    wheel: RealWheel
    passed: bool = False
    check: Run | None = None
    broken_seen: bool = False
    broken: Run | None = None
    round_trip: bool = False
    init: Run | None = None
    init_peak_kb: int = 0
    compared: int = 0
    carrying: int = 0  # shared libraries that carry device code, as buildrows reads them
    equal: int = 0
    unreadable: list[str] = field(default_factory=list)
    differing: list[str] = field(default_factory=list)


def _as_expected(wheel: RealWheel, run: Run, *, init: bool = False) -> bool:
    """Passes; or, for a wheel with its own gap, fails (exit 5) naming that gap (for init's policy, the
    gap init cannot tell is optional, where the wheel names one)."""
    expected = (wheel.init_expect_fail or wheel.expect_fail) if init else wheel.expect_fail
    if expected is None:
        return run.code == 0 and "verdict: PASS" in run.out
    return run.code == 5 and expected in run.out


def audit(wheel: RealWheel, path: Path, work: Path) -> Outcome:
    from buildrows.binaries.wheelread import read_wheel
    from buildrows.check.device import library_json

    o = Outcome(wheel)
    base = ["check", str(path), *wheel.target()]
    o.check = buildrows("--config", str(DATA / wheel.policy), *base, *wheel.args)
    o.passed = _as_expected(wheel, o.check)
    broken_dir = work / "broken"
    broken_dir.mkdir(parents=True, exist_ok=True)
    args = wheel.broken_args or wheel.args
    o.broken = buildrows("--config", str(broken_policy(wheel, broken_dir)), *base, *args)
    o.broken_seen = o.broken.code == 5 and wheel.message in o.broken.out
    project = work / "project"
    project.mkdir(parents=True, exist_ok=True)
    (project / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools"]\n'
                                            'build-backend = "setuptools.build_meta"\n', encoding="utf-8")
    o.init = buildrows("init", "--from-wheel", str(path), "--cuda", wheel.cuda, cwd=project)
    o.init_peak_kb = o.init.peak_kb
    if o.init.code == 0:
        rt = buildrows("--config", str(project / "buildrows.toml"), *base, *wheel.args)
        o.round_trip = _as_expected(wheel, rt, init=True)
        if not o.round_trip:
            o.init = rt
    mine = library_json(read_wheel(path).libraries)
    o.carrying = sum(1 for code in mine.values() if code["elf"] or code["ptx"])
    tool = cuobjdump() if wheel.cuobjdump else None
    if tool is not None:
        with zipfile.ZipFile(path) as zf:
            for member, code in mine.items():
                if not code["elf"] and not code["ptx"]:
                    continue
                theirs = cuobjdump_lists(tool, zf.read(member))
                if theirs is None:
                    o.unreadable.append(member)
                    continue
                o.compared += 1
                # cuobjdump --list-elf names a family cubin (sm_100f) as sm_100 (its ELF header says f)
                elf = {n[:-1] if re.fullmatch(r"sm_\d+f", n) else n for n in code["elf"]}
                if (elf, set(code["ptx"])) == theirs:
                    o.equal += 1
                else:
                    o.differing.append(f"{member}: buildrows {code}, cuobjdump {sorted(theirs[0])} {sorted(theirs[1])}")
    return o


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=None)
    ap.add_argument("names", nargs="*", help="wheel file name prefixes (default: all)")
    a = ap.parse_args(argv)
    cache = a.cache or cache_dir()
    print("| wheel | size | shape | policy | check | broken promise | init round-trip | device code = cuobjdump "
          "| peak RSS check / init | waits on |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ok = True
    for w in wheels():
        if a.names and not any(w.file.startswith(n) for n in a.names):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            o = audit(w, ensure(w, cache), Path(tmp))
        assert o.check is not None
        dev = f"{o.equal}/{o.compared} equal" + (f" ({len(o.unreadable)} cuobjdump cannot read)" if o.unreadable else "")
        verdict = ("PASS" if w.expect_fail is None else "FAIL as expected (the wheel's gap)") if o.passed else "NOT AS EXPECTED"
        if not w.cuobjdump:  # its entry in wheels.toml says why
            dev = (f"not compared (wheels.toml says why; device code in {o.carrying} libraries)" if o.carrying
                   else "n/a (no library carries device code)")
        waiting = unmerged(w)
        print(f"| `{w.file.split('-')[0]}=={w.file.split('-')[1]}` | {w.size_mb or '?'} MB | {w.shape} | {w.policy} | "
              f"{verdict} | {'fails as expected' if o.broken_seen else 'NOT SEEN'} | {'yes' if o.round_trip else 'NO'} | "
              f"{dev} | {o.check.peak_kb / 1024:.0f} / {o.init_peak_kb / 1024:.0f} MB | "
              f"{', '.join(waiting) + ' (not merged)' if waiting else '-'} |")
        if not (o.passed and o.broken_seen and o.round_trip):
            for r in (o.check, o.broken, o.init):
                if r is not None and r.code not in (0, 5):
                    print(f"    {w.file}: {(r.err or r.out).strip().splitlines()[-1][:300]}", file=sys.stderr)
        ok = ok and (bool(waiting) or (o.passed and o.broken_seen and o.round_trip and not o.differing))
        for d in o.differing:
            print(f"    differs: {d}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

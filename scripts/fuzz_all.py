#!/usr/bin/env python3
"""Large fuzz run over every buildrows parser (issue 7); CI runs the modest hypothesis budget instead.

    python scripts/fuzz_all.py                    # 100,000+ cases, fixed seed, prints a table
    python scripts/fuzz_all.py --scale 0.1        # a tenth of that
    python scripts/fuzz_all.py --only elf,wheel --seed 7 --save /tmp/fuzz-crashes

Direct calls in random mutation loops (no hypothesis overhead), reproducible from --seed. Each case
must end in a result or buildrows' own error (the parser's ValueError subclass, or a BuildrowsError);
any other exception, a case over --case-timeout seconds, or memory past --memory-gb is a finding.
Seeds: the example policy, the generator fixtures, an nvcc-built CUDA .so (when nvcc is on PATH or
at /usr/local/bin/nvcc), hand-made ELF and fat binaries, a MinGW-built PE DLL (when MinGW is there),
and wheels made of these. The run works in a temporary directory and checks that nothing was
written outside it. Exit status 1 when anything was found.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from buildrows.binaries.binfmt import BinaryFormatError, read_binary  # noqa: E402
from buildrows.binaries.fatbin import FatbinError, list_device_code  # noqa: E402
from buildrows.binaries.wheelread import WheelError, read_wheel  # noqa: E402
from buildrows.ci.matrix import narrow  # noqa: E402
from buildrows.cli import main  # noqa: E402
from buildrows.errors import BuildrowsError  # noqa: E402
from buildrows.policy.archs import ArchError, Train, parse_arch_list  # noqa: E402
from buildrows.policy.load import policy_from_dict  # noqa: E402
from buildrows.policy.problems import Locator  # noqa: E402
from buildrows.ui import UI  # noqa: E402
from tests.cuda_tools import METADATA, fatbin_container, fatbin_entry, make_elf  # noqa: E402
from tests.fuzz_tools import (  # noqa: E402
    EXAMPLE_POLICY,
    GENERATOR_DIR,
    library_in_memory,
    library_streamed,
    mutate_bytes,
    mutate_doc,
    mutate_elf,
    mutate_fatbin,
    mutate_text,
    mutate_wheel,
    random_text,
    random_value,
)

# Cases per parser at --scale 1 (sum: 117,000). "stream": the streaming library reader against the
# in-memory one on a mutated library, in random chunk sizes (any difference is a finding).
BUDGET = {
    "policy-dict": 20_000, "policy-text": 10_000, "arch-list": 20_000, "train": 5_000, "matrix": 12_000,
    "elf": 15_000, "pe": 4_000, "fatbin": 17_000, "wheel": 6_000, "cli": 2_000, "stream": 6_000,
}


class CaseTimeout(BaseException):
    """Raised by SIGALRM inside a case that ran too long (BaseException: no parser may swallow it)."""


@dataclass
class Stats:
    cases: int = 0
    ok: int = 0
    own_errors: int = 0
    seconds: float = 0.0
    slowest: float = 0.0
    unexpected: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)


def _alarm(_signum: int, _frame: object) -> None:
    raise CaseTimeout


# --- seeds -------------------------------------------------------------------------------------

KERNEL = """
__global__ void scale(float* x, float a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }
extern "C" void launch(float* x, float a, int n) { scale<<<(n + 255) / 256, 256>>>(x, a, n); }
"""


def nvcc_seed(work: Path) -> bytes | None:
    nvcc = shutil.which("nvcc") or ("/usr/local/bin/nvcc" if Path("/usr/local/bin/nvcc").exists() else None)
    if nvcc is None:
        return None
    src = work / "seed.cu"
    src.write_text(KERNEL)
    out = work / "libseed.so"
    cmd = [nvcc, "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared", "-gencode=arch=compute_80,code=sm_80",
           "-gencode=arch=compute_90,code=[sm_90,compute_90]", "-o", str(out), str(src)]
    if subprocess.run(cmd, capture_output=True, check=False).returncode != 0:
        return None
    return out.read_bytes()


def pe_seed(work: Path, fatbin: bytes) -> bytes | None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from make_check_fixtures import build_pe_dll, mingw_available
    except ImportError:
        return None
    if not mingw_available():
        return None
    try:
        return build_pe_dll(work, fatbin, True).read_bytes()
    except Exception:  # a seed we cannot build is skipped, not a finding
        return None


def hand_made_elf() -> bytes:
    fatbin = fatbin_container([fatbin_entry(2, 80), fatbin_entry(2, 90), fatbin_entry(1, 90),
                               fatbin_entry(2, 100, flags=0x100011)])
    return make_elf([(".nv_fatbin", fatbin)], needed=["libcudart.so.13"], runpath="$ORIGIN/../nvidia/cu13/lib")


# --- the run -----------------------------------------------------------------------------------

def run_case(stats: Stats, fn: Callable[[], Any], expected: tuple[type[BaseException], ...], timeout: float,
             describe: Callable[[], str]) -> None:
    stats.cases += 1
    start = time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        fn()
        stats.ok += 1
    except expected:
        stats.own_errors += 1
    except CaseTimeout:
        stats.unexpected["timeout"] += 1
        stats.examples.setdefault("timeout", describe())
    except Exception as e:  # the point of the run: record anything else
        key = type(e).__name__
        stats.unexpected[key] += 1
        stats.examples.setdefault(key, describe() + "\n" + "".join(traceback.format_exception(e))[-2000:])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        took = time.perf_counter() - start
        stats.seconds += took
        stats.slowest = max(stats.slowest, took)


def listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def main_(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every per-parser count")
    ap.add_argument("--only", help="comma-separated parsers: " + ",".join(BUDGET))
    ap.add_argument("--case-timeout", type=float, default=5.0)
    ap.add_argument("--memory-gb", type=float, default=4.0, help="address-space limit for the run")
    ap.add_argument("--save", metavar="DIR", help="write one reproducer description per finding here")
    args = ap.parse_args(argv)

    warnings.filterwarnings("ignore", "Duplicate name", UserWarning)  # the wheel mutator makes them on purpose
    limit = int(args.memory_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGALRM, _alarm)
    rng = random.Random(args.seed)
    only = set(args.only.split(",")) if args.only else set(BUDGET)
    work = Path(tempfile.mkdtemp(prefix="buildrows-fuzz-"))
    cwd = work / "cwd"
    cwd.mkdir()
    os.chdir(cwd)
    watched = [REPO / "examples", REPO / "tests" / "data"]
    before = {str(w): listing(w) for w in watched}
    ui = UI(out=io.StringIO(), err=io.StringIO())
    for var in ("GITHUB_ENV", "BUILD_ENV_FILE", "GITHUB_OUTPUT", "GITHUB_ACTIONS"):
        os.environ.pop(var, None)
    os.environ["BUILDROWS_HOST_OS"] = "linux"

    seeds_dir = work / "seeds"
    seeds_dir.mkdir()
    t0 = time.perf_counter()
    cuda_so = nvcc_seed(seeds_dir)
    elves = [hand_made_elf()] + ([cuda_so] if cuda_so else [])
    fatbins = [bytes(s) for e in elves for s in read_binary(e).device_code_sections]
    pe = pe_seed(seeds_dir, fatbins[-1])
    print(f"seeds: {len(elves)} ELF ({'with' if cuda_so else 'no'} nvcc .so), {len(fatbins)} fat binaries, "
          f"{'a MinGW PE DLL' if pe else 'no PE DLL (MinGW missing)'}; built in {time.perf_counter() - t0:.1f}s",
          flush=True)

    policy_text = EXAMPLE_POLICY.read_text(encoding="utf-8")
    policy_doc = tomllib.loads(policy_text)
    policy = policy_from_dict(copy.deepcopy(policy_doc), str(EXAMPLE_POLICY))
    generator = [p.read_text(encoding="utf-8") for p in sorted(GENERATOR_DIR.glob("*.json"))]
    wheel_members = [("demo/_core.so", elves[-1]), ("demo/_plain.so", elves[0]),
                     ("demo-1.0+cu130.dist-info/METADATA", METADATA.encode())]
    if pe:
        wheel_members.append(("demo/devicecode.dll", pe))
    wheel_path = work / "demo-1.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl"
    own = (BuildrowsError,)
    results: dict[str, Stats] = {}

    def count(name: str) -> int:
        return int(BUDGET[name] * args.scale) if name in only else 0

    def loop(name: str, make: Callable[[], tuple[Callable[[], Any], Callable[[], str]]],
             expected: tuple[type[BaseException], ...]) -> None:
        n = count(name)
        if not n:
            return
        stats = results.setdefault(name, Stats())
        for _ in range(n):
            fn, describe = make()
            run_case(stats, fn, expected, args.case_timeout, describe)
        print(f"  {name}: {stats.cases} cases in {stats.seconds:.1f}s", flush=True)

    def policy_dict_case() -> tuple[Callable[[], Any], Callable[[], str]]:
        doc = mutate_doc(policy_doc, rng) if rng.random() < 0.9 else random_value(rng)
        if not isinstance(doc, dict):
            doc = {"python": doc, "platforms": {}}
        snapshot = repr(doc)[:3000]
        return (lambda: policy_from_dict(doc, "fuzz.toml")), (lambda: "policy_from_dict(" + snapshot + ")")

    def policy_text_case() -> tuple[Callable[[], Any], Callable[[], str]]:
        text = mutate_text(policy_text, rng)

        def fn() -> Any:
            try:
                doc = tomllib.loads(text)
            except tomllib.TOMLDecodeError:
                return None
            return policy_from_dict(doc, "fuzz.toml", Locator(text))
        return fn, (lambda: "policy text:\n" + text)

    def arch_case() -> tuple[Callable[[], Any], Callable[[], str]]:
        text = (random_text(rng) if rng.random() < 0.5 else
                " ".join(rng.choice(["7.5", "8.0", "90", "9.0a", "10.0f", "12.0+PTX", "12.0+ptx", "sm_90", "9.O",
                                     "native", "110", "٩.٠", "+PTX", "1.0", "99.9"]) for _ in range(rng.randrange(6))))
        ptx = rng.choice(["newest", "none", None, "9.0", "sm_90", "x"])
        train = rng.choice([None, Train(12, 6), Train(13, 0), Train(99, 9)])
        return (lambda: parse_arch_list(text, ptx=ptx, train=train)), (lambda: f"parse_arch_list({text!r}, ptx={ptx!r}, train={train})")

    def train_case() -> tuple[Callable[[], Any], Callable[[], str]]:
        v = random_text(rng, rng.randrange(7)) if rng.random() < 0.8 else random_value(rng)
        return (lambda: Train.parse(v)), (lambda: f"Train.parse({v!r})")

    def matrix_case() -> tuple[Callable[[], Any], Callable[[], str]]:
        base = rng.choice(generator)
        if rng.random() < 0.5:
            text = mutate_text(base, rng)
        else:
            text = json.dumps(mutate_doc(json.loads(base), rng, rounds=5))
        platform = rng.choice(["linux-x86_64", "linux-aarch64", "windows-amd64"])
        pr = rng.random() < 0.3
        return (lambda: narrow(policy, platform, text, source="fuzz.json", pull_request=pr)), (lambda: f"narrow({platform}, pr={pr}):\n{text[:3000]}")

    def elf_case() -> tuple[Callable[[], Any], Callable[[], str]]:
        data = mutate_elf(rng.choice(elves), rng)

        def fn() -> Any:
            info = read_binary(data)
            for s in info.device_code_sections:
                list_device_code(s)
        return fn, (lambda: f"read_binary(ELF of {len(data)} bytes), sha of mutation input saved")

    def pe_case() -> tuple[Callable[[], Any], Callable[[], str]]:
        assert pe is not None
        data = mutate_bytes(pe, rng, rounds=rng.choice([1, 1, 2, 8]))

        def fn() -> Any:
            info = read_binary(data)
            for s in info.device_code_sections:
                list_device_code(s)
        return fn, (lambda: f"read_binary(PE of {len(data)} bytes)")

    def fatbin_case() -> tuple[Callable[[], Any], Callable[[], str]]:
        data = mutate_fatbin(rng.choice(fatbins), rng)
        return (lambda: list_device_code(data)), (lambda: f"list_device_code({data[:256].hex()}...)")

    def wheel_case() -> tuple[Callable[[], Any], Callable[[], str]]:
        data = mutate_wheel(wheel_members, rng)

        def fn() -> Any:
            wheel_path.write_bytes(data)
            return read_wheel(wheel_path)
        return fn, (lambda: f"read_wheel of {len(data)} bytes (hex head {data[:64].hex()})")

    stream_dir = work / "stream"
    stream_dir.mkdir()

    def stream_case() -> tuple[Callable[[], Any], Callable[[], str]]:
        kind = rng.randrange(3)
        if kind == 0 or (kind == 2 and pe is None):
            data = mutate_elf(rng.choice(elves), rng)
        elif kind == 1:
            fatbin = mutate_fatbin(rng.choice(fatbins), rng) + b"\0" * rng.choice([0, 8]) + rng.choice(fatbins)
            decoy = rng.choice(fatbins)[: rng.randrange(16, 200)] if rng.random() < 0.3 else b""
            data = make_elf([(".rodata", decoy), (".nv_fatbin", fatbin)], needed=["libcudart.so.13"])
        else:
            assert pe is not None
            data = mutate_bytes(pe, rng, rounds=rng.choice([1, 2, 8]))
        case_rng = random.Random(rng.random())

        def fn() -> Any:
            expected = library_in_memory(data)
            got = library_streamed(data, case_rng, stream_dir, deflated=case_rng.random() < 0.8)
            if got != expected:
                raise AssertionError(f"streamed {got!r} != in memory {expected!r}")
        return fn, (lambda: f"stream vs memory on {len(data)} bytes (hex head {data[:64].hex()})")

    def cli_case() -> tuple[Callable[[], Any], Callable[[], str]]:
        data = mutate_wheel(wheel_members, rng)
        argv = rng.choice([["check", str(wheel_path)], ["check", str(wheel_path), "--json"],
                           ["check", str(wheel_path), "--row", "linux-x86_64-cu130-py312"],
                           ["archs", "--from-wheel", str(wheel_path), "--json"]])

        def fn() -> Any:
            wheel_path.write_bytes(data)
            code = main(["--config", str(EXAMPLE_POLICY), *argv], ui)
            if code not in (0, 2, 3, 5):
                raise AssertionError(f"exit code {code}: {ui.err.getvalue()[-500:]}")  # type: ignore[attr-defined]
            ui.out.seek(0), ui.out.truncate(), ui.err.seek(0), ui.err.truncate()  # type: ignore[attr-defined]
        return fn, (lambda: f"buildrows {' '.join(argv)} on a mutated wheel")

    print(f"seed {args.seed}, scale {args.scale}, per-case timeout {args.case_timeout}s, memory {args.memory_gb} GiB",
          flush=True)
    loop("policy-dict", policy_dict_case, own)
    loop("policy-text", policy_text_case, own)
    loop("arch-list", arch_case, (ArchError,))
    loop("train", train_case, (ValueError,))
    loop("matrix", matrix_case, own)
    loop("elf", elf_case, (BinaryFormatError, FatbinError))
    if pe:
        loop("pe", pe_case, (BinaryFormatError, FatbinError))
    loop("fatbin", fatbin_case, (FatbinError,))
    loop("wheel", wheel_case, (WheelError,))
    loop("stream", stream_case, ())
    loop("cli", cli_case, ())

    leaked = [f"{w}: {sorted(listing(w) ^ before[str(w)])[:5]}" for w in watched if listing(w) != before[str(w)]]
    stray = sorted(listing(cwd))
    os.chdir(REPO)

    header = f"{'parser':<12} {'cases':>8} {'seconds':>8} {'ok':>8} {'own error':>10} {'unexpected':>10} {'slowest ms':>10}  exceptions found"
    print("\n" + header + "\n" + "-" * len(header))
    total = Stats()
    for name, s in results.items():
        found = ", ".join(f"{k}×{v}" for k, v in s.unexpected.most_common()) or "none"
        print(f"{name:<12} {s.cases:>8} {s.seconds:>8.1f} {s.ok:>8} {s.own_errors:>10} {sum(s.unexpected.values()):>10} "
              f"{s.slowest * 1000:>10.1f}  {found}")
        total.cases += s.cases
        total.seconds += s.seconds
        total.ok += s.ok
        total.own_errors += s.own_errors
        total.unexpected.update(s.unexpected)
        total.slowest = max(total.slowest, s.slowest)
    print("-" * len(header))
    print(f"{'total':<12} {total.cases:>8} {total.seconds:>8.1f} {total.ok:>8} {total.own_errors:>10} "
          f"{sum(total.unexpected.values()):>10} {total.slowest * 1000:>10.1f}")
    print(f"peak memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MiB; "
          f"changed in the watched repository folders: {'; '.join(leaked) or 'nothing'}; "
          f"left in the working directory: {stray or 'nothing'}")
    if args.save:
        out = Path(args.save)
        out.mkdir(parents=True, exist_ok=True)
        for name, s in results.items():
            for kind, text in s.examples.items():
                (out / f"{name}-{kind}.txt").write_text(text, encoding="utf-8")
    else:
        for name, s in results.items():
            for kind, text in s.examples.items():
                print(f"\n=== {name}: first {kind} ===\n{text[-1500:]}")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if total.unexpected or leaked or stray else 0


if __name__ == "__main__":
    sys.exit(main_())

"""Regenerate buildrows/data/cuda_trains.toml from NVIDIA's own published sources.

For every CUDA 11.8-12.x train on PyPI (`nvidia-cuda-nvcc-cu11`/`-cu12`, which carry ptxas but no
nvcc), ask its ptxas what it compiles (`--help`'s -arch values) and the newest PTX ISA it reads.
For every CUDA 13.x train on PyPI (`nvidia-cuda-nvcc`), download the newest release of that train
(with the `nvidia-nvvm`, `nvidia-cuda-crt` and `nvidia-cuda-runtime` wheels its nvcc needs to
compile), and ask its nvcc: `--version`, `--list-gpu-code`, `--list-gpu-arch`, which `a`/`f`
variants it accepts (`nvcc --dryrun -arch=sm_XYa`), and the PTX ISA it writes (`.version` of
`nvcc -ptx` on a trivial kernel). Each entry records the date it was measured, the date PyPI first
published the train, and where it came from. The minimum driver of each train is read from
NVIDIA's redist manifests (`redistrib_X.Y.0.json`, component `nvidia_driver`) when they can be
reached; entries that cannot be measured here (trains before 13.0, drivers when the manifests are
unreachable) are kept from the committed file with their own date and source.

    python scripts/refresh_cuda_data.py            # rewrite the data file
    python scripts/refresh_cuda_data.py --check    # exit 1 when the committed file is out of date
    python scripts/refresh_cuda_data.py --fixtures tests/data/cuda13x  # the tests' real 13.x libraries

Downloads are kept under `--cache` (default ~/.cache/buildrows/cuda-nvcc). CI runs `--check` in
its opt-in tier (BUILDROWS_REFRESH_CUDA_DATA=1, tests/test_cuda_data.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "buildrows" / "data" / "cuda_trains.toml"
PYPI = "https://pypi.org/pypi/{name}/json"
REDIST = "https://developer.download.nvidia.com/compute/cuda/redist/redistrib_{version}.json"
PLATFORMS = ("manylinux_2_27_x86_64", "manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux2010_x86_64",
             "manylinux_2_12_x86_64")
#: The PyPI packages an nvcc of CUDA 13 needs beside it to compile (`nvcc -ptx`): cicc, the crt headers, cuda_runtime.h.
COMPANIONS = ("nvidia-nvvm", "nvidia-cuda-crt", "nvidia-cuda-runtime")
KERNEL = "__global__ void buildrows_probe(int *p) { p[threadIdx.x] = 1; }\n"
FIRST_MEASURED_MAJOR = 13  # nvidia-cuda-nvcc (no -cuXY suffix) starts at 13.0


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.load(r)


def pypi_trains(name: str) -> dict[tuple[int, int], tuple[str, str]]:
    """{(major, minor): (newest final version, date PyPI first published a final of that train)}."""
    data = _get_json(PYPI.format(name=name))
    out: dict[tuple[int, int], tuple[str, str]] = {}
    firsts: dict[tuple[int, int], str] = {}
    for version, files in data["releases"].items():
        m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", version)
        linux = [f for f in files if "x86_64" in f["filename"] and "manylinux" in f["filename"]]
        if not m or not linux:
            continue  # pre-releases, placeholders, other platforms
        key = (int(m.group(1)), int(m.group(2)))
        uploaded = min(f["upload_time"][:10] for f in linux)
        firsts[key] = min(firsts.get(key, uploaded), uploaded)
        best = out.get(key)
        if best is None or tuple(int(x) for x in version.split(".")) > tuple(int(x) for x in best[0].split(".")):
            out[key] = (version, "")
    return {k: (v, firsts[k]) for k, (v, _) in out.items()}


def _download(name: str, version: str, cache: Path) -> Path:
    norm = name.replace("-", "_")
    found = sorted(cache.glob(f"{norm}-{version}-*.whl"))
    if found:
        return found[0]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(cache),
           f"{name}=={version}"]
    for p in PLATFORMS:
        cmd += ["--platform", p]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    found = sorted(cache.glob(f"{norm}-{version}-*.whl"))
    if not found:
        raise SystemExit(f"pip downloaded no wheel of {name}=={version} into {cache}")
    return found[0]


def toolkit(train: tuple[int, int], version: str, cache: Path) -> Path:
    """The bin/ directory of train's nvcc, unpacked with what it needs to compile."""
    where = cache / "unpacked" / version
    marker = where / ".complete"
    if not marker.exists():
        wheels = [_download("nvidia-cuda-nvcc", version, cache)]
        for companion in COMPANIONS:
            ours = pypi_trains(companion).get(train)
            if ours is None:
                raise SystemExit(f"PyPI has no {companion} of CUDA {train[0]}.{train[1]}")
            # the same release as nvcc where PyPI has it, else that train's newest
            same = version if _exists(companion, version) else ours[0]
            wheels.append(_download(companion, same, cache))
        where.mkdir(parents=True, exist_ok=True)
        for w in wheels:
            with zipfile.ZipFile(w) as z:
                z.extractall(where)
        for f in where.rglob("*"):
            if f.is_file() and ("/bin/" in f.as_posix()):
                f.chmod(0o755)
        marker.write_text("ok\n")
    nvccs = sorted(where.rglob("bin/nvcc"))
    if not nvccs:
        raise SystemExit(f"no bin/nvcc in {where}")
    return nvccs[0].parent


_RELEASES: dict[str, set[str]] = {}


def _exists(name: str, version: str) -> bool:
    if name not in _RELEASES:
        _RELEASES[name] = set(_get_json(PYPI.format(name=name))["releases"])
    return version in _RELEASES[name]


def _run(argv: list[str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"`{' '.join(argv)}` exited {proc.returncode}: {(proc.stdout + proc.stderr).strip()[-400:]}")
    return proc.stdout + proc.stderr


def _dotted(number: str) -> str:
    return f"{number[:-1]}.{number[-1]}"


def measure(bindir: Path) -> dict[str, Any]:
    """What this nvcc compiles, its full version and the PTX ISA it writes."""
    nvcc = str(bindir / "nvcc")
    version = re.search(r"release (\d+\.\d+), V(\d+(?:\.\d+)*)", _run([nvcc, "--version"]))
    if version is None:
        raise SystemExit(f"{nvcc} --version names no release")
    code = re.findall(r"sm_(\d+)", _run([nvcc, "--list-gpu-code"]))
    arch = re.findall(r"compute_(\d+)", _run([nvcc, "--list-gpu-arch"]))
    if set(code) != set(arch):
        raise SystemExit(f"{nvcc}: --list-gpu-code ({code}) and --list-gpu-arch ({arch}) disagree")
    numbers = sorted(set(code), key=int)
    variants: dict[str, list[str]] = {"a": [], "f": []}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.cu"
        src.write_text(KERNEL)
        for n in numbers:
            for suffix in ("a", "f"):
                probe = subprocess.run([nvcc, "--dryrun", f"-arch=sm_{n}{suffix}", "-c", str(src), "-o",
                                        str(Path(tmp) / "probe.o")], capture_output=True, text=True, check=False)
                if probe.returncode == 0:
                    variants[suffix].append(_dotted(n))
        ptx = Path(tmp) / "probe.ptx"
        _run([nvcc, "-ptx", f"-arch=compute_{numbers[0]}", str(src), "-o", str(ptx)])
        isa = re.search(r"^\.version (\d+\.\d+)", ptx.read_text(), re.MULTILINE)
    if isa is None:
        raise SystemExit(f"{nvcc} -ptx wrote no .version line")
    return {"archs": [_dotted(n) for n in numbers], "a": variants["a"], "f": variants["f"],
            "ptx-isa": isa.group(1), "nvcc": version.group(2)}


#: Before CUDA 13.0 NVIDIA's nvcc wheels carry ptxas but no nvcc: what they compile is read from it.
PTXAS_PACKAGES = {11: "nvidia-cuda-nvcc-cu11", 12: "nvidia-cuda-nvcc-cu12"}
FIRST_TRAIN = (11, 8)


def ptxas_of(package: str, version: str, cache: Path) -> Path:
    """The ptxas of an nvidia-cuda-nvcc-cuXY wheel, unpacked into the cache."""
    where = cache / "unpacked" / f"{package}-{version}"
    if not (where / ".complete").exists():
        with zipfile.ZipFile(_download(package, version, cache)) as z:
            z.extractall(where)
        (where / ".complete").write_text("ok\n")
    found = sorted(where.rglob("bin/ptxas"))
    if not found:
        raise SystemExit(f"no bin/ptxas in {where}")
    found[0].chmod(0o755)
    return found[0]


def measure_ptxas(ptxas: Path) -> dict[str, Any]:
    """What ptxas compiles (the values its --help allows for -arch) and the newest PTX ISA it reads."""
    text = _run([str(ptxas), "--help"])
    start = text.index("--gpu-name")
    block = text[start:text.index("Default value", start)]
    names = re.findall(r"'sm_(\d+)([af]?)'", block)
    numbers = sorted({n for n, _ in names}, key=int)
    version = re.search(r"release (\d+\.\d+), V(\d+(?:\.\d+)*)", _run([str(ptxas), "--version"]))
    if not numbers or version is None:
        raise SystemExit(f"{ptxas} --help lists no sm_ value, or --version no release")
    isa = None
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.ptx"
        for candidate in [f"{a}.{b}" for a in range(10, 5, -1) for b in range(9, -1, -1)]:
            src.write_text(f".version {candidate}\n.target sm_{numbers[0]}\n.address_size 64\n"
                           ".visible .entry buildrows_probe()\n{{\n\tret;\n}}\n")
            probe = subprocess.run([str(ptxas), f"-arch=sm_{numbers[0]}", str(src), "-o", str(Path(tmp) / "p.cubin")],
                                   capture_output=True, text=True, check=False)
            if probe.returncode == 0:
                isa = candidate
                break
    if isa is None:
        raise SystemExit(f"{ptxas} accepts no PTX ISA from 6.0 to 10.9")
    def having(suffix: str) -> list[str]:
        return [_dotted(n) for n in numbers if (n, suffix) in names]

    return {"archs": [_dotted(n) for n in numbers], "a": having("a"), "f": having("f"), "ptx-isa": isa,
            "nvcc": version.group(2)}


def redist_driver(train: tuple[int, int]) -> tuple[str | None, str]:
    """The Linux x86_64 driver NVIDIA's redist manifest of train's GA release ships, and the URL or why not."""
    url = REDIST.format(version=f"{train[0]}.{train[1]}.0")
    try:
        data = _get_json(url)
    except (urllib.error.URLError, OSError, ValueError) as e:
        return None, f"{url}: unreachable ({getattr(e, 'reason', e)})"
    if not isinstance(data, dict):
        return None, f"{url}: not a manifest"
    driver = data.get("nvidia_driver", {})
    version = driver.get("version") if isinstance(driver, dict) else None
    return (str(version) if version else None), url


def _q(s: str) -> str:
    return json.dumps(s)


def _list(items: list[str]) -> str:
    return "[" + ", ".join(_q(s) for s in items) + "]"


def _key(s: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", s))


HEADER = """\
# What each CUDA train compiles, the PTX ISA it writes and the oldest driver of each train.
# GENERATED by scripts/refresh_cuda_data.py (see docs/development.md): entries whose source is
# PyPI were measured by running that train's own nvcc (13.x) or, before 13.0, its ptxas (NVIDIA's
# nvidia-cuda-nvcc-cu11/-cu12 wheels carry ptxas but no nvcc); entries marked "entered by hand"
# could not be measured by the script (PTX ISA of trains before 11.8; drivers come from NVIDIA's
# redist manifests, unreachable where the script last ran: see [refresh]) and are kept as they are.
# `a` = architecture-specific variants, `f` = family variants (CUDA 12.9+). A train newer than this
# file is taken to compile what the newest train here compiles (with a note saying so), and a build
# asks that train's own nvcc (`--list-gpu-code`) before compiling.
"""


def render(data: dict[str, Any], refresh: dict[str, str]) -> str:
    out = [HEADER, "[refresh]"]
    out += [f"{k} = {_q(v)}" for k, v in refresh.items()]
    out.append("")
    for name in sorted(data["trains"], key=_key):
        t = data["trains"][name]
        out.append(f"[trains.{_q(name)}]")
        for k in ("archs", "a", "f"):
            out.append(f"{k} = {_list(t[k])}")
        for k in ("ptx-isa", "nvcc", "released", "date", "source"):
            if k in t:
                out.append(f"{k} = {_q(t[k])}")
        out.append("")
    out.append("# Which train first wrote each PTX ISA version (the `.version` line of PTX, also in each PTX entry's\n"
               "# fat-binary header). A driver JIT-compiles PTX only up to its own train's ISA.")
    out.append("[ptx-isa]")
    for isa in sorted(data["ptx-isa"], key=_key):
        e = data["ptx-isa"][isa]
        out.append(f"{_q(isa)} = {{ train = {_q(e['train'])}, date = {_q(e['date'])}, source = {_q(e['source'])} }}")
    out.append("")
    out.append("# The oldest Linux x86_64 driver of each train's GA release (the driver its PTX needs to JIT).\n"
               "# A train missing here has no driver number buildrows could read: the check names the train.")
    out.append("[driver]")
    for train in sorted(data["driver"], key=_key):
        e = data["driver"][train]
        out.append(f"{_q(train)} = {{ driver = {_q(e['driver'])}, date = {_q(e['date'])}, source = {_q(e['source'])} }}")
    out.append("")
    out.append("# Minor-version compatibility: cubins of any train of a major load on the major's first driver.")
    out.append("[driver-floor]")
    for major in sorted(data["driver-floor"], key=_key):
        e = data["driver-floor"][major]
        out.append(f"{_q(major)} = {{ driver = {_q(e['driver'])}, date = {_q(e['date'])}, source = {_q(e['source'])} }}")
    return "\n".join(out) + "\n"


def refresh(cache: Path, today: str) -> str:
    old = tomllib.loads(DATA.read_text(encoding="utf-8"))
    data: dict[str, Any] = {k: dict(old.get(k, {})) for k in ("trains", "ptx-isa", "driver", "driver-floor")}
    trains = {k: v for k, v in pypi_trains("nvidia-cuda-nvcc").items() if k[0] >= FIRST_MEASURED_MAJOR}
    notes: list[tuple[str, str]] = []
    isa_seen: dict[str, tuple[int, int]] = {}  # ISA -> the first train that reads it, of those measured
    for major, package in sorted(PTXAS_PACKAGES.items()):
        for train, (version, released) in sorted(pypi_trains(package).items()):
            if train < FIRST_TRAIN or train[0] != major:
                continue
            name = f"{train[0]}.{train[1]}"
            print(f"CUDA {name}: {package} {version} (first published {released}): ptxas", file=sys.stderr)
            got = measure_ptxas(ptxas_of(package, version, cache))
            data["trains"][name] = {**got, "released": released, "date": today,
                                    "source": f"PyPI {package} {version}: ptxas --help (its -arch values), the newest "
                                              ".version it reads"}
            if got["ptx-isa"] not in isa_seen:
                isa_seen[got["ptx-isa"]] = train
                data["ptx-isa"][got["ptx-isa"]] = {"train": name, "date": today,
                                                   "source": f"the newest .version ptxas of PyPI {package} {version} reads"}
    for train in sorted(trains):
        version, released = trains[train]
        name = f"{train[0]}.{train[1]}"
        print(f"CUDA {name}: nvidia-cuda-nvcc {version} (first published {released})", file=sys.stderr)
        got = measure(toolkit(train, version, cache))
        source = (f"PyPI nvidia-cuda-nvcc {version}: nvcc --list-gpu-code, --list-gpu-arch, -arch=sm_XY{{a,f}} "
                  "--dryrun, -ptx of a trivial kernel")
        data["trains"][name] = {**got, "released": released, "date": today, "source": source}
        data["ptx-isa"][got["ptx-isa"]] = {"train": name, "date": today,
                                           "source": f"nvcc -ptx of PyPI nvidia-cuda-nvcc {version}"}
        driver, where = redist_driver(train)
        if driver is not None:
            data["driver"][name] = {"driver": driver, "date": today, "source": f"{where} (nvidia_driver)"}
        else:
            notes.append((f"redistrib_{name}.0.json", where.split(": ", 1)[-1]))
    refreshed = {"date": today, "pypi": "https://pypi.org/pypi/nvidia-cuda-nvcc/json"}
    refreshed["redist"] = (f"{', '.join(n for n, _ in notes)} at {REDIST.rsplit('/', 1)[0]}/: {notes[-1][1]}; the "
                           "[driver] entries of those trains were kept from the committed file" if notes else "read")
    return render(data, refreshed)


FIXTURE_TRAINS = ((13, 3), (13, 5))


def fixtures(cache: Path, out: Path) -> None:
    """Tiny libraries built by real CUDA 13.x nvcc (an sm_80 cubin and compute_80 PTX, no cudart), for the
    tests of PTX ISA and cubin toolkit notes (tests/test_cuda_data.py): `libk13.3.so`, `libk13.5.so`."""
    trains = pypi_trains("nvidia-cuda-nvcc")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.cu"
        src.write_text(KERNEL)
        for train in FIXTURE_TRAINS:
            nvcc = toolkit(train, trains[train][0], cache) / "nvcc"
            lib = out / f"libk{train[0]}.{train[1]}.so"
            _run([str(nvcc), "-shared", "-cudart", "none", "-Xcompiler", "-fPIC", "-gencode",
                  "arch=compute_80,code=sm_80", "-gencode", "arch=compute_80,code=compute_80", "-o", str(lib), str(src)])
            _run(["strip", str(lib)])
            print(f"wrote {lib} (nvidia-cuda-nvcc {trains[train][0]})", file=sys.stderr)


def _measured(text: str) -> dict[str, Any]:
    """The file without the dates of its measurement, to compare two refreshes."""
    data = tomllib.loads(text)
    data.pop("refresh", None)
    for t in data.get("trains", {}).values():
        t.pop("date", None)
        t.pop("source", None)
    for table in ("ptx-isa", "driver", "driver-floor"):
        for e in data.get(table, {}).values():
            e.pop("date", None)
            e.pop("source", None)
    return data


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache", type=Path, default=Path(os.path.expanduser("~/.cache/buildrows/cuda-nvcc")))
    p.add_argument("--check", action="store_true", help="exit 1 when the committed data differs from a fresh refresh")
    p.add_argument("--date", default=datetime.date.today().isoformat(), help="the date written to measured entries")
    p.add_argument("--fixtures", type=Path, metavar="DIR", help="build the tests' tiny CUDA 13.x libraries into DIR "
                   "instead of refreshing the data")
    args = p.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.fixtures is not None:
        fixtures(args.cache, args.fixtures)
        return 0
    text = refresh(args.cache, args.date)
    if args.check:
        if _measured(text) != _measured(DATA.read_text(encoding="utf-8")):
            print(f"{DATA.relative_to(ROOT)} is out of date with NVIDIA's published toolkits\n"
                  "    fix: python scripts/refresh_cuda_data.py, and commit the file", file=sys.stderr)
            return 1
        print(f"{DATA.relative_to(ROOT)} is up to date", file=sys.stderr)
        return 0
    DATA.write_text(text, encoding="utf-8")
    print(f"wrote {DATA.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Capture what every public command prints on the bundled examples, for a before/after diff.

A change meant to move code without changing behaviour (a layout move, a refactor) is proven by
running this before and after it and diffing the two directories::

    python scripts/capture_commands.py /tmp/before      # on the old tree
    python scripts/capture_commands.py /tmp/after       # on the new tree
    diff -r /tmp/before /tmp/after

Each command runs in a fresh copy of the example (so files it writes are captured too), with a
fixed environment. Times ("took 0.3s") and the temporary directory's path are normalised; nothing
else is. `build` and `check` run only where nvcc is found (the CUDA row), else on the CPU row.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "cuda-extension"
EXECUTORCH = ROOT / "examples" / "executorch" / "buildrows.toml"
GENERATOR = ROOT.parent / "shared" / "fixtures" / "generator"

TIMES = re.compile(r"\b\d+(\.\d+)?\s?(ms|s|m\d+s|min)\b|\b\d+m\d+(\.\d+)?s\b|in \d+(\.\d+)?s\b")


def _commands(work: Path, wheel: str | None) -> list[tuple[str, list[str], dict[str, str]]]:
    ex = str(EXECUTORCH)
    cmds: list[tuple[str, list[str], dict[str, str]]] = [
        ("help", ["--help"], {}),
        ("rows", ["rows"], {}),
        ("rows-glob", ["rows", "linux-*-cu13*-py312"], {}),
        ("show", ["show", "linux-x86_64-cu130-py312"], {}),
        ("show-cpu", ["show", "linux-x86_64-cpu-py311"], {}),
        ("env-shell", ["env", "linux-x86_64-cu130-py312", "--format", "shell"], {}),
        ("env-github", ["env", "linux-x86_64-cu130-py312", "--format", "github"], {}),
        ("env-powershell", ["env", "linux-x86_64-cu132-py310", "--format", "powershell"], {}),
        ("env-dotenv", ["env", "linux-x86_64-cpu-py312", "--format", "dotenv"], {}),
        ("render", ["render", "linux-x86_64-cu130-py312", "linux-x86_64-cpu-py312"], {}),
        ("hook-cpu", ["hook"], {"CU_VERSION": "cpu", "BUILD_ENV_FILE": str(work / "hook.env"),
                                "GITHUB_ENV": str(work / "gh.env")}),
        ("hook-unknown", ["hook"], {"CU_VERSION": "cu999"}),
        ("doctor", ["doctor", "linux-x86_64-cpu-py311"], {}),
        ("schema", ["schema"], {}),
        ("toolkit-list", ["toolkit", "list"], {}),
        ("ex-rows", ["--config", ex, "rows"], {}),
        ("ex-show", ["--config", ex, "show", "linux-x86_64-cu130-py312"], {}),
        ("workflow", ["workflow", "--out", str(work / "wf")], {}),
        ("ex-workflow", ["--config", ex, "workflow", "--out", str(work / "wf"), "--root", str(ROOT),
                         "--scripts-dir", "build/capture-scripts"], {}),
        ("init", ["init", "--cuda", "13.0"], {"CWD": str(work / "init")}),
        ("bad-row", ["show", "linux-x86_64-cu999-py312"], {}),
    ]
    for fixture in sorted(GENERATOR.glob("*.json")):
        cmds.append((f"matrix-{fixture.stem}", ["--config", ex, "matrix", "--from", str(fixture)], {}))
    if wheel is not None:
        cmds.append(("check", ["check", wheel], {}))
        cmds.append(("check-json", ["check", wheel, "--json"], {}))
        cmds.append(("archs", ["archs", "--from-wheel", wheel], {}))
    return cmds


def _run(argv: list[str], cwd: Path, extra: dict[str, str], home: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CU_VERSION", "DESIRED_CUDA", "BUILD_ENV"))}
    env.update({"NO_COLOR": "1", "HOME": str(home), "BUILDROWS_CACHE": str(home / "cache"), "COLUMNS": "100"})
    env.update(extra)
    r = subprocess.run([sys.executable, "-m", "buildrows", *argv], cwd=cwd, env=env, capture_output=True, text=True,
                       check=False)
    return f"exit {r.returncode}\n--- stdout\n{r.stdout}--- stderr\n{r.stderr}"


def _normalise(text: str, work: Path) -> str:
    text = text.replace(str(work), "<work>").replace(str(work.parent), "<tmp>")
    return TIMES.sub("<time>", re.sub(r"/tmp/tmp[a-z0-9_]+", "<tmpdir>", text))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="capture-") as tmp:
        work = Path(tmp) / "w"
        shutil.copytree(EXAMPLE, work / "example", ignore=shutil.ignore_patterns("build", "dist", "*.json"))
        home = Path(tmp) / "home"
        home.mkdir()
        shutil.copytree(EXAMPLE, work / "init", ignore=shutil.ignore_patterns("build", "dist", "*.json", "buildrows.toml"))
        build = _run(["build", "linux-x86_64-cpu-py311" if shutil.which("nvcc") is None else "linux-x86_64-cu130-py311",
                      "--no-compiler-cache"], work / "example", {}, home)
        (out / "build.txt").write_text(_normalise(build, work))
        wheels = sorted((work / "example" / "dist").glob("*.whl"))
        wheel = str(wheels[0]) if wheels else None
        for name, cmd, extra in _commands(work, wheel):
            cwd = Path(extra.pop("CWD", work / "example"))
            text = _run(cmd, cwd, extra, home)
            for f in sorted(work.glob("*.env")):
                text += f"--- {f.name}\n{f.read_text()}"
                f.unlink()
            (out / f"{name}.txt").write_text(_normalise(text, work))
        written = sorted((work / "example").glob("*Presets*.json")) + sorted((work / "wf").glob("*"))
        for f in written + sorted((ROOT / "build" / "capture-scripts").glob("*")) + [work / "init" / "buildrows.toml"]:
            if not f.is_file():
                continue
            (out / f"file-{f.name}").write_text(_normalise(f.read_text(), work))
    print(f"captured {len(list(out.iterdir()))} outputs into {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

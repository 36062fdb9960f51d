"""Run a rendered wheel workflow the way pytorch/test-infra's files run it, on this machine.

The caller workflow (what `buildrows workflow` rendered) is read with its `uses:` calls; each call is
checked against the inputs the called reusable workflow declares (test-infra's files in
tests/data/test-infra, copied at one commit). Then the build job of build_wheels_linux.yml is
executed step by step from those files: the `if:` conditions are evaluated, composite actions
(set-channel, setup-binary-builds, run-script-with-cache) are expanded, and every `run:` script is
run with the shell it names, in the directory it names, with GITHUB_ENV / GITHUB_OUTPUT /
GITHUB_PATH handled as the runner handles them. pkg-helpers is the real one, writing the first
BUILD_ENV_FILE; the pre-script, the build and the post-script are the user's.

What this machine lacks is replaced, and each replacement is printed:
- `conda` is a small stand-in (`create` makes a venv with the requested Python when there is one,
  else this Python; cmake and ninja come from this environment; `run -p ENV CMD` runs CMD with the
  environment's bin first on PATH; `info`/`clean`/`config`/`install` are no-ops);
- `actions/checkout` copies the test-infra fixture, and clones the user's repository with its
  submodules as the `submodules` input says;
- steps that need download.pytorch.org or files the fixture does not carry are skipped by name,
  with the reason.

Guards (each raises HarnessError naming the job or step): an input the called workflow does not
declare, a required input not passed, a script an input names that does not exist, a value that
pkg-helpers wrote into BUILD_ENV_FILE winning over the row's when the build step sources it, a
step that fails, and a wheel reaching the upload step that no passing `buildrows check` saw.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests import gha_expr

TEST_INFRA = Path(__file__).parent / "data" / "test-infra"
_REUSABLE_PREFIX = "pytorch/test-infra/.github/workflows/"

#: Steps of test-infra's files the harness does not run here, and why.
SKIPPED_STEPS = {
    "Install torch dependency": "pip install torch from download.pytorch.org: unreachable here, and the "
                                "bundled example does not import torch",
    "Repair Manylinux_2_28 Wheel": "test-infra/.github/scripts/repair_manylinux_2_28.sh is not among the fixtures "
                                   "(the post-script runs after it, so it checks the repaired wheel)",
}


class HarnessError(Exception):
    """The rendered workflow would not run, or would upload an unchecked wheel; names where."""


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "cuda-extension"

# The bundled example's policy as a repository would keep it: in a subdirectory (packaging/), with
# buildrows carried under tools/ as a wheel ([ci] install is a path in the repository).
EXAMPLE_POLICY = """\
[project]
name = "cuda-extension"
driver = "scikit-build-core"
source-dir = ".."
cuda-option = "CUDA_EXTENSION_BUILD_CUDA"

[python]
versions = ["3.10", "3.11", "3.12", "3.13"]

[cuda]
trains = ["13.0"]

[platforms.linux-x86_64]
trains = ["13.0"]

[[platforms.linux-x86_64.cuda]]
trains = ["13.0"]
archs = "{archs}"

[ci]
install = "../tools/{wheel}"
paths = ["../csrc/**", "../src/**", "../build_support/**"]
# test-infra's Linux smoke test also greps for a pinned torch, which this example does not need.
smoke-test = false
"""


def buildrows_wheel(repo_root: Path, out: Path) -> Path:
    """buildrows (this checkout) as a wheel, as a repository would carry it."""
    out.mkdir(parents=True, exist_ok=True)
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(repo_root)],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise HarnessError(f"cannot build buildrows' wheel: {res.stderr.strip()[-500:]}")
    return next(out.glob("buildrows-*.whl"))


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=harness", "-c", "user.email=harness@example.invalid", *args], cwd=repo,
                   check=True, capture_output=True)


def example_repository(root: Path, wheel: Path, archs: str = "7.5",
                       edit: Callable[[Path], None] | None = None) -> Path:
    """The user's repository: the bundled CUDA example, its policy in packaging/, buildrows under
    tools/, and what `buildrows workflow` renders, committed (the build job checks out a commit).
    EDIT changes the repository before the commit (a test's broken variant)."""
    repo = root / "repo"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns(
        "build", "dist", "*.egg-info", "__pycache__", "CMakeUserPresets.json", "buildrows-presets.json",
        "buildrows.toml"))
    (repo / "tools").mkdir()
    shutil.copy2(wheel, repo / "tools" / wheel.name)
    (repo / "packaging").mkdir()
    (repo / "packaging" / "buildrows.toml").write_text(EXAMPLE_POLICY.format(archs=archs, wheel=wheel.name),
                                                       encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_ACTIONS"}
    res = subprocess.run([str(Path(sys.executable).parent / "buildrows"), "--config", "packaging/buildrows.toml",
                          "workflow"], cwd=repo, env=env, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise HarnessError(f"buildrows workflow failed: {res.stderr.strip()}")
    if edit is not None:
        edit(repo)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "project")
    return repo


#: What the bundled example's `[ci] install = "../.."` installs: buildrows' own project, as this
#: repository holds it (the files hatchling builds the wheel from).
BUILDROWS_FILES = ("pyproject.toml", "README.md", "buildrows", "presets", "cmake")
BUNDLED_CONFIG = "examples/cuda-extension/buildrows.toml"


def bundled_example_repository(root: Path, buildrows_root: Path, archs: str | None = None,
                               edit: Callable[[Path], None] | None = None, render_after_edit: bool = False) -> Path:
    """buildrows' repository as far as the bundled example needs it: the example under
    examples/cuda-extension with its own policy, unchanged, and buildrows' project at the root
    (what its `[ci] install = "../.."` installs); then what `buildrows workflow` renders from that
    policy, committed. ARCHS replaces the policy's 13.0 list before rendering (a short build; the
    workflow is still what `buildrows workflow` renders from the policy). EDIT changes the repository
    before the commit (a test's broken variant)."""
    repo = root / "repo"
    repo.mkdir(parents=True)
    for name in BUILDROWS_FILES:
        src = buildrows_root / name
        if src.is_dir():
            shutil.copytree(src, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, repo / name)
    shutil.copytree(EXAMPLE, repo / "examples" / "cuda-extension", ignore=shutil.ignore_patterns(
        "build", "dist", "*.egg-info", "__pycache__", "CMakeUserPresets.json", "buildrows-presets.json"))
    if archs is not None:
        cfg = repo / BUNDLED_CONFIG
        text = cfg.read_text(encoding="utf-8")
        full = 'trains = ["13.0", "13.2"]\narchs = "7.5 8.0 8.6 8.9 9.0 10.0 12.0"\n'
        if full not in text:
            raise HarnessError(f"{BUNDLED_CONFIG}: no 13.0 architecture list to replace")
        cfg.write_text(text.replace(full, f'trains = ["13.0", "13.2"]\narchs = "{archs}"\n'), encoding="utf-8")
    if edit is not None and render_after_edit:  # a policy change: the workflow is rendered from it
        edit(repo)
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_ACTIONS"}
    res = subprocess.run([str(Path(sys.executable).parent / "buildrows"), "--config", BUNDLED_CONFIG, "workflow"],
                         cwd=repo, env=env, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise HarnessError(f"buildrows workflow failed: {res.stderr.strip()}")
    if edit is not None and not render_after_edit:
        edit(repo)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "project")
    return repo


def load_yaml(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise HarnessError(f"{path}: not a workflow")
    if True in doc and "on" not in doc:  # YAML 1.1 reads the key `on` as a boolean
        doc["on"] = doc.pop(True)
    return doc


@dataclass(frozen=True)
class DeclaredInput:
    name: str
    type: str
    required: bool
    default: Any


def declared_inputs(reusable: Mapping[str, Any]) -> dict[str, DeclaredInput]:
    """The `workflow_call` inputs a reusable workflow declares."""
    call = (reusable.get("on") or {}).get("workflow_call") or {}
    out: dict[str, DeclaredInput] = {}
    for name, spec in (call.get("inputs") or {}).items():
        spec = spec or {}
        out[name] = DeclaredInput(name, spec.get("type", "string"), bool(spec.get("required", False)),
                                  spec.get("default"))
    return out


def reusable_path(uses: str, test_infra: Path = TEST_INFRA) -> Path | None:
    """The fixture file a `uses: pytorch/test-infra/.github/workflows/X@ref` names."""
    if not uses.startswith(_REUSABLE_PREFIX):
        return None
    name = uses[len(_REUSABLE_PREFIX):].split("@", 1)[0]
    return test_infra / ".github" / "workflows" / name


def check_calls(caller: Mapping[str, Any], where: str, test_infra: Path = TEST_INFRA) -> list[str]:
    """Every problem with the caller's calls of test-infra's reusable workflows (empty when none)."""
    problems: list[str] = []
    jobs = caller.get("jobs") or {}
    called = 0
    for job_id, job in jobs.items():
        uses = (job or {}).get("uses")
        if not uses:
            continue
        path = reusable_path(uses, test_infra)
        if path is None:
            continue
        if not path.is_file():
            problems.append(f"{where}: job '{job_id}' calls {uses}, which is not among test-infra's workflows "
                            f"({test_infra / '.github' / 'workflows'})")
            continue
        called += 1
        declared = declared_inputs(load_yaml(path))
        given = (job.get("with") or {})
        for name, val in given.items():
            if name not in declared:
                import difflib

                close = difflib.get_close_matches(name, list(declared), n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                problems.append(f"{where}: job '{job_id}' passes input '{name}', which {path.name} does not declare"
                                f"{hint} (GitHub rejects the call)")
            elif declared[name].type == "boolean" and not (isinstance(val, bool) or "${{" in str(val)):
                problems.append(f"{where}: job '{job_id}' passes boolean input '{name}' the string {val!r}")
        for d in declared.values():
            if d.required and d.name not in given:
                problems.append(f"{where}: job '{job_id}' does not pass input '{d.name}', which {path.name} requires")
    if called == 0:
        problems.append(f"{where}: no job calls one of test-infra's reusable workflows")
    return problems


def parse_env_file(text: str) -> dict[str, str]:
    """GITHUB_ENV / GITHUB_OUTPUT syntax: NAME=value lines and NAME<<DELIM heredocs."""
    out: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i].rstrip("\r")
        i += 1
        if not line.strip():
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            body: list[str] = []
            while i < len(lines) and lines[i].rstrip("\r") != delim:
                body.append(lines[i].rstrip("\r"))
                i += 1
            if i >= len(lines):
                raise HarnessError(f"unterminated {name}<<{delim} in an environment file")
            i += 1
            out[name] = "\n".join(body)
        elif "=" in line:
            name, val = line.split("=", 1)
            out[name] = val
        else:
            raise HarnessError(f"malformed environment file line {line!r}")
    return out


_CONDA_STANDIN = r'''#!{python}
"""Stand-in for conda on a machine without it (see tests/ci_harness.py)."""
import os, shutil, subprocess, sys, glob

TOOLS = {tools!r}

def find_python(version):
    if version and ".".join(map(str, sys.version_info[:2])) != version:
        for cand in [shutil.which("python" + version)] + sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/" + version + ".*/bin/python"))):
            if cand and subprocess.run([cand, "-c", "pass"], capture_output=True).returncode == 0:
                return cand
        print("conda stand-in: no Python " + version + " here; using " + sys.executable, file=sys.stderr)
    return sys.executable

args = sys.argv[1:]
cmd = args[0] if args else ""
if cmd == "create":
    prefix = args[args.index("--prefix") + 1]
    version = next((a.split("=", 1)[1] for a in args if a.startswith("python=")), "")
    subprocess.run([find_python(version), "-m", "venv", prefix], check=True)
    for a in args:
        name = a.split("=", 1)[0]
        if name in TOOLS:
            os.symlink(TOOLS[name], os.path.join(prefix, "bin", name))
    print("conda stand-in: created " + prefix)
elif cmd == "run":
    rest = args[1:]
    prefix = None
    while rest and rest[0].startswith("-"):
        opt = rest.pop(0)
        if opt in ("-p", "--prefix"):
            prefix = rest.pop(0)
    env = dict(os.environ)
    if prefix:
        env["PATH"] = os.path.join(prefix, "bin") + os.pathsep + env.get("PATH", "")
        env["CONDA_PREFIX"] = prefix
        env["VIRTUAL_ENV"] = prefix
    os.execvpe(rest[0], rest, env)
elif cmd == "info":
    print("     base environment : " + os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + "  (stand-in)")
else:  # clean, config, install: nothing to do without conda
    print("conda stand-in: " + " ".join(args) + " (no-op)")
'''


@dataclass
class StepLog:
    name: str
    status: str  # ran | skipped | not run (if) | stand-in | checked
    detail: str = ""


@dataclass
class Job:
    """The state of one job while it runs: contexts, environment, and what each step set."""

    workspace: Path
    temp: Path
    env: dict[str, str]
    contexts: dict[str, Any]
    path_prepend: list[str] = field(default_factory=list)
    set_by: dict[str, str] = field(default_factory=dict)  # variable -> step that put it in GITHUB_ENV
    log: list[StepLog] = field(default_factory=list)


class LinuxRun:
    """One matrix row of build_wheels_linux.yml, from a rendered caller workflow."""

    def __init__(self, *, caller: Path, repository: Path, work: Path, python: str, accel: str,
                 generator: Path, event: str = "push", test_infra: Path = TEST_INFRA,
                 echo: Callable[[str], None] = print, buildrows_bin: Path | None = None,
                 runner_env: Mapping[str, str] | None = None, install_torch: bool = False) -> None:
        self.caller_path = caller
        # Run "Install torch dependency" (pkg-helpers' PIP_INSTALL_TORCH) instead of skipping it: a
        # PyTorch extension's row. Its index cannot be reached here: the runner's PIP_NO_INDEX=1 and
        # PIP_FIND_LINKS (a local wheelhouse) make pip ignore it, as a runner with a mirror would.
        self.install_torch = install_torch
        self.runner_env = dict(runner_env or {})  # more of the runner's environment, e.g. BUILDROWS_CACHE
        self.caller = load_yaml(caller)
        self.repository = repository
        self.work = work
        self.python = python
        self.accel = accel
        self.generator = generator
        self.event = event
        self.test_infra = test_infra
        self.echo = echo
        self.buildrows_bin = buildrows_bin or Path(sys.executable).parent
        # What the runner's environment adds (a repository variable such as BUILDROWS_CUDA_MIRROR).
        self.runner_env = dict(runner_env or {})
        self.work.mkdir(parents=True, exist_ok=True)

    # --- the caller ----------------------------------------------------------------------------

    def _job_calling(self, workflow: str) -> tuple[str, dict[str, Any]]:
        for job_id, job in (self.caller.get("jobs") or {}).items():
            if str((job or {}).get("uses", "")).startswith(_REUSABLE_PREFIX + workflow + "@"):
                return job_id, job
        raise HarnessError(f"{self.caller_path.name}: no job calls {workflow}")

    def filtered_matrix(self) -> dict[str, Any]:
        """Run the caller's filter step (`buildrows matrix`) on the generator's output."""
        job = (self.caller.get("jobs") or {}).get("filter-matrix")
        if job is None:
            raise HarnessError(f"{self.caller_path.name}: no filter-matrix job")
        step = next((s for s in job["steps"] if s.get("id") == "filter"), None)
        if step is None:
            raise HarnessError(f"{self.caller_path.name}: job 'filter-matrix' has no step with id 'filter'")
        out = self.work / "filter-output"
        out.write_text("", encoding="utf-8")
        ctx = self._github_context()
        env = {k: gha_expr.to_string(gha_expr.value(v, {"github": ctx, "needs": {}, "env": {}}))
               for k, v in (step.get("env") or {}).items() if k not in ("GENERATED",)}
        env.update(GENERATED=self.generator.read_text(encoding="utf-8"), GITHUB_OUTPUT=str(out),
                   PATH=f"{self.buildrows_bin}{os.pathsep}{os.environ.get('PATH', '')}")
        env.pop("GITHUB_ACTIONS", None)
        base = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "GITHUB_ENV", "BUILD_ENV_FILE")}
        res = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                             cwd=self.repository, env={**base, **env}, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise HarnessError(f"job 'filter-matrix' step '{step.get('name', 'filter')}' failed "
                               f"(exit {res.returncode}):\n{res.stderr.strip()}")
        outputs = parse_env_file(out.read_text(encoding="utf-8"))
        self.echo(f"== filter-matrix: {len(json.loads(outputs['matrix'])['include'])} row(s) from {self.generator.name}")
        return {"matrix": outputs["matrix"]}

    def _github_context(self) -> dict[str, Any]:
        return {
            "repository": "buildrows-user/project", "event_name": self.event, "ref": "refs/heads/main",
            "ref_name": "main", "base_ref": "", "sha": "0" * 40, "workspace": str(self.work / "ws"),
            "run_id": "4242", "event": {"ref": "refs/heads/main", "pull_request": None}, "workflow": "build",
        }

    # --- the build job -------------------------------------------------------------------------

    def run(self) -> Job:
        problems = check_calls(self.caller, self.caller_path.name, self.test_infra)
        if problems:
            raise HarnessError("\n".join(problems))
        job_id, caller_job = self._job_calling("build_wheels_linux.yml")
        needs = {"filter-matrix": {"outputs": self.filtered_matrix(), "result": "success"}}
        github = self._github_context()
        reusable = load_yaml(reusable_path(caller_job["uses"], self.test_infra))  # type: ignore[arg-type]
        inputs = self._inputs(caller_job, reusable, {"github": github, "needs": needs, "env": {}})
        self._check_named_files(job_id, inputs)
        matrix = json.loads(inputs["build-matrix"])["include"]
        row = next((r for r in matrix if r["python_version"] == self.python and r["desired_cuda"] == self.accel), None)
        if row is None:
            raise HarnessError(f"job '{job_id}': the filtered matrix has no row for Python {self.python} and "
                               f"{self.accel} (it has {', '.join(r['build_name'] for r in matrix)})")
        self.echo(f"== build job of {reusable_path(caller_job['uses'], self.test_infra).name}: "  # type: ignore[union-attr]
                  f"matrix row {row['build_name']} ({row['container_image']})")
        job = self._start_job(reusable["jobs"]["build"], inputs, row, github)
        for step in reusable["jobs"]["build"]["steps"]:
            self._step(job, step, scope="")
        return job

    def _inputs(self, caller_job: Mapping[str, Any], reusable: Mapping[str, Any],
                ctx: Mapping[str, Any]) -> dict[str, Any]:
        declared = declared_inputs(reusable)
        out: dict[str, Any] = {n: d.default if d.default is not None else ("" if d.type == "string" else None)
                               for n, d in declared.items()}
        for name, raw in (caller_job.get("with") or {}).items():
            out[name] = gha_expr.value(raw, ctx)
        for name, d in declared.items():
            if d.type == "boolean" and isinstance(out[name], str):
                out[name] = out[name].lower() == "true"
        return out

    def _check_named_files(self, job_id: str, inputs: Mapping[str, Any]) -> None:
        """Scripts the inputs name must exist in the repository (test-infra stops on a missing
        pre/post-script, and silently falls back to `import PACKAGE` on a missing smoke test)."""
        missing: list[str] = []
        for name in ("pre-script", "post-script", "smoke-test-script", "env-var-script"):
            rel = str(inputs.get(name) or "")
            if not rel:
                continue
            if not (self.repository / rel).is_file():
                missing.append(f"job '{job_id}' input '{name}': {rel} does not exist in the repository "
                               f"({self.repository})")
        if missing:
            raise HarnessError("\n".join(missing))

    def _start_job(self, job_def: Mapping[str, Any], inputs: Mapping[str, Any], row: Mapping[str, Any],
                   github: Mapping[str, Any]) -> Job:
        ws = self.work / "ws"
        temp = self.work / "runner-temp"
        home = self.work / "home"
        tools = self.work / "tools"
        for d in (ws, temp, home, tools):
            d.mkdir(parents=True, exist_ok=True)
        venv_bin = Path(sys.executable).parent
        conda = tools / "conda"
        standin_tools = {n: str(venv_bin / n) for n in ("cmake", "ninja") if (venv_bin / n).exists()}
        conda.write_text(_CONDA_STANDIN.format(python=sys.executable, tools=standin_tools), encoding="utf-8")
        conda.chmod(0o755)
        # `bash -l` reads /etc/profile (which may reset PATH) and then this: the builder image has conda on PATH.
        (home / ".bash_profile").write_text(f'export PATH="{tools}:$PATH"\n', encoding="utf-8")
        # The runner's PATH, without this test environment's bin: the build sees only what the job installs.
        path = os.pathsep.join([str(tools)] + [p for p in os.environ.get("PATH", "").split(os.pathsep)
                                               if p and Path(p).resolve() != venv_bin.resolve()])
        keep = ("LANG", "LC_ALL", "TMPDIR", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS",
                "PIP_CACHE_DIR", "PIP_NO_INDEX", "PIP_CONFIG_FILE", "XDG_CACHE_HOME", "USER")
        base = {k: os.environ[k] for k in keep if k in os.environ}
        if "PIP_CACHE_DIR" not in base and "XDG_CACHE_HOME" not in base:
            base["XDG_CACHE_HOME"] = str(Path.home() / ".cache")  # share pip's cache with this machine
        base.update(
            HOME=str(home), PATH=path, CI="true", GITHUB_ACTIONS="true", GITHUB_WORKSPACE=str(ws),
            RUNNER_TEMP=str(temp), RUNNER_OS="Linux", RUNNER_ARCH="X64", GITHUB_RUN_ID=str(github["run_id"]),
            GITHUB_REPOSITORY=str(github["repository"]), GITHUB_EVENT_NAME=str(github["event_name"]),
            GITHUB_REF=str(github["ref"]), GITHUB_REF_NAME=str(github["ref_name"]), GITHUB_BASE_REF="",
            GITHUB_SHA=str(github["sha"]), GITHUB_STEP_SUMMARY=str(temp / "step-summary.md"),
        )
        base.update(self.runner_env)
        job = Job(workspace=ws, temp=temp, env=base,
                  contexts={"github": dict(github), "inputs": dict(inputs), "matrix": dict(row), "env": {},
                            "steps": {}, "secrets": {}, "vars": {}, "runner": {"os": "Linux", "temp": str(temp)},
                            "job": {}, "strategy": {}})
        for name, raw in (job_def.get("env") or {}).items():
            job.env[name] = gha_expr.to_string(gha_expr.value(raw, job.contexts))
        job.contexts["env"] = dict(job.env)
        self.echo(f"   job env: CU_VERSION={job.env.get('CU_VERSION')} PYTHON_VERSION={job.env.get('PYTHON_VERSION')}")
        return job

    # --- steps ---------------------------------------------------------------------------------

    def _step(self, job: Job, step: Mapping[str, Any], scope: str, action_ctx: Mapping[str, Any] | None = None,
              inherited_env: Mapping[str, str] | None = None, action_dir: str = "") -> None:
        ctx = dict(job.contexts)
        if action_ctx is not None:
            ctx.update(action_ctx)
        ctx["env"] = {**job.env, **(inherited_env or {})}
        name = str(step.get("name") or step.get("uses") or "run")
        if "${{" in name:
            name = gha_expr.interpolate(name, ctx)
        label = f"{scope}{name}"
        if not gha_expr.condition(step.get("if"), ctx):
            job.log.append(StepLog(label, "not run (if)"))
            return
        step_env = dict(inherited_env or {})
        for k, raw in (step.get("env") or {}).items():
            step_env[k] = gha_expr.to_string(gha_expr.value(raw, ctx))
        if "uses" in step:
            self._uses(job, step, label, ctx, step_env)
            return
        if name in SKIPPED_STEPS and not (name == "Install torch dependency" and self.install_torch):
            job.log.append(StepLog(label, "skipped", SKIPPED_STEPS[name]))
            self.echo(f"-- {label}: skipped ({SKIPPED_STEPS[name]})")
            return
        if name.startswith("Build the wheel"):
            self._check_build_env(job, label, ctx, step_env)
        self._run(job, step, label, ctx, step_env, action_dir)

    def _uses(self, job: Job, step: Mapping[str, Any], label: str, ctx: Mapping[str, Any],
              step_env: dict[str, str]) -> None:
        uses = str(step["uses"])
        with_ = {k: gha_expr.value(v, ctx) for k, v in (step.get("with") or {}).items()}
        if uses.startswith("actions/checkout@"):
            self._checkout(job, label, with_)
        elif uses.startswith("./"):
            action_dir = job.workspace / uses[2:]
            action = load_yaml(action_dir / "action.yml")
            declared = action.get("inputs") or {}
            for k in with_:
                if k not in declared:
                    raise HarnessError(f"step '{label}': passes input '{k}', which {uses} does not declare")
            inputs: dict[str, Any] = {}
            for k, spec in declared.items():
                spec = spec or {}
                if k in with_:
                    inputs[k] = with_[k]
                elif spec.get("required") and spec.get("default") is None:
                    raise HarnessError(f"step '{label}': does not pass input '{k}', which {uses} requires")
                else:
                    inputs[k] = spec.get("default", "")
            self.echo(f"== {label} (composite {uses})")
            sub: dict[str, Any] = {"inputs": inputs, "steps": {}}
            for s in action["runs"]["steps"]:
                self._step(job, s, scope=f"{label} / ", action_ctx=sub, inherited_env=step_env, action_dir=uses[2:])
        elif uses.startswith("actions/upload-artifact@"):
            self._upload_gate(job, label, str(with_.get("path", "")))
        elif uses.startswith("actions/cache@") or uses.startswith("conda-incubator/setup-miniconda@"):
            job.log.append(StepLog(label, "skipped", f"{uses} is not available here"))
        else:
            raise HarnessError(f"step '{label}': the harness does not know how to run {uses}")

    def _checkout(self, job: Job, label: str, with_: Mapping[str, Any]) -> None:
        dest = job.workspace / str(with_.get("path") or "")
        repo = str(with_.get("repository") or "")
        if dest.exists():
            shutil.rmtree(dest)
        if repo == "pytorch/test-infra":
            shutil.copytree(self.test_infra, dest)
            job.log.append(StepLog(label, "stand-in", "copied test-infra from the fixtures"))
            self.echo(f"-- {label}: test-infra from {self.test_infra}")
            return
        submodules = gha_expr.to_string(with_.get("submodules", "false")).lower()
        if submodules not in ("true", "false", "recursive"):
            raise HarnessError(f"step '{label}': submodules {submodules!r} is not one of actions/checkout's "
                               "values (true, false, recursive)")
        cmd = ["git", "clone", "--quiet"]
        if submodules == "recursive":
            cmd.append("--recurse-submodules")
        subprocess.run([*cmd, str(self.repository), str(dest)], check=True, capture_output=True)
        if submodules == "true":
            subprocess.run(["git", "-C", str(dest), "submodule", "update", "--init"], check=True, capture_output=True)
        job.log.append(StepLog(label, "stand-in", f"cloned {self.repository} (submodules: {submodules})"))
        self.echo(f"-- {label}: cloned the repository into {dest} (submodules: {submodules})")

    def _run(self, job: Job, step: Mapping[str, Any], label: str, ctx: Mapping[str, Any],
             step_env: Mapping[str, str], action_dir: str) -> None:
        script = gha_expr.interpolate(str(step["run"]), ctx)
        shell = str(step.get("shell") or "bash -e {0}")
        n = len(job.log)
        script_file = job.temp / f"step-{n:02d}.sh"
        script_file.write_text(script, encoding="utf-8")
        if shell == "bash":
            argv = ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script_file)]
        else:
            argv = [str(script_file) if a == "{0}" else a for a in shlex.split(shell)]
        wd = step.get("working-directory")
        cwd = job.workspace / gha_expr.interpolate(str(wd), ctx) if wd else job.workspace
        env_file = job.temp / f"env-{n:02d}"
        out_file = job.temp / f"output-{n:02d}"
        path_file = job.temp / f"path-{n:02d}"
        for f in (env_file, out_file, path_file):
            f.write_text("", encoding="utf-8")
        env = {**job.env, **step_env, "GITHUB_ENV": str(env_file), "GITHUB_OUTPUT": str(out_file),
               "GITHUB_PATH": str(path_file), "GITHUB_ACTION_PATH": str(job.workspace / action_dir)}
        if job.path_prepend:
            env["PATH"] = os.pathsep.join([*reversed(job.path_prepend), env["PATH"]])
        self.echo(f"== {label}  [{shell} in {cwd.relative_to(self.work) if cwd.is_relative_to(self.work) else cwd}]")
        res = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             check=False)
        (job.temp / f"log-{n:02d}.txt").write_text(res.stdout, encoding="utf-8")
        if res.returncode != 0:
            tail = "\n".join(res.stdout.strip().splitlines()[-40:])
            raise HarnessError(f"step '{label}' failed (exit {res.returncode}):\n{textwrap.indent(tail, '    ')}")
        for line in res.stdout.splitlines():
            if line.startswith(("buildrows", "+ ", "BUILD_ENV_FILE", "export TORCH_CUDA_ARCH_LIST", "::", "verdict",
                                "  [", "smoke test")) or "PASS" in line or "FAIL" in line:
                self.echo("   " + line)
        new_env = parse_env_file(env_file.read_text(encoding="utf-8"))
        for k, v in new_env.items():
            job.env[k] = v
            job.set_by[k] = label
        job.contexts["env"] = dict(job.env)
        job.path_prepend += [p for p in path_file.read_text(encoding="utf-8").splitlines() if p.strip()]
        if step.get("id"):
            outputs = parse_env_file(out_file.read_text(encoding="utf-8"))
            steps = ctx.get("steps")
            if isinstance(steps, dict):
                steps[str(step["id"])] = {"outputs": outputs, "outcome": "success", "conclusion": "success"}
        job.log.append(StepLog(label, "ran"))

    # --- guards --------------------------------------------------------------------------------

    def _check_build_env(self, job: Job, label: str, ctx: Mapping[str, Any], step_env: Mapping[str, str]) -> None:
        """What the build step sees after `source "${BUILD_ENV_FILE}"`: the row's values, not pkg-helpers'."""
        env_file = job.env.get("BUILD_ENV_FILE")
        if not env_file:
            raise HarnessError(f"step '{label}': BUILD_ENV_FILE is not set (pkg-helpers did not run)")
        probe = ('set -euxo pipefail\nsource "${BUILD_ENV_FILE}"\n'
                 f'{shlex.quote(sys.executable)} -c "import json, os; print(json.dumps(dict(os.environ)))"\n')
        res = subprocess.run(["bash", "--noprofile", "--norc", "-c", probe], env={**job.env, **step_env},
                             capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise HarnessError(f"step '{label}': `source \"${{BUILD_ENV_FILE}}\"` fails under set -euxo pipefail:\n"
                               + textwrap.indent(res.stderr.strip()[-2000:], "    "))
        seen: dict[str, str] = json.loads(res.stdout.strip().splitlines()[-1])
        row_name = job.env.get("BUILDROWS_ROW", "")
        from_hook = {k: v for k, v in job.env.items() if job.set_by.get(k, "").endswith("Run script")}
        helpers = _pkg_helpers_values(Path(env_file))
        expected = dict(from_hook)
        want = self._row_arch_list(row_name) if row_name else None
        if want is not None:
            expected["TORCH_CUDA_ARCH_LIST"] = want
        elif "TORCH_CUDA_ARCH_LIST" in helpers:
            raise HarnessError(f"step '{label}': no pre-script told the build which row it builds (BUILDROWS_ROW is "
                               "unset), so pkg-helpers' TORCH_CUDA_ARCH_LIST="
                               f"{helpers['TORCH_CUDA_ARCH_LIST']!r} wins over the row's")
        for k, v in sorted(expected.items()):
            got = seen.get(k)
            if got != v:
                whose = " (pkg-helpers' value)" if helpers.get(k) == got else ""
                raise HarnessError(f"step '{label}': after `source \"${{BUILD_ENV_FILE}}\"` the build sees {k}={got!r}"
                                   f"{whose}, but row {row_name or '?'} needs {v!r}: a value from pkg-helpers wins over "
                                   "the row's (the hook must append to BUILD_ENV_FILE, after pkg-helpers)")
        self.echo(f"-- {label}: after `source BUILD_ENV_FILE` the build sees the row's values "
                  f"(TORCH_CUDA_ARCH_LIST={seen.get('TORCH_CUDA_ARCH_LIST')!r}; pkg-helpers wrote "
                  f"{helpers.get('TORCH_CUDA_ARCH_LIST')!r})")

    def _row_arch_list(self, row: str) -> str | None:
        config = self._config()
        res = subprocess.run([str(self.buildrows_bin / "buildrows"), "--config", str(config), "rows", row, "--json"],
                             capture_output=True, text=True, check=False, env={**os.environ, "NO_COLOR": "1"})
        if res.returncode != 0:
            raise HarnessError(f"buildrows rows {row} failed: {res.stderr.strip()}")
        rows = json.loads(res.stdout)
        return str(rows[0]["torch_cuda_arch_list"] or "") or None

    def _config(self) -> Path:
        for job in (self.caller.get("jobs") or {}).values():
            for step in (job or {}).get("steps") or []:
                run = str(step.get("run", ""))
                if "--config" in run:
                    word = run.split("--config", 1)[1].split()[0]
                    return self.repository / shlex.split(word)[0]
        raise HarnessError(f"{self.caller_path.name}: no step names the policy with --config")

    def _upload_gate(self, job: Job, label: str, path: str) -> None:
        """A wheel may reach the upload only if a passing `buildrows check` saw exactly this file."""
        dist = job.workspace / path
        wheels = sorted(dist.glob("*.whl"))
        if not wheels:
            raise HarnessError(f"step '{label}': no wheel in {path} to upload")
        receipts = job.temp / "buildrows-checked.sha256"
        checked: dict[str, str] = {}
        if receipts.is_file():
            for line in receipts.read_text(encoding="utf-8").splitlines():
                digest, _, name = line.partition("  ")
                checked[name.strip()] = digest.strip()
        for whl in wheels:
            digest = hashlib.sha256(whl.read_bytes()).hexdigest()
            if checked.get(whl.name) != digest:
                why = ("no passing `buildrows check` ran on it" if whl.name not in checked
                       else "it changed after `buildrows check` passed")
                raise HarnessError(f"step '{label}': {path}{whl.name} reaches the upload unchecked: {why} "
                                   "(the post-script must check every wheel before upload)")
        job.log.append(StepLog(label, "checked", ", ".join(w.name for w in wheels)))
        self.echo(f"-- {label}: every wheel was checked before upload: {', '.join(w.name for w in wheels)}")


def _pkg_helpers_values(build_env_file: Path) -> dict[str, str]:
    """The values pkg-helpers wrote: the `export NAME='value'` lines before the first buildrows block."""
    out: dict[str, str] = {}
    for line in build_env_file.read_text(encoding="utf-8").splitlines():
        if line.startswith("# buildrows") or "BUILDROWS_ROW" in line:
            break
        if line.startswith("export ") and "=" in line:
            name, _, raw = line[len("export "):].partition("=")
            try:
                parts = shlex.split(raw)
            except ValueError:
                continue
            out[name] = parts[0] if parts else ""
    return out


# --- Windows: checked up to the shells its steps run in -------------------------------------------


def check_windows(caller_path: Path, repository: Path, test_infra: Path = TEST_INFRA,
                  echo: Callable[[str], None] = print, work: Path | None = None) -> list[str]:
    """build_wheels_windows.yml's steps that run the user's files, checked without Windows: the inputs,
    the shell each step runs in, the scripts' syntax for that shell, and - executing the pre-script
    under bash with Git Bash's `uname`, `cygpath` and `cmd` stood in - that ninja is installed and on
    PATH before the hook runs, inside the env-script's developer environment. Returns what ran."""
    caller = load_yaml(caller_path)
    problems = check_calls(caller, caller_path.name, test_infra)
    if problems:
        raise HarnessError("\n".join(problems))
    job = next(j for j in caller["jobs"].values() if str(j.get("uses", "")).startswith(_REUSABLE_PREFIX + "build_wheels_windows.yml@"))
    inputs = job["with"]
    reusable = load_yaml(reusable_path(job["uses"], test_infra))  # type: ignore[arg-type]
    build = reusable["jobs"]["build"]
    default_shell = ((build.get("defaults") or {}).get("run") or {}).get("shell")
    report: list[str] = []

    def repo_file(value: str, what: str) -> Path:
        rel = value.replace("\\\\", "/").replace("\\", "/")
        p = repository / rel
        if not p.is_file():
            raise HarnessError(f"job 'build' input '{what}': {value} does not exist in the repository ({repository})")
        return p

    steps = {s.get("name", ""): s for s in build["steps"]}
    # The pre-script: run-script-with-cache's `Run script`, `${CONDA_RUN} bash ${SCRIPT}` under `bash -l {0}`.
    rswc = load_yaml(test_infra / ".github/actions/run-script-with-cache/action.yml")
    run_script = next(s for s in rswc["runs"]["steps"] if s.get("name") == "Run script")
    if run_script.get("shell") != "bash -l {0}" or "${CONDA_RUN} bash ${SCRIPT}" not in run_script["run"]:
        raise HarnessError("run-script-with-cache no longer runs the pre-script as `${CONDA_RUN} bash ${SCRIPT}` "
                           "under `bash -l {0}`; the harness must be updated")
    pre = repo_file(str(inputs["pre-script"]), "pre-script")
    _bash_syntax(pre, "pre-script")
    report.append(f"step 'Run Pre-Script with Caching' / 'Run script': shell {run_script['shell']} (Git Bash), "
                  f"runs `${{CONDA_RUN}} bash {inputs['pre-script']}`")
    # env-script: a .bat run by cmd (via conda run) around the build, the post-script and the smoke test.
    env_script = repo_file(str(inputs["env-script"]), "env-script")
    if not env_script.name.endswith(".bat") or b"\r\n" not in env_script.read_bytes():
        raise HarnessError(f"job 'build' input 'env-script': {env_script.name} must be a .bat with CRLF line endings")
    for name in ("Build the wheel (python-build-package) X64", "Build the wheel (setup-py) X64", "Run post-script",
                 "Smoke Test X64"):
        shell = steps[name].get("shell", default_shell)
        if shell != "bash -l {0}":
            raise HarnessError(f"step '{name}' runs under {shell!r}, not Git Bash; the harness must be updated")
        report.append(f"step '{name}': shell {shell} (Git Bash, job default)")
    post = str(inputs["post-script"]).split()
    if post[0] != "bash" or len(post) != 2:
        raise HarnessError(f"job 'build' input 'post-script': {' '.join(post)!r} is run as a command "
                           "(`${CONDA_RUN} ${ENV_SCRIPT} ${POST_SCRIPT}`); write `bash SCRIPT`")
    _bash_syntax(repo_file(post[1], "post-script"), "post-script")
    smoke = repo_file(str(inputs["smoke-test-script"]), "smoke-test-script")
    compile(smoke.read_text(encoding="utf-8"), str(smoke), "exec")
    report.append(f"post-script `{' '.join(post)}` and smoke test {smoke.name} exist and parse")
    report += _windows_pre_script_order(str(inputs["pre-script"]), repository, work)
    report += _windows_post_script(post[1], repository, work)
    for line in report:
        echo("   " + line)
    return report


def _bash_syntax(path: Path, what: str) -> None:
    res = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise HarnessError(f"{what} {path.name} is not valid bash: {res.stderr.strip()}")


class _GitBash:
    """A copy of the repository and a PATH that make bash look like Git Bash on the Windows builder:
    `uname -s` says MINGW64; `python` (pip, buildrows), `cygpath` and `cmd` record what they are
    asked and in which directory; pip installing ninja puts a ninja on PATH as it would in the
    build environment's Scripts directory. Scripts run as test-infra runs them - `bash SCRIPT` in
    the repository, SCRIPT spelled as the input spells it (backslashes: Git Bash hands the script
    its path that way, so $0 and BASH_SOURCE carry them)."""

    def __init__(self, repository: Path, work: Path | None) -> None:
        import tempfile

        if work is not None and work.resolve().is_relative_to(repository.resolve()):
            work = None  # a copy inside the tree being copied would copy itself
        self.base = Path(tempfile.mkdtemp(prefix="git-bash-", dir=work))
        self.repo = self.base / "repo"
        shutil.copytree(repository, self.repo, ignore=shutil.ignore_patterns(".git"))
        fake = self.base / "bin"
        self.scripts = self.base / "Scripts"
        fake.mkdir()
        self.scripts.mkdir()
        self.journal = self.base / "journal"
        j, sd = shlex.quote(str(self.journal)), shlex.quote(str(self.scripts))
        # which ninja a call would run: only the one pip put in the environment's Scripts counts
        where = f'(ninja on PATH: $([[ "$(command -v ninja)" == {sd}/* ]] && echo yes || echo no); in $(pwd))'
        tools = {
            "uname": 'echo MINGW64_NT-10.0-20348\n',
            "cygpath": 'shift; echo "${1//\\//\\\\}"\n',
            "python": f'echo "python $* {where}" >> {j}\n'
                      f'if [[ "$*" == *"install"*"ninja=="* ]]; then printf "#!/bin/sh\\n" > {sd}/ninja; chmod +x {sd}/ninja; fi\n'
                      # `buildrows stamp` prints the wheel's path (unchanged: the name already has +cu130)
                      'if [[ " $* " == *" stamp "* ]]; then echo "${@: -1}"; fi\n',
            "cmd": f'echo "cmd $* {where}" >> {j}\n',
        }
        for name, body in tools.items():
            p = fake / name
            p.write_text("#!/usr/bin/env bash\n" + body, encoding="utf-8")
            p.chmod(0o755)
        self.path = f"{fake}{os.pathsep}{self.scripts}{os.pathsep}/usr/bin:/bin"

    def run(self, script: str, what: str, env: Mapping[str, str] | None = None) -> list[str]:
        if "\\" in script:  # the same bytes under the name Git Bash opens them by
            real = self.repo / script.replace("\\\\", "/").replace("\\", "/")
            (self.repo / script).write_bytes(real.read_bytes())
        self.journal.write_text("", encoding="utf-8")
        res = subprocess.run(["bash", script], cwd=self.repo, capture_output=True, text=True, check=False,
                             env={"PATH": self.path, "HOME": str(self.base), **(env or {})})
        if res.returncode != 0:
            raise HarnessError(f"{what} {script} under Git Bash (MINGW64) failed (exit {res.returncode}): "
                               f"{res.stderr.strip()[-1500:]}")
        return self.journal.read_text(encoding="utf-8").splitlines()

    def in_repository(self, call: str, what: str, script: str) -> None:
        where = call.rsplit("; in ", 1)[1].rstrip(")")
        if Path(where).resolve() != self.repo.resolve():
            raise HarnessError(f"{what} {script}: `{call.split(' (ninja', 1)[0]}` runs in {where}, not in the "
                               f"repository ({self.repo}), so the policy's relative path does not resolve")

    def show(self, calls: list[str], what: str) -> list[str]:
        return [f"{what} under Git Bash (MINGW64): {c.replace(str(self.repo), '<repository>')}" for c in calls]


def _windows_pre_script_order(script: str, repository: Path, work: Path | None) -> list[str]:
    """The pre-script under Git Bash: buildrows installed as pinned, ninja installed and on PATH, then
    the hook, with the policy's path, inside the env-script's developer environment, in the repository."""
    bash = _GitBash(repository, work)
    calls = bash.run(script, "pre-script")
    ninja = next((i for i, c in enumerate(calls) if "install" in c and "ninja==" in c), None)
    hook = next((i for i, c in enumerate(calls) if c.startswith("cmd ") and " hook " in c + " "), None)
    if ninja is None:
        raise HarnessError(f"pre-script {script} under Git Bash does not install ninja; the hook would choose the "
                           "Visual Studio generator with ClangCL (MSB4023)")
    if hook is None:
        raise HarnessError(f"pre-script {script} under Git Bash does not run the hook inside the env-script's "
                           f"developer environment (`cmd //c ENV_SCRIPT python -m buildrows ... hook`): {calls}")
    if hook < ninja or "ninja on PATH: yes" not in calls[hook]:
        raise HarnessError(f"pre-script {script}: the hook runs before ninja is on PATH ({calls})")
    if "--config" not in calls[hook]:
        raise HarnessError(f"pre-script {script}: the hook is not given the policy's path ({calls[hook]})")
    bash.in_repository(calls[hook], "pre-script", script)
    return bash.show(calls, "pre-script")


def _windows_post_script(script: str, repository: Path, work: Path | None) -> list[str]:
    """The post-script under Git Bash, on a dist/ holding one wheel: `buildrows check` with the
    policy and the hook's row, in the repository, on that wheel."""
    bash = _GitBash(repository, work)
    wheel = "proj-0.1.0+cu130-cp312-cp312-win_amd64.whl"
    (bash.repo / "dist").mkdir(exist_ok=True)
    (bash.repo / "dist" / wheel).write_bytes(b"PK")
    row = "windows-amd64-cu130-py312"
    calls = bash.run(script, "post-script", {"BUILDROWS_ROW": row, "RUNNER_TEMP": str(bash.base)})
    check = next((c for c in calls if " -m buildrows " in c and " check " in c), None)
    if check is None or f"--row {row}" not in check or f"dist/{wheel}" not in check or "--config" not in check:
        raise HarnessError(f"post-script {script} under Git Bash does not run `buildrows --config POLICY check --row "
                           f"ROW` on dist/{wheel}: {calls}")
    bash.in_repository(check, "post-script", script)
    return bash.show(calls, "post-script")

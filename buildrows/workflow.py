"""Render the GitHub workflows that use the policy: generator call, buildrows filter, shared build.

`plan` decides every value (pure, unit-tested); `render` fills the jinja2 template. jinja2 is
imported inside `render` so that importing this module stays cheap.
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from buildrows import __version__
from buildrows.errors import BadInput, Refused
from buildrows.matrix import FULL_MATRIX_LABEL
from buildrows.model import Policy
from buildrows.resources import resource_dir

TEMPLATE = "build-wheels-cuda.yml.j2"
DEFAULT_PRE_SCRIPT = "scripts/pre_build_hook.sh"

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


@dataclass(frozen=True)
class WorkflowPlan:
    """Every value one platform's workflow is rendered from."""

    platform: str
    file_name: str
    title: str
    config: str  # the policy, relative to the repository root
    paths: tuple[str, ...]
    branches: tuple[str, ...]
    generator_inputs: tuple[tuple[str, str], ...]
    build_workflow: str
    build_inputs: tuple[tuple[str, str], ...]
    install: str


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


def plan(
    policy: Policy,
    *,
    root: Path,
    out_dir: Path,
    platforms: Sequence[str] = (),
    overrides: Mapping[str, str] | None = None,
    pre_script: str = DEFAULT_PRE_SCRIPT,
    install: str | None = None,
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
    config = _relative(policy.path, root, "the policy")
    try:
        out_rel = _relative(out_dir, root, "--out")
    except BadInput:  # rendered elsewhere (a preview, a test): it will live where GitHub reads workflows
        out_rel = ".github/workflows"
    chosen = [p for p in policy.platforms if not platforms or p in platforms]
    plans: list[WorkflowPlan] = []
    for platform in chosen:
        rows = [r for r in policy.rows if r.platform == platform and r.empty_reason is None]
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
        file_name = f"build-wheels-cuda-{platform}.yml" if has_cuda else f"build-wheels-{platform}.yml"
        build: list[tuple[str, str]] = [
            ("repository", "${{ github.repository }}"),
            ("ref", ""),
            ("test-infra-repository", "pytorch/test-infra"),
            ("test-infra-ref", "main"),
            ("package-name", policy.project.name),
            # the hook: finds the row from CU_VERSION/DESIRED_CUDA and writes BUILD_ENV_FILE
            ("pre-script", pre_script),
        ]
        if platform == "linux-aarch64":
            # Without it the shared build prepares an x86_64 job and skips the aarch64 conda install.
            build.append(("architecture", "aarch64"))
        paths = [config, pre_script, f"{out_rel}/{file_name}", *extra_paths]
        plans.append(WorkflowPlan(
            platform=platform,
            file_name=file_name,
            title=f"Build {'CUDA ' if has_cuda else ''}wheels ({platform})",
            config=config,
            paths=tuple(dict.fromkeys(paths)),
            branches=tuple(branches),
            generator_inputs=tuple(gen.items()),
            build_workflow=_BUILD_WORKFLOW[os_],
            build_inputs=tuple(build),
            install=install or f"buildrows=={__version__}",
        ))
    if not plans:
        raise Refused(f"{policy.path} publishes no rows on {', '.join(chosen) or 'any platform'}: no workflow to render")
    return plans


_PLAIN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./+=-]*$")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def _yaml_scalar(value: object) -> str:
    """A YAML scalar for one-line VALUE: plain when unambiguous, otherwise single-quoted."""
    s = str(value)
    if "\n" in s:
        raise ValueError(f"multi-line value {s!r} in a workflow template")
    if _PLAIN.match(s) and s.lower() not in _YAML_WORDS and not re.fullmatch(r"[0-9.+-]+", s):
        return s
    return "'" + s.replace("'", "''") + "'"


def render(p: WorkflowPlan, template_dir: Path | None = None, template: str = TEMPLATE) -> str:
    """The workflow text; its generator switches are checked after rendering, whatever the template says."""
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
    try:
        text = env.get_template(template).render(
            platform=p.platform, title=p.title, config=p.config, paths=p.paths, branches=p.branches,
            generator_inputs=p.generator_inputs, build_workflow=p.build_workflow, build_inputs=p.build_inputs,
            install=p.install, full_matrix_label=FULL_MATRIX_LABEL,
        )
    except jinja2.TemplateError as e:
        raise BadInput(f"template {template}: {e}\n    fix: correct the template") from None
    check_rendered_switches(text, f"{template} (rendered for {p.platform})")
    return text

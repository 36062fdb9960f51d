"""The one rule for which runtime requirements a row's wheel declares (SPEC §3).

`buildrows build` writes them into the wheel and `buildrows check` holds the wheel to them, so
both call this: the train's set on Linux (each requirement whose marker applies to the row's
platform), nothing on Windows (a C++ program does not search site-packages) or for CPU rows.
"""

from __future__ import annotations

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement

from buildrows.errors import BadInput
from buildrows.policy.trains import Train


def marker_environment(platform: str) -> dict[str, str]:
    """PEP 508 marker values for a platform name such as linux-x86_64 or windows-amd64."""
    env = {k: str(v) for k, v in default_environment().items()}
    if platform.startswith("linux"):
        env.update(platform_system="Linux", sys_platform="linux", os_name="posix")
    else:
        env.update(platform_system="Windows", sys_platform="win32", os_name="nt")
    env["platform_machine"] = platform.split("-", 1)[1].replace("amd64", "AMD64")
    return env


def applies(req: Requirement, platform: str) -> bool:
    return req.marker is None or req.marker.evaluate(marker_environment(platform))


def expected_requirements(platform: str, cuda: Train | None, requirements: tuple[str, ...]) -> list[str]:
    """The Requires-Dist entries a wheel of this row must declare, exactly."""
    if cuda is None or platform.startswith("windows"):
        return []
    out = []
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement as e:  # the policy's own entry: bad input, not a failed wheel
            raise BadInput(f"the policy's runtime requirement {text!r} for CUDA {cuda.dotted} does not parse: {e}\n"
                           f"    fix: correct requirements under [cuda.runtime.{cuda.major}]") from None
        if applies(req, platform):
            out.append(text)
    return out


def torch_requirement(value: str) -> str:
    """The requirement a policy's `torch` value means: "2.14.1" -> torch==2.14.1, "2.14.*" ->
    torch==2.14.*, ">=2.13,<2.15" -> torch>=2.13,<2.15. ValueError when it is neither."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    text = value.strip()
    spec = f"=={text}" if text[:1].isdigit() else text
    try:
        parsed = SpecifierSet(spec)
    except InvalidSpecifier:
        raise ValueError(f"torch = {value!r} is neither a version nor a version specifier") from None
    if not str(parsed):
        raise ValueError("torch is empty")
    return f"torch{parsed}"

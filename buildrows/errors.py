"""One error hierarchy; only the CLI turns an error into an exit code (SPEC §9)."""

from __future__ import annotations

from buildrows.frozen import Frozen, frozen_dataclass

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_REFUSED = 3
EXIT_EXTERNAL = 4
EXIT_CHECK_FAILED = 5


@frozen_dataclass(frozen=True, eq=False, repr=False)
class Problem(Frozen):
    """One thing wrong with an input, located as precisely as we can."""

    message: str
    file: str | None = None
    line: int | None = None
    row: str | None = None
    field: str | None = None
    hint: str | None = None
    refusal: bool = False  # a policy guard (exit 3) rather than malformed input (exit 2)

    def render(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "")
        parts = [p for p in (where, self.field and f"[{self.field}]") if p]
        head = " ".join(parts)
        text = f"{head}: " if head else ""
        if self.row:
            text += f"row {self.row}: "
        text += self.message
        if self.hint:
            text += f"\n    fix: {self.hint}"
        return text


class BuildrowsError(Exception):
    """Base of every error buildrows reports to a person."""

    exit_code = EXIT_INTERNAL
    title = "error"

    def __init__(self, message: str = "", problems: list[Problem] | tuple[Problem, ...] = ()) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        if not message and self.problems:
            message = "\n".join(p.render() for p in self.problems)
        super().__init__(message)

    @property
    def message(self) -> str:
        return str(self)


class BadInput(BuildrowsError):
    """Malformed configuration, arguments or files (exit 2)."""

    exit_code = EXIT_BAD_INPUT
    title = "bad input"


class Refused(BuildrowsError):
    """A policy guard fired (exit 3)."""

    exit_code = EXIT_REFUSED
    title = "refused"


class ExternalFailure(BuildrowsError):
    """An external command (cmake, the build) failed (exit 4)."""

    exit_code = EXIT_EXTERNAL
    title = "step failed"


class CheckFailed(BuildrowsError):
    """The wheel check failed (exit 5)."""

    exit_code = EXIT_CHECK_FAILED
    title = "check failed"


def raise_problems(problems: list[Problem], summary: str) -> None:
    """Raise one error carrying every problem; refusal (3) only when all are refusals."""
    if not problems:
        return
    body = "\n".join(p.render() for p in problems)
    n = len(problems)
    text = f"{summary} ({n} problem{'s' if n != 1 else ''}):\n{body}"
    if all(p.refusal for p in problems):
        raise Refused(text, problems)
    raise BadInput(text, problems)


EXIT_INTERRUPTED = 130


class Interrupted(BuildrowsError):
    """The user pressed Ctrl-C (exit 130, as a shell reports SIGINT)."""

    exit_code = EXIT_INTERRUPTED
    title = "interrupted"

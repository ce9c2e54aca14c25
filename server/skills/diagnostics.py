"""What loading a package found wrong: each deviation as a Diagnostic, the error that refuses a package with
them, and the report one load collects them in."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ..errors import InvalidArgumentError


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One deviation: where it is, which rule it breaks, and what was found."""

    severity: Severity
    file: str
    rule: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.rule}: {self.message}"


class SkillFormatError(InvalidArgumentError):
    """The package cannot be loaded; `diagnostics` holds every error (and the warnings found with them)."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = tuple(diagnostics)
        errors = [str(d) for d in diagnostics if d.severity is Severity.ERROR]
        super().__init__("; ".join(errors))


class LoadReport:
    """Diagnostics of one load; a deviation is an error when strict, else a warning."""

    def __init__(self, file: str, strict: bool) -> None:
        self.file, self.strict, self.found = file, strict, list[Diagnostic]()

    def error(self, rule: str, message: str, line: int | None = None) -> Diagnostic:
        self.found.append(Diagnostic(Severity.ERROR, self.file, rule, message, line))
        return self.found[-1]

    def warning(self, rule: str, message: str, line: int | None = None) -> None:
        self.found.append(Diagnostic(Severity.WARNING, self.file, rule, message, line))

    def deviation(self, rule: str, message: str) -> None:
        (self.error if self.strict else self.warning)(rule, message)

    def raise_if_errors(self) -> None:
        if any(d.severity is Severity.ERROR for d in self.found):
            raise SkillFormatError(self.found)

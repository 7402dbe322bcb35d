"""Diagnostics: what is wrong, where (file:line:column), which rule, and how to fix it.

Every stage that can refuse input reports through these, so the CLI renders one shape of message and
never a traceback.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True)
class Diagnostic:
    severity: Severity
    rule: str
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    hint: str | None = None

    def to_json(self) -> dict:
        return asdict(self)

    def location(self) -> str:
        if self.file is None:
            return ""
        if self.line is None:
            return self.file
        return f"{self.file}:{self.line}:{self.column or 1}"

    def format(self) -> str:
        where = self.location()
        head = f"{where}: " if where else ""
        text = f"{head}{self.severity}[{self.rule}]: {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class DiagnosticError(Exception):
    """Raised by a stage that cannot go on; carries the diagnostics that say why."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = diagnostics
        super().__init__("\n".join(d.format() for d in diagnostics))


def has_errors(diagnostics: list[Diagnostic]) -> bool:
    return any(d.severity == "error" for d in diagnostics)

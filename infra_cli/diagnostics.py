"""Diagnostics: what is wrong, where (file:line:column), which rule, and how to fix it.

Every stage that can refuse input reports through these, so the CLI renders one shape of message and
never a traceback.

A message or hint that tells the user to run a command names it as data: a `Text` (`says("adopt it with ",
NextStep(("infra", "import"), (address, name, stack)))`). Its value is the text as a run without flags reads it;
the view renders its steps with the run's flags (commands/hints.py `rendered`), so no text is rewritten by pattern.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Literal

from infra_cli.arguments import NextStep

Severity = Literal["error", "warning", "info"]

# The az listings a hint names to see what Azure holds, which the az CLI cannot do on the local Azure (the emulator
# refuses its tokens): a local run names LIST_INSTEAD, for its stack, in their place (NextStep.local_instead).
LIST_COMPUTES = ("az", "ml", "compute", "list")
SHOW_COMPUTE = ("az", "ml", "compute", "show")
LIST_ENVIRONMENTS = ("az", "ml", "environment", "list")
LIST_INSTEAD = ("infra", "state", "list")


class Text(str):
    """A text that names next steps: its value is the text with each step in backquotes as written (what a run
    without --local or --var reads, what the JSON says), `parts` the text and the steps apart, for a view to render
    with the run's flags. Joined to a str with `+` it stays a Text; an f-string or str() makes it plain text."""

    parts: tuple[str | NextStep, ...]

    def __new__(cls, parts: tuple[str | NextStep, ...]) -> Text:
        merged: list[str | NextStep] = []
        for part in (p for given in parts for p in (given.parts if isinstance(given, Text) else (given,))):
            if isinstance(part, str) and merged and isinstance(merged[-1], str):
                merged[-1] = merged[-1] + str(part)
            elif part != "":
                merged.append(part if isinstance(part, NextStep) else str(part))
        text = super().__new__(cls, "".join(p if isinstance(p, str) else as_written(p) for p in merged))
        text.parts = tuple(merged)
        return text

    def __add__(self, other: str) -> Text:   # type: ignore[override]
        return Text((self, other))

    def __radd__(self, other: str) -> Text:
        return Text((other, self))

    def __reduce__(self):   # pickle and copy keep the steps
        return Text, (self.parts,)

    def replace(self, old: str, new: str, count: int = -1) -> str:   # type: ignore[override]
        """Replaced in the text and in the steps' arguments, steps kept (a secret scrubbed out of a hint); where
        `old` spans a step's edge, the plain text replaced, so nothing is ever left unreplaced."""
        if count != -1 or not old:
            return str(self).replace(old, new, count)
        text = Text(tuple(p.replace(old, new) if isinstance(p, str) else
                          NextStep(p.command, tuple(a.replace(old, new) for a in p.args), p.local_instead)
                          for p in self.parts))
        return text if old not in text else str(self).replace(old, new)

    def steps(self) -> tuple[NextStep, ...]:
        return tuple(p for p in self.parts if isinstance(p, NextStep))


def says(*parts: str | NextStep) -> Text:
    """A text naming next steps: `says("run ", NextStep(("infra", "plan"), (stack,)), " first")`."""
    return Text(parts)


def joined(separator: str, texts: list[str]) -> str:
    """`separator.join(texts)`, keeping the steps of those that are Texts."""
    out: list[str | NextStep] = []
    for i, text in enumerate(texts):
        out.extend(([separator] if i else []) + [text])
    return Text(tuple(out)) if any(isinstance(t, Text) for t in texts) else separator.join(texts)


def words(step: NextStep) -> str:
    """A step's command line as written: its arguments quoted for a shell where they need it."""
    return " ".join([*step.command, *(shlex.quote(a) for a in step.args)])


def as_written(step: NextStep) -> str:
    """A step in backquotes, as a run without flags names it."""
    return f"`{words(step)}`"


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
        return {"severity": self.severity, "rule": self.rule, "message": str(self.message), "file": self.file,
                "line": self.line, "column": self.column, "hint": None if self.hint is None else str(self.hint)}

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

"""validate: stack files -> diagnostics (offline)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from infra_cli.diagnostics import Diagnostic, DiagnosticError, has_errors
from infra_cli.stack.load import LoadedStack, load_stack
from infra_cli.validate.knowledge import checked_catalog
from infra_cli.validate.rules import run_rules


def validate_stack(loaded: LoadedStack) -> list[Diagnostic]:
    return run_rules(loaded, checked_catalog())


def validate_files(paths: Iterable[Path]) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for path in paths:
        try:
            out.extend(validate_stack(load_stack(path)))
        except DiagnosticError as exc:
            out.extend(exc.diagnostics)
    return out


def load_valid_stack(path: Path) -> tuple[LoadedStack, list[Diagnostic]]:
    """Load and validate; raise DiagnosticError if any rule reports an error. Warnings come back."""
    loaded = load_stack(path)
    diagnostics = validate_stack(loaded)
    if has_errors(diagnostics):
        raise DiagnosticError(diagnostics)
    return loaded, diagnostics

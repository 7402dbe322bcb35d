"""validate: stack files -> diagnostics (offline)."""

from __future__ import annotations

from pathlib import Path
from typing import Collection, Iterable

from infra_cli.diagnostics import Diagnostic, DiagnosticError, has_errors
from infra_cli.stack.load import LoadedStack, load_stack
from infra_cli.stack.variables import Inputs
from infra_cli.knowledge.skus import load_catalog
from infra_cli.validate.rules import run_rules


def validate_stack(loaded: LoadedStack) -> list[Diagnostic]:
    return [*loaded.source.warnings, *run_rules(loaded, load_catalog())]


def validate_files(paths: Iterable[Path]) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for path in paths:
        try:
            out.extend(validate_stack(load_stack(path)))
        except DiagnosticError as exc:
            out.extend(exc.diagnostics)
    return out


def load_valid_stack(path: Path, *, judged_live: Collection[str] = (),
                     inputs: Inputs | None = None) -> tuple[LoadedStack, list[Diagnostic]]:
    """Load and validate; raise DiagnosticError if any rule reports an error. Warnings come back.

    `judged_live`: rule ids the caller judges again against the live state (the plan's preflight), left out here;
    when other errors stop the caller before it reads the live state, they are reported as validate reports them
    (every error validate shows, the caller shows)."""
    loaded = load_stack(path, inputs=inputs)
    found = validate_stack(loaded)
    diagnostics = [d for d in found if d.rule not in judged_live]
    if has_errors(diagnostics):
        raise DiagnosticError(found)
    return loaded, diagnostics

"""validate: stack files -> diagnostics (offline)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Collection, Iterable

from infra_cli.diagnostics import Diagnostic, DiagnosticError, has_errors
from infra_cli.knowledge.names import name_rules
from infra_cli.stack.load import LoadedStack, SchemaErrors, load_stack
from infra_cli.stack.variables import Inputs
from infra_cli.knowledge.skus import load_catalog
from infra_cli.validate.rules import run_rules


def validate_stack(loaded: LoadedStack) -> list[Diagnostic]:
    return [*loaded.source.warnings, *run_rules(loaded, load_catalog())]


def beside_schema_errors(exc: SchemaErrors) -> list[Diagnostic]:
    """The schema's errors and, in the same pass, what the rules find in the rest of the stack (SchemaErrors.
    partial): fixing the schema errors must not bring a second round of name and reference errors. A reference
    to an entry left out for its schema error is not dangling, and the names of the entries left out are
    still judged."""
    out = list(exc.diagnostics)
    if exc.partial is None:
        return out
    def refers_to_removed(d: Diagnostic) -> bool:
        return d.rule == "distribution.dangling-reference" and any(
            f"names {section[:-1]} {name!r}," in d.message for section, names in exc.removed.items() for name in names)

    out.extend(d for d in validate_stack(exc.partial) if not refers_to_removed(d))
    left_out = SimpleNamespace(**{s: dict.fromkeys(exc.removed.get(s, ())) for s in ("clusters", "environments",
                                                                                       "distributions")})
    for r in name_rules():
        if r.field is None and r.section in exc.removed:   # the keys of a section: the entries' own names
            out.extend(exc.partial.source.diagnostic(path, r.rule_id, f"{r.what} {name!r} is not a name Azure accepts",
                                                     f"use {r.rule} ({r.source})", key=is_key)
                       for name, path, is_key in r.names_in(left_out) if not r.pattern.fullmatch(name))
    return sorted(out, key=lambda d: (d.line or 0, d.column or 0))


def validate_files(paths: Iterable[Path], inputs: Inputs | None = None) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for path in paths:
        try:
            out.extend(validate_stack(load_stack(path, inputs=inputs)))
        except SchemaErrors as exc:
            out.extend(beside_schema_errors(exc))
        except DiagnosticError as exc:
            out.extend(exc.diagnostics)
    return out


def load_valid_stack(path: Path, *, judged_live: Collection[str] = (),
                     inputs: Inputs | None = None) -> tuple[LoadedStack, list[Diagnostic]]:
    """Load and validate; raise DiagnosticError if any rule reports an error (with the schema's, every error
    one pass finds: beside_schema_errors). Warnings come back.

    `judged_live`: rule ids the caller judges again against the live state (the plan's preflight), left out here;
    when other errors stop the caller before it reads the live state, they are reported as validate reports them
    (every error validate shows, the caller shows)."""
    try:
        loaded = load_stack(path, inputs=inputs)
    except SchemaErrors as exc:
        raise DiagnosticError(beside_schema_errors(exc)) from None
    found = validate_stack(loaded)
    diagnostics = [d for d in found if d.rule not in judged_live]
    if has_errors(diagnostics):
        raise DiagnosticError(found)
    return loaded, diagnostics

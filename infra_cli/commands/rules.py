"""`infra rules`: every rule validate and plan judge a stack by, as tflint lists its rules: id, severity, summary
and the page that explains it (docs/rules/ID.md). Offline, no Azure."""

import json

import typer

from infra_cli.commands.cli import Command, no_color_option
from infra_cli.commands.errors import fail
from infra_cli.diagnostics import DiagnosticError


def rules(
    as_json: bool = typer.Option(False, "--json", help="print the rules as JSON: [{id, severity, summary, doc, "
                                 "switchable}]"),
    no_color: bool = no_color_option(),
) -> None:
    """List the rules validate and plan judge stacks by: id, severity, summary and its page (docs/rules/ID.md)."""
    from infra_cli.validate.rules import catalogue

    try:
        listed = catalogue()   # with the names' rules of validators/names.yaml
    except DiagnosticError as exc:
        raise fail(exc.diagnostics, as_json)
    if as_json:
        print(json.dumps([r.to_json() for r in listed], indent=2))
        return
    for r in listed:
        severity = r.severity + (f" (or {r.also})" if r.also else "")
        switch = ", switchable" if r.switchable else ""
        print(f"{r.id}  {severity}{switch}\n    {r.summary}\n    {r.doc}")
    print(f"\n{len(listed)} rules. A stack switches a rule's warnings off with a reason: "
          "rules: {ID: {enabled: false, reason: \"...\"}} (errors are never switched off)")


def register(app: typer.Typer) -> None:
    app.command(cls=Command)(rules)

"""`infra validate` and `infra schema`: offline, no Azure."""

import json
import sys
from pathlib import Path
from typing import List

import typer

from infra_cli.commands.output import EXIT_ERROR, EXIT_OK, Command, print_diagnostics, var_file_option, var_option
from infra_cli.diagnostics import has_errors


def validate(
    stacks: List[Path] = typer.Argument(..., help="stack files", metavar="STACK..."),
    as_json: bool = typer.Option(False, "--json", help="print diagnostics as a JSON list"),
    var: List[str] = var_option(),
    var_file: List[str] = var_file_option(),
) -> None:
    """Check stack files offline: schema, references, InfiniBand eligibility, GPUs, MPI, launchers."""
    from infra_cli.validate.engine import validate_files

    diagnostics = validate_files(stacks)
    if as_json:
        print(json.dumps([d.to_json() for d in diagnostics], indent=2))
    else:
        print_diagnostics(diagnostics)
        errors = sum(d.severity == "error" for d in diagnostics)
        warnings = sum(d.severity == "warning" for d in diagnostics)
        verdict = "invalid" if errors else "valid"
        print(f"{len(stacks)} stack file(s) {verdict}: {errors} error(s), {warnings} warning(s)", file=sys.stderr)
    raise typer.Exit(EXIT_ERROR if has_errors(diagnostics) else EXIT_OK)


def schema() -> None:
    """Print the JSON Schema of stack files (for editors' YAML language servers)."""
    from infra_cli.stack.schema import stack_json_schema

    print(json.dumps(stack_json_schema(), indent=2))


def register(app: typer.Typer) -> None:
    app.command(cls=Command)(validate)
    app.command(cls=Command)(schema)

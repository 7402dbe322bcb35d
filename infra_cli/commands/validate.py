"""`infra validate` and `infra schema`: offline, no Azure."""

import json
import sys
from pathlib import Path
from typing import List

import typer

from infra_cli.commands.cli import Command, VariablesCommand
from infra_cli.commands.errors import EXIT_ERROR, EXIT_OK
from infra_cli.commands.run import stack_inputs
from infra_cli.commands.terminal import print_diagnostics
from infra_cli.diagnostics import has_errors


# `infra validate --json`'s shape: {format_version, valid, error_count, warning_count, stack_count,
# variables_file_count, diagnostics: [{severity, rule, message, file, line, column, hint}]}; the minor version grows
# with an added key (1.1: the two counts), the major with a changed one
VALIDATE_FORMAT_VERSION = "1.1"


def validate(
    stacks: List[Path] = typer.Argument(..., help="stack files", metavar="STACK..."),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON: {format_version, valid, "
                                 "error_count, warning_count, stack_count, variables_file_count, diagnostics}"),
) -> None:
    """Check stack files offline: schema, references, InfiniBand eligibility, GPUs, MPI, launchers."""
    from infra_cli.validate.engine import validate_each

    judged = validate_each(stacks, stack_inputs(unset_unknown=True))
    diagnostics = judged.diagnostics
    errors = sum(d.severity == "error" for d in diagnostics)
    warnings = sum(d.severity == "warning" for d in diagnostics)
    if as_json:   # the shape of `terraform validate -json`, versioned as plan's JSON is
        print(json.dumps({"format_version": VALIDATE_FORMAT_VERSION, "valid": not errors, "error_count": errors,
                          "warning_count": warnings, "stack_count": judged.stacks,
                          "variables_file_count": judged.variables_files,
                          "diagnostics": [d.to_json() for d in diagnostics]}, indent=2))
    else:
        print_diagnostics(diagnostics)
        verdict = "invalid" if errors else "valid"
        print(f"{_files(judged.stacks, judged.variables_files)} {verdict}: {errors} error(s), {warnings} warning(s)",
              file=sys.stderr)
    raise typer.Exit(EXIT_ERROR if has_errors(diagnostics) else EXIT_OK)


def _files(stacks: int, variables_files: int) -> str:
    """"2 stack file(s)", "2 stack file(s) and 1 variables file(s)": a variables file (the hook passes them with the
    stacks) is not counted as a stack."""
    said = [f"{stacks} stack file(s)"] if stacks or not variables_files else []
    return " and ".join(said + ([f"{variables_files} variables file(s)"] if variables_files else []))


def schema() -> None:
    """Print the JSON Schema of stack files (for editors' YAML language servers)."""
    from infra_cli.stack.schema import stack_json_schema

    print(json.dumps(stack_json_schema(), indent=2))


def register(app: typer.Typer) -> None:
    app.command(cls=VariablesCommand)(validate)
    app.command(cls=Command)(schema)

"""`infra graph` and `infra render`: the stack written out as DOT, or as Azure ML CLI v2 files."""

import os
from pathlib import Path

import typer

from infra_cli.commands.cli import VariablesCommand
from infra_cli.commands.errors import fail
from infra_cli.commands.run import stack_inputs
from infra_cli.commands.terminal import print_diagnostics
from infra_cli.diagnostics import DiagnosticError


def graph(
    stack: Path = typer.Argument(..., metavar="STACK"),
) -> None:
    """Print the stack's resources and dependencies as Graphviz DOT (`infra graph S | dot -Tsvg > g.svg`)."""
    from infra_cli.plan.graph import stack_graph
    from infra_cli.stack.load import load_stack

    try:
        print(stack_graph(load_stack(stack, inputs=stack_inputs()).stack), end="")
    except DiagnosticError as exc:
        raise fail(exc.diagnostics)


def render(
    stack: Path = typer.Argument(..., metavar="STACK"),
    out: Path = typer.Option(..., "--out", metavar="DIR", help="directory to write Azure ML CLI v2 YAML and scripts into"),
    write_secrets: bool = typer.Option(False, "--write-secrets", help="write sensitive values (a sensitive map "
                                       "given whole, ${VAR} in a command, a SAS URL) in clear into job files of mode "
                                       "0600, with a warning, instead of refusing them"),
) -> None:
    """Write Azure ML CLI v2 YAML (az ml ... create -f) for each cluster, environment and smoke job.

    Several stacks may render into one --out: each removes only the files its own render wrote (listed in
    DIR/.infra-render.json, signed with INFRA_PLAN_KEY when set, else with a key of yours in
    $XDG_STATE_HOME/infra/render.key)."""
    from infra_cli.apply.files import render_stack
    from infra_cli.plan.planfile import plan_key

    try:
        written, diagnostics = render_stack(stack, out, write_secrets=write_secrets, plan_key=plan_key(os.environ),
                                         inputs=stack_inputs())
    except DiagnosticError as exc:
        raise fail(exc.diagnostics)
    print_diagnostics(diagnostics)
    for path in written:
        print(path)


def register(app: typer.Typer) -> None:
    app.command(cls=VariablesCommand)(graph)
    app.command(cls=VariablesCommand)(render)

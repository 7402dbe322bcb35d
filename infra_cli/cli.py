"""The command line: parse, call one engine function, render, map to an exit code.

Imports stay lazy: commands that do not touch Azure (--help, validate, schema, skus, image check) must
not import azure.*, torch, jinja2 or the emulator.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer
from typer.core import TyperGroup

from infra_cli.diagnostics import Diagnostic, DiagnosticError, has_errors

EXIT_OK, EXIT_ERROR, EXIT_CHANGES = 0, 1, 2
DEBUG_VARIABLE = "INFRA_DEBUG"  # =1: print the traceback of an error as well


def _azure_error(exc: BaseException) -> bool:
    """Whether the SDKs raised it: every azure-core and azure-ai-ml error derives from AzureError.
    Only checked when azure.core is already imported (an offline command never imports it)."""
    module = sys.modules.get("azure.core.exceptions")
    return module is not None and isinstance(exc, module.AzureError)


def report_error(exc: BaseException) -> int:
    """The one place an exception that escaped a command is reported: what it is, in one line, no traceback
    (unless INFRA_DEBUG=1). Azure's refusals, local OS errors and bugs each read as what they are."""
    import os

    if os.environ.get(DEBUG_VARIABLE, "") not in ("", "0"):
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    if isinstance(exc, DiagnosticError):
        print_diagnostics(exc.diagnostics)
    elif _azure_error(exc):
        from infra_cli.azure.errors import describe_azure_error  # no escape codes; headline, then details

        print(f"error: Azure refused: {describe_azure_error(exc)}", file=sys.stderr)
    elif isinstance(exc, OSError):  # local: a file, a directory, a socket on this machine
        what = exc.strerror or str(exc) or type(exc).__name__
        where = f": {exc.filename}" if exc.filename else ""
        print(f"error: {type(exc).__name__}: {what}{where}", file=sys.stderr)
    else:
        text = (str(exc).strip().splitlines() or [""])[0][:300]
        print(f"error: internal error (a bug in infra): {type(exc).__name__}{': ' + text if text else ''}\n"
              f"  hint: run again with {DEBUG_VARIABLE}=1 to see the traceback, and report it", file=sys.stderr)
    return EXIT_ERROR


class _ReportingGroup(TyperGroup):
    """Every command runs inside this: an exception no command handled becomes one line (report_error)."""

    def invoke(self, ctx):
        # Typer carries its own copy of click: its exception classes are found through Typer's public ones.
        click_exception = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, click_exception):
            raise
        except Exception as exc:
            raise typer.Exit(report_error(exc)) from None


app = typer.Typer(
    cls=_ReportingGroup,
    name="infra",
    help="Plan, apply and prove distributed GPU training infrastructure on Azure Machine Learning.",
    no_args_is_help=True,
    add_completion=True,   # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        from infra_cli import __version__

        print(f"infra v{__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _global_options(
    version: bool = typer.Option(False, "--version", "-version", callback=_print_version, is_eager=True,
                                 help="print the version and exit"),
) -> None:
    """Plan, apply and prove distributed GPU training infrastructure on Azure Machine Learning."""


def print_diagnostics(diagnostics: list[Diagnostic], stream=None) -> None:
    stream = stream or sys.stderr
    colour = stream.isatty()
    codes = {"error": "\033[31m", "warning": "\033[33m", "info": "\033[36m"}
    for d in diagnostics:
        text = d.format()
        if colour:
            text = text.replace(f"{d.severity}[", f"{codes.get(d.severity, '')}{d.severity}\033[0m[", 1)
        print(text, file=stream)


def fail(diagnostics: list[Diagnostic], as_json: bool = False) -> "typer.Exit":
    if as_json:
        print(json.dumps([d.to_json() for d in diagnostics], indent=2))
    else:
        print_diagnostics(diagnostics)
    return typer.Exit(EXIT_ERROR)


@app.command()
def validate(
    stacks: List[Path] = typer.Argument(..., help="stack files", metavar="STACK..."),
    as_json: bool = typer.Option(False, "--json", help="print diagnostics as a JSON list"),
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


@app.command()
def skus(
    location: Optional[str] = typer.Option(None, "--location", help="region (live availability needs --local or Azure)"),
    infiniband: bool = typer.Option(False, "--infiniband", help="only sizes whose InfiniBand NCCL/MPI can use"),
    as_json: bool = typer.Option(False, "--json"),
    local: bool = typer.Option(False, "--local", help="ask the local emulator for availability in --location"),
) -> None:
    """List VM sizes for distributed training from the catalog (validators/skus.yaml)."""
    from infra_cli.render_text import skus_table
    from infra_cli.validate.knowledge import checked_catalog

    try:
        catalog = checked_catalog()
    except DiagnosticError as exc:
        raise fail(exc.diagnostics, as_json)
    rows = [s for s in catalog if not infiniband or s.infiniband_eligible]
    available: dict[str, str] | None = None
    if location and local:
        from infra_cli.azure.preflight import sku_availability

        try:
            available = sku_availability(location, [s.name for s in rows], local=True)
        except DiagnosticError as exc:
            raise fail(exc.diagnostics, as_json)
    elif location:
        print_diagnostics([Diagnostic("warning", "skus.location-ignored",
                                      f"--location {location} needs --local to ask for availability; "
                                      "showing the catalog", hint="add --local")])
    if as_json:
        out = []
        for s in rows:
            row = s.to_json()
            if available is not None:
                row["availability"] = available.get(s.name.lower(), "not offered")
            out.append(row)
        print(json.dumps(out, indent=2))
    else:
        print(skus_table(rows, available))


@app.command()
def schema() -> None:
    """Print the JSON Schema of stack files (for editors' YAML language servers)."""
    from infra_cli.stack.schema import stack_json_schema

    print(json.dumps(stack_json_schema(), indent=2))


@app.command()
def graph(stack: Path = typer.Argument(..., metavar="STACK")) -> None:
    """Print the stack's resources and dependencies as Graphviz DOT (`infra graph S | dot -Tsvg > g.svg`)."""
    from infra_cli.plan.graph import stack_graph
    from infra_cli.stack.load import load_stack

    try:
        print(stack_graph(load_stack(stack).stack), end="")
    except DiagnosticError as exc:
        raise fail(exc.diagnostics)


@app.command()
def render(
    stack: Path = typer.Argument(..., metavar="STACK"),
    out: Path = typer.Option(..., "--out", help="directory to write Azure ML CLI v2 YAML and scripts into"),
) -> None:
    """Write Azure ML CLI v2 YAML (az ml ... create -f) for each cluster, environment and smoke job."""
    from infra_cli.render_files import render_stack

    try:
        written, diagnostics = render_stack(stack, out)
    except DiagnosticError as exc:
        raise fail(exc.diagnostics)
    print_diagnostics(diagnostics)
    for path in written:
        print(path)


def _register_subcommands() -> None:
    # Each sub-application lives beside its engine and imports only typer at module level.
    from infra_cli.emulator.command import emulator_app
    from infra_cli.image.command import image_app
    from infra_cli.lifecycle_commands import register as register_lifecycle
    from infra_cli.smoke.command import register as register_smoke

    app.add_typer(image_app, name="image")
    app.add_typer(emulator_app, name="emulator")
    register_lifecycle(app)
    register_smoke(app)


_register_subcommands()


def main() -> None:
    from infra_cli.azure.clients import forget_inherited_emulator_cloud

    # before anything imports azure.ai.ml, which reads it at import time (clients.py imports no azure module)
    forget_inherited_emulator_cloud()
    # Usage errors exit 1, as Terraform's do: click's default 2 would read as "changes present" to a CI
    # job running `infra plan --detailed-exitcode` with a mistyped option.
    # (Typer carries its own copy of click, so the class is found through the public BadParameter.)
    usage_error = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
    usage_error.exit_code = 1
    try:
        app(prog_name="infra")   # "infra" in usage and completion, also under python -m infra_cli
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)

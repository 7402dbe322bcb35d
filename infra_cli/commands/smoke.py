"""`infra smoke`: parse, run the stack's smoke jobs through the SDK, print verdicts, exit 0 only if all passed."""

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from infra_cli.commands.cli import StackCommand
from infra_cli.commands.errors import EXIT_ERROR, EXIT_OK, fail, smoke_interrupted
from infra_cli.commands.run import stack_inputs, this_run
from infra_cli.commands.terminal import print_diagnostics, progress_stream
from infra_cli.diagnostics import DiagnosticError


def smoke(
    stack: Path = typer.Argument(..., metavar="STACK"),
    distribution: Optional[List[str]] = typer.Option(
        None, "--distribution", metavar="NAME", help="only this distribution's smoke job (repeatable)"),
    as_json: bool = typer.Option(False, "--json", help="print the verdicts as JSON on stdout"),
    report: Optional[Path] = typer.Option(
        None, "--report", metavar="DIR", help="write report.html (busbw chart per distribution) and smoke.json here"),
) -> None:
    """Run the stack's smoke-test jobs (ranks, DDP replicas, all_reduce busbw, NCCL transport) and judge them."""
    from infra_cli.validate.engine import load_valid_stack

    try:
        loaded, warnings = load_valid_stack(stack, inputs=stack_inputs())
    except DiagnosticError as exc:
        raise fail(exc.diagnostics, as_json)
    print_diagnostics(warnings)
    # Progress goes to stderr when stdout carries JSON.
    stream = progress_stream(sys.stderr if as_json else sys.stdout)
    try:
        from infra_cli.commands.backend import build_provider
        from infra_cli.plan.engine import current_smoke_inputs, smoke_preflight
        from infra_cli.commands.views.smoke_progress import smoke_progress
        from infra_cli.smoke.run import SmokeInterrupted, run_smoke

        provider = build_provider(loaded.stack.workspace, local=this_run().local, anchor=stack)
        chosen = list(distribution or loaded.stack.distributions)
        missing = smoke_preflight(loaded, provider, chosen)
        if missing:   # nothing to run on: say what to apply, before any job is submitted
            raise DiagnosticError(missing)
        inputs = current_smoke_inputs(loaded, provider, chosen)
        verdicts = run_smoke(loaded, provider, inputs, list(distribution or []) or None,
                             emit=smoke_progress(stream))
    except SmokeInterrupted as exc:
        raise typer.Exit(smoke_interrupted(exc, str(stack)))
    except DiagnosticError as exc:
        raise fail(exc.diagnostics, as_json)
    # anything else (an SDK refusal, a local OS error, a bug) is reported by the CLI's one wrapper
    if as_json:
        print(json.dumps([v.to_json() for v in verdicts], indent=2))
    elif sys.stdout.isatty():   # bandwidth as a picture where a person reads it
        from infra_cli.commands.views.smoke_report import terminal_chart

        for v in verdicts:
            stream("\n" + terminal_chart(v))
    if report is not None:
        from infra_cli.commands.views.smoke_report import write_report

        stream(f"\nReport: {write_report(report, verdicts, loaded.stack.stack)}")
    if not verdicts:
        stream("no smoke jobs: the stack has no distribution with smoke enabled")
    passed, incomplete = sum(v.passed for v in verdicts), sum(bool(v.incomplete) for v in verdicts)
    stream(f"\nSmoke: {passed} of {len(verdicts)} passed" + (f", {incomplete} incomplete." if incomplete else "."))
    raise typer.Exit(EXIT_OK if passed == len(verdicts) else EXIT_ERROR)


class _SmokeCommand(StackCommand):
    local_help = "run on the local emulator instead of Azure"


def register(app: typer.Typer) -> None:
    app.command(cls=_SmokeCommand)(smoke)

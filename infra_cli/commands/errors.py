"""How a command ends: its exit codes, the diagnostics that stop it, and the one place an exception no command
handled becomes one line of text (report_error), Ctrl-C included (interrupted_message, smoke_interrupted)."""

from __future__ import annotations

import errno
import json
import os
import sys
import traceback
from typing import Any

import typer

from infra_cli.arguments import NextStep, RunArgs
from infra_cli.commands.hints import given_stack, rendered_diagnostic, step
from infra_cli.commands.run import RunRecord
from infra_cli.commands.terminal import print_diagnostics
from infra_cli.diagnostics import Diagnostic, DiagnosticError

EXIT_OK, EXIT_ERROR, EXIT_CHANGES = 0, 1, 2
EXIT_INTERRUPTED = 130   # Ctrl-C, as a shell reports a process ended by SIGINT (128 + 2)
DEBUG_VARIABLE = "INFRA_DEBUG"  # =1: print the traceback of an error as well


def interrupted_message(record: RunRecord | None) -> str:
    """The line a Ctrl-C that no command caught ends with: what was stopped and what it left (as the command last
    said it: commands/run.py interrupt_leaves)."""
    return f"Interrupted (Ctrl-C): infra stopped; {record.leaves if record is not None else 'nothing was changed'}."


def smoke_interrupted(exc: Any, stack: str) -> int:
    """Ctrl-C during smoke jobs (smoke/run.py SmokeInterrupted): what was stopped and what it left; the exit."""
    if not exc.submitted:
        stopped = "no smoke job had been submitted"
    else:
        stopped = f"the smoke job(s) not yet judged were canceled ({', '.join('smoke.' + d for d in exc.stopped)})"
    print(f"Interrupted (Ctrl-C): {stopped}. Their smokes stay pending ({step(NextStep(('infra', 'plan'), (stack,)))} "
          "shows them); the stack's clusters and environments were not changed by the smoke.", file=sys.stderr)
    return EXIT_INTERRUPTED


def fail(diagnostics: list[Diagnostic], as_json: bool = False) -> typer.Exit:
    """Print why a command cannot go on (JSON on stdout when asked), and the exit to raise."""
    if as_json:
        print(json.dumps([rendered_diagnostic(d).to_json() for d in diagnostics], indent=2))
    else:
        print_diagnostics(diagnostics)
    return typer.Exit(EXIT_ERROR)


def _azure_error(exc: BaseException) -> bool:
    """Whether the SDKs raised it: every azure-core and azure-ai-ml error derives from AzureError.
    Only checked when azure.core is already imported (an offline command never imports it)."""
    module = sys.modules.get("azure.core.exceptions")
    return module is not None and isinstance(exc, module.AzureError)


NO_CREDENTIAL = (
    "error: infra could not sign in to Azure: no credential was found (nothing was sent to Azure)\n"
    "  hint: sign in with `az login`, or set AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET for a\n"
    "        service principal; to try the stack without Azure, add --local\n"
    f"  {DEBUG_VARIABLE}=1 lists each credential DefaultAzureCredential tried and why it was unavailable")


def report_error(exc: BaseException, run: RunArgs | None = None) -> int:
    """The one place an exception that escaped a command is reported: what it is, in one line, no traceback
    (unless INFRA_DEBUG=1). Azure's refusals, local OS errors and bugs each read as what they are. `run`: the
    arguments of the command that raised it (root.py: its --var/--var-file left out, as they always were here)."""
    run = RunArgs() if run is None else run
    if os.environ.get(DEBUG_VARIABLE, "") not in ("", "0"):
        traceback.print_exception(exc, file=sys.stderr)
    lock = sys.modules.get("infra_cli.state.lock")   # loaded by every command that takes the lock
    if isinstance(exc, DiagnosticError):
        print_diagnostics(exc.diagnostics)
    elif lock is not None and isinstance(exc, lock.LockHeld):
        # another run holds the stack's lock (Terraform's "Error acquiring the state lock"): raised before any write
        info = exc.info
        unlock = NextStep(("infra", "force-unlock"), (info.lock_id, given_stack(run) or "STACK"))
        print(f"error: stack {exc.stack!r} is locked by {info.holder} (lock ID {info.lock_id}) since {info.since} "
              f"({info.operation}); nothing was changed.\n  hint: wait for it to finish; if that process is gone, "
              f"run {step(unlock, run)}", file=sys.stderr)
    elif _azure_error(exc):
        from infra_cli.azure.errors import describe_azure_error, is_sign_in_failure, retries_spent

        if is_sign_in_failure(exc):
            print(NO_CREDENTIAL, file=sys.stderr)
        else:  # no escape codes; headline, then details
            print(f"error: Azure refused: {describe_azure_error(exc)}", file=sys.stderr)
            if retries_spent(exc):   # throttled or failing: say it was not given up on at once, and what to do
                from infra_cli.azure.clients import DEFAULT_RETRY_TOTAL

                print(f"  hint: infra sent the request {1 + DEFAULT_RETRY_TOTAL} times, waiting between tries as "
                      "Azure's Retry-After asked (else longer each time); run the same command again later (what "
                      "was done stays done: the next plan shows what remains)", file=sys.stderr)
    elif isinstance(exc, OSError):  # local: a file, a directory, a socket on this machine
        what = exc.strerror or str(exc) or type(exc).__name__
        where = f": {exc.filename}" if exc.filename else ""
        print(f"error: {type(exc).__name__}: {what}{where}", file=sys.stderr)
        if exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
            print("  hint: the disk is full or the file is over its size limit (ulimit -f): free space and run the "
                  "command again", file=sys.stderr)
    else:
        text = (str(exc).strip().splitlines() or [""])[0][:300]
        print(f"error: internal error (a bug in infra): {type(exc).__name__}{': ' + text if text else ''}\n"
              f"  hint: run again with {DEBUG_VARIABLE}=1 to see the traceback, and report it", file=sys.stderr)
    return EXIT_ERROR



"""One run of infra: its arguments (infra_cli/arguments.py RunArgs, built once by commands/cli.py Command) and
what a Ctrl-C from now on would leave, held by the run itself (click's context object, made fresh for each
command line by commands/root.py), never by a module."""

from __future__ import annotations

from dataclasses import dataclass, field

from typer._click.globals import get_current_context

from infra_cli.arguments import RunArgs


@dataclass
class RunRecord:
    """What one command line carries while it runs: its parsed arguments, and what a Ctrl-C now would leave, as
    the command last said it (interrupt_leaves; root.py prints it)."""

    args: RunArgs = field(default_factory=RunArgs)
    leaves: str = "nothing was changed"


def run_record(ctx=None) -> RunRecord | None:
    """The record of the run `ctx` (default: the one running) belongs to; None outside a run."""
    ctx = ctx if ctx is not None else get_current_context(silent=True)
    obj = getattr(ctx, "obj", None)
    return obj if isinstance(obj, RunRecord) else None


def this_run() -> RunArgs:
    """The running command's arguments (RunArgs() outside a command: a test calling a view directly)."""
    record = run_record()
    return record.args if record is not None else RunArgs()


def interrupt_leaves(state: str) -> None:
    """Say what a Ctrl-C from now on would leave (Terraform says what it stopped and what state it left)."""
    record = run_record()
    if record is not None:
        record.leaves = state


def stack_inputs():
    """The running command's --var / --var-file as the stack loader takes them (stack/variables.py Inputs)."""
    from infra_cli.stack.variables import Inputs

    return Inputs(this_run().variables)

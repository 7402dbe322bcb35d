"""One run of infra: its arguments (infra_cli/arguments.py RunArgs, built once by commands/cli.py Command) and
what a Ctrl-C from now on would leave, held by the run itself (click's context object, made fresh for each
command line by commands/root.py), never by a module."""

from __future__ import annotations

from dataclasses import dataclass, field

from typer._click.globals import get_current_context

from infra_cli.arguments import NextStep, RunArgs
from infra_cli.diagnostics import says


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


# what a command that reads or writes only the state (output, state list, show, state rm, import, force-unlock)
# reads of a stack: its name and workspace (where its state is) and the environments' pinned versions (which
# version is read live); a variable nothing here is built from may stay unset (Terraform's `output` needs no
# variables). An engine adds what else it reads (plan/outputs.py output_needs, the resource `state rm` and
# `import` write: stack/variables.py needing).
READ_ONLY_NEEDS: tuple[tuple[str, ...], ...] = (("stack",), ("workspace",), ("environments", "*", "version"))


def stack_inputs(*, needs: tuple[tuple[str, ...] | str, ...] | None = None, unset_unknown: bool = False):
    """The running command's --var / --var-file as the stack loader takes them (stack/variables.py Inputs).
    `needs`: the stack paths a command that reads the state is built from (READ_ONLY_NEEDS): an unset variable
    none of them is built from is unknown, not an error. `unset_unknown`: every unset variable is unknown, with a
    warning (offline validate)."""
    from infra_cli.stack.variables import Inputs

    run = this_run()
    if needs:
        return Inputs(run.variables, unset_unknown=True, needed=needs,
                      command=says(NextStep(("infra", *run.command.split()))))
    return Inputs(run.variables, unset_unknown=unset_unknown)

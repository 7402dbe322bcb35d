"""Next steps as this run must take them: a command a message names, with the run's flags (RunArgs) added.

Next steps are data (infra_cli/arguments.py NextStep), in the commands' own messages and inside an engine's
diagnostics.Text; `step` renders one: `--local` on a local run (copied without it, it would target real Azure), and
the run's --var/--var-file where the step names the same stack (without them a `${var.env}` workspace is another
one); a sensitive --var is named, never repeated with its value. `rendered` renders every step of a Text, and an
az listing the local Azure cannot answer as the infra command that lists it there."""

from __future__ import annotations

import os
import shlex
from dataclasses import replace
from pathlib import Path

from infra_cli.arguments import NextStep, RunArgs
from infra_cli.commands.run import this_run
from infra_cli.diagnostics import Diagnostic, Text, words

# The commands that take --local (and, but for skus, the run's --var/--var-file); any other step is named as written
_TAKES_RUN_FLAGS = {("infra", "plan"), ("infra", "apply"), ("infra", "destroy"), ("infra", "import"),
                    ("infra", "force-unlock"), ("infra", "smoke"), ("infra", "state", "list"),
                    ("infra", "state", "rm"), ("infra", "skus")}
# The subcommands a run's --var/--var-file are not repeated on (skus reads no stack)
_NO_VARIABLES = ("skus",)


def given_stack(run: RunArgs) -> str | None:
    """The stack the run was given, as typed; for a plan file, the stack it was made from."""
    given = run.stack
    if given is None:
        return None
    from infra_cli.plan.planfile import is_plan_file, saved_stack_path

    if is_plan_file(Path(given)):   # read as `--local` reads it to find the project: bounded, never raising
        stack = saved_stack_path(Path(given))
        return str(stack) if stack is not None and str(stack) else None
    return given


def _same_file(word: str, path: str) -> bool:
    if word.startswith("-"):
        return False
    try:
        return word == path or os.path.realpath(word) == os.path.realpath(path)
    except (OSError, ValueError):
        return False


def _as_run(subcommand: str, args: list[str], run: RunArgs) -> tuple[str, str]:
    """A command (`infra SUBCOMMAND ARGS...`) as this run must run it: the flags to add, and a note of the
    sensitive --var left out (their names, never their values)."""
    added, note = "", ""
    if run.variables and subcommand not in _NO_VARIABLES and not {"--var", "--var-file"} & set(args) and \
            run.stack is not None and any(_same_file(arg, run.stack) for arg in args):
        from infra_cli.stack.source import declared_not_sensitive
        from infra_cli.stack.variables import command_line_words, left_out_of_command_line

        not_sensitive = declared_not_sensitive(run.stack)
        added += "".join(f" {shlex.quote(word)}" for word in command_line_words(run.variables, not_sensitive))
        left_out = left_out_of_command_line(run.variables, not_sensitive)
        note = f" (with {', '.join(f'--var {name}=...' for name in left_out)} again)" if left_out else ""
    if run.local and "--local" not in args:
        added += " --local"
    return added, note


def step(next_step: NextStep, run: RunArgs | None = None) -> str:
    """A next step as the user must run it now, in backquotes (with the note of a sensitive --var left out)."""
    run = this_run() if run is None else run
    if next_step.local_instead and run.local:
        stack = given_stack(run)
        if stack is not None:   # what lists it on the local Azure, for the stack this run was given
            next_step = NextStep(next_step.local_instead, (stack,))
    if next_step.command[:3] not in _TAKES_RUN_FLAGS and next_step.command[:2] not in _TAKES_RUN_FLAGS:
        return f"`{words(next_step)}`"
    added, note = _as_run(next_step.command[-1], list(next_step.args), run)
    return f"`{words(next_step)}{added}`{note}"


def step_words(next_step: NextStep, run: RunArgs | None = None) -> str:
    """A next step as a plain command line, without backquotes or note (a line that is only the command)."""
    run = this_run() if run is None else run
    return words(next_step) + _as_run(next_step.command[-1], list(next_step.args), run)[0]


def rendered(text: str, run: RunArgs | None = None) -> str:
    """`text` as this run must read it: each step a Text names rendered by `step`; any other text as it is."""
    if not isinstance(text, Text):
        return text
    run = this_run() if run is None else run
    return "".join(part if isinstance(part, str) else step(part, run) for part in text.parts)


def rendered_diagnostic(d: Diagnostic, run: RunArgs | None = None) -> Diagnostic:
    """A diagnostic with the steps of its message and hint rendered for this run."""
    if not isinstance(d.message, Text) and not isinstance(d.hint, Text):
        return d
    run = this_run() if run is None else run
    return replace(d, message=rendered(d.message, run), hint=d.hint and rendered(d.hint, run))

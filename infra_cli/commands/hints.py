"""Next steps as this run must take them: a command a message names, with the run's flags (RunArgs) added.

The commands' own next steps are data (infra_cli/arguments.py NextStep) rendered by `step`: `--local` on a local
run (copied without it, it would target real Azure), and the run's --var/--var-file where the step names the same
stack (without them a `${var.env}` workspace is another one); a sensitive --var is named, never repeated with its
value. The engines' free-text diagnostics still name commands in backquotes: `for_this_run` adds the same flags
to each (see docs/ARCHITECTURE.md for what is left to move to structured next steps)."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import replace
from pathlib import Path

from infra_cli.arguments import NextStep, RunArgs
from infra_cli.commands.run import this_run
from infra_cli.diagnostics import Diagnostic

# The commands that take --local, as a message names them in backquotes: `infra import cluster.gpu gpu STACK`.
_COMMAND_NAMED = re.compile(r"`(infra (?:plan|apply|destroy|import|force-unlock|smoke|state list|state rm|skus)\b[^`]*)`")
# The subcommands a run's --var/--var-file are repeated on (skus reads no stack)
_NO_VARIABLES = ("skus",)


# What the engines name to list what Azure holds, which the az CLI cannot do on the local Azure (the emulator
# refuses its tokens): on a local run, what infra lists there instead, for the stack this run was given. A key
# matches the az command with whatever arguments follow it (`az ml compute show --name X`), except a registry's
# listing (`--registry-name R`): the stack's state holds none of a registry's environments, and plan names that
# listing only for a registry with more names than its hint says (Azure's azureml: its names are public); the local
# Azure's registry has every name said in the hint (plan/engine.py NAMES_SAID), so it stays as written.
_LOCAL_INSTEAD = {"az ml compute list": "infra state list {stack}", "az ml compute show": "infra state list {stack}",
                  "az ml environment list": "infra state list {stack}"}
_AZ_NAMED = re.compile("`(" + "|".join(map(re.escape, _LOCAL_INSTEAD)) + r")(?: (?![^`]*--registry-name)[^`]*)?`")


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
    added, note = _as_run(next_step.command[-1], list(next_step.args), run)
    return f"`{_words(next_step)}{added}`{note}"


def step_words(next_step: NextStep, run: RunArgs | None = None) -> str:
    """A next step as a plain command line, without backquotes or note (a line that is only the command)."""
    run = this_run() if run is None else run
    return _words(next_step) + _as_run(next_step.command[-1], list(next_step.args), run)[0]


def _words(next_step: NextStep) -> str:
    return " ".join([*next_step.command, *(shlex.quote(a) for a in next_step.args)])


def for_this_run(text: str, run: RunArgs | None = None) -> str:
    """`text` (an engine's free text) with every command it names in backquotes as the user must run it now, as
    `step` renders a NextStep."""
    run = this_run() if run is None else run
    if not run.local and not run.variables:
        return text
    stack = given_stack(run) if run.local and _AZ_NAMED.search(text) else None
    if stack is not None:
        text = _AZ_NAMED.sub(lambda m: f"`{_LOCAL_INSTEAD[m.group(1)].format(stack=shlex.quote(stack))}`", text)

    def as_run(m: re.Match) -> str:
        command = m.group(1)
        words = command.split()
        added, note = _as_run(words[1], words[2:], run)
        return f"`{command}{added}`{note}"

    return _COMMAND_NAMED.sub(as_run, text)


def for_this_run_diagnostic(d: Diagnostic, run: RunArgs | None = None) -> Diagnostic:
    run = this_run() if run is None else run
    if not run.local and not run.variables:
        return d
    return replace(d, message=for_this_run(d.message, run), hint=d.hint and for_this_run(d.hint, run))

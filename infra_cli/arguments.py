"""A run's arguments, parsed once, as one typed value (as Terraform's internal/command/arguments): what the
command line said, handed down to the engines and to the views. The commands build it (commands/cli.py
Command.invoke); the engines take from it what they need (the variable inputs, targets, replace, parallelism)
as plain arguments, and the views render next steps with it (commands/hints.py).

A next step is data, never text with a command inside: `NextStep(("infra", "apply"), ("plan.bin",))`; a message
names it inside a diagnostics.Text. The view that prints it adds the run's flags (`--local`, the run's
`--var`/`--var-file` where it names the same stack, a sensitive `--var` named without its value).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

OUTPUT_FORMATS = ("text", "json", "markdown")


@dataclass(frozen=True)
class VarInput:
    """One `--var NAME=VALUE` (kind "var") or `--var-file FILE` (kind "var-file") as written."""

    kind: str
    text: str


@dataclass(frozen=True)
class RunArgs:
    """One run's command line, typed. `stack`: the stack (or plan file, or source) as typed; `variables`: the
    --var and --var-file options in their command-line order (Terraform's precedence is that order across
    both options)."""

    command: str = ""
    stack: str | None = None
    local: bool = False
    variables: tuple[VarInput, ...] = ()
    targets: tuple[str, ...] = ()
    replace: tuple[str, ...] = ()
    parallelism: int | None = None
    output: str = "text"   # one of OUTPUT_FORMATS
    no_color: bool = False   # -no-color: no colour on the terminal either (commands/terminal.py colour_for)

    def without_variables(self) -> RunArgs:
        """The same run, its --var/--var-file left out (what a step taken after the command names)."""
        return replace(self, variables=())


@dataclass(frozen=True)
class NextStep:
    """A command a message tells the user to run: its words as data. `command`: the program and subcommand
    (`("infra", "plan")`); `args`: its arguments as the engine knows them. The view adds the run's flags."""

    command: tuple[str, ...]
    args: tuple[str, ...] = ()
    # An az command the local Azure cannot answer (the emulator refuses the az CLI's tokens): the infra command
    # that lists the same there, for the run's stack, named instead on a local run: ("infra", "state", "list").
    local_instead: tuple[str, ...] = ()

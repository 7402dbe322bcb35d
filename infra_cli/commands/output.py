"""What every command shares: exit codes, diagnostics on the terminal, progress lines, and the one wrapper
that turns an exception no command handled into one line of text."""

from __future__ import annotations

import difflib
import errno
import json
import os
import re
import shlex
import sys
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from infra_cli.commands import params
from infra_cli.diagnostics import Diagnostic, DiagnosticError

EXIT_OK, EXIT_ERROR, EXIT_CHANGES = 0, 1, 2
EXIT_INTERRUPTED = 130   # Ctrl-C, as a shell reports a process ended by SIGINT (128 + 2)
DEBUG_VARIABLE = "INFRA_DEBUG"  # =1: print the traceback of an error as well
_COLOURS = {"error": "\033[31m", "warning": "\033[33m", "info": "\033[36m"}


class _Run:
    """What a view must know of the command line that started this run (Terraform's views are made with the
    command's arguments): whether it was --local, so every command a message names is one the user can copy."""

    local = False
    # the stack (or plan file) this run was given, when it was given --var/--var-file: a command a message names
    # for the same stack repeats them (stack.variables.command_line_words)
    stack: str | None = None
    # the stack (or plan file) this run was given, as typed: what a local run names instead of an az command
    given: str | None = None
    # what a Ctrl-C now would leave, as the command last said it (interrupt_leaves); main() prints it
    interrupt_leaves = "nothing was changed"


def interrupt_leaves(state: str) -> None:
    """Say what a Ctrl-C from now on would leave (Terraform says what it stopped and what state it left)."""
    _Run.interrupt_leaves = state


def interrupted_message() -> str:
    """The line a Ctrl-C that no command caught ends with: what was stopped and what it left."""
    return f"Interrupted (Ctrl-C): infra stopped; {for_this_run(_Run.interrupt_leaves)}."


def smoke_interrupted(exc: Any, stack: str) -> int:
    """Ctrl-C during smoke jobs (smoke/run.py SmokeInterrupted): what was stopped and what it left; the exit."""
    if not exc.submitted:
        stopped = "no smoke job had been submitted"
    else:
        stopped = f"the smoke job(s) not yet judged were canceled ({', '.join('smoke.' + d for d in exc.stopped)})"
    print(for_this_run(f"Interrupted (Ctrl-C): {stopped}. Their smokes stay pending (`infra plan {stack}` shows "
                       "them); the stack's clusters and environments were not changed by the smoke."),
          file=sys.stderr)
    return EXIT_INTERRUPTED


def terraform_spellings(options: list[Any], args: list[str], *, group: bool) -> list[str]:
    """`args` with Terraform's single-dash spelling of every long option written as click reads it: `-out=p.plan`
    -> `--out=p.plan`, `-json` -> `--json`, `-parallelism 4` -> `--parallelism 4` (Terraform's flag package
    takes one dash or two alike: https://pkg.go.dev/flag). Only the long names of this command's own options are
    rewritten; a value an option takes is never read as an option (`--target -x`), nor anything after `--`; a
    group stops at its first argument, the subcommand, whose own options are its to read."""
    longs: dict[str, Any] = {}
    shorts: dict[str, Any] = {}
    for option in options:
        for name in [*getattr(option, "opts", ()), *getattr(option, "secondary_opts", ())]:
            (longs if name.startswith("--") else shorts)[name] = option
    out: list[str] = []
    takes_value = False
    for i, arg in enumerate(args):
        if takes_value:
            out.append(arg)
            takes_value = False
            continue
        if arg == "--" or (group and not arg.startswith("-")):
            return out + args[i:]
        if arg.startswith("-") and not arg.startswith("--") and len(arg) > 2 and "-" + arg.split("=", 1)[0] in longs:
            arg = "-" + arg
        name = arg.split("=", 1)[0]
        option = longs.get(name) if arg.startswith("--") else shorts.get(arg[:2]) if len(arg) >= 2 else None
        if option is not None and "=" not in arg and not (option.is_flag or option.count) and \
                (arg.startswith("--") or len(arg) == 2):
            takes_value = True   # the next word is its value (a short option's may be joined: -rnccl)
        out.append(arg)
    return out


def close_options(typed: str, options: list[Any]) -> list[str]:
    """The long options `typed` (an unknown option) may have meant: a misspelling of one (difflib's ratio of
    the bare names at least 0.75) or the start of one (3 letters or more). Click's own suggestion compares
    with the dashes included, so `--bogus` was offered `--out`."""
    bare = typed.lstrip("-").split("=", 1)[0]
    names = [n for o in options for n in (*getattr(o, "opts", ()), *getattr(o, "secondary_opts", ()))
             if n.startswith("--")]
    out = [n for n in names if len(bare) >= 3 and n[2:].startswith(bare)]
    out += [n for n in difflib.get_close_matches(bare, [n[2:] for n in names], n=3, cutoff=0.75)
            for n in ["--" + n] if n not in out]
    return out


# click's UsageError, as typer carries its own copy of click (found through the public BadParameter)
_USAGE_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


def _parse(command: Any, parse: Any, ctx: Any, args: list[str], *, group: bool) -> list[str]:
    """What Command and Group read their options with: plain values without pydantic (params.py says why),
    Terraform's single-dash spellings (terraform_spellings), and only close suggestions for an unknown one."""
    options = command.get_params(ctx)
    params.install(options)
    try:
        return parse(ctx, terraform_spellings(options, list(args), group=group))
    except _USAGE_ERROR as exc:
        if type(exc).__name__ == "NoSuchOption":
            # `-bogus` is read by click as the short option -b: name the word as it was typed
            typed = next((a.split("=", 1)[0] for a in args if len(exc.option_name) == 2 and
                          a.startswith(exc.option_name) and len(a) > 2 and not a.startswith("--")), None)
            if typed:
                exc.option_name, exc.message = typed, f"No such option: {typed}"
            exc.possibilities = close_options(exc.option_name, options)
        raise


class Command(TyperCommand):
    """Usage lines as Terraform and POSIX utilities write them: `infra plan [OPTIONS] STACK`, where typer
    writes `{STACK}` for a required argument. Every command registers with `app.command(cls=Command)`."""

    def invoke(self, ctx):
        _Run.local = bool(ctx.params.get("local"))
        given = ctx.params.get("stack") or ctx.params.get("source") or ctx.params.get("target")
        _Run.given = str(given) if given is not None else None
        if _VARIABLE_INPUTS not in ctx.meta:
            return super().invoke(ctx)
        # a command that loads a stack: its --var / --var-file, in order, for this run only (a test may run
        # several commands in one process)
        from infra_cli.stack.variables import VarInput, set_command_line

        _Run.stack = str(given) if given is not None and ctx.meta[_VARIABLE_INPUTS] else None
        set_command_line([VarInput(kind, text) for kind, text in ctx.meta[_VARIABLE_INPUTS]])
        try:
            return super().invoke(ctx)
        finally:
            set_command_line([])
            _Run.stack = None

    def make_parser(self, ctx):
        """A parser that also keeps the --var and --var-file values in the order they were written: Terraform's
        precedence is that order across both options, which click's per-option lists lose."""
        parser = super().make_parser(ctx)
        if not any(p.name in _VARIABLE_KINDS for p in self.get_params(ctx)):
            return parser
        parse = parser.parse_args

        def parse_args(args):
            opts, largs, order = parse(args=args)
            left = {name: list(opts.get(name) or []) for name in _VARIABLE_KINDS}
            ctx.meta[_VARIABLE_INPUTS] = [(_VARIABLE_KINDS[p.name], left[p.name].pop(0))
                                          for p in order if p.name in left and left[p.name]]
            return opts, largs, order

        parser.parse_args = parse_args
        return parser

    def collect_usage_pieces(self, ctx) -> list[str]:
        return [_plain_usage(piece) for piece in super().collect_usage_pieces(ctx)]

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        return _parse(self, super().parse_args, ctx, args, group=False)


_VARIABLE_KINDS = {"var": "var", "var_file": "var-file"}
_VARIABLE_INPUTS = "infra.variable_inputs"


def var_option():
    """`--var NAME=VALUE` (`-var`) on every command that loads a stack (read by Command, not the command)."""
    return typer.Option([], "--var", "-var", metavar="NAME=VALUE", expose_value=False,
                        help="set a stack variable (repeatable; with --var-file, the later one wins)")


def var_file_option():
    return typer.Option([], "--var-file", "-var-file", metavar="FILE", expose_value=False,
                        help="set stack variables from a YAML or JSON file of NAME: VALUE (repeatable)")


class Group(TyperGroup):
    """A group of commands (the root, `image`, `state`, `emulator`): its options are read as a Command's."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        return _parse(self, super().parse_args, ctx, args, group=True)


def _plain_usage(piece: str) -> str:
    """"{STACK}" -> "STACK"; "{STACK...}..." -> "STACK..."; anything else as it is."""
    m = re.fullmatch(r"\{(.+?)\}(\.\.\.)?", piece)
    if m is None:
        return piece
    name, repeated = m.groups()
    return name + ("..." if repeated and not name.endswith("...") else "")


# The commands that take --local, as a message names them in backquotes: `infra import cluster.gpu gpu STACK`.
_COMMAND_NAMED = re.compile(r"`(infra (?:plan|apply|destroy|import|force-unlock|smoke|state list|state rm|skus)\b[^`]*)`")


# What the engines name to list what Azure holds, which the az CLI cannot do on the local Azure (the emulator
# refuses its tokens): on a local run, what infra lists there instead, for the stack this run was given. A key
# matches the az command with whatever arguments follow it (`az ml compute show --name X`), except a registry's
# listing (`--registry-name R`): the stack's state holds none of a registry's environments, and plan names that
# listing only for a registry with more names than its hint says (Azure's azureml: its names are public); the local
# Azure's registry has every name said in the hint (plan/engine.py NAMES_SAID), so it stays as written.
_LOCAL_INSTEAD = {"az ml compute list": "infra state list {stack}", "az ml compute show": "infra state list {stack}",
                  "az ml environment list": "infra state list {stack}"}
_AZ_NAMED = re.compile("`(" + "|".join(map(re.escape, _LOCAL_INSTEAD)) + r")(?: (?![^`]*--registry-name)[^`]*)?`")


def _given_stack() -> str | None:
    """The stack this run was given, as typed; for a plan file, the stack it was made from."""
    given = _Run.given
    if given is None:
        return None
    from infra_cli.plan.planfile import is_plan_file, saved_stack_path

    if is_plan_file(Path(given)):   # read as `--local` reads it to find the project: bounded, never raising
        stack = saved_stack_path(Path(given))
        return str(stack) if stack is not None and str(stack) else None
    return given


def local_flag() -> str:
    """" --local" when this run was local (a command named for the user to run must target the same Azure)."""
    return " --local" if _Run.local else ""


def for_this_run(text: str) -> str:
    """`text` with every command it names in backquotes as the user must run it now: with --local on a local
    run (copied without it, it would target real Azure), and with this run's --var/--var-file where it names
    the same stack (without them a `${var.env}` workspace is another one). The engines name commands without
    knowing how they were run; this one view adds what only the command line knows."""
    if not _Run.local and _Run.stack is None:
        return text
    stack = _given_stack() if _Run.local and _AZ_NAMED.search(text) else None
    if stack is not None:
        text = _AZ_NAMED.sub(lambda m: f"`{_LOCAL_INSTEAD[m.group(1)].format(stack=shlex.quote(stack))}`", text)

    def as_run(m: re.Match) -> str:
        command, note = m.group(1), ""
        words = command.split()
        if _Run.stack is not None and words[1] != "skus" and not {"--var", "--var-file"} & set(words) and \
                any(_same_file(word, _Run.stack) for word in words[2:]):
            from infra_cli.stack.variables import command_line_words, left_out_of_command_line

            command += "".join(f" {shlex.quote(word)}" for word in command_line_words())
            left_out = left_out_of_command_line()   # a sensitive value is named, never repeated
            note = f" (with {', '.join(f'--var {name}=...' for name in left_out)} again)" if left_out else ""
        if _Run.local and "--local" not in words:
            command += " --local"
        return f"`{command}`{note}"

    return _COMMAND_NAMED.sub(as_run, text)


def _same_file(word: str, path: str) -> bool:
    if word.startswith("-"):
        return False
    try:
        return word == path or os.path.realpath(word) == os.path.realpath(path)
    except (OSError, ValueError):
        return False


def for_this_run_diagnostic(d: Diagnostic) -> Diagnostic:
    if not _Run.local and _Run.stack is None:
        return d
    return replace(d, message=for_this_run(d.message), hint=d.hint and for_this_run(d.hint))


def colour_for(stream) -> bool:
    """Colour (and live redrawing) only on a terminal that wants it: NO_COLOR set to anything
    (https://no-color.org) or TERM=dumb (Emacs shells, some CI logs) turns it off, as Terraform's -no-color does."""
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def print_diagnostics(diagnostics: list[Diagnostic], stream=None) -> None:
    stream = stream or sys.stderr
    colour = colour_for(stream)
    for d in diagnostics:
        d = for_this_run_diagnostic(d)
        text = d.format()
        if colour:
            text = text.replace(f"{d.severity}[", f"{_COLOURS.get(d.severity, '')}{d.severity}\033[0m[", 1)
        print(text, file=stream)


def fail(diagnostics: list[Diagnostic], as_json: bool = False) -> typer.Exit:
    """Print why a command cannot go on (JSON on stdout when asked), and the exit to raise."""
    if as_json:
        print(json.dumps([for_this_run_diagnostic(d).to_json() for d in diagnostics], indent=2))
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


def report_error(exc: BaseException) -> int:
    """The one place an exception that escaped a command is reported: what it is, in one line, no traceback
    (unless INFRA_DEBUG=1). Azure's refusals, local OS errors and bugs each read as what they are."""
    if os.environ.get(DEBUG_VARIABLE, "") not in ("", "0"):
        traceback.print_exception(exc, file=sys.stderr)
    lock = sys.modules.get("infra_cli.state.lock")   # loaded by every command that takes the lock
    if isinstance(exc, DiagnosticError):
        print_diagnostics(exc.diagnostics)
    elif lock is not None and isinstance(exc, lock.LockHeld):
        # another run holds the stack's lock (Terraform's "Error acquiring the state lock"): raised before any write
        info, stack = exc.info, _given_stack() or "STACK"
        print(for_this_run(f"error: stack {exc.stack!r} is locked by {info.holder} (lock ID {info.lock_id}) since "
                           f"{info.since} ({info.operation}); nothing was changed.\n  hint: wait for it to finish; if "
                           f"that process is gone, run `infra force-unlock {info.lock_id} {shlex.quote(stack)}`"),
              file=sys.stderr)
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


def progress_stream(stream):
    """A line of an engine's progress, written at once (a pipe would hold it back until the end) and with the
    commands it names as this run needs them (for_this_run)."""
    def write(line: str) -> None:
        print(for_this_run(line), file=stream, flush=True)

    return write


class Progress:
    """Live lines per resource on a terminal (rich); one plain line per change of state otherwise."""

    def __init__(self):
        self.tty = colour_for(sys.stdout)
        self.rows: dict[str, tuple[str, str, float]] = {}
        self.live: Any = None

    def __enter__(self):
        if self.tty:
            from rich.live import Live

            self.live = Live(self._table(), refresh_per_second=4, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc):
        if self.live is not None:
            self.live.update(self._table())
            self.live.__exit__(*exc)

    def _table(self):
        from rich.table import Table

        table = Table.grid(padding=(0, 2))
        for address, (phase, text, elapsed) in self.rows.items():
            mark = {"done": "[green]✓[/]", "failed": "[red]✗[/]", "skipped": "[yellow]-[/]"}.get(phase, "[cyan]…[/]")
            table.add_row(mark, address, text, f"{elapsed:5.1f}s")
        return table

    def __call__(self, event) -> None:
        if self.live is not None:
            self.rows[event.address] = (event.phase, event.text, event.elapsed_s)
            self.live.update(self._table())
        elif self.rows.get(event.address, ("", "", 0.0))[1] != event.text:  # one line per change of state
            self.rows[event.address] = (event.phase, event.text, event.elapsed_s)
            tail = f" [{event.elapsed_s:.1f}s]" if event.phase in ("done", "failed") else ""
            # an event of the whole run (Ctrl-C) has no address: its text alone
            print(f"{event.address}: {event.text}{tail}" if event.address else event.text, flush=True)

"""The command line as click reads it, for every command: Terraform's single-dash spellings, close suggestions for
an unknown option, usage lines as POSIX writes them, and the run's arguments parsed once into one typed value
(infra_cli/arguments.py RunArgs), --var and --var-file in the order they were written."""

from __future__ import annotations

import difflib
import functools
import re
from typing import Any, List

import typer
from typer.core import TyperCommand, TyperGroup

from infra_cli.arguments import RunArgs, VarInput
from infra_cli.commands import params
from infra_cli.commands.run import RunRecord, run_record

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


# click's UsageError, as typer carries its own copy of click (found through the public BadParameter); typed
# Any: its attributes (option_name, possibilities, exit_code) are click's, read and set as click defines them
USAGE_ERROR: type[Any] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


def _parse(command: Any, parse: Any, ctx: Any, args: list[str], *, group: bool) -> list[str]:
    """What Command and Group read their options with: plain values without pydantic (params.py says why),
    Terraform's single-dash spellings (terraform_spellings), and only close suggestions for an unknown one."""
    options = command.get_params(ctx)
    params.install(options)
    try:
        return parse(ctx, terraform_spellings(options, list(args), group=group))
    except USAGE_ERROR as exc:
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
    writes `{STACK}` for a required argument. Every command registers with `app.command(cls=Command)` (a command
    that loads a stack with StackCommand or VariablesCommand, which add the shared options)."""

    def invoke(self, ctx):
        """The run's arguments, parsed once (run_args), on the run's record: the views render next steps with them."""
        record = run_record(ctx)
        if record is None:   # a command invoked without the root group (a test): a record of its own
            record = ctx.obj = RunRecord()
        record.args = run_args(ctx)
        return super().invoke(ctx)

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


# A group's Terraform commands that infra spells otherwise (the root's are commands/root.py's _TERRAFORM_ONLY):
# "No such command" alone leaves a Terraform user nowhere.
_ELSEWHERE = {
    ("state", "show"): "`infra show STACK` prints every resource the stack owns in Azure with its live attributes "
                       "(`--json` as `terraform show -json`); `infra state list STACK` lists their addresses",
}


def no_color_option():
    """`-no-color`: plain text on a terminal too. Every command that prints a diagnostic takes it, as Terraform's
    meta.process strips it from every command's arguments
    (https://github.com/hashicorp/terraform/blob/main/internal/command/meta.go); tests/test_first_week_third_walk.py
    holds each command to it. The run's arguments carry it (RunArgs.no_color), commands/terminal.py colour_for
    reads it."""
    return typer.Option(False, "--no-color", expose_value=False, callback=_keep,
                        help="no colour, even on a terminal (as NO_COLOR=1 or TERM=dumb)")


LOCAL_HELP = "use the local emulator instead of Azure"
_SHARED = "infra.shared_options"


def _keep(ctx: typer.Context, param: typer.CallbackParam, value: bool) -> bool:
    """Keep a shared flag's value for run_args: the command reads it from the run (this_run()), not a parameter."""
    ctx.meta.setdefault(_SHARED, {})[param.name] = value
    return value


def local_option(help: str = LOCAL_HELP):
    return typer.Option(False, "--local", expose_value=False, callback=_keep, help=help)


@functools.cache
def shared_options(local_help: str | None) -> tuple[Any, ...]:
    """The one declaration of the options every command that loads a stack takes, in --help's order: --local
    (unless `local_help` is None), -no-color, --var, --var-file, as click parameters typer builds (so they read
    and print as any typer option). StackCommand appends them to each such command; the objects are shared."""
    def declared(local: bool = local_option(local_help or LOCAL_HELP), no_color: bool = no_color_option(),
                 var: List[str] = var_option(), var_file: List[str] = var_file_option()) -> None:
        """The template the shared options are read from."""

    template = typer.Typer(add_completion=False)
    template.command()(declared)
    made = typer.main.get_command(template).params
    return tuple(p for p in made if local_help is not None or p.name != "local")


class StackCommand(Command):
    """A command that loads a stack: it takes the shared options (shared_options) without declaring them; it reads
    them from the run (commands/run.py this_run(): .local, .no_color, .variables). `local_help`: --local's help
    for this command, None for a command with no --local (subclass to change it)."""

    local_help: str | None = LOCAL_HELP

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.params.extend(shared_options(self.local_help))


class VariablesCommand(StackCommand):
    """A command that reads a stack file but no cloud (validate, graph, render): -no-color, --var, --var-file."""

    local_help = None


class Group(TyperGroup):
    """A group of commands (the root, `image`, `state`, `emulator`): its options are read as a Command's."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        return _parse(self, super().parse_args, ctx, args, group=True)

    def resolve_command(self, ctx, args):
        said = _ELSEWHERE.get((ctx.info_name, args[0])) if args and ctx.parent is not None else None
        if said and self.get_command(ctx, args[0]) is None:
            ctx.fail(f"No such command '{args[0]}': {said}.")
        return super().resolve_command(ctx, args)


def _plain_usage(piece: str) -> str:
    """"{STACK}" -> "STACK"; "{STACK...}..." -> "STACK..."; anything else as it is."""
    m = re.fullmatch(r"\{(.+?)\}(\.\.\.)?", piece)
    if m is None:
        return piece
    name, repeated = m.groups()
    return name + ("..." if repeated and not name.endswith("...") else "")


def command_line(ctx) -> dict[str, Any]:
    """What the command line said, by parameter name: the command's own parameters and the shared options'."""
    return {**ctx.meta.get(_SHARED, {}), **ctx.params}   # skus's own --local is a parameter


def run_args(ctx) -> RunArgs:
    """The typed value of this command line: what its options and arguments said, --var/--var-file in order.
    The stack is the command's STACK (`source` for apply's STACK|PLANFILE, `target` for show's PLANFILE|STACK);
    `target` as a list is plan's --target."""
    params = command_line(ctx)
    target = params.get("target")
    many = isinstance(target, (list, tuple))
    given = params.get("stack") or params.get("source") or (None if many else target)
    output = "json" if params.get("as_json") else "markdown" if params.get("markdown") else "text"
    parallelism = params.get("parallelism")
    return RunArgs(
        command=" ".join(ctx.command_path.split()[1:]),
        stack=str(given) if given is not None else None,
        local=bool(params.get("local")),
        variables=tuple(VarInput(kind, text) for kind, text in ctx.meta.get(_VARIABLE_INPUTS, ())),
        targets=tuple(target) if isinstance(target, (list, tuple)) else (),
        replace=tuple(params.get("replace") or ()),
        parallelism=parallelism if isinstance(parallelism, int) else None,
        output=output,
        no_color=params.get("no_color") is True)

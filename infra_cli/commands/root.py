"""The `infra` command line: the root command, its global options, and the command groups it registers
(commands/main.py runs it).

The modules that define commands do not use `from __future__ import annotations`: typer reads every command's
annotations at each start, and as text each one is compiled first (10 ms of `infra --help`;
tests/test_startup_imports.py).
"""

import os
import sys
from pathlib import Path
from typing import Optional

import typer
from typer._completion_classes import completion_init  # noqa: F401  (main() starts completion with it)
from typer._completion_shared import _get_shell_name, get_completion_script, install

from infra_cli import __version__
from infra_cli.commands import emulator, image, lifecycle, render, rules, skus, smoke, state, validate
from infra_cli.commands.cli import USAGE_ERROR, Group  # noqa: F401  (main() sets USAGE_ERROR's exit code)
from infra_cli.commands.errors import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, interrupted_message, report_error
from infra_cli.commands.run import RunRecord, run_record


_SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")
_DETECT = "-"   # the value of --show-completion / --install-completion given without a shell
_COMPLETION_OPTIONS = ("--show-completion", "--install-completion")
_COMPLETE_VARIABLE = "_INFRA_COMPLETE"   # set by the completion scripts when the shell asks for completions


def _completion(ctx, param, value):
    """--show-completion [SHELL] / --install-completion [SHELL]: the script for the shell named (typer's own
    options take no value and always answer for the shell they detect: `--show-completion zsh` printed bash's);
    without a name, the shell infra runs under; a shell infra has no script for is an error naming those it has."""
    if value is None or ctx.resilient_parsing:
        return value
    option = param.opts[0]
    shell = (_get_shell_name() or "") if value == _DETECT else value.strip().lower()
    if shell not in _SHELLS:
        said = f"shell {value!r} is not supported" if value != _DETECT else (
            "could not tell which shell runs infra" + (f" ({shell} has no completion script)" if shell else ""))
        print(f"error: {said}: name one of {', '.join(_SHELLS)}, as in `infra {option} zsh`", file=sys.stderr)
        raise typer.Exit(EXIT_ERROR)
    if param.name == "show_completion":
        print(get_completion_script(prog_name="infra", complete_var=_COMPLETE_VARIABLE, shell=shell))
    else:
        installed, path = install(shell=shell, prog_name="infra", complete_var=_COMPLETE_VARIABLE)
        print(f"{installed} completion installed in {path}\nCompletion will take effect once you restart the shell")
    raise typer.Exit(EXIT_OK)


# Terraform's commands that infra has no command for, with what to run instead (a Terraform user types `infra init`
# first; "No such command" alone leaves them nowhere).
_TERRAFORM_ONLY = {
    "init": "infra needs no init (no providers or modules to download; its state is the tags Azure holds): "
            "run `infra validate STACK`, then `infra plan STACK` (`--local` for the local Azure)",
    "refresh": "`infra plan STACK --refresh-only` reports drift, as `terraform plan -refresh-only` does",
    "taint": "`infra apply STACK --replace ADDR` replaces a resource, as `terraform apply -replace=ADDR` does",
    "workspace": "a stack's workspace comes from its variables: `infra plan STACK --var-file staging.yaml` "
                 "(README: Variables)",
    "fmt": "infra has no formatter (a stack is YAML, kept as written): `infra validate STACK` checks it, at the "
           "line of each problem",
}


class _ReportingGroup(Group):
    """Every command runs inside this: an exception no command handled becomes one line (report_error),
    whether a command raised it or an option's callback while the command line was read (--version writing
    to a full disk). Click's own exits, usage errors and a closed pipe are handled by click before this.
    The completion options take an optional shell name: given alone, they stand for the detected shell."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        args = list(args)
        for i, arg in enumerate(args):
            if arg in _COMPLETION_OPTIONS and (i + 1 == len(args) or args[i + 1].startswith("-")):
                args.insert(i + 1, _DETECT)
                break
            if not arg.startswith("-"):   # the command: what follows is its own
                break
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx, args):
        if args and args[0] in _TERRAFORM_ONLY and self.get_command(ctx, args[0]) is None:
            ctx.fail(f"No such command '{args[0]}': {_TERRAFORM_ONLY[args[0]]}.")
        return super().resolve_command(ctx, args)

    def invoke(self, ctx):
        """Ctrl-C that no command caught: what was stopped and what it left (typer would exit 130 silently)."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            print(interrupted_message(run_record(ctx)), file=sys.stderr)
            raise typer.Exit(EXIT_INTERRUPTED) from None

    def main(self, *args, **kwargs):
        """Each command line gets a record of its own (commands/run.py): its arguments and what a Ctrl-C leaves."""
        record = RunRecord()
        kwargs.setdefault("obj", record)
        try:
            return super().main(*args, **kwargs)
        except Exception as exc:   # the run's flags without its --var/--var-file, as this hint always named them
            sys.exit(report_error(exc, record.args.without_variables()))


app = typer.Typer(
    cls=_ReportingGroup,
    name="infra",
    help="Plan, apply and prove distributed GPU training infrastructure on Azure Machine Learning.",
    no_args_is_help=True,
    add_completion=False,   # infra's own --install-completion / --show-completion [SHELL] (_completion)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def installed_version() -> str:
    """The version pip installed (the distribution's metadata, what `pip show infra-cli` says), else the
    package's own __version__ (a checkout run in place); pyproject.toml reads its version from __version__, so
    the two agree for every build."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        installed = distribution("infra-cli")
    except PackageNotFoundError:
        return __version__
    # an installation elsewhere (another venv's, an old editable one) is not this package's metadata
    files = installed.files or []
    here = Path(__file__).resolve().parent.parent / "__init__.py"
    ours = any(Path(str(installed.locate_file(f))).resolve() == here for f in files if str(f).endswith("__init__.py"))
    return installed.version if ours or not files else __version__


def _chdir(ctx, param, value: Optional[str]) -> None:
    """`-chdir=DIR`, Terraform's global option: the command runs in DIR, as if started there (its paths, the
    project's .infra/ and local Azure are DIR's)."""
    if value is None or ctx.resilient_parsing:
        return
    try:
        os.chdir(value)
    except OSError as exc:
        raise typer.BadParameter(f"cannot change to {value!r}: {exc.strerror or exc}", param_hint="'-chdir'") from None


def _print_version(value: bool) -> None:
    if value:
        print(f"infra v{installed_version()}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _global_options(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="print the version and exit"),
    chdir: Optional[str] = typer.Option(None, "--chdir", metavar="DIR", callback=_chdir, expose_value=False,
                                        help="run the command in DIR (Terraform's -chdir=DIR)"),
    install_completion: Optional[str] = typer.Option(
        None, "--install-completion", metavar="[SHELL]", callback=_completion, is_eager=True, expose_value=False,
        help=f"install completion for SHELL ({', '.join(_SHELLS)}; default: the current shell)"),
    show_completion: Optional[str] = typer.Option(
        None, "--show-completion", metavar="[SHELL]", callback=_completion, is_eager=True, expose_value=False,
        help="print the completion script for SHELL, to copy it or customize the installation"),
) -> None:
    """Plan, apply and prove distributed GPU training infrastructure on Azure Machine Learning."""


@app.command("version", hidden=True)
def _version() -> None:
    """Terraform's spelling of --version (`terraform version`); --help lists --version alone."""
    _print_version(True)


# The order of --help: offline commands first, then the lifecycle, then the sub-applications.
for group in (validate, rules, skus, render, lifecycle, state, smoke, image, emulator):
    group.register(app)

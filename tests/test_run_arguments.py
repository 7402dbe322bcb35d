"""A run's arguments, parsed once, as one typed value (infra_cli/arguments.py RunArgs, as Terraform's
internal/command/arguments): built by the command (commands/cli.py), handed to the stack loader as an argument,
and used by the views to render next steps (commands/hints.py step) with the run's flags; no module keeps a run's
inputs (issue 42)."""

import dataclasses
import re
from pathlib import Path
from typing import List

import pytest
import typer
from typer.testing import CliRunner

from infra_cli.arguments import NextStep, RunArgs, VarInput
from infra_cli.commands.cli import Command, var_file_option, var_option
from infra_cli.commands.hints import step, step_words
from infra_cli.commands.run import this_run
from infra_cli.diagnostics import DiagnosticError, says
from infra_cli.stack.load import load_stack
from infra_cli.stack.variables import Inputs

ROOT = Path(__file__).resolve().parent.parent

STACK = """\
stack: args
variables:
  env: {type: string}
  token: {type: string, sensitive: true}
workspace:
  subscription_id: 00000000-0000-0000-0000-000000000000
  resource_group: rg-${var.env}
  name: mlw-${var.env}
  location: eastus
"""


def _probe_app(seen: list):
    app = typer.Typer()

    @app.command(cls=Command)
    def probe(stack: Path = typer.Argument(..., metavar="STACK"),
              local: bool = typer.Option(False, "--local"),
              target: List[str] = typer.Option([], "--target"),
              replace: List[str] = typer.Option([], "--replace"),
              parallelism: int = typer.Option(8, "--parallelism"),
              as_json: bool = typer.Option(False, "--json"),
              var: List[str] = var_option(), var_file: List[str] = var_file_option()) -> None:
        seen.append(this_run())

    @app.command(cls=Command)
    def other() -> None:
        seen.append(this_run())

    return app


def test_the_command_line_is_parsed_once_into_one_typed_value():
    seen: list = []
    result = CliRunner().invoke(_probe_app(seen), [
        "probe", "s.yaml", "--var", "a=1", "--var-file", "one.yaml", "-var", "b=2", "--local", "--target",
        "cluster.gpu", "--replace", "environment.e", "--parallelism", "3", "--json"])
    assert result.exit_code == 0, result.output
    assert seen == [RunArgs(command="probe", stack="s.yaml", local=True,
                            variables=(VarInput("var", "a=1"), VarInput("var-file", "one.yaml"), VarInput("var", "b=2")),
                            targets=("cluster.gpu",), replace=("environment.e",), parallelism=3, output="json")]
    with pytest.raises(dataclasses.FrozenInstanceError):
        seen[0].local = False


def test_a_run_leaves_nothing_to_the_next_one():
    # two command lines in one process (as the tests run them): the second sees none of the first's --var
    seen: list = []
    app = _probe_app(seen)
    CliRunner().invoke(app, ["probe", "s.yaml", "--var", "a=1", "--local"])
    CliRunner().invoke(app, ["other"])
    assert seen[1] == RunArgs(command="other")
    assert this_run() == RunArgs()   # outside a run


def test_the_loader_takes_the_variable_inputs_as_an_argument(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(STACK)
    loaded = load_stack("s.yaml", inputs=Inputs((VarInput("var", "env=dev"), VarInput("var", "token=t0"),
                                                 VarInput("var", "env=prod"))))
    assert loaded.stack.workspace.resource_group == "rg-prod"   # the later one wins
    # a run's --var given to a command in this process is not the loader's: without inputs, no value
    CliRunner().invoke(_probe_app([]), ["probe", "s.yaml", "--var", "env=dev", "--var", "token=t0"])
    with pytest.raises(DiagnosticError) as exc:
        load_stack("s.yaml")
    assert {d.rule for d in exc.value.diagnostics} == {"variable.missing"}


def test_no_module_of_the_stack_or_the_commands_keeps_a_run_in_a_global():
    found = [f"{p.relative_to(ROOT)}:{i}" for folder in ("stack", "commands")
             for p in sorted((ROOT / "infra_cli" / folder).rglob("*.py"))
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.match(r"\s*global\s", line)]
    assert not found


def test_a_next_step_is_rendered_with_the_runs_flags_and_never_a_secret(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(STACK)
    run = RunArgs(stack="s.yaml", local=True, variables=(
        VarInput("var", "token=hunter2"), VarInput("var-file", "dev.yaml"), VarInput("var", "env=dev")))
    shown = step(NextStep(("infra", "plan"), ("s.yaml",)), run)
    assert shown == "`infra plan s.yaml --var-file dev.yaml --var env=dev --local` (with --var token=... again)"
    assert "hunter2" not in shown
    # a step on another file takes no --var; without --local, none is added
    assert step(NextStep(("infra", "apply"), ("saved.plan",)), run) == "`infra apply saved.plan --local`"
    assert step_words(NextStep(("infra", "apply"), ("my plans/saved.plan",)), RunArgs()) == \
        "infra apply 'my plans/saved.plan'"


def test_an_undeclared_or_unreadable_stack_names_every_var_without_its_value(tmp_path, monkeypatch):
    # what the view cannot read as declared non-sensitive is named, never repeated
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text("stack: [unclosed\n")
    run = RunArgs(stack="s.yaml", variables=(VarInput("var", "env=dev"),))
    assert step(NextStep(("infra", "plan"), ("s.yaml",)), run) == "`infra plan s.yaml` (with --var env=... again)"


def test_a_progress_line_written_from_an_engines_thread_is_rendered_for_the_run():
    # the engines write progress from worker threads, where click's context is not: the stream keeps the run
    import threading

    from infra_cli.commands.terminal import progress_stream

    app = typer.Typer()
    lines: list = []

    class Stream:
        def write(self, text):
            lines.append(text)

        def flush(self):
            pass

    @app.command(cls=Command)
    def probe(stack: Path = typer.Argument(..., metavar="STACK"), local: bool = typer.Option(False, "--local")) -> None:
        write = progress_stream(Stream())
        worker = threading.Thread(target=write, args=(says("see ", NextStep(("infra", "plan"), ("s.yaml",))),))
        worker.start()
        worker.join()

    @app.command(cls=Command)
    def other() -> None:
        pass

    assert CliRunner().invoke(app, ["probe", "s.yaml", "--local"]).exit_code == 0
    assert "".join(lines) == "see `infra plan s.yaml --local`\n"

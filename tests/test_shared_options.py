"""--local, -no-color, --var and --var-file are declared once (infra_cli/commands/cli.py shared_options) and every
command that takes a stack gets them from there (StackCommand, VariablesCommand), reading them from the run
(this_run()), never from a parameter of its own: a new stack command cannot drift in spelling or help."""

from __future__ import annotations

import ast
from pathlib import Path

import typer
from typer.testing import CliRunner

from infra_cli.commands.cli import StackCommand, shared_options
from infra_cli.commands.main import app
from infra_cli.commands.run import this_run

ROOT = Path(__file__).resolve().parent.parent
SHARED = ("local", "no_color", "var", "var_file")
# every command that reads a stack file (graph, render and validate read no cloud: no --local)
STACK_COMMANDS = {"plan", "apply", "destroy", "import", "force-unlock", "show", "output", "state list", "state rm",
                  "smoke", "graph", "render", "validate"}


def _commands() -> dict[str, object]:
    out = {}

    def walk(command, path):
        out[path] = command
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())
    walk(typer.main.get_command(app), "")
    return out


def test_every_stack_command_takes_the_shared_options_from_the_one_declaration():
    commands = _commands()
    takes_var = {path for path, command in commands.items() if any(p.name == "var" for p in command.params)}
    assert takes_var == STACK_COMMANDS
    for path in STACK_COMMANDS:
        command = commands[path]
        assert isinstance(command, StackCommand), path
        declared = shared_options(command.local_help)
        mine = [p for p in command.params if p.name in SHARED]
        assert [p.name for p in mine] == [p.name for p in declared], path
        assert all(any(p is d for d in declared) for p in mine), f"`infra {path}` declares its own {mine}"
        assert all(not p.expose_value for p in mine), path   # the command reads the run, not a parameter
    assert [p.name for p in shared_options(None)] == ["no_color", "var", "var_file"]


def test_no_command_module_spells_a_shared_option_itself():
    """Outside cli.py no `typer.Option(..., "--local" | "--no-color" | "--var" | "--var-file")`; skus's --local
    (which Azure region's availability to ask the emulator) is its own option."""
    found = []
    for path in sorted((ROOT / "infra_cli" / "commands").rglob("*.py")):
        if path.name in ("cli.py", "skus.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("Option", "Argument"):
                spelled = {a.value for a in node.args if isinstance(a, ast.Constant)}
                if spelled & {"--local", "--no-color", "--var", "-var", "--var-file", "-var-file"}:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, found


def test_a_stack_command_reads_the_shared_options_from_the_run():
    probe_app = typer.Typer()
    seen = []

    def probe(stack: Path = typer.Argument(..., metavar="STACK")) -> None:
        seen.append(this_run())

    def other() -> None:
        """A second command, so that the probe is reached by its name as a command of infra is."""

    probe_app.command(cls=StackCommand)(probe)
    probe_app.command(cls=StackCommand)(other)
    result = CliRunner().invoke(probe_app, ["probe", "s.yaml", "-var", "a=1", "-no-color", "--local",
                                            "--var-file", "f.yaml"])
    assert result.exit_code == 0, result.output
    run = seen[0]
    assert (run.stack, run.local, run.no_color) == ("s.yaml", True, True)
    assert [(v.kind, v.text) for v in run.variables] == [("var", "a=1"), ("var-file", "f.yaml")]
    CliRunner().invoke(probe_app, ["probe", "s.yaml"])
    assert (seen[1].local, seen[1].no_color, seen[1].variables) == (False, False, ())

"""The issue 43 walk's third round: the wrong turns left. `-no-color` on every command that prints (Terraform's
meta.process takes it on every command), no outputs drawn for a plan with errors, and every diagnostic naming the
stack as the command line gave it (`stacks/train.yaml:`), never its resolved path."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import typer

from test_cli_first_week import _cli, _on_a_terminal, _stack

# commands that print neither a diagnostic nor colour: `version` its one line, `schema` a JSON document
PLAIN = {("version",), ("schema",)}


def _leaves(command, path=()):
    subcommands = getattr(command, "commands", None)
    if subcommands is None:
        yield path, command
        return
    for name, sub in subcommands.items():
        yield from _leaves(sub, (*path, name))


def test_every_command_that_prints_takes_no_color():
    """`infra output -no-color` and `infra import -no-color` were "No such option": Terraform strips -no-color
    on every command (meta.process, https://github.com/hashicorp/terraform/blob/main/internal/command/meta.go),
    and every infra command but PLAIN prints diagnostics, coloured on a terminal. A new command is held here."""
    from infra_cli.commands.root import app

    leaves = dict(_leaves(typer.main.get_command(app)))
    assert ("output",) in leaves and ("state", "list") in leaves and ("image", "check") in leaves
    lacking = [" ".join(path) for path, command in leaves.items() if path not in PLAIN and
               not any("--no-color" in p.opts for p in command.params)]
    assert lacking == [], f"commands without -no-color: {lacking}"


PLAN_WITH_OUTPUTS = """
outputs:
  cpu_id: {value: "${cluster.cpu.id}"}
"""


def test_output_and_import_take_no_color_and_print_none(tmp_path):
    stack = _stack(tmp_path)
    stack.write_text(stack.read_text() + PLAN_WITH_OUTPUTS)
    # nothing of the stack exists: `output` warns, `import` of a missing cluster fails; in colour on a terminal
    runs = [("output", str(stack), "--local"), ("import", "cluster.cpu", "cpu", str(stack), "--local"),
            ("state", "list", str(tmp_path / "nope.yaml"), "--local")]   # no such stack: an error
    for args in runs:
        coloured = _on_a_terminal(*args, tmp_path=tmp_path)
        assert "\033[" in coloured, (args, coloured)
        for flag in ("-no-color", "--no-color"):
            plain = _on_a_terminal(*args, flag, tmp_path=tmp_path)
            assert "No such option" not in plain and "\033[" not in plain, (args, plain)
            assert plain.replace("\r", "").strip(), args   # it still said what it says


def test_a_plan_with_errors_draws_no_outputs(tmp_path):
    """After `state rm cluster.cpu`, plan's plan.unmanaged-resource is an error: "Outputs after apply:" with
    null values followed it, where Terraform shows no outputs for a plan that failed."""
    stack = _stack(tmp_path)
    stack.write_text(stack.read_text() + PLAN_WITH_OUTPUTS)
    r = _cli("apply", str(stack), "-target=cluster.cpu", "--local", "--auto-approve", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr + r.stdout
    r = _cli("plan", str(stack), "--local", tmp_path=tmp_path)
    assert r.returncode == 0 and "Outputs after apply:" in r.stdout, r.stderr   # a plan that can apply shows them
    r = _cli("state", "rm", "cluster.cpu", str(stack), "--local", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    for view in ([], ["--markdown"]):
        r = _cli("plan", str(stack), "--local", *view, tmp_path=tmp_path)
        assert r.returncode == 1 and "plan.unmanaged-resource" in r.stderr, r.stderr
        assert "Outputs after apply" not in r.stdout and "cpu_id" not in r.stdout, (view, r.stdout)
    r = _cli("plan", str(stack), "--local", "--json", tmp_path=tmp_path)
    document = json.loads(r.stdout)
    assert r.returncode == 1 and "plan.unmanaged-resource" in {d["rule"] for d in document["diagnostics"]}
    assert "output_changes" not in document, document.get("output_changes")


def _relative_files(r: subprocess.CompletedProcess, given: str) -> list[str]:
    files = [d["file"] for d in json.loads(r.stdout)["diagnostics"] if d.get("file")]
    assert files, r.stdout
    return [f for f in files if f != given]


def test_diagnostics_name_the_stack_as_given(tmp_path):
    """`plan.targeting` and `plan.unknown-target` named /tmp/.../stacks/train.yaml where every other diagnostic
    names stacks/train.yaml, as the command line gave it."""
    (tmp_path / "stacks").mkdir()
    stack = _stack(tmp_path / "stacks")
    given = "stacks/" + stack.name
    r = _cli("plan", given, "--local", "-target=cluster.cpu", "--json", tmp_path=tmp_path, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "plan.targeting" in r.stdout and _relative_files(r, given) == []
    r = _cli("plan", given, "--local", "-target=cluster.nope", tmp_path=tmp_path, cwd=tmp_path)
    assert r.returncode == 1 and f"{given}: error[plan.unknown-target]" in r.stderr and str(tmp_path) not in \
        r.stderr, r.stderr
    r = _cli("plan", given, "--local", "-replace=cluster.nope", tmp_path=tmp_path, cwd=tmp_path)
    assert r.returncode == 1 and "plan.unknown-replace" in r.stderr and str(tmp_path) not in r.stderr, r.stderr
    # apply's engine: import of an undeclared cluster, state rm of one the stack does not own
    r = _cli("import", "cluster.nope", "nope", given, "--local", tmp_path=tmp_path, cwd=tmp_path)
    assert r.returncode == 1 and given in r.stderr and str(tmp_path) not in r.stderr, r.stderr
    r = _cli("state", "rm", "cluster.cpu", given, "--local", tmp_path=tmp_path, cwd=tmp_path)
    assert r.returncode == 1 and given in r.stderr and str(tmp_path) not in r.stderr, r.stderr


def test_no_diagnostic_is_built_from_the_resolved_stack_path():
    """LoadedStack.file is the stack as given, which every diagnostic names; `path` is resolved, for reading
    what lies beside it. A new diagnostic written with str(loaded.path) is caught here."""
    import re

    root = Path(__file__).resolve().parent.parent / "infra_cli"
    found = [f"{p.relative_to(root)}:{n}" for p in root.rglob("*.py")
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"str\((\w+\.)*loaded\.path\)", line)]
    assert found == [], f"use LoadedStack.file for a diagnostic's file: {found}"

"""Next steps are data: an engine names the command a message tells the user to run as a NextStep inside a
diagnostics.Text, and the view renders it with the run's flags (commands/hints.py). No engine writes a command in
its text, so a new message inherits the run's flags without any pattern rewriting outgoing text."""

from __future__ import annotations

import ast
import copy
import json
import pickle
from pathlib import Path

from infra_cli.arguments import NextStep, RunArgs
from infra_cli.commands.hints import rendered, rendered_diagnostic
from infra_cli.diagnostics import LIST_COMPUTES, LIST_INSTEAD, Diagnostic, Text, joined, says

PACKAGE = Path(__file__).resolve().parent.parent / "infra_cli"


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def commands_in_text(root: Path = PACKAGE) -> list[str]:
    """Every string literal (docstrings aside) of a module outside commands/ that writes an infra command in
    backquotes: "`infra plan ...`" is a NextStep."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] == "commands":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        found += [f"{path.relative_to(root.parent)}:{node.lineno}: {node.value[:80]!r}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                  and "`infra " in node.value]
    return found


def test_no_engine_writes_a_command_in_its_text():
    found = commands_in_text()
    assert not found, ("name the command as a NextStep inside the text (diagnostics.says), so the view renders it "
                       "with the run's flags:\n" + "\n".join(found))


def test_the_scan_finds_a_command_written_in_text(tmp_path):
    # the scan above can fail: a module writing a command in an f-string's text is found, its docstring is not
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "m.py").write_text('"""Run `infra plan`."""\n\ndef f(s):\n'
                                              '    return f"run `infra plan {s}` first"\n')
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands" / "v.py").write_text('X = "`infra plan`"\n')
    assert commands_in_text(tmp_path) == ["tmp_path/engine/m.py:4: 'run `infra plan '".replace(
        "tmp_path", tmp_path.name)]


def test_a_text_reads_as_written_and_renders_for_the_run():
    hint = says("run ", NextStep(("infra", "apply"), ("my stack.yaml",)), " first")
    assert hint == "run `infra apply 'my stack.yaml'` first"
    assert rendered(hint, RunArgs()) == hint
    assert rendered(hint, RunArgs(local=True)) == "run `infra apply 'my stack.yaml' --local` first"
    # a command that takes no --local (validate, image check) is named as written
    other = says("run ", NextStep(("infra", "validate")), " and ", NextStep(("infra", "image", "check")))
    assert rendered(other, RunArgs(local=True)) == other == "run `infra validate` and `infra image check`"


def test_a_text_keeps_its_steps_through_what_engines_do_with_it():
    hint = says("run ", NextStep(("infra", "plan"), ("s.yaml",)))
    for kept in ("a: " + hint + ".", joined("; ", ["x", hint]), pickle.loads(pickle.dumps(hint)), copy.deepcopy(hint),
                 hint.replace("run", "RUN")):
        assert isinstance(kept, Text) and rendered(kept, RunArgs(local=True)).count("`infra plan s.yaml --local`") == 1
    # a secret that spans a step's edge is replaced all the same (the steps lost, never the secret kept)
    assert hint.replace("n `infra", "X") == "ruX plan s.yaml`" and not isinstance(hint.replace("n `infra", "X"), Text)
    assert json.dumps({"hint": hint}) == json.dumps({"hint": str(hint)})


def test_an_az_listing_is_the_local_azures_infra_listing_on_a_local_run():
    hint = says("see ", NextStep(LIST_COMPUTES, local_instead=LIST_INSTEAD))
    d = Diagnostic("error", "r", "m", hint=hint)
    assert rendered_diagnostic(d, RunArgs(stack="s.yaml")).hint == "see `az ml compute list`"
    assert rendered_diagnostic(d, RunArgs(stack="s.yaml", local=True)).hint == "see `infra state list s.yaml --local`"
    assert rendered_diagnostic(d, RunArgs(stack="s.yaml", local=True)).to_json() == {
        "severity": "error", "rule": "r", "message": "m", "file": None, "line": None, "column": None,
        "hint": "see `infra state list s.yaml --local`"}

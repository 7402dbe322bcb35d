"""Hostile input to what issue 43 added to variables: unknown values (an unset variable offline), var files that
validate recognises by the stacks beside them, and a var file's text converted to the declared type."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra_cli.diagnostics import DiagnosticError
from infra_cli.stack.load import parse_stack
from infra_cli.stack.variables import Inputs, VarInput
from infra_cli.validate.engine import validate_files

from test_variables import STACK

SECRET = "Hunter2-Very-Secret!"


def infra(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("INFRA_VAR_")}
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], cwd=cwd, capture_output=True, text=True,
                          env=environ, timeout=120)


def test_the_placeholder_of_an_unset_sensitive_variable_is_not_scrubbed_from_every_message(tmp_path):
    # a placeholder is no secret: taking its text out of diagnostics would garble every message with "unknown"
    stack, source = parse_stack(STACK, "s.yaml", {}, Inputs(unset_unknown=True))
    assert not source.secrets
    assert ("clusters", "a100", "ssh_settings", "admin_password") in source.unknown


def test_a_sensitive_value_from_a_var_file_of_the_wrong_type_is_never_echoed(tmp_path):
    text = STACK.replace("admin_password: {type: string, sensitive: true}", "admin_password: {type: number, sensitive: true}")
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "t.yaml").write_text(text)
    (tmp_path / "stacks" / "p.vars.json").write_text(f'{{"admin_password": "{SECRET}"}}')
    got = infra("validate", "stacks/p.vars.json", cwd=tmp_path)
    assert got.returncode == 1 and "error[variable.type]" in got.stderr and "var file stacks/p.vars.json" in got.stderr
    assert SECRET not in got.stdout + got.stderr


def test_a_sensitive_var_given_of_the_wrong_shape_is_named_never_shown(tmp_path):
    text = STACK.replace("admin_password: {type: string, sensitive: true}", "admin_password: {sensitive: true}")
    (tmp_path / "s.yaml").write_text(text.replace("max_instances: ${var.nodes}", "max_instances: ${var.admin_password}"))
    got = infra("validate", "s.yaml", "--var", "admin_password=987654.25", cwd=tmp_path)
    assert got.returncode == 1 and "from --var admin_password" in got.stderr, got.stderr
    assert "987654" not in got.stdout + got.stderr


def test_non_finite_numbers_are_refused_at_the_value_not_at_the_stack(tmp_path):
    for given in ('{"nodes": "1e400"}', '{"nodes": 1e400}', '{"nodes": "nan"}', '{"nodes": "inf"}'):
        (tmp_path / "v.json").write_text(given)
        with pytest.raises(DiagnosticError) as exc:
            parse_stack(STACK, "s.yaml", {"INFRA_VAR_admin_password": SECRET},
                        Inputs((VarInput("var-file", str(tmp_path / "v.json")),)))
        (d,) = exc.value.diagnostics
        assert d.rule == "variable.type" and d.file == str(tmp_path / "v.json"), (given, d)


def test_a_fifo_and_unreadable_files_beside_a_var_file_neither_hang_nor_break_validate(tmp_path):
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    os.mkfifo(stacks / "a-fifo.yaml")   # read non-blocking, refused: no writer needed
    (stacks / "bad.yaml").write_bytes(b"\xff\xfe: [")
    (stacks / "deep.yaml").write_text("stack: x\nvariables: " + "[" * 5000 + "]" * 5000 + "\n")
    (stacks / "t.yaml").write_text(STACK)
    (stacks / "env.yaml").write_text("env: prod\n")
    got = infra("validate", "stacks/env.yaml", cwd=tmp_path)
    assert got.returncode == 0 and "a variables file for stacks/t.yaml" in got.stderr, got.stderr
    assert "Traceback" not in got.stderr


def test_a_file_with_stack_keys_is_still_judged_as_a_stack(tmp_path):
    # a stack that lost its `stack:` line is not a variables file because one of its keys is a variable's name
    (tmp_path / "t.yaml").write_text(STACK)
    (tmp_path / "broken.yaml").write_text("env: prod\nworkspace: {name: x}\n")
    found = validate_files([tmp_path / "broken.yaml"])
    assert any(d.rule == "stack.missing-key" for d in found), [d.format() for d in found]


def test_a_mapping_with_no_stack_key_is_never_advised_to_add_stack(tmp_path):
    # no stack beside it declares `colour`, and it has none of a stack's keys: a var file gone astray
    (tmp_path / "t.yaml").write_text(STACK)
    (tmp_path / "staging.yaml").write_text("colour: blue\n")
    found = validate_files([tmp_path / "staging.yaml"])
    assert [d.rule for d in found] == ["variable.file"], [d.format() for d in found]
    assert "stack:" not in found[0].hint and "NAME.vars.yaml" in found[0].hint

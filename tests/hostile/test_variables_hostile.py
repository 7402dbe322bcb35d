"""Attacks on stack variables (issue 33): a sensitive value echoed by an error, a forged value in a resealed plan
file, a var file that is a FIFO, a value that tries to expand again, an output that reaches past its stack."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infra_cli.diagnostics import DiagnosticError
from infra_cli.plan.planfile import content_digest
from infra_cli.stack.load import parse_stack
from infra_cli.stack.variables import Inputs, VarInput

ROOT = Path(__file__).resolve().parent.parent.parent
STACK = textwrap.dedent("""\
    variables:
      token: {type: string, sensitive: true}
      nodes: {type: number, default: 1, allowed: [1, 2]}
      label: {type: string, default: x}
    stack: hostile
    workspace:
      subscription_id: 00000000-0000-0000-0000-0000000000a1
      resource_group: rg-test
      name: mlw-test
      location: eastus
    clusters:
      gpu: {size: Standard_ND96asr_v4, max_instances: "${var.nodes}", description: "${var.label}"}
    """)
TOKEN = "Very-Secret-Token-123"


def diagnostics(*given: tuple[str, str], environ=None) -> str:
    with pytest.raises(DiagnosticError) as exc:
        parse_stack(STACK, "s.yaml", {"INFRA_VAR_token": TOKEN} if environ is None else environ,
                    Inputs(tuple(VarInput(k, v) for k, v in given)))
    return "\n".join(d.format() for d in exc.value.diagnostics)


def test_a_sensitive_value_of_the_wrong_shape_is_not_echoed(tmp_path):
    bad = tmp_path / "v.yaml"
    bad.write_text(f"token: [{TOKEN}]\n")
    shown = diagnostics(("var-file", str(bad)))
    assert "variable.type" in shown and TOKEN not in shown and "(sensitive value)" in shown
    shown = diagnostics(("var", f"tokn={TOKEN}"))   # a typo of a sensitive name: the value is not known secret
    assert "variable.undeclared" in shown and TOKEN not in shown


def test_a_value_is_not_interpolated_twice():
    stack, _ = parse_stack(STACK, "s.yaml", {"INFRA_VAR_token": TOKEN, "HOME_SECRET": "leak"},
                           Inputs((VarInput("var", "label=${HOME_SECRET}-$${var.token}"),)))
    assert stack.clusters["gpu"].description == "${HOME_SECRET}-$${var.token}"


def test_a_var_file_that_is_a_fifo_is_refused_at_once(tmp_path):
    fifo = tmp_path / "vars.yaml"
    os.mkfifo(fifo)
    shown = diagnostics(("var-file", str(fifo)))
    assert "is a FIFO" in shown


def test_a_forged_value_in_a_resealed_plan_file_is_refused(tmp_path):
    """The plan's variables are sealed with the rest, but the sha256 digest can be recomputed: a value outside
    the variable's type or `allowed` is refused at load, before anything is read or written."""
    stack = tmp_path / "s.yaml"
    stack.write_text(STACK)
    env = {**os.environ, "INFRA_LOCAL_DIR": str(tmp_path / "state"), "INFRA_VAR_token": TOKEN}
    run = lambda *a: subprocess.run([sys.executable, "-m", "infra_cli", *a], capture_output=True, text=True,
                                    cwd=ROOT, env=env, timeout=300)
    plan_file = tmp_path / "p.plan"
    made = run("plan", str(stack), "--local", "--out", str(plan_file))
    assert made.returncode == 0, made.stderr
    assert TOKEN not in plan_file.read_text()
    body = json.loads(plan_file.read_text())
    body["variables"]["nodes"] = {"value": 64}
    body["digest"] = content_digest(body)
    plan_file.write_text(json.dumps(body))
    refused = run("apply", str(plan_file), "--local")
    assert refused.returncode == 1 and "error[variable.not-allowed]" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    assert run("state", "list", str(stack), "--local").stdout == ""   # nothing was created

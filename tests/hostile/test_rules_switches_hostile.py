"""Hostile `rules:` entries (infra_cli/stack/rule_switch.py, infra_cli/validate/rules/switches.py): what a stack
writes there is judged and bounded like the rest of the stack, never read as a path, and never hides an error,
prints a secret or floods the output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from infra_cli.diagnostics import Diagnostic
from infra_cli.validate.engine import validate_files

ROOT = Path(__file__).resolve().parents[2]
HEADER = ("stack: t\nworkspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, "
          "name: mlw, location: eastus}\n")
# 16 processes on an 8-GPU size: distribution.gpus-exceeded, an error
EXCEEDED = ("clusters:\n  gpu: {size: Standard_ND96asr_v4, max_instances: 2}\nenvironments:\n  env: {curated: "
            "'azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest'}\ndistributions:\n  job: {cluster: gpu, "
            "environment: env, type: pytorch, process_count_per_instance: 16}\n")


def _validate(tmp_path: Path, body: str) -> list[Diagnostic]:
    stack = tmp_path / "s.yaml"
    stack.write_text(HEADER + body, encoding="utf-8")
    return validate_files([stack])


@pytest.mark.parametrize("key", ["../../etc/passwd", "/etc/shadow", "distribution.*", "x" * 1000, "''"])
def test_an_id_is_only_looked_up_never_read_as_a_path_and_said_in_one_line(tmp_path, key):
    found = _validate(tmp_path, EXCEEDED + f"rules:\n  '{key}': {{enabled: false, reason: r}}\n")
    unknown = [d for d in found if d.rule == "rules.unknown"]
    assert len(unknown) == 1 and unknown[0].severity == "error"
    assert len(unknown[0].message) < 200 and "root:" not in unknown[0].message
    assert any(d.rule == "distribution.gpus-exceeded" for d in found), "a bad switch hides nothing"


@pytest.mark.parametrize("rules, words", [
    ("[distribution.gpus-exceeded]", "valid dictionary"),
    ("{distribution.gpus-exceeded: false}", "valid dictionary"),
    ("{distribution.gpus-underused: {enabled: maybe, reason: r}}", "valid boolean"),
    ("{distribution.gpus-underused: {enabled: false, reason: 7}}", "valid string"),
    ("{distribution.gpus-underused: {enabled: false, reason: r, severity: info}}", "unknown key 'severity'"),
    ("{distribution.gpus-underused: {enabled: false, reason: \"a\\nb\"}}", "control characters"),
])
def test_a_switch_of_the_wrong_shape_is_a_schema_error_at_its_place(tmp_path, rules, words):
    found = _validate(tmp_path, EXCEEDED + f"rules: {rules}\n")
    refused = [d for d in found if d.rule in ("stack.invalid", "stack.unknown-key")]
    assert refused and words in refused[0].message and refused[0].line == HEADER.count("\n") + 7, found
    assert any(d.rule == "distribution.gpus-exceeded" for d in found), "the rest is judged in the same pass"


def test_a_reason_is_one_line_of_output(tmp_path):
    found = _validate(tmp_path, EXCEEDED + f"rules: {{distribution.gpus-underused: {{enabled: false, "
                                            f"reason: {'why ' * 1000}}}}}\n")
    (refused,) = [d for d in found if d.rule == "stack.invalid"]
    assert "at most 300 characters" in refused.message and len(refused.message) < 400


@pytest.mark.parametrize("reason", ["'${var.token}'", "'prefix ${var.token} suffix'", "'${NODE_SECRET}'"])
def test_a_secret_never_becomes_a_reason_plan_prints(tmp_path, reason):
    body = "variables:\n  token: {sensitive: true, default: hunter2-secret}\n" + EXCEEDED.replace("16", "1")
    stack = tmp_path / "s.yaml"
    stack.write_text(HEADER + body + f"rules:\n  distribution.gpus-underused: {{enabled: false, reason: {reason}}}\n")
    done = subprocess.run([sys.executable, "-m", "infra_cli", "plan", str(stack), "--local", "--json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "NODE_SECRET": "hunter2-secret",
                               "INFRA_LOCAL_DIR": str(tmp_path / "cloud"), "HOME": str(tmp_path)})
    assert done.returncode == 1 and "hunter2-secret" not in done.stdout + done.stderr
    assert "plain text" in done.stdout + done.stderr


@pytest.mark.parametrize("rule_id", ["distribution.gpus-exceeded", "cluster.subnet-without-vnet", "workspace.name",
                                     "rules.unknown", "rules.not-switchable"])
def test_an_error_is_never_switched_off(tmp_path, rule_id):
    found = _validate(tmp_path, EXCEEDED + f"rules:\n  {rule_id}: {{enabled: false, reason: we know}}\n")
    assert [d.rule for d in found if d.severity == "error"] == ["distribution.gpus-exceeded", "rules.not-switchable"]


def test_a_rule_switched_off_for_its_warnings_keeps_its_errors(tmp_path):
    """cluster.size-retired warns in plan of a retired cluster that exists; switched off, validate's error for a new
    cluster of a retired size stays."""
    body = "clusters:\n  old: {size: Standard_NC12}\nrules:\n  cluster.size-retired: {enabled: false, reason: moving}\n"
    assert [(d.rule, d.severity) for d in _validate(tmp_path, body)] == [("cluster.size-retired", "error")]

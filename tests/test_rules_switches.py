"""A stack's `rules:` switches (infra_cli/validate/rules/switches.py and stack/model.py RuleSwitch), as tflint's
`rule "ID" { enabled = false }`: a rule switched off with a reason stops warning for that stack, in validate and in
plan, and plan lists it (text, and `rules_disabled` in its JSON); errors are never switched off; an unknown id, a
switch without a reason and one that would hide an error are refused where they are written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from infra_cli.diagnostics import Diagnostic
from infra_cli.stack.schema import stack_json_schema
from infra_cli.validate.engine import validate_files

from rules_fixtures import A100, CURATED_ENV, ROOT, check, one_distribution

UNDERUSED = one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 1\n")
OFF = "rules:\n  distribution.gpus-underused: {enabled: false, reason: single-GPU debug runs}\n"


def test_a_rule_switched_off_with_a_reason_stops_warning_for_the_stack(tmp_path):
    assert [d.rule for d in check(tmp_path, UNDERUSED).diagnostics] == ["distribution.gpus-underused"]
    assert check(tmp_path, UNDERUSED + OFF).diagnostics == []


def test_a_rule_switched_on_still_warns(tmp_path):
    r = check(tmp_path, UNDERUSED + "rules:\n  distribution.gpus-underused: {enabled: true}\n")
    assert [d.rule for d in r.diagnostics] == ["distribution.gpus-underused"]


def test_only_the_rule_switched_off_is_silenced(tmp_path):
    body = UNDERUSED.replace(f"size: {A100}", f"size: {A100}\n    location: westus") + OFF
    assert [d.rule for d in check(tmp_path, body).diagnostics] == ["cluster.location"]


def test_a_rule_that_also_reports_errors_keeps_them(tmp_path):
    off = "rules:\n  cluster.size-unknown: {enabled: false, reason: a size newer than the catalog}\n"
    catalog_gap = "clusters:\n  gpu:\n    size: Standard_ND96isr_X999_v9\n"
    assert check(tmp_path, catalog_gap).of("cluster.size-unknown")[0].severity == "warning"
    assert check(tmp_path, catalog_gap + off).diagnostics == []
    r = check(tmp_path, "clusters:\n  gpu:\n    size: NotASize\n" + off)
    r.one("cluster.size-unknown", "error", "size: NotASize")


def test_an_unknown_rule_is_an_error_with_a_did_you_mean(tmp_path):
    r = check(tmp_path, UNDERUSED + "rules:\n  distribution.gpus-undrused: {enabled: false, reason: debug}\n")
    d = r.one("rules.unknown", "error", "distribution.gpus-undrused")
    assert "did you mean 'distribution.gpus-underused'?" in d.hint and "infra rules" in d.hint
    assert r.of("distribution.gpus-underused"), "a misspelt switch switches nothing off"


def test_a_rule_that_reports_only_errors_cannot_be_switched_off(tmp_path):
    body = one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 16\n")
    r = check(tmp_path, body + "rules:\n  distribution.gpus-exceeded: {enabled: false, reason: we know}\n")
    assert "docs/rules/distribution.gpus-exceeded.md" in r.one("rules.not-switchable", "error",
                                                               "distribution.gpus-exceeded").hint
    assert r.one("distribution.gpus-exceeded", "error", "process_count_per_instance: 16")


def _validated(tmp_path, body: str) -> list[Diagnostic]:
    """What `infra validate` reports (the schema's refusals with the rules' findings)."""
    stack = tmp_path / "s.yaml"
    stack.write_text(HEADER_LINES + body, encoding="utf-8")
    return validate_files([stack])


@pytest.mark.parametrize("switch", ["{enabled: false}", "{enabled: false, reason: ''}", "{enabled: false, reason: '  '}"])
def test_a_rule_switched_off_without_a_reason_is_refused(tmp_path, switch):
    found = _validated(tmp_path, UNDERUSED + f"rules:\n  distribution.gpus-underused: {switch}\n")
    (d,) = [d for d in found if d.severity == "error"]
    assert d.rule == "stack.invalid" and "needs a reason" in d.message and "reason:" in d.message
    assert d.line == HEADER_LINES.count("\n") + UNDERUSED.count("\n") + 2
    assert [d.rule for d in found if d.severity == "warning"] == ["distribution.gpus-underused"]
    assert [d.rule for d in _validated(tmp_path, UNDERUSED + OFF)] == []


def test_a_sensitive_reason_is_refused_so_plan_never_prints_it(tmp_path):
    body = "variables:\n  token: {sensitive: true, default: hunter2}\n" + UNDERUSED
    found = _validated(tmp_path, body + "rules:\n  distribution.gpus-underused: {enabled: false, reason: '${var.token}'}\n")
    (refused,) = [d for d in found if d.severity == "error"]
    assert refused.rule == "stack.invalid" and "plain text" in refused.message and "hunter2" not in repr(found)
    assert [d.rule for d in found if d.severity == "warning" and d.rule != "variable.sensitive-default"] == \
        ["distribution.gpus-underused"], "a refused switch switches nothing off"


def test_the_schema_has_the_switch():
    rules = stack_json_schema()["properties"]["rules"]
    switch = json.dumps(rules)
    assert "enabled" in switch and "reason" in switch and "infra rules" in rules["description"]


def _plan(tmp_path, body: str, *args: str) -> subprocess.CompletedProcess:
    stack = tmp_path / "s.yaml"
    stack.write_text(HEADER_LINES + body, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "INFRA_LOCAL_DIR": str(tmp_path / "cloud")}
    return subprocess.run([sys.executable, "-m", "infra_cli", "plan", str(stack), "--local", *args], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=300)


HEADER_LINES = ("stack: t\nworkspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, "
                "name: mlw, location: eastus}\n")


def test_plan_lists_what_the_stack_switched_off_and_drops_its_warnings(tmp_path):
    done = _plan(tmp_path, UNDERUSED + OFF, "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["rules_disabled"] == [{"id": "distribution.gpus-underused", "reason": "single-GPU debug runs"}]
    assert [d for d in plan["diagnostics"] if d["rule"] == "distribution.gpus-underused"] == []
    text = _plan(tmp_path, UNDERUSED + OFF)
    assert "Rule distribution.gpus-underused is switched off by this stack: single-GPU debug runs" in text.stdout
    assert "gpus-underused" not in text.stderr
    plain = json.loads(_plan(tmp_path, UNDERUSED, "--json").stdout)
    assert "rules_disabled" not in plain, "a stack that switches nothing off plans as before"
    assert [d["rule"] for d in plain["diagnostics"]] == ["distribution.gpus-underused"]


def test_plan_keeps_an_error_its_preflight_finds_for_a_switched_off_rule(tmp_path):
    """cluster.public-ip-without-subnet is judged again live by plan's preflight (plan/preflight.py): validate's
    warning, switched off, is gone; the workspace without a managed network makes it an error, which stays."""
    body = (f"clusters:\n  gpu:\n    size: {A100}\n    enable_node_public_ip: false\n")
    before = json.loads(_plan(tmp_path, body, "--json").stdout)
    assert [d["rule"] for d in before["diagnostics"]] == ["cluster.public-ip-without-subnet"], before["diagnostics"]
    off = "rules:\n  cluster.public-ip-without-subnet: {enabled: false, reason: the workspace has a managed network}\n"
    after = json.loads(_plan(tmp_path, body + off, "--json").stdout)
    assert [(d["rule"], d["severity"]) for d in after["diagnostics"]] == [("cluster.public-ip-without-subnet", "error")]
    assert after["rules_disabled"][0]["id"] == "cluster.public-ip-without-subnet"
    offline = _validated(tmp_path, body)
    assert [(d.rule, d.severity) for d in offline] == [("cluster.public-ip-without-subnet", "warning")]
    assert _validated(tmp_path, body + off) == []


def test_plan_drops_the_warning_its_preflight_gives_a_switched_off_rule(tmp_path):
    """cluster.size-retired is judged again live by plan's preflight (plan/preflight.py retired_sizes): a warning for
    a cluster that exists. Applied while its size is current, then planned with a catalog that says Azure retired it:
    the warning, and none where the stack switched the rule off (plan/engine.py drops it, beside validate's)."""
    cluster = f"clusters:\n  gpu:\n    size: {A100}\n"
    env = {"INFRA_LOCAL_DIR": str(tmp_path / "cloud")}
    applied = _infra(tmp_path, cluster, "apply", "--auto-approve", "--no-smoke", env=env)
    assert applied.returncode == 0, applied.stderr
    validators = tmp_path / "validators"
    shutil.copytree(ROOT / "validators", validators)
    skus = validators / "skus.yaml"
    skus.write_text(skus.read_text(encoding="utf-8").replace(
        f"  {A100}:\n    gpus: 8\n", f"  {A100}:\n    retired: 2020-01-01\n    gpus: 8\n", 1), encoding="utf-8")
    env.update(INFRA_VALIDATORS_DIR=str(validators), XDG_CACHE_HOME=str(tmp_path / "cache"))
    before = json.loads(_infra(tmp_path, cluster, "plan", "--json", env=env).stdout)
    assert [(d["rule"], d["severity"]) for d in before["diagnostics"]] == [("cluster.size-retired", "warning")]
    off = "rules:\n  cluster.size-retired: {enabled: false, reason: replaced next quarter}\n"
    after = json.loads(_infra(tmp_path, cluster + off, "plan", "--json", env=env).stdout)
    assert after["diagnostics"] == [] and after["rules_disabled"] == [
        {"id": "cluster.size-retired", "reason": "replaced next quarter"}]


def _infra(tmp_path, body: str, command: str, *args: str, env: dict) -> subprocess.CompletedProcess:
    stack = tmp_path / "s.yaml"
    stack.write_text(HEADER_LINES + body, encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "infra_cli", command, str(stack), "--local", *args], cwd=tmp_path,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT), **env},
                          timeout=300)

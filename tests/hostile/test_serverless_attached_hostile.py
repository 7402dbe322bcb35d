"""Attacks on serverless distributions and computes infra does not manage (issue 41): a compute reference that
would leave its REST path segment or its YAML line, an instance_type or a job tier that would inject into the
job file, and a job the emulator is sent with a size or tier no serverless compute has."""

from __future__ import annotations

import pytest

from infra_cli.diagnostics import DiagnosticError
from infra_cli.stack.load import load_stack
from rules_fixtures import A100, CURATED_ENV, HEADER, one_distribution


def _stack(tmp_path, lines: str):
    body = one_distribution(A100, CURATED_ENV, "type: pytorch\n" + lines)
    body = "environments:\n" + body.split("environments:\n", 1)[1].replace("    cluster: gpu\n", "")
    path = tmp_path / "stack.yaml"
    path.write_text(HEADER + body, encoding="utf-8")
    return path


@pytest.mark.parametrize("reference", [
    "azureml:../../computes/other", "azureml:x?api-version=1", "azureml:x#y", "azureml:x%2Fy", "azureml:x y",
    "/subscriptions/s/resourceGroups/rg/providers/Microsoft.MachineLearningServices/virtualclusters/../vc",
    "/subscriptions/s/resourceGroups/rg/providers/Evil.Provider/virtualclusters/vc", "azureml:x\u2028y",
    "azureml:" + "a" * 300,
])
def test_a_compute_reference_never_leaves_its_segment(tmp_path, reference):
    with pytest.raises(DiagnosticError) as exc:
        load_stack(_stack(tmp_path, f"compute: {reference!r}\n"))
    d = exc.value.diagnostics[0]
    assert d.line and "Traceback" not in d.message


@pytest.mark.parametrize("lines", [
    'resources: {instance_type: "Standard_NC6\\ncompute: azureml:evil"}\n',
    'resources: {instance_type: "Standard_NC6\\u2028x"}\n',
    "queue_settings: {job_tier: 'standard\\ncompute: evil'}\n",
    "queue_settings: {job_tier: gold}\n",
])
def test_a_serverless_size_or_tier_never_writes_another_key(tmp_path, lines):
    with pytest.raises(DiagnosticError) as exc:
        load_stack(_stack(tmp_path, lines))
    assert exc.value.diagnostics[0].line


def test_a_serverless_size_holding_yaml_is_refused_and_never_rendered(tmp_path):
    from infra_cli.apply.files import render_stack

    path = _stack(tmp_path, "resources: {instance_type: 'Standard_ND96asr_v4: {compute: evil}'}\n")
    with pytest.raises(DiagnosticError) as exc:
        render_stack(path, tmp_path / "out")
    assert [d.rule for d in exc.value.diagnostics if d.severity == "error"] == ["cluster.size-unknown"]
    assert not list((tmp_path / "out").rglob("*.yml"))


@pytest.mark.parametrize("props, target", [
    ({"resources": {"instanceCount": 1, "instanceType": "Standard_NC6\n; rm -rf /"}}, "resources.instanceType"),
    ({"resources": {"instanceCount": 1, "instanceType": ["Standard_NC6"]}}, "resources.instanceType"),
    ({"resources": {"instanceCount": 1}, "queueSettings": {"jobTier": "gold"}}, "queueSettings.jobTier"),
])
def test_the_emulator_refuses_a_serverless_job_no_serverless_compute_runs(props, target):
    from infra_cli.emulator.ml_jobs import _check_serverless
    from infra_cli.emulator.wire import ArmError

    with pytest.raises(ArmError) as exc:
        _check_serverless(props)
    assert exc.value.target == target

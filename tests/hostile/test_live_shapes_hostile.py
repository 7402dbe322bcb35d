"""Azure's answer in a shape infra did not expect must never become a destroy.

Found with Azure's recorded AmlCompute GET of api-version 2021-07-01 (and 2018-11-19, 2020-08-01), whose subnet
is a plain string, not `{"id": ...}`: infra read it as "no subnet", and plan proposed to delete and recreate the
cluster (a subnet forces a replacement). Any shape infra cannot read (a number, a list, a properties block that
is not an object, a count in words) now stops the plan with an error naming the field and the cluster; the
recorded shapes read as what they mean. Replayed through infra's real SDK clients (tests/contract).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "contract"))
from contract_support import (azure_clients, example, load_stack_text, owned, replay,  # noqa: E402
                              response_body, workspace_url)

from infra_cli.azure.provider import AzureProvider  # noqa: E402
from infra_cli.diagnostics import DiagnosticError  # noqa: E402
from infra_cli.plan.desired import desired_resources  # noqa: E402
from infra_cli.plan.diff import diff  # noqa: E402
from infra_cli.plan.live import refresh  # noqa: E402
from infra_cli.plan.model import NO_OP  # noqa: E402

RECORDED = example("machinelearningservices/2021-07-01/Compute/get/AmlCompute.json")
P = RECORDED["parameters"]
STACK = f"""
stack: hostile
workspace: {{subscription_id: {P['subscriptionId']}, resource_group: {P['resourceGroupName']},
             name: {P['workspaceName']}, location: eastus2}}
clusters:
  compute123:
    size: Standard_NC6
    max_instances: 1
    idle_time_before_scale_down: 300
    network_settings: {{subnet: test-subnet-resource-id}}
    description: some compute
"""


def _plan(tmp_path, monkeypatch, body: dict):
    loaded = load_stack_text(tmp_path, STACK)
    resources = desired_resources(loaded)
    clients = azure_clients(monkeypatch, P, "eastus2")
    with replay() as mock:
        mock.get(f"{workspace_url(P)}/computes", json={"value": [owned(body, resources[0])]})
        live = refresh(AzureProvider(clients), resources)
    return diff(resources, live, stack="hostile", source=loaded.source)


def test_the_recorded_string_subnet_is_the_subnet_not_a_replacement(tmp_path, monkeypatch):
    (change,) = _plan(tmp_path, monkeypatch, response_body(RECORDED)).changes
    assert change.actions == NO_OP, (change.action_reason, change.replace_paths)


@pytest.mark.parametrize("where,value", [
    ("subnet", 42), ("subnet", ["test-subnet-resource-id"]), ("subnet", {"name": "default"}),
    ("scaleSettings", {"maxNodeCount": "many", "minNodeCount": 0, "nodeIdleTimeBeforeScaleDown": "PT5M"}),
    ("vmSize", {"name": "STANDARD_NC6"}),
])
def test_an_unreadable_shape_stops_the_plan_naming_the_field(tmp_path, monkeypatch, where, value):
    body = response_body(RECORDED)
    body["properties"]["properties"][where] = value
    with pytest.raises(DiagnosticError) as stopped:
        _plan(tmp_path, monkeypatch, body)
    (problem,) = stopped.value.diagnostics
    assert problem.rule == "plan.live-unreadable" and "cluster.compute123" in problem.message
    assert f"properties.properties.{where}" in problem.message


def test_properties_not_an_object_stop_the_plan(tmp_path, monkeypatch):
    body = response_body(RECORDED)
    body["properties"]["properties"] = "STANDARD_NC6"
    with pytest.raises(DiagnosticError) as stopped:
        _plan(tmp_path, monkeypatch, body)
    assert [d.rule for d in stopped.value.diagnostics] == ["plan.live-unreadable"]
    assert "properties.properties as \"STANDARD_NC6\"" in stopped.value.diagnostics[0].message


def test_the_value_shown_carries_no_terminal_escape(tmp_path, monkeypatch):
    body = response_body(RECORDED)
    body["properties"]["properties"]["subnet"] = ["\x1b]0;owned\x07\x1b[2J" + "x" * 500]
    with pytest.raises(DiagnosticError) as stopped:
        _plan(tmp_path, monkeypatch, body)
    text = stopped.value.diagnostics[0].format()
    assert "\x1b" not in text and "\x07" not in text and len(text) < 600

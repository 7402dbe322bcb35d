"""A compute Azure has not finished: the 2025-12-01 recorded create (fixtures/machinelearningservices/2025-12-01/
Compute/createOrUpdate/BasicAmlCompute.json) answers 201 with `{"computeType": "AmlCompute", "provisioningState":
"Creating"}` and no AmlCompute properties at all (the spec's AmlComputeProperties requires no field). Read through
infra's real clients, such a cluster plans as still being created (no replacement, no plan.live-unreadable), and
apply waits for the create to finish before it compares and puts the stack's settings. Deleting is read as such
(created again once gone), and properties that are null as "not reported".
"""

from __future__ import annotations

import copy

import pytest

from contract_support import (OPERATION_URL, azure_clients, example, load_stack_text, owned, recorded_cluster_stack,
                              replay, response_body, sent, workspace_url)

from infra_cli.apply.executor import Applier
from infra_cli.azure.compute_codec import compute_values
from infra_cli.azure.provider import AzureProvider
from infra_cli.commands.views.plan import render_change
from infra_cli.plan.desired import desired_resources
from infra_cli.plan.diff import diff, drift
from infra_cli.knowledge.skus import load_catalog
from infra_cli.plan.live import LiveFacts, refresh
from infra_cli.plan.preflight import preflight
from infra_cli.plan.model import REPLACE, UPDATE

CREATING = example("machinelearningservices/2025-12-01/Compute/createOrUpdate/BasicAmlCompute.json")
SETTLED = example("machinelearningservices/2025-12-01/Compute/get/AmlCompute.json")  # the same name, Succeeded
PARAMS = CREATING["parameters"]
COMPUTE = f"{workspace_url(PARAMS)}/computes/{PARAMS['computeName']}"
OPERATION = OPERATION_URL.format(sub=PARAMS["subscriptionId"], loc="eastus2")


def _live(tmp_path, monkeypatch, body: dict):
    """The live state of the workspace whose one compute Azure answers with `body` (owned by the stack)."""
    resources = desired_resources(load_stack_text(tmp_path, recorded_cluster_stack(PARAMS)))
    (cluster,) = resources
    clients = azure_clients(monkeypatch, PARAMS, "eastus2")
    with replay() as mock:
        mock.get(f"{workspace_url(PARAMS)}/computes", json={"value": [owned(body, cluster)]})
        return refresh(AzureProvider(clients), resources)


def _plan(tmp_path, monkeypatch, body: dict):
    loaded = load_stack_text(tmp_path, recorded_cluster_stack(PARAMS))
    resources = desired_resources(loaded)
    (cluster,) = resources
    live = _live(tmp_path, monkeypatch, body)
    return (diff(resources, live, stack="contract", source=loaded.source), loaded, cluster,
            azure_clients(monkeypatch, PARAMS, "eastus2"))


def test_the_recorded_answer_has_no_amlcompute_properties():
    for status in ("200", "201"):
        props = response_body(CREATING, status)["properties"]
        assert props == {"computeType": "AmlCompute", "provisioningState": "Creating"}


def test_the_recorded_creating_answer_is_read_without_a_problem():
    values = compute_values(response_body(CREATING, "201"))
    assert "unreadable" not in values and values["size"] is None and values["provisioning_state"] == "Creating"


def test_the_recorded_creating_answer_plans_as_still_creating(tmp_path, monkeypatch):
    result, loaded, _, _ = _plan(tmp_path, monkeypatch, response_body(CREATING, "201"))
    (change,) = result.changes
    assert change.actions == UPDATE and change.replace_paths == []
    assert change.action_reason.startswith("update_after_create: provisioningState is Creating")
    assert "apply waits for it" in change.action_reason
    assert result.diagnostics == []
    assert drift(desired_resources(load_stack_text(tmp_path, recorded_cluster_stack(PARAMS))),
                 _live(tmp_path, monkeypatch, response_body(CREATING, "201")), stack="contract") == []
    # the plan's preflight reads it too (quota): nothing of it is counted while Azure reports no settings
    facts = LiveFacts(location="eastus2", workspace_location="eastus2")
    found = preflight([change], [], facts, load_catalog(), loaded.source, PARAMS["workspaceName"])
    assert [d.rule for d in found] == ["cluster.size-retired"]   # STANDARD_NC6, recorded: a warning, it exists
    assert found[0].severity == "warning"
    shown = "\n".join(render_change(change, lambda text, code: text))
    assert "cluster.compute123 is still being created: apply waits for it" in shown
    assert "(not reported yet) -> " in shown and "forces replacement" not in shown


@pytest.mark.parametrize("state,properties,actions,reason", [
    ("Deleting", None, REPLACE, "replace_because_tainted: provisioningState is Deleting"),
    ("Updating", None, UPDATE, "update_after_create: provisioningState is Updating"),
    ("Succeeded", None, UPDATE, "update_after_create: Azure answered no settings for it"),
    ("Creating", {"vmPriority": "Dedicated"}, UPDATE, "update_after_create: provisioningState is Creating"),
])
def test_every_provisioning_state_is_read_as_such(tmp_path, monkeypatch, state, properties, actions, reason):
    body = response_body(CREATING, "201")
    body["properties"].update(provisioningState=state, properties=properties)
    result, _, _, _ = _plan(tmp_path, monkeypatch, body)
    (change,) = result.changes
    assert change.actions == actions and change.action_reason.startswith(reason), change
    assert result.diagnostics == []
    if actions == REPLACE:
        assert change.replace_paths == [["provisioning_state"]]  # the state, not values Azure never sent


def test_apply_waits_for_the_create_then_puts_the_stacks_settings(tmp_path, monkeypatch):
    """The first read finds it Creating, the next one finished (the recorded GET, the stack's settings): apply
    sends no delete, and one PUT once the create is over."""
    result, loaded, cluster, clients = _plan(tmp_path, monkeypatch, response_body(CREATING, "201"))
    (change,) = result.changes
    settled = response_body(SETTLED)
    events = []
    with replay() as mock:
        mock.get(COMPUTE, json=owned(response_body(CREATING, "201"), cluster))   # still creating
        mock.get(COMPUTE, json=owned(settled, cluster))                          # finished
        mock.put(COMPUTE, json=copy.deepcopy(response_body(CREATING, "201")), status=201,
                 headers={"Azure-AsyncOperation": OPERATION})
        mock.get(OPERATION, json={"status": "Succeeded"})
        mock.get(COMPUTE, json=owned(settled, cluster))                          # the create's final read
        Applier(AzureProvider(clients), loaded, events.append, poll_s=0).run_change(change, cluster)
    order = [c.request.method for c in mock.kept]
    assert order[:3] == ["GET", "GET", "PUT"], order   # read until the create is over, then the PUT
    (put,) = sent(mock, "PUT")
    assert put.url.split("?")[0] == COMPUTE and sent(mock, "DELETE") == []
    assert any("putting the cluster again" in e.text for e in events), events

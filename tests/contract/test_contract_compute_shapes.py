"""Every api-version's recorded AmlCompute GET (fixtures/README.md: 2018-11-19 to 2025-12-01, the newest stable)
replayed through infra's real read path (AzureProvider over azure-core, then plan's normalise): each reads as the
same cluster, and a stack that describes it plans no change. The recorded subnet comes in two shapes, a plain
string (2018-11-19 to 2021-07-01) and the spec's ResourceId `{"id": ...}` (2021-10-01 on); a stack names it by
id or by vnet_name + subnet. A shape no api-version records is a plan error naming the field, never a replace.
"""

from __future__ import annotations

import copy
import json

import pytest

from contract_support import (RECORDED_CLUSTER, azure_clients, example, load_stack_text, owned,
                              recorded_cluster_stack, replay, response_body, sent, workspace_url)

from infra_cli.azure.provider import AzureProvider
from infra_cli.diagnostics import DiagnosticError
from infra_cli.plan.desired import desired_resources
from infra_cli.plan.diff import diff, drift
from infra_cli.plan.kinds.cluster import read_cluster
from infra_cli.plan.live import refresh
from infra_cli.plan.model import NO_OP, REPLACE

# api-version -> the recorded AmlCompute GET (fixtures/machinelearningservices/<api-version>/...)
GETS = {
    "2018-11-19": "machinelearningservices/2018-11-19/getAmlCompute.json",
    "2020-08-01": "machinelearningservices/2020-08-01/getAmlCompute.json",
    "2021-07-01": "machinelearningservices/2021-07-01/Compute/get/AmlCompute.json",
    "2022-10-01": "machinelearningservices/2022-10-01/Compute/get/AmlCompute.json",
    "2023-04-01": "machinelearningservices/2023-04-01/Compute/get/AmlCompute.json",
    "2024-10-01": "machinelearningservices/2024-10-01/Compute/get/AmlCompute.json",
    "2025-12-01": "machinelearningservices/2025-12-01/Compute/get/AmlCompute.json",
}
STRING_SUBNET = {"2018-11-19", "2020-08-01", "2021-07-01"}
PLACEHOLDER = "test-subnet-resource-id"  # every example's subnet id: fixtures/README.md, "Placeholders"
# 2020-08-01 records an identity; the others none
IDENTITY = "/subscriptions/f9d7ebed-adbd-4cb4-b973-aaf82c136138/resourcegroups/myResourceGroup1/providers/" \
           "Microsoft.ManagedIdentity/userAssignedIdentities/identity2"

# What infra reads off every recorded cluster: the same cluster in each api-version (enableNodePublicIp left out
# by 2018-11-19 and 2020-08-01 is the spec's default, true; "..." and {"id": "..."} the same subnet)
EXPECTED = {version: dict(RECORDED_CLUSTER) for version in GETS}
EXPECTED["2020-08-01"].update(identity_type="system_assigned,user_assigned",
                              user_assigned_identities=[IDENTITY.lower()])


def recorded(version: str) -> dict:
    return example(GETS[version])


def params(version: str) -> dict:
    return recorded(version)["parameters"]


def subnet_id(version: str, vnet: str = "vnet1") -> str:
    p = params(version)
    return (f"/subscriptions/{p['subscriptionId']}/resourceGroups/{p['resourceGroupName']}"
            f"/providers/Microsoft.Network/virtualNetworks/{vnet}/subnets/default")


def stack_text(version: str, network: str = f"{{subnet: {PLACEHOLDER}}}") -> str:
    """The recorded cluster as a user writes it, in this api-version's example: its identity where it records
    one, the subnet as `network`."""
    identity = ("    identity: {type: 'system_assigned,user_assigned', user_assigned_identities: "
                f"[{{resource_id: '{IDENTITY}'}}]}}\n") if EXPECTED[version]["identity_type"] else ""
    return recorded_cluster_stack(params(version), network, identity)


def with_subnet(body: dict, value) -> dict:
    """The body with its subnet replaced by `value`, kept in the example's own shape when `value` is an id."""
    out = copy.deepcopy(body)
    props = out["properties"]["properties"]
    props["subnet"] = {"id": value} if isinstance(value, str) and isinstance(props["subnet"], dict) else value
    return out


def computes_url(version: str) -> str:
    return f"{workspace_url(params(version))}/computes"


def plan_against(tmp_path, monkeypatch, version: str, text: str, body: dict):
    """Refresh (the workspace's computes answered with `body`, owned by the stack) and diff."""
    loaded = load_stack_text(tmp_path, text)
    resources = desired_resources(loaded)
    (cluster,) = resources
    clients = azure_clients(monkeypatch, params(version), "eastus2")
    with replay() as mock:
        mock.get(computes_url(version), json={"value": [owned(body, cluster)]})
        live = refresh(AzureProvider(clients), resources)
    assert len(sent(mock, "GET")) == 1
    return diff(resources, live, stack="contract", source=loaded.source), resources, live


def test_the_examples_record_both_subnet_shapes():
    """The premise: the older api-versions' examples send the subnet as a string, the newer as {"id": ...}."""
    for version in GETS:
        subnet = recorded(version)["responses"]["200"]["body"]["properties"]["properties"]["subnet"]
        assert subnet == (PLACEHOLDER if version in STRING_SUBNET else {"id": PLACEHOLDER}), version


@pytest.mark.parametrize("version", list(GETS))
def test_each_api_versions_get_reads_the_recorded_cluster(monkeypatch, version):
    clients = azure_clients(monkeypatch, params(version), "eastus2")
    url = f"{computes_url(version)}/{params(version)['computeName']}"
    with replay() as mock:
        mock.get(url, json=response_body(recorded(version)))
        cluster = read_cluster(AzureProvider(clients), "compute123")
    assert cluster.attributes == EXPECTED[version]
    assert cluster.address == "cluster.compute123" and cluster.tags == {}


@pytest.mark.parametrize("version", list(GETS))
def test_a_stack_that_describes_the_recorded_cluster_plans_no_change(tmp_path, monkeypatch, version):
    """The subnet by its (recorded) id: no change, and no drift; a string subnet is not "no subnet"."""
    result, resources, live = plan_against(tmp_path, monkeypatch, version, stack_text(version),
                                           response_body(recorded(version)))
    assert result.diagnostics == []
    (change,) = result.changes
    assert change.actions == NO_OP, (change.changed_paths(), change.before, change.after)
    assert drift(resources, live, stack="contract") == []


@pytest.mark.parametrize("version", list(GETS))
def test_a_subnet_named_by_vnet_and_subnet_is_the_id_azure_answers(tmp_path, monkeypatch, version):
    """The example's placeholder id swapped for a full ARM id in the example's own shape (string or object), in
    ARM's casing; the stack names it by vnet_name + subnet: the same subnet. Another vnet is a replacement,
    shown on the subnet: a real change still shows."""
    body = with_subnet(response_body(recorded(version)), subnet_id(version))
    result, _, _ = plan_against(tmp_path, monkeypatch, version,
                                stack_text(version, "{vnet_name: vnet1, subnet: default}"), body)
    (change,) = result.changes
    assert change.actions == NO_OP, change.changed_paths()
    moved, _, _ = plan_against(tmp_path, monkeypatch, version,
                               stack_text(version, "{vnet_name: vnet2, subnet: default}"), body)
    (change,) = moved.changes
    assert change.actions == REPLACE and change.replace_paths == [["subnet"]]


@pytest.mark.parametrize("no_subnet", [None, {}, {"id": None}])
def test_no_subnet_in_any_shape_is_no_subnet(tmp_path, monkeypatch, no_subnet):
    """null, an empty object or a ResourceId with a null id: the cluster has no subnet, and a stack without one
    plans no change."""
    body = with_subnet(response_body(recorded("2025-12-01")), None)
    body["properties"]["properties"]["subnet"] = no_subnet
    text = stack_text("2025-12-01").replace(f"    network_settings: {{subnet: {PLACEHOLDER}}}\n", "")
    result, _, live = plan_against(tmp_path, monkeypatch, "2025-12-01", text, body)
    assert live.of("cluster")["compute123"].attributes["subnet"] is None
    (change,) = result.changes
    assert change.actions == NO_OP, change.changed_paths()


UNREADABLE = [
    # (where in properties.properties, the value, the path the error names)
    ("subnet", 42, "properties.properties.subnet"),
    ("subnet", [PLACEHOLDER], "properties.properties.subnet"),
    ("subnet", {"resourceId": PLACEHOLDER}, "properties.properties.subnet"),
    ("subnet", {"id": 7}, "properties.properties.subnet"),
    ("vmSize", ["STANDARD_NC6"], "properties.properties.vmSize"),
    ("vmSize", None, "properties.properties.vmSize"),
    ("scaleSettings", "1 node", "properties.properties.scaleSettings"),
    ("enableNodePublicIp", "yes", "properties.properties.enableNodePublicIp"),
]


@pytest.mark.parametrize("version", ["2021-07-01", "2025-12-01"])
@pytest.mark.parametrize("field,value,path", UNREADABLE)
def test_a_shape_no_api_version_records_is_a_plan_error_naming_the_field(tmp_path, monkeypatch, version, field,
                                                                          value, path):
    body = response_body(recorded(version))
    body["properties"]["properties"][field] = value
    with pytest.raises(DiagnosticError) as stopped:
        plan_against(tmp_path, monkeypatch, version, stack_text(version), body)
    (problem,) = stopped.value.diagnostics
    assert problem.severity == "error" and problem.rule == "plan.live-unreadable"
    assert problem.message.startswith("cluster.compute123: ") and f" {path} as " in problem.message
    assert json.dumps(value) in problem.message or value is None
    assert "az ml compute show --name compute123" in problem.hint


def test_properties_that_are_not_an_object_are_named(tmp_path, monkeypatch):
    body = response_body(recorded("2025-12-01"))
    body["properties"]["properties"] = ["STANDARD_NC6"]
    with pytest.raises(DiagnosticError) as stopped:
        plan_against(tmp_path, monkeypatch, "2025-12-01", stack_text("2025-12-01"), body)
    paths = {d.message.split(" as ")[0] for d in stopped.value.diagnostics}
    assert paths == {"cluster.compute123: Azure answered properties.properties"}


def test_an_unreadable_compute_the_stack_does_not_declare_is_left_alone(tmp_path, monkeypatch):
    """Another team's compute with a shape infra cannot read stops nobody's plan: infra never compares it, and
    without its ownership tags it is never infra's to delete."""
    version = "2025-12-01"
    loaded = load_stack_text(tmp_path, stack_text(version))
    resources = desired_resources(loaded)
    (cluster,) = resources
    other = response_body(recorded(version))
    other["name"] = "theirs"
    other["properties"]["properties"]["subnet"] = 42
    clients = azure_clients(monkeypatch, params(version), "eastus2")
    with replay() as mock:
        mock.get(computes_url(version), json={"value": [owned(response_body(recorded(version)), cluster), other]})
        live = refresh(AzureProvider(clients), resources)
    result = diff(resources, live, stack="contract", source=loaded.source)
    assert [c.actions for c in result.changes] == [NO_OP] and result.diagnostics == []


def test_a_compute_whose_name_cannot_be_read_stops_the_plan(tmp_path, monkeypatch):
    """It could be the stack's own cluster: plan cannot tell, so it says so."""
    version = "2025-12-01"
    body = response_body(recorded(version))
    body["name"] = {"value": "compute123"}
    with pytest.raises(DiagnosticError) as stopped:
        plan_against(tmp_path, monkeypatch, version, stack_text(version), body)
    (problem,) = stopped.value.diagnostics
    assert problem.message.startswith("a compute of the workspace: Azure answered name as ")
    assert "az ml compute list" in problem.hint


def test_import_of_a_string_subnet_cluster_keeps_its_subnet(tmp_path, monkeypatch):
    """`infra import` PUTs the cluster back with infra's tags and the values it read: the 2021-07-01 string subnet
    goes back as the subnet it is (it went back as none, which Azure refuses: a subnet cannot change)."""
    import contextlib

    from contract_support import body_of
    from infra_cli.apply.engine import import_resource
    from infra_cli.state.store import StateStore
    from infra_cli.state.serial import StateSerial

    # The stack's lock and serial are infra's own environment versions, with no recorded example to replay: they
    # are held to Azure's shape on the emulator (tests/hostile/test_locked_commands.py, test_lifecycle_local.py).
    # Here only the compute's requests are replayed.
    monkeypatch.setattr(StateStore, "lock", lambda self, stack, operation: contextlib.nullcontext())
    monkeypatch.setattr(StateStore, "serial", lambda self, stack: StateSerial())
    monkeypatch.setattr(StateStore, "bump_serial", lambda self, stack, current, operation: current)
    version = "2021-07-01"
    text = stack_text(version, "{vnet_name: vnet1, subnet: default}")
    (tmp_path / "stack.yaml").write_text(text)
    body = with_subnet(response_body(recorded(version)), subnet_id(version))
    clients = azure_clients(monkeypatch, params(version), "eastus2")
    url = f"{computes_url(version)}/compute123"
    # the PUT is azure-ai-ml's, which reads its answer itself (and only in the spec's shape, {"id": ...})
    answer = with_subnet(response_body(recorded("2025-12-01")), subnet_id(version))
    with replay(every_answer_used=False) as mock:
        mock.get(url, json=body)
        mock.put(url, json=answer)
        import_resource("cluster.compute123", "compute123", tmp_path / "stack.yaml",
                        backend=lambda _: AzureProvider(clients))
    (put,) = sent(mock, "PUT")
    assert body_of(put)["properties"]["properties"]["subnet"]["id"].lower() == subnet_id(version).lower()

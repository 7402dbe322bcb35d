"""A cluster Azure reports as Failed, and Azure's error answers: what infra plans and what it shows.

No recorded example carries a Failed cluster or an error body, so these answers are built from recorded ones
(get/AmlCompute.json) and the spec's own shapes (Compute.provisioningState, ErrorResponse, the LRO status),
and each is checked against the spec's response schema before it is replayed.
"""

from __future__ import annotations

import pytest

from contract_support import (OPERATION_URL, azure_clients, load_stack_text, ml_example, owned,
                              recorded_cluster_stack, replay, response_body, workspace_url)
from spec_schema import SPEC_ROOT, problems

from infra_cli.azure.provider import AzureProvider
from infra_cli.plan.desired import desired_resources
from infra_cli.plan.diff import diff
from infra_cli.plan.kinds.cluster import ClusterSecrets, read_cluster
from infra_cli.plan.live import refresh
from infra_cli.plan.model import REPLACE

GET = ml_example("Compute/get/AmlCompute.json")
CREATE_BASIC = ml_example("Compute/createOrUpdate/BasicAmlCompute.json")
PARAMS = GET["parameters"]
W = workspace_url(PARAMS)
COMPUTE = f"{W}/computes/{PARAMS['computeName']}"
COMMON_TYPES = SPEC_ROOT + "common-types/resource-management/v3/types.json"
STACK = recorded_cluster_stack()
# An ARM error as the common types define it (ErrorResponse -> ErrorDetail), with a detail line
ALLOCATION_FAILED = {"error": {
    "code": "AllocationFailed",
    "message": "Allocation failed. We do not have sufficient capacity for the requested VM size in this region.",
    "details": [{"code": "ZonalAllocationFailed", "message": "Try another size or region."}]}}


@pytest.fixture
def clients(monkeypatch):
    return azure_clients(monkeypatch, PARAMS, "eastus2")


def failed_cluster() -> dict:
    """get/AmlCompute.json as Azure reports a cluster whose provisioning failed (Compute.provisioningState
    Failed, Compute.provisioningErrors and AmlComputeProperties.errors holding an ErrorResponse)."""
    body = response_body(GET)
    body["properties"]["provisioningState"] = "Failed"
    body["properties"]["provisioningErrors"] = [ALLOCATION_FAILED]
    body["properties"]["properties"]["errors"] = [ALLOCATION_FAILED]
    body["properties"]["properties"]["allocationState"] = "Steady"
    return body


def test_the_failed_cluster_is_a_valid_answer():
    assert problems(failed_cluster(), "ComputeResource", request=False) == []
    assert problems(ALLOCATION_FAILED, "ErrorResponse", request=False, spec=COMMON_TYPES) == []


def test_a_failed_cluster_plans_a_replacement(tmp_path, clients):
    loaded = load_stack_text(tmp_path, STACK)
    resources = desired_resources(loaded)
    (cluster,) = resources
    with replay() as mock:
        mock.get(f"{W}/computes", json={"value": [owned(failed_cluster(), cluster)]})
        live = refresh(AzureProvider(clients), resources)
    (change,) = diff(resources, live, stack="contract", source=loaded.source).changes
    assert change.actions == REPLACE
    assert "Failed" in change.action_reason and "AllocationFailed" in change.action_reason
    # the same cluster, Succeeded, is no change at all: the state alone forces the replacement
    with replay() as mock:
        mock.get(f"{W}/computes", json={"value": [owned(response_body(GET), cluster)]})
        healthy = refresh(AzureProvider(clients), resources)
    (same,) = diff(resources, healthy, stack="contract", source=loaded.source).changes
    assert same.actions == ["no-op"]


def test_a_missing_cluster_reads_as_absent(clients):
    not_found = {"error": {"code": "ResourceNotFound", "message": "compute123 was not found"}}
    assert problems(not_found, "ErrorResponse", request=False, spec=COMMON_TYPES) == []
    with replay() as mock:
        mock.get(COMPUTE, json=not_found, status=404)
        assert read_cluster(AzureProvider(clients), "compute123") is None


def _put(clients, tmp_path):
    loaded = load_stack_text(tmp_path, STACK.replace("    network_settings: {subnet: test-subnet-resource-id}\n", ""))
    (cluster,) = desired_resources(loaded)
    AzureProvider(clients).put_cluster(cluster, ClusterSecrets(), None, None)


def test_a_refused_create_shows_azures_code_and_message(tmp_path, clients, capsys):
    """A 400 with an ErrorResponse body: the CLI names Azure's code and message, then each detail."""
    from infra_cli.azure.errors import azure_error_code, azure_error_message
    from infra_cli.commands.errors import report_error

    with replay() as mock:
        mock.put(COMPUTE, json=ALLOCATION_FAILED, status=400)
        with pytest.raises(Exception) as refused:
            _put(clients, tmp_path)
    assert azure_error_code(refused.value) == "AllocationFailed"
    assert azure_error_message(refused.value) == ALLOCATION_FAILED["error"]["message"]
    report_error(refused.value)
    detail = ALLOCATION_FAILED["error"]["details"][0]
    assert capsys.readouterr().err.splitlines() == [
        "error: Azure refused: AllocationFailed: " + ALLOCATION_FAILED["error"]["message"],
        f"  {detail['code']}: {detail['message']}"], "the ErrorDetail's details say what to do"


def test_a_failed_create_operation_shows_azures_code_and_message(tmp_path, clients):
    """The recorded 201 (Creating, Azure-AsyncOperation), then the operation ends Failed with an ErrorDetail
    (the common types' OperationStatusResult): infra reports the operation's code and message."""
    from infra_cli.azure.errors import azure_error_code, azure_error_message

    operation = OPERATION_URL.format(sub=PARAMS["subscriptionId"], loc="eastus")
    status = {"status": "Failed", "error": ALLOCATION_FAILED["error"]}
    with replay() as mock:
        mock.put(COMPUTE, json=response_body(CREATE_BASIC, "201"), status=201,
                 headers={"Azure-AsyncOperation": operation})
        mock.get(operation, json=status)
        with pytest.raises(Exception) as failed:
            _put(clients, tmp_path)
    assert azure_error_code(failed.value) == "AllocationFailed"
    assert azure_error_message(failed.value) == ALLOCATION_FAILED["error"]["message"]

"""The checked-in REST definitions against Azure's own recorded examples, and against requests they must
refuse: the schema checks the other contract tests lean on can fail, and fail for the right reason."""

from __future__ import annotations

import copy

import pytest

from contract_support import ml_example, response_body
from spec_schema import ASSETS_SPEC, COMPUTE_SPEC, problems

# (example, status, definition, spec): every recorded response infra reads
RESPONSES = [
    ("Compute/get/AmlCompute.json", "200", "ComputeResource", COMPUTE_SPEC),
    ("Compute/list.json", "200", "PaginatedComputeResourcesList", COMPUTE_SPEC),
    ("Compute/createOrUpdate/BasicAmlCompute.json", "201", "ComputeResource", COMPUTE_SPEC),
    ("Compute/createOrUpdate/AmlCompute.json", "200", "ComputeResource", COMPUTE_SPEC),
    ("Compute/createOrUpdate/AmlCompute.json", "201", "ComputeResource", COMPUTE_SPEC),
    ("Compute/patch.json", "200", "ComputeResource", COMPUTE_SPEC),
    ("EnvironmentVersion/get.json", "200", "EnvironmentVersionResource", ASSETS_SPEC),
    ("EnvironmentVersion/list.json", "200", "EnvironmentVersionResourceArmPaginatedResult", ASSETS_SPEC),
    ("EnvironmentVersion/createOrUpdate.json", "201", "EnvironmentVersionResource", ASSETS_SPEC),
]
# (example, where the request body is, definition, spec): every recorded request
REQUESTS = [
    ("Compute/createOrUpdate/BasicAmlCompute.json", "parameters", "ComputeResource", COMPUTE_SPEC),
    ("Compute/createOrUpdate/AmlCompute.json", "parameters", "ComputeResource", COMPUTE_SPEC),
    ("Compute/patch.json", "parameters", "ClusterUpdateParameters", COMPUTE_SPEC),
    ("EnvironmentVersion/createOrUpdate.json", "body", "EnvironmentVersionResource", ASSETS_SPEC),
]


@pytest.mark.parametrize("name,status,definition,spec", RESPONSES)
def test_recorded_responses_meet_the_definitions(name, status, definition, spec):
    assert problems(response_body(ml_example(name), status), definition, request=False, spec=spec) == []


@pytest.mark.parametrize("name,key,definition,spec", REQUESTS)
def test_recorded_requests_meet_the_definitions(name, key, definition, spec):
    assert problems(ml_example(name)["parameters"][key], definition, request=True, spec=spec) == []


def test_a_response_is_not_a_request():
    """What Azure answers carries what it fills in (id, provisioningState, allocationState, ...): as a request
    each of those is refused by name."""
    found = problems(response_body(ml_example("Compute/get/AmlCompute.json")), "ComputeResource", request=True)
    assert "/properties/provisioningState: read-only (Azure fills it in): a request must not carry it" in found
    assert "/properties/properties/allocationState: read-only (Azure fills it in): a request must not carry it" in found
    assert "/id: read-only (Azure fills it in): a request must not carry it" in found
    environment = response_body(ml_example("EnvironmentVersion/get.json"))
    assert "/properties/environmentType: read-only (Azure fills it in): a request must not carry it" in problems(
        environment, "EnvironmentVersionResource", request=True, spec=ASSETS_SPEC)


def _basic_request() -> dict:
    return copy.deepcopy(ml_example("Compute/createOrUpdate/BasicAmlCompute.json")["parameters"]["parameters"])


@pytest.mark.parametrize("edit,expected", [
    (lambda p: p.update(vmPriority="Spot"),
     "/properties/properties/vmPriority: 'Spot' is not one of ['Dedicated', 'LowPriority']"),
    (lambda p: p.update(remoteLoginPortPublicAccess="Open"),
     "/properties/properties/remoteLoginPortPublicAccess: 'Open' is not one of ['Enabled', 'Disabled', 'NotSpecified']"),
    (lambda p: p["scaleSettings"].pop("maxNodeCount"),
     "/properties/properties/scaleSettings: 'maxNodeCount' is a required property"),
    (lambda p: p["scaleSettings"].update(nodeIdleTimeBeforeScaleDown="300"),
     "/properties/properties/scaleSettings/nodeIdleTimeBeforeScaleDown: '300' is not a 'duration'"),
    (lambda p: p.update(subnet={}),  # azure-ai-ml's begin_update sends this
     "/properties/properties/subnet: 'id' is a required property"),
    (lambda p: p.update(userAccountCredentials={"adminUserSshPublicKey": "ssh-rsa AAAA"}),
     "/properties/properties/userAccountCredentials: 'adminUserName' is a required property"),
    (lambda p: p.update(scaleSettings=None),
     "/properties/properties/scaleSettings: None is not of type 'object'"),
])
def test_a_wrong_request_is_refused_for_its_fault(edit, expected):
    request = _basic_request()
    edit(request["properties"]["properties"])
    assert problems(request, "ComputeResource", request=True) == [expected]


def test_nullable_fields_admit_null_and_others_do_not():
    request = _basic_request()
    request["properties"]["properties"].update(subnet=None, virtualMachineImage=None, enableNodePublicIp=None)
    request["properties"]["description"] = None
    assert problems(request, "ComputeResource", request=True) == []
    request["properties"]["properties"]["vmSize"] = None
    assert problems(request, "ComputeResource", request=True) == [
        "/properties/properties/vmSize: None is not of type 'string'"]


def test_the_discriminator_picks_the_subtype():
    """computeType names the definition the inner properties are held to: an AKS body with an AmlCompute-only
    field is not checked as AmlCompute, an AmlCompute body is."""
    request = _basic_request()
    request["properties"]["properties"]["vmPriority"] = "Spot"
    request["properties"]["computeType"] = "AKS"
    assert problems(request, "ComputeResource", request=True) == []
    request["properties"]["computeType"] = "Kubernets"
    assert problems(request, "ComputeResource", request=True) == [
        "/properties/computeType: 'Kubernets' is not one of ['AKS', 'Kubernetes', 'AmlCompute', 'ComputeInstance', "
        "'DataFactory', 'VirtualMachine', 'HDInsight', 'Databricks', 'DataLakeAnalytics', 'SynapseSpark']"]


def test_an_unknown_environment_field_is_refused():
    """EnvironmentVersion allows no other properties (additionalProperties: false, with its allOf parents'
    description/tags/isAnonymous merged in)."""
    body = copy.deepcopy(ml_example("EnvironmentVersion/createOrUpdate.json")["parameters"]["body"])
    body["properties"]["dockerfile"] = "FROM ubuntu"
    assert problems(body, "EnvironmentVersionResource", request=True, spec=ASSETS_SPEC) == [
        "/properties: Additional properties are not allowed ('dockerfile' was unexpected)"]

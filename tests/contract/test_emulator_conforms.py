"""The emulator held to Azure's REST specification: its answers, over real HTTPS with its token, validate
against the spec's response definitions (fixtures/schemas, via spec_schema.problems), and Azure's recorded
example requests, replayed against it, get answers of the same shape as the recorded ones.

Every ARM route the emulator registers is either checked here against a definition or named in
NOT_CHECKED with the reason; a new route in neither fails test_every_arm_route_is_accounted_for.
"""

from __future__ import annotations

import copy
import time
from urllib.parse import quote

import pytest
import requests

from contract_support import ml_example, response_body
from emulator_fixtures import TEST_PROVISIONING_DELAY_S, start_emulator
from infra_cli.emulator import routes
from spec_schema import (ASSETS_PREVIEW_SPEC, ASSETS_SPEC, COMPUTE_RP_SPEC, COMPUTE_SPEC, ML_LOCATION_SPEC, SKUS_SPEC,
                         SPEC_ROOT, WORKSPACE_SPEC, declared, problems, response_definition)

TYPES_SPEC = SPEC_ROOT + "common-types/resource-management/v3/types.json"
SUB, RG, WS = "00000000-0000-0000-0000-0000000000c1", "rg-conform", "ws-conform"
W = f"subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.MachineLearningServices/workspaces/{WS}"
ML_API, SKU_API = "2024-10-01", "2021-07-01"
CLUSTER = {"location": "eastus", "properties": {"computeType": "AmlCompute", "description": "conformance", "properties": {
    "vmSize": "Standard_ND96asr_v4", "vmPriority": "Dedicated", "enableNodePublicIp": True,
    "scaleSettings": {"minNodeCount": 1, "maxNodeCount": 2, "nodeIdleTimeBeforeScaleDown": "PT5M"}}}}
ENVIRONMENT = {"properties": {"image": "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest",
                              "description": "conformance"}}

# route handler -> why its answer is not checked against a definition here
NOT_CHECKED = {
    "cancel_job": "answers 202 with no body (Job/cancel.json records none)",
    "cancel_status": "answers 200/202 with no body",
    "discovery": "the registry discovery document is not an ARM resource (no definition in the REST specs)",
}
# ARM's Azure-AsyncOperation status values (https://github.com/Azure/azure-resource-manager-rpc/blob/master/
# v1.0/async-api-reference.md): the operation-status route has no definition in the ML spec
OPERATION_STATUSES = {"InProgress", "Succeeded", "Failed", "Canceled"}


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    server = start_emulator(tmp_path_factory.mktemp("conform") / "local")
    server.ensure_workspace(SUB, RG, WS, "eastus")
    yield server
    server.stop()


def call(emulator, method: str, path: str, body=None, api: str = ML_API, token: str | None = None):
    sep = "&" if "?" in path else "?"
    headers = {"Authorization": f"Bearer {emulator.token if token is None else token}"}
    return requests.request(method, f"{emulator.url}{path}{sep}api-version={api}", json=body, headers=headers,
                            verify=str(emulator.cert_path), timeout=30)


def settled(emulator, name: str, workspace: str = W) -> dict:
    """The compute once its operation is done (the provisioning delay, then a GET that settles it)."""
    deadline = time.time() + 10
    while True:
        body = call(emulator, "GET", f"{workspace}/computes/{name}").json()
        if body["properties"]["provisioningState"] not in ("Creating", "Updating", "Deleting") or time.time() > deadline:
            return body
        time.sleep(TEST_PROVISIONING_DELAY_S / 2)


def conforms(response: requests.Response, status: int, definition: str, spec: str = COMPUTE_SPEC) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert problems(body, definition, request=False, spec=spec) == [], body
    return body


# --- every route's answers against the spec's response definitions -----------------------------------------

def test_compute_lifecycle_answers_meet_the_definitions(emulator):
    created = conforms(call(emulator, "PUT", f"{W}/computes/life", CLUSTER), 201, "ComputeResource")
    assert created["properties"]["provisioningState"] == "Creating"
    # Azure's shapes (Compute/get/AmlCompute.json): size upper-cased, ISO 8601 idle time, a null image and
    # errors, Resizing towards the minimum while it is created; no null identity (an object when present)
    inner = created["properties"]["properties"]
    assert inner["vmSize"] == "STANDARD_ND96ASR_V4"
    assert inner["scaleSettings"]["nodeIdleTimeBeforeScaleDown"] == "PT5M"
    assert "virtualMachineImage" in inner and inner["virtualMachineImage"] is None
    assert "errors" in inner and inner["errors"] is None
    assert (inner["allocationState"], inner["targetNodeCount"]) == ("Resizing", 1)
    assert "identity" not in created

    done = settled(emulator, "life")
    assert problems(done, "ComputeResource", request=False) == []
    assert (done["properties"]["provisioningState"], done["properties"]["properties"]["allocationState"],
            done["properties"]["properties"]["currentNodeCount"]) == ("Succeeded", "Steady", 1)

    listed = conforms(call(emulator, "GET", f"{W}/computes"), 200, "PaginatedComputeResourcesList")
    assert "life" in [c["name"] for c in listed["value"]]
    patched = conforms(call(emulator, "PATCH", f"{W}/computes/life",
                            {"properties": {"properties": {"scaleSettings": {"maxNodeCount": 1, "minNodeCount": 0}}}}),
                       200, "ComputeResource")
    assert patched["properties"]["provisioningState"] == "Updating"
    assert settled(emulator, "life")["properties"]["properties"]["scaleSettings"]["maxNodeCount"] == 1

    deleted = call(emulator, "DELETE", f"{W}/computes/life")
    assert deleted.status_code == 202 and deleted.content == b""
    assert deleted.headers["Location"] == deleted.headers["Azure-AsyncOperation"]


def test_operation_status_has_arms_shape_and_says_when_to_look_again(emulator):
    created = call(emulator, "PUT", f"{W}/computes/opstatus", CLUSTER)
    # an SDK user's poller waits what this says, not its 30 s default (the 31 s create of issue 15)
    assert "retry-after-ms" in created.headers or "Retry-After" in created.headers
    status_url = created.headers["Azure-AsyncOperation"]
    first = requests.get(status_url, headers={"Authorization": f"Bearer {emulator.token}"},
                         verify=str(emulator.cert_path), timeout=30)
    body = first.json()
    assert {"id", "name", "status"} <= set(body) and body["status"] in OPERATION_STATUSES
    if body["status"] == "InProgress":
        wait = float(first.headers.get("Retry-After") or 0) + float(first.headers.get("retry-after-ms") or 0) / 1000
        assert 0 < wait <= TEST_PROVISIONING_DELAY_S + 1
    time.sleep(TEST_PROVISIONING_DELAY_S + 0.1)
    final = requests.get(status_url, headers={"Authorization": f"Bearer {emulator.token}"},
                         verify=str(emulator.cert_path), timeout=30)
    assert final.json()["status"] == "Succeeded"
    assert "Retry-After" not in final.headers and "retry-after-ms" not in final.headers


def test_failed_cluster_carries_errors_as_azure_records_them(tmp_path):
    server = start_emulator(tmp_path / "local", lro_failure_rate=1.0, seed=1)
    try:
        server.ensure_workspace(SUB, RG, WS, "eastus")
        call(server, "PUT", f"{W}/computes/bad", CLUSTER)
        failed = settled(server, "bad")
        assert problems(failed, "ComputeResource", request=False) == []
        assert failed["properties"]["provisioningState"] == "Failed"
        errors = failed["properties"]["properties"]["errors"]
        assert errors and {"code", "message"} <= set(errors[0]["error"])
        assert failed["properties"]["provisioningErrors"] == errors
    finally:
        server.stop()


def test_environment_version_answers_meet_the_definitions(emulator):
    put = conforms(call(emulator, "PUT", f"{W}/environments/conform/versions/1", ENVIRONMENT), 201,
                   "EnvironmentVersionResource", ASSETS_SPEC)
    assert put["properties"]["provisioningState"] == "Succeeded"
    conforms(call(emulator, "PUT", f"{W}/environments/conform/versions/1", ENVIRONMENT), 200,
             "EnvironmentVersionResource", ASSETS_SPEC)
    conforms(call(emulator, "GET", f"{W}/environments/conform/versions/1"), 200, "EnvironmentVersionResource",
             ASSETS_SPEC)
    conforms(call(emulator, "GET", f"{W}/environments/conform/versions"), 200,
             "EnvironmentVersionResourceArmPaginatedResult", ASSETS_SPEC)


def test_registry_environment_versions_meet_the_definitions(emulator):
    from infra_cli.emulator.ml_registry import MFE_PREFIX, REGISTRY_RESOURCE_GROUP, REGISTRY_SUBSCRIPTION

    base = (f"{MFE_PREFIX.lstrip('/')}/subscriptions/{REGISTRY_SUBSCRIPTION}/resourceGroups/{REGISTRY_RESOURCE_GROUP}"
            "/providers/Microsoft.MachineLearningServices/registries/azureml/environments")
    route = next(r for r in routes.ROUTES if r.handler.__name__ == "list_versions" and "registries" in r.pattern.pattern)
    assert route.pattern.match("/" + base + "/x/versions"), "the registry route moved: update this test"
    from infra_cli.knowledge.curated import curated_registries

    name = curated_registries()["azureml"][0].name
    listed = conforms(call(emulator, "GET", f"{base}/{name}/versions"), 200,
                      "EnvironmentVersionResourceArmPaginatedResult", ASSETS_SPEC)
    version = listed["value"][0]["name"]
    conforms(call(emulator, "GET", f"{base}/{name}/versions/{version}"), 200, "EnvironmentVersionResource", ASSETS_SPEC)


def test_resource_skus_meet_the_definition(emulator):
    body = conforms(call(emulator, "GET", f"subscriptions/{SUB}/providers/Microsoft.Compute/skus?$filter="
                         + quote("location eq 'eastus'"), api=SKU_API), 200, "ResourceSkusResult", SKUS_SPEC)
    assert body["value"]


ML_LOCATION = f"subscriptions/{SUB}/providers/Microsoft.MachineLearningServices/locations/eastus"
ML_LOCATION_API = "2023-08-01-preview"      # azure-ai-ml's compute.list_usage / list_sizes
ASSETS_PREVIEW_API = "2024-10-01-preview"   # azure-ai-ml's datastores (containers and uploads send older previews)
COMPUTE_USAGE_API = "2026-04-01"            # azure-mgmt-compute's usage.list; held to 2025-04-01, the newest spec kept


@pytest.mark.parametrize("route,template", [
    ("usages", "/subscriptions/{subscriptionId}/providers/Microsoft.MachineLearningServices/locations/{location}/usages"),
    ("vmSizes", "/subscriptions/{subscriptionId}/providers/Microsoft.MachineLearningServices/locations/{location}/vmSizes"),
])
def test_ml_location_answers_meet_the_operations_definitions(emulator, route, template):
    definition = response_definition(ML_LOCATION_SPEC, template)
    body = conforms(call(emulator, "GET", f"{ML_LOCATION}/{route}", api=ML_LOCATION_API), 200, definition,
                    ML_LOCATION_SPEC)
    assert body["value"], f"the emulated region offers no {route}"


def test_compute_usages_meet_the_operations_definition(emulator):
    definition = response_definition(
        COMPUTE_RP_SPEC, "/subscriptions/{subscriptionId}/providers/Microsoft.Compute/locations/{location}/usages")
    body = conforms(call(emulator, "GET", f"subscriptions/{SUB}/providers/Microsoft.Compute/locations/eastus/usages",
                         api=COMPUTE_USAGE_API), 200, definition, COMPUTE_RP_SPEC)
    assert {"cores"} < {u["name"]["value"] for u in body["value"]}


def test_datastore_answers_meet_the_definitions(emulator):
    listed = conforms(call(emulator, "GET", f"{W}/datastores", api=ASSETS_PREVIEW_API), 200,
                      "DatastoreResourceArmPaginatedResult", ASSETS_PREVIEW_SPEC)
    assert {d["properties"]["datastoreType"] for d in listed["value"]} == {"AzureBlob"}
    default = conforms(call(emulator, "GET", f"{W}/datastores?isDefault=true", api=ASSETS_PREVIEW_API), 200,
                       "DatastoreResourceArmPaginatedResult", ASSETS_PREVIEW_SPEC)
    name = default["value"][0]["name"]
    conforms(call(emulator, "GET", f"{W}/datastores/{name}", api=ASSETS_PREVIEW_API), 200, "DatastoreResource",
             ASSETS_PREVIEW_SPEC)


def test_environment_container_answers_meet_the_definitions(emulator):
    call(emulator, "PUT", f"{W}/environments/containers/versions/1", ENVIRONMENT)
    conforms(call(emulator, "PUT", f"{W}/environments/containers", {"properties": {"description": "conformance"}},
                  api=ASSETS_PREVIEW_API), 200, "EnvironmentContainerResource", ASSETS_PREVIEW_SPEC)
    got = conforms(call(emulator, "GET", f"{W}/environments/containers", api=ASSETS_PREVIEW_API), 200,
                   "EnvironmentContainerResource", ASSETS_PREVIEW_SPEC)
    assert (got["properties"]["latestVersion"], got["properties"]["nextVersion"]) == ("1", "2")
    conforms(call(emulator, "GET", f"{W}/environments", api=ASSETS_PREVIEW_API), 200,
             "EnvironmentContainerResourceArmPaginatedResult", ASSETS_PREVIEW_SPEC)


def test_registry_environment_containers_meet_the_definitions(emulator):
    from infra_cli.emulator.ml_registry import MFE_PREFIX, REGISTRY_RESOURCE_GROUP, REGISTRY_SUBSCRIPTION
    from infra_cli.knowledge.curated import curated_registries

    base = (f"{MFE_PREFIX.lstrip('/')}/subscriptions/{REGISTRY_SUBSCRIPTION}/resourceGroups/{REGISTRY_RESOURCE_GROUP}"
            "/providers/Microsoft.MachineLearningServices/registries/azureml/environments")
    conforms(call(emulator, "GET", base), 200, "EnvironmentContainerResourceArmPaginatedResult", ASSETS_PREVIEW_SPEC)
    name = curated_registries()["azureml"][0].name
    conforms(call(emulator, "GET", f"{base}/{name}"), 200, "EnvironmentContainerResource", ASSETS_PREVIEW_SPEC)


def test_pending_upload_answer_meets_the_definition(emulator):
    body = conforms(call(emulator, "POST", f"{W}/codes/snapshot/versions/1/startPendingUpload",
                         {"pendingUploadType": "TemporaryBlobReference"}, api=ASSETS_PREVIEW_API), 200,
                    "PendingUploadResponseDto", ASSETS_PREVIEW_SPEC)
    assert body["blobReferenceForConsumption"]["credential"]["credentialType"] == "SAS"



WORKSPACE_API = "2024-10-01-preview"   # azure-ai-ml's workspaces operations (its 2024-10-01-preview client)
WORKSPACE_PATH = ("/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/"
                  "Microsoft.MachineLearningServices/workspaces/{workspaceName}")


def _workspace(response: requests.Response, method: str) -> dict:
    """The answer held to the operation's definition, and to the keys Workspace and WorkspaceProperties declare
    (neither forbids others, so a key of the emulator's own would pass the schema unseen)."""
    body = conforms(response, 200, response_definition(WORKSPACE_SPEC, WORKSPACE_PATH, method), WORKSPACE_SPEC)
    assert set(body) - declared(WORKSPACE_SPEC, "Workspace") == set()
    assert set(body["properties"]) - declared(WORKSPACE_SPEC, "WorkspaceProperties") == set()
    return body


def test_workspace_get_answer_meets_the_definition(emulator):
    got = _workspace(call(emulator, "GET", W, api=WORKSPACE_API), "get")
    assert (got["name"], got["location"], got["properties"]["provisioningState"]) == (WS, "eastus", "Succeeded")
    assert got["properties"]["discoveryUrl"].startswith(emulator.url)
    # and azure-ai-ml reads it as the workspace it asked for
    from infra_cli.commands.backend import build_clients
    from infra_cli.stack.model import Workspace

    ml = build_clients(Workspace(subscription_id=SUB, resource_group=RG, name=WS, location="eastus"), local=True,
                       emulator=emulator).ml
    read = ml.workspaces.get(WS)
    assert (read.name, read.location, read.discovery_url) == (WS, "eastus", got["properties"]["discoveryUrl"])


def test_workspace_put_answers_meet_the_definition(emulator):
    from azure.ai.ml.entities import Workspace as SdkWorkspace

    from infra_cli.azure.clients import EmulatorTarget
    from infra_cli.stack.model import Workspace

    # `infra --local` against a served emulator: a GET, then a PUT of {"location": ...} for an absent workspace
    target = EmulatorTarget(emulator.url, emulator.port, emulator.cert_path, emulator.token)
    emulator.stats.reset()
    target.ensure_workspace(Workspace(subscription_id=SUB, resource_group=RG, name="ws-infra", location="eastus"), 0)
    assert [(r.method, r.status) for r in emulator.stats.matching(path_contains="/workspaces/ws-infra")] == \
        [("GET", 404), ("PUT", 200)]
    _workspace(call(emulator, "GET", W.replace(WS, "ws-infra"), api=WORKSPACE_API), "get")
    created = _workspace(call(emulator, "PUT", W.replace(WS, "ws-bare"), {"location": "eastus"}, api=WORKSPACE_API),
                         "put")
    assert created["properties"]["provisioningState"] == "Succeeded"

    # the body azure-ai-ml builds for a workspace (its 2024-10-01-preview model), created, then its tags changed
    body = SdkWorkspace(name="ws-sdk", location="eastus", description="conformance",
                        tags={"infra.stack": "conform"})._to_rest_object().as_dict()
    sdk = W.replace(WS, "ws-sdk")
    first = _workspace(call(emulator, "PUT", sdk, body, api=WORKSPACE_API), "put")
    assert (first["tags"], first["properties"]["description"]) == ({"infra.stack": "conform"}, "conformance")
    body["tags"] = {"infra.stack": "changed"}
    again = _workspace(call(emulator, "PUT", sdk, body, api=WORKSPACE_API), "put")
    assert again["tags"] == {"infra.stack": "changed"}
    assert again["properties"]["workspaceId"] == first["properties"]["workspaceId"]


JOB_GET_API, JOB_PUT_API = "2024-01-01-preview", "2025-01-01-preview"   # azure-ai-ml's jobs.get/list, create
JOB_STATUSES = {"NotStarted", "Starting", "Provisioning", "Preparing", "Queued", "Running", "Finalizing",
                "CancelRequested", "Completed", "Failed", "Canceled"}


def _job(emulator, name: str) -> dict:
    return conforms(call(emulator, "GET", f"{W}/jobs/{name}", api=JOB_GET_API), 200, "JobBaseResource",
                    ASSETS_PREVIEW_SPEC)


def _until_terminal(emulator, name: str, timeout: float = 60) -> dict:
    """Every answer on the way (NotStarted .. Completed/Canceled) held to the definition, the last returned."""
    deadline = time.time() + timeout
    while True:
        body = _job(emulator, name)
        if body["properties"]["status"] in ("Completed", "Failed", "Canceled") or time.time() > deadline:
            return body
        time.sleep(0.2)


@pytest.fixture(scope="module")
def submitted(emulator):
    """A command job submitted through azure-ai-ml (the body the SDK sends), with a literal input, an output
    and a PyTorch distribution, on a cluster and environment created through the SDK too."""
    from azure.ai.ml import Output, PyTorchDistribution, command
    from azure.ai.ml.entities import AmlCompute, Environment

    from infra_cli.commands.backend import build_clients
    from infra_cli.stack.model import Workspace

    ml = build_clients(Workspace(subscription_id=SUB, resource_group=RG, name=WS, location="eastus"), local=True,
                       emulator=emulator).ml
    ml.compute.begin_create_or_update(AmlCompute(name="jobs", size="Standard_ND96asr_v4", max_instances=2)).result()
    ml.environments.create_or_update(Environment(name="jobs", version="1", image=ENVIRONMENT["properties"]["image"]))
    job = command(command="echo ${{inputs.epochs}}", inputs={"epochs": 2},
                  outputs={"model": Output(type="uri_folder")}, environment="jobs:1", compute="jobs",
                  instance_count=2, distribution=PyTorchDistribution(process_count_per_instance=1),
                  environment_variables={"CONFORM": "1"}, description="conformance")
    return ml, ml.jobs.create_or_update(job).name


def test_job_answers_meet_the_definitions(emulator, submitted):
    ml, name = submitted
    first = _job(emulator, name)
    props = first["properties"]
    assert (props["jobType"], props["distribution"]["distributionType"]) == ("Command", "PyTorch")
    assert props["inputs"]["epochs"]["jobInputType"] == "literal"
    assert props["outputs"]["model"]["jobOutputType"] == "uri_folder"
    assert props["status"] in JOB_STATUSES
    done = _until_terminal(emulator, name)
    assert done["properties"]["status"] == "Completed", done["properties"]["status"]
    listed = conforms(call(emulator, "GET", f"{W}/jobs", api=JOB_GET_API), 200, "JobBaseResourceArmPaginatedResult",
                      ASSETS_PREVIEW_SPEC)
    assert name in [j["name"] for j in listed["value"]]


def test_job_put_answers_meet_the_definition(emulator, submitted):
    ml, name = submitted
    # the body azure-ai-ml sent, as the emulator kept it, less what only the service writes
    body = {"properties": {k: v for k, v in _job(emulator, name)["properties"].items()
                           if k not in ("status", "services")}}
    created = conforms(call(emulator, "PUT", f"{W}/jobs/{name}-again", body, api=JOB_PUT_API), 201,
                       "JobBaseResource", ASSETS_PREVIEW_SPEC)
    assert created["properties"]["status"] == "NotStarted"
    body["properties"]["description"] = "changed"
    updated = conforms(call(emulator, "PUT", f"{W}/jobs/{name}-again", body, api=JOB_PUT_API), 200,
                       "JobBaseResource", ASSETS_PREVIEW_SPEC)
    assert updated["properties"]["description"] == "changed"
    _until_terminal(emulator, f"{name}-again")


def test_canceled_job_answers_meet_the_definition(emulator, submitted):
    ml, name = submitted
    body = {"properties": {k: v for k, v in _job(emulator, name)["properties"].items()
                           if k not in ("status", "services")}}
    body["properties"]["command"] = "sleep 30"
    body["properties"].pop("inputs")
    call(emulator, "PUT", f"{W}/jobs/{name}-cancel", body, api=JOB_PUT_API)
    canceled = call(emulator, "POST", f"{W}/jobs/{name}-cancel/cancel", api=JOB_GET_API)
    assert canceled.status_code == 202 and canceled.content == b""
    assert _job(emulator, f"{name}-cancel")["properties"]["status"] in ("CancelRequested", "Canceled")
    assert _until_terminal(emulator, f"{name}-cancel")["properties"]["status"] == "Canceled"

@pytest.mark.parametrize("method,path,body,status", [
    ("GET", f"{W}/computes/absent", None, 404),
    ("PUT", f"{W}/computes/life", {**CLUSTER, "properties": {**CLUSTER["properties"], "computeType": "AKS"}}, 400),
    ("PATCH", f"{W}/computes/absent", {"properties": {}}, 404),
    ("GET", f"{W}/environments/absent/versions/1", None, 404),
    ("PUT", f"{W}/environments/conform/versions/1", {"properties": {}}, 400),
    ("PUT", W.replace(WS, "ws-nowhere"), {"properties": {}}, 400),
    ("GET", f"subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.MachineLearningServices/workspaces/none/computes",
     None, 404),
    # routes the emulator does not serve, for the token's holder: ARM's error shape, not a bare 404
    ("GET", f"{W}/onlineEndpoints", None, 404),
    ("POST", f"{W}/computes/gpu/stop", None, 404),
    ("DELETE", f"{W}/environments/conform/versions/1", None, 405),
])
def test_errors_have_azures_error_response_shape(emulator, method, path, body, status):
    answer = conforms(call(emulator, method, path, body), status, "ErrorResponse", TYPES_SPEC)
    assert answer["error"]["code"] and answer["error"]["message"]
    assert answer["error"]["code"] == answer["error"]["code"].strip() and " " not in answer["error"]["code"]
    assert answer == {"error": answer["error"]}


def test_a_method_not_allowed_names_those_allowed(emulator):
    answer = call(emulator, "DELETE", f"{W}/environments/conform/versions/1")
    assert answer.status_code == 405 and answer.json()["error"]["code"] == "MethodNotAllowed"
    assert set(answer.headers["Allow"].split(", ")) == {"GET", "PUT"}


@pytest.mark.parametrize("path", [f"{W}/onlineEndpoints", f"{W}/computes/gpu/stop", "nothing/at/all"])
def test_strangers_get_401_not_the_route_table(emulator, path):
    for token in ("", "not-the-token"):
        answer = call(emulator, "GET", path, token=token)
        assert answer.status_code == 401
        assert answer.json()["error"]["code"] in ("AuthenticationFailed", "InvalidAuthenticationToken")
        assert "not serve" not in answer.text and "allow" not in answer.text.lower()


def test_every_arm_route_is_accounted_for():
    """A route answering ARM (api-version) is checked above or named in NOT_CHECKED with why."""
    checked = {"get_compute", "list_computes", "put_compute", "patch_compute", "delete_compute", "operation_status",
               "list_versions", "get_version", "put_version", "resource_skus", "ml_usages", "ml_vm_sizes",
               "compute_usages", "list_datastores", "get_datastore", "list_containers", "get_container",
               "put_container", "start_pending_upload", "list_environments", "get_environment",
               "list_jobs", "get_job", "put_job", "get_workspace", "put_workspace"}
    arm = {r.handler.__name__ for r in routes.ROUTES if r.api_version}
    assert arm - checked - set(NOT_CHECKED) == set()
    assert set(NOT_CHECKED) <= arm, "NOT_CHECKED names a route that is gone"


# --- Azure's recorded example requests, replayed against the emulator --------------------------------------

def _shape(value):
    """A JSON value's shape: dict keys with their shapes, a list's first element, a scalar's type; null is
    any shape (Azure's own examples answer null where a value may be)."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return None if value is None else type(value).__name__


def _same_shape(recorded, answered, path: str = "") -> list[str]:
    """Where `answered` lacks what `recorded` has, or has it as another JSON type."""
    if recorded is None or answered is None:
        return []   # null where the other has a value: whether null is allowed there is problems()' to say
    if isinstance(recorded, dict):
        if not isinstance(answered, dict):
            return [f"{path or '/'}: recorded an object, answered {answered!r}"]
        out = []
        for key, value in recorded.items():
            if key not in answered:
                out.append(f"{path}/{key}: recorded, not answered")
            else:
                out += _same_shape(value, answered[key], f"{path}/{key}")
        return out
    if isinstance(recorded, list):
        if not isinstance(answered, list):
            return [f"{path}: recorded a list, answered {answered!r}"]
        return _same_shape(recorded[0], answered[0], f"{path}/0") if recorded and answered else []
    if answered is not None and type(answered).__name__ != type(recorded).__name__:
        return [f"{path}: recorded {type(recorded).__name__}, answered {type(answered).__name__}"]
    return []


@pytest.fixture(scope="module")
def example_emulator(tmp_path_factory):
    """An emulator holding the recorded examples' workspace (their subscription, group and name)."""
    server = start_emulator(tmp_path_factory.mktemp("examples") / "local")
    p = ml_example("Compute/get/AmlCompute.json")["parameters"]
    server.ensure_workspace(p["subscriptionId"], p["resourceGroupName"], p["workspaceName"], "eastus")
    yield server
    server.stop()


def _example_path(p: dict, tail: str) -> str:
    return (f"subscriptions/{p['subscriptionId']}/resourceGroups/{p['resourceGroupName']}/providers/"
            f"Microsoft.MachineLearningServices/workspaces/{p['workspaceName']}/{tail}")


def test_recorded_compute_requests_get_answers_of_the_recorded_shape(example_emulator):
    basic = ml_example("Compute/createOrUpdate/BasicAmlCompute.json")
    p = basic["parameters"]
    request = copy.deepcopy(p["parameters"])
    # The replay's one change: the example's STANDARD_NC6 was retired in 2023 (validators/skus.yaml), so the
    # emulated region no longer offers it, as Azure no longer does; an offered size, in the same upper case.
    request["properties"]["properties"]["vmSize"] = "STANDARD_ND96ASR_V4"
    created = call(example_emulator, "PUT", _example_path(p, f"computes/{p['computeName']}"), request)
    assert str(created.status_code) in basic["responses"], created.text
    assert _same_shape(response_body(basic, str(created.status_code)), created.json()) == []
    assert problems(created.json(), "ComputeResource", request=False) == []
    # what the request set comes back as sent (image, OS), the size in Azure's upper case
    inner = created.json()["properties"]["properties"]
    assert inner["virtualMachineImage"] == request["properties"]["properties"]["virtualMachineImage"]
    assert (inner["osType"], inner["vmSize"]) == ("Windows", "STANDARD_ND96ASR_V4")

    got = settled(example_emulator, p["computeName"], _example_path(p, "").rstrip("/"))
    recorded_get = response_body(ml_example("Compute/get/AmlCompute.json"))
    assert _same_shape(recorded_get, got) == []
    assert problems(got, "ComputeResource", request=False) == []

    listed = call(example_emulator, "GET", _example_path(p, "computes")).json()
    recorded_list = response_body(ml_example("Compute/list.json"))
    # the recorded list holds AKS computes only: their envelope and the Compute fields every type shares, less
    # resourceId (the attached AKS cluster's own id; a cluster the workspace made has none)
    aml = copy.deepcopy(recorded_list["value"][0])
    del aml["properties"]["resourceId"]
    # the recorded nextLink says more pages follow; one cluster fits one page (paging: the environment replay)
    assert "nextLink" not in listed
    assert _same_shape({"value": [aml]}, listed) == []

    patch = ml_example("Compute/patch.json")
    patched = call(example_emulator, "PATCH", _example_path(p, f"computes/{p['computeName']}"),
                   patch["parameters"]["parameters"])
    assert str(patched.status_code) in patch["responses"], patched.text
    assert _same_shape(response_body(patch), patched.json()) == []
    assert settled(example_emulator, p["computeName"], _example_path(p, "").rstrip("/"))[
        "properties"]["properties"]["scaleSettings"] == \
        patch["parameters"]["parameters"]["properties"]["properties"]["scaleSettings"]

    delete = ml_example("Compute/delete.json")
    deleted = call(example_emulator, "DELETE", _example_path(p, f"computes/{p['computeName']}"))
    assert str(deleted.status_code) in delete["responses"]


def test_recorded_environment_version_request_gets_an_answer_of_the_recorded_shape(example_emulator):
    recorded = ml_example("EnvironmentVersion/createOrUpdate.json")
    p = {**recorded["parameters"], **ml_example("Compute/get/AmlCompute.json")["parameters"]}
    body = copy.deepcopy(recorded["parameters"]["body"])
    # The example names its environment and version "string" and sends a build context and an image together;
    # the replay keeps its body as is and registers it under a name and version the example's placeholders allow.
    answered = call(example_emulator, "PUT", _example_path(p, "environments/recorded/versions/1"), body)
    assert str(answered.status_code) in recorded["responses"], answered.text
    assert _same_shape(response_body(recorded, str(answered.status_code)), answered.json()) == []
    assert problems(answered.json(), "EnvironmentVersionResource", request=False, spec=ASSETS_SPEC) == []

    got = call(example_emulator, "GET", _example_path(p, "environments/recorded/versions/1")).json()
    assert _same_shape(response_body(ml_example("EnvironmentVersion/get.json")), got) == []
    # a second version and pages of one: the list answers Azure's paged shape, nextLink and all
    call(example_emulator, "PUT", _example_path(p, "environments/recorded/versions/2"), body)
    example_emulator.backend.page_size = 1
    try:
        listed = call(example_emulator, "GET", _example_path(p, "environments/recorded/versions")).json()
        assert _same_shape(response_body(ml_example("EnvironmentVersion/list.json")), listed) == []
        following = requests.get(listed["nextLink"], headers={"Authorization": f"Bearer {example_emulator.token}"},
                                 verify=str(example_emulator.cert_path), timeout=30).json()
        assert [v["name"] for v in listed["value"] + following["value"]] == ["1", "2"]
        assert problems(following, "EnvironmentVersionResourceArmPaginatedResult", request=False,
                        spec=ASSETS_SPEC) == []
    finally:
        example_emulator.backend.page_size = 50

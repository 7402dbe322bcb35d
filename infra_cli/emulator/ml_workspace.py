"""Workspaces, their discovery document and their datastores."""

from __future__ import annotations

import uuid

from infra_cli.emulator.auth import signed_link_query
from infra_cli.emulator.service import EmulatedService, Scope
from infra_cli.emulator.blobs import ACCOUNT
from infra_cli.emulator.wire import ArmError, Request, Response, json_response, not_found, system_data, utc_now_iso



def artifact_container(workspace: dict) -> str:
    """The workspaceartifactstore container: job logs and outputs under ExperimentRun/dcid.JOB/."""
    return f"azureml-artifacts-{workspace['properties']['workspaceId']}"


def ensure_workspace(service: EmulatedService, scope: Scope, location: str) -> dict:
    """The workspace's body, created first if absent (local mode: a stack's workspace exists)."""
    with service.store.lock:
        body = service.store.get("workspace", scope.group_key, scope.workspace)
        if body is None:
            body = _new_workspace(scope, location, {}, service.world.workspace_isolation)
            service.store.put("workspace", scope.group_key, scope.workspace, body)
    return body


def _new_workspace(scope: Scope, location: str, request: dict, isolation: str) -> dict:
    """`isolation`: the managed network's isolation mode when the request sets none (the world's)."""
    workspace_id = str(uuid.uuid4())
    wanted = ((request.get("properties") or {}).get("managedNetwork") or {}).get("isolationMode") or isolation
    now = utc_now_iso()
    sub, rg = scope.subscription, scope.resource_group
    return {
        "id": scope.arm_id, "name": scope.workspace, "type": "Microsoft.MachineLearningServices/workspaces",
        "location": location.replace(" ", "").lower(), "kind": "Default", "tags": request.get("tags") or {},
        "identity": {"type": "SystemAssigned"}, "sku": {"name": "Basic", "tier": "Basic"},
        "systemData": system_data(now),
        "properties": {
            "workspaceId": workspace_id, "friendlyName": scope.workspace, "provisioningState": "Succeeded",
            "description": (request.get("properties") or {}).get("description", ""),
            "storageAccount": f"/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Storage/storageAccounts/{ACCOUNT}",
            "keyVault": f"/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.KeyVault/vaults/kv-local",
            "applicationInsights": f"/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Insights/components/ai-local",
            "hbiWorkspace": False, "publicNetworkAccess": "Enabled", "v1LegacyMode": False,
            # ManagedNetworkSettings (workspaceRP.json): the mode, no outbound rules of the user's, and its status
            "managedNetwork": {"isolationMode": wanted, "outboundRules": {},
                               "status": {"status": "Inactive" if wanted == "Disabled" else "Active",
                                          "sparkReady": False}},
        },
    }


def _with_urls(service: EmulatedService, body: dict) -> dict:
    # The discovery URL carries the server's current port, so it is computed on read, never stored.
    props = dict(body["properties"])
    workspace_id = props["workspaceId"]
    props["discoveryUrl"] = (f"{service.base_url}discovery/workspaces/{workspace_id}?"
                             + signed_link_query(service.token, "discovery", workspace_id))
    props["mlFlowTrackingUri"] = f"azureml://{service.base_url.split('//', 1)[1]}mlflow/v1.0{body['id']}"
    return {**body, "properties": props}


def get_workspace(service: EmulatedService, req: Request, scope: Scope) -> Response:
    return json_response(200, _with_urls(service, service.workspace(scope)))


def put_workspace(service: EmulatedService, req: Request, scope: Scope) -> Response:
    request = req.json()
    with service.store.lock:
        existing = service.store.get("workspace", scope.group_key, scope.workspace)
        if existing is not None:
            body = {**existing, "tags": request.get("tags", existing.get("tags") or {})}
            status = 200
        else:
            location = request.get("location")
            if not location:
                raise ArmError(400, "LocationRequired", "The location property is required for this definition.")
            # Workspaces_CreateOrUpdate answers 200 (or 202), never 201 (workspaceRP.json, Workspace/create.json)
            body, status = _new_workspace(scope, location, request, service.world.workspace_isolation), 200
        service.store.put("workspace", scope.group_key, scope.workspace, body)
    return json_response(status, _with_urls(service, body))


def get_discovery(service: EmulatedService, req: Request, workspace_id: str) -> Response:
    base = service.base_url.rstrip("/")
    services = ("api", "catalog", "experimentation", "gallery", "history", "hyperdrive", "labeling",
                "modelmanagement", "pipelines", "studio")
    return json_response(200, {name: base for name in services})


def _datastore(service: EmulatedService, scope: Scope, name: str, container: str, default: bool) -> dict:
    # The SDK builds the account URL as "https://{accountName}.blob.{storage_endpoint}". A path-style
    # account name ending in '#' turns the rest into a URL fragment, so the URL lands on this emulator's
    # blob endpoint ("https://127.0.0.1:PORT/devstoreaccount1") whatever the cloud's storage endpoint.
    account = f"{service.base_url.split('//', 1)[1]}{ACCOUNT}#"
    return {
        "id": f"{scope.arm_id}/datastores/{name}", "name": name,
        "type": "Microsoft.MachineLearningServices/workspaces/datastores",
        "properties": {"datastoreType": "AzureBlob", "accountName": account, "containerName": container,
                       "endpoint": "core.windows.net", "protocol": "https", "isDefault": default,
                       "credentials": {"credentialsType": "None"}, "description": "", "tags": {}},
    }


def _datastores(service: EmulatedService, scope: Scope) -> list[dict]:
    workspace = service.workspace(scope)
    workspace_id = workspace["properties"]["workspaceId"]
    return [_datastore(service, scope, "workspaceblobstore", f"azureml-blobstore-{workspace_id}", True),
            _datastore(service, scope, "workspaceartifactstore", artifact_container(workspace), False)]


def list_datastores(service: EmulatedService, req: Request, scope: Scope) -> Response:
    stores = _datastores(service, scope)
    if req.query.get("isdefault", "").lower() == "true":
        stores = [s for s in stores if s["properties"]["isDefault"]]
    return json_response(200, service.page(req, stores))


def get_datastore(service: EmulatedService, req: Request, scope: Scope, name: str) -> Response:
    for store in _datastores(service, scope):
        if store["name"].lower() == name.lower():
            return json_response(200, store)
    raise not_found("datastore", name, scope.workspace)

"""Workspaces, their discovery document and their datastores."""

from __future__ import annotations

import uuid

from infra_cli.emulator.auth import signed_link_query
from infra_cli.emulator.backend import Backend, Scope
from infra_cli.emulator.blobs import ACCOUNT
from infra_cli.emulator.wire import ArmError, Request, Response, json_response, not_found, system_data, utc_now_iso



def artifact_container(workspace: dict) -> str:
    """The workspaceartifactstore container: job logs and outputs under ExperimentRun/dcid.JOB/."""
    return f"azureml-artifacts-{workspace['properties']['workspaceId']}"


def ensure_workspace(backend: Backend, scope: Scope, location: str) -> dict:
    """The workspace's body, created first if absent (local mode: a stack's workspace exists)."""
    with backend.store.lock:
        body = backend.store.get("workspace", scope.group_key, scope.workspace)
        if body is None:
            body = _new_workspace(scope, location, {})
            backend.store.put("workspace", scope.group_key, scope.workspace, body)
    return body


def _new_workspace(scope: Scope, location: str, request: dict) -> dict:
    workspace_id = str(uuid.uuid4())
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
        },
    }


def _with_urls(backend: Backend, body: dict) -> dict:
    # The discovery URL carries the server's current port, so it is computed on read, never stored.
    props = dict(body["properties"])
    workspace_id = props["workspaceId"]
    props["discoveryUrl"] = (f"{backend.base_url}discovery/workspaces/{workspace_id}?"
                             + signed_link_query(backend.token, "discovery", workspace_id))
    props["mlFlowTrackingUri"] = f"azureml://{backend.base_url.split('//', 1)[1]}mlflow/v1.0{body['id']}"
    return {**body, "properties": props}


def get_workspace(backend: Backend, req: Request, scope: Scope) -> Response:
    return json_response(200, _with_urls(backend, backend.workspace(scope)))


def put_workspace(backend: Backend, req: Request, scope: Scope) -> Response:
    request = req.json()
    with backend.store.lock:
        existing = backend.store.get("workspace", scope.group_key, scope.workspace)
        if existing is not None:
            body = {**existing, "tags": request.get("tags", existing.get("tags") or {})}
            status = 200
        else:
            location = request.get("location")
            if not location:
                raise ArmError(400, "LocationRequired", "The location property is required for this definition.")
            # Workspaces_CreateOrUpdate answers 200 (or 202), never 201 (workspaceRP.json, Workspace/create.json)
            body, status = _new_workspace(scope, location, request), 200
        backend.store.put("workspace", scope.group_key, scope.workspace, body)
    return json_response(status, _with_urls(backend, body))


def get_discovery(backend: Backend, req: Request, workspace_id: str) -> Response:
    base = backend.base_url.rstrip("/")
    services = ("api", "catalog", "experimentation", "gallery", "history", "hyperdrive", "labeling",
                "modelmanagement", "pipelines", "studio")
    return json_response(200, {name: base for name in services})


def _datastore(backend: Backend, scope: Scope, name: str, container: str, default: bool) -> dict:
    # The SDK builds the account URL as "https://{accountName}.blob.{storage_endpoint}". A path-style
    # account name ending in '#' turns the rest into a URL fragment, so the URL lands on this emulator's
    # blob endpoint ("https://127.0.0.1:PORT/devstoreaccount1") whatever the cloud's storage endpoint.
    account = f"{backend.base_url.split('//', 1)[1]}{ACCOUNT}#"
    return {
        "id": f"{scope.arm_id}/datastores/{name}", "name": name,
        "type": "Microsoft.MachineLearningServices/workspaces/datastores",
        "properties": {"datastoreType": "AzureBlob", "accountName": account, "containerName": container,
                       "endpoint": "core.windows.net", "protocol": "https", "isDefault": default,
                       "credentials": {"credentialsType": "None"}, "description": "", "tags": {}},
    }


def _datastores(backend: Backend, scope: Scope) -> list[dict]:
    workspace = backend.workspace(scope)
    workspace_id = workspace["properties"]["workspaceId"]
    return [_datastore(backend, scope, "workspaceblobstore", f"azureml-blobstore-{workspace_id}", True),
            _datastore(backend, scope, "workspaceartifactstore", artifact_container(workspace), False)]


def list_datastores(backend: Backend, req: Request, scope: Scope) -> Response:
    stores = _datastores(backend, scope)
    if req.query.get("isdefault", "").lower() == "true":
        stores = [s for s in stores if s["properties"]["isDefault"]]
    return json_response(200, backend.page(req, stores))


def get_datastore(backend: Backend, req: Request, scope: Scope, name: str) -> Response:
    for store in _datastores(backend, scope):
        if store["name"].lower() == name.lower():
            return json_response(200, store)
    raise not_found("datastore", name, scope.workspace)

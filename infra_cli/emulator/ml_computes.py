"""Azure ML computes (AmlCompute clusters): GET, list, PUT, PATCH of scale settings, DELETE.

Azure's refusals are modelled: a PUT that changes a field fixed at creation, a size not offered to the
subscription in the region, a cluster whose maximum would exceed the family's vCPU quota, an invalid name.
Creates, updates and deletes are long-running (Azure-AsyncOperation) and last provisioning_delay_s.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from infra_cli.emulator.service import EmulatedService, Scope
from infra_cli.emulator.wire import (ArmError, Request, Response, json_response, not_found, public, system_data,
                                    utc_now_iso)

TYPE = "compute"
_BUSY = {"Creating", "Updating", "Deleting"}

# Fields fixed when a cluster is created: (label for the message, path under properties.properties, default).
_IMMUTABLE = (
    ("vmSize", ("vmSize",), None),
    ("vmPriority", ("vmPriority",), "Dedicated"),
    ("subnet", ("subnet", "id"), None),
    ("enableNodePublicIp", ("enableNodePublicIp",), True),
    ("userAccountCredentials", ("userAccountCredentials",), None),
    ("osType", ("osType",), "Linux"),
)


def _inner(body: dict) -> dict:
    return (body.get("properties") or {}).get("properties") or {}


def _field(inner: dict, path: tuple[str, ...], default):
    value: Any = inner
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    if isinstance(value, str) and path == ("vmSize",):
        value = value.lower()
    return default if value in (None, "", {}) else value


def _credentials_fingerprint(creds: dict | None) -> str | None:
    # SSH keys and passwords are never stored or echoed: only a digest, to notice a change.
    if not creds:
        return None
    return hashlib.sha256(json.dumps(creds, sort_keys=True).encode()).hexdigest()


def compute_usage(service: EmulatedService, subscription: str, location: str, family: str | None, *,
                  priority: str | None = None, excluding: tuple[str, str] | None = None) -> int:
    """vCPUs committed in a family (None: every family) and region, of one priority (Dedicated, LowPriority;
    None: both): every live cluster's maximum nodes x the size's vCPUs.

    Azure counts only allocated nodes; the emulator counts each cluster's maximum, so a create that could
    never scale to its maximum is refused up front, where plan and apply can report it."""
    used = 0
    for row in service.store.rows(TYPE):
        if not row.scope.startswith(subscription.lower() + "/") or excluding == (row.scope, row.name):
            continue
        body = row.body
        if body.get("location", "").lower() != location.lower():
            continue
        if body["properties"].get("provisioningState") == "Failed":
            continue
        inner = _inner(body)
        if priority is not None and str(inner.get("vmPriority") or "Dedicated").lower() != priority.lower():
            continue
        sku = service.world.catalog.get(inner.get("vmSize", ""))
        if sku is not None and (family is None or sku.family.lower() == family.lower()):
            used += int((inner.get("scaleSettings") or {}).get("maxNodeCount", 0)) * sku.vcpus
    return used


def get_compute(service: EmulatedService, req: Request, scope: Scope, name: str) -> Response:
    service.workspace(scope)
    body = service.store.get(TYPE, scope.key, name)
    if body is None:
        raise not_found("compute", name, scope.workspace)
    return json_response(200, public(body))


def list_computes(service: EmulatedService, req: Request, scope: Scope) -> Response:
    service.workspace(scope)
    return json_response(200, service.page(req, [public(r.body) for r in service.store.rows(TYPE, scope.key)]))


def put_compute(service: EmulatedService, req: Request, scope: Scope, name: str) -> Response:
    workspace = service.workspace(scope)
    service.check_name("compute", name)
    request = req.json()
    props = request.get("properties") or {}
    if props.get("computeType") == "Kubernetes":
        return _attach_kubernetes(service, scope, name, request, props, workspace)
    if props.get("computeType") != "AmlCompute":
        raise ArmError(400, "BadRequest", f"computeType {props.get('computeType')!r} is not supported by the "
                       "emulator: only AmlCompute clusters and attached Kubernetes computes are.",
                       target="properties.computeType")
    inner = dict(props.get("properties") or {})
    if not inner.get("vmSize"):
        raise ArmError(400, "BadRequest", "properties.properties.vmSize is required.", target="vmSize")
    location = (request.get("location") or props.get("computeLocation") or workspace["location"]).replace(" ", "").lower()
    with service.store.lock:
        existing = service.store.get(TYPE, scope.key, name)
        if existing is not None:
            return _update(service, req, scope, name, existing, request, inner, location)
        _check_size(service, inner["vmSize"], location)
        _check_quota(service, scope, name, inner, location)
        _check_node_network(workspace, inner)
        body = _new_body(scope, name, request, inner, location)
        _refuse_low_priority(service, inner, body)
        op = service.start_operation(TYPE, scope, name, "create",
                                     on_success=_state(body, "Succeeded"), on_failure=_failed(body))
        service.store.put(TYPE, scope.key, name, _state(body, "Creating"))
    return json_response(201, public(_state(body, "Creating")), _async_headers(service, req, op, location))


def _update(service: EmulatedService, req: Request, scope: Scope, name: str, existing: dict, request: dict,
            inner: dict, location: str) -> Response:
    state = existing["properties"].get("provisioningState")
    if state in _BUSY:
        raise ArmError(409, "Conflict", f"Compute '{name}' is {state.lower()}; wait for that operation to finish "
                       "before changing it.")
    old_inner = _inner(existing)
    new_inner = {**inner, "userAccountCredentials": _credentials_fingerprint(inner.get("userAccountCredentials"))}
    for label, path, default in _IMMUTABLE:
        before = (existing.get("_private") or {}).get("credentialsDigest") if label == "userAccountCredentials" \
            else _field(old_inner, path, default)
        after = _field(new_inner, path, default)
        if before != after:
            raise ArmError(409, "PropertyChangeNotAllowed",
                           f"Changing property '{label}' of existing compute '{name}' is not allowed"
                           + ("" if label == "userAccountCredentials" else f" ({before} -> {after})")
                           + ": delete the compute and create it again.", target=label)
    if location != existing["location"].lower():
        raise ArmError(409, "PropertyChangeNotAllowed", f"Changing property 'location' of existing compute "
                       f"'{name}' is not allowed ({existing['location']} -> {location}).", target="location")
    access = inner.get("remoteLoginPortPublicAccess", "NotSpecified")
    if access != "NotSpecified" and access != old_inner.get("remoteLoginPortPublicAccess", "NotSpecified"):
        raise ArmError(409, "PropertyChangeNotAllowed", f"Changing property 'remoteLoginPortPublicAccess' of "
                       f"existing compute '{name}' is not allowed.", target="remoteLoginPortPublicAccess")
    updated = copy.deepcopy(existing)
    updated["tags"] = request.get("tags", existing.get("tags") or {})
    if "identity" in request:
        updated["identity"] = request["identity"]
    if "description" in request.get("properties", {}):
        updated["properties"]["description"] = request["properties"]["description"]
    return _rescale(service, req, scope, name, existing, updated, inner.get("scaleSettings"), location)


def patch_compute(service: EmulatedService, req: Request, scope: Scope, name: str) -> Response:
    service.workspace(scope)
    request = req.json()
    # ClusterUpdateParameters: {"properties": {"properties": {"scaleSettings": ...}}} (Compute/patch.json)
    scale = (((request.get("properties") or {}).get("properties") or {}).get("scaleSettings"))
    with service.store.lock:
        existing = service.store.get(TYPE, scope.key, name)
        if existing is None:
            raise not_found("compute", name, scope.workspace)
        state = existing["properties"].get("provisioningState")
        if state in _BUSY:
            raise ArmError(409, "Conflict", f"Compute '{name}' is {state.lower()}; wait for that operation to finish.")
        return _rescale(service, req, scope, name, existing, copy.deepcopy(existing), scale, existing["location"])


def _rescale(service: EmulatedService, req: Request, scope: Scope, name: str, existing: dict, updated: dict,
             scale: dict | None, location: str) -> Response:
    inner = updated["properties"]["properties"]
    if scale:
        merged = {**inner.get("scaleSettings", {}), **scale}
        if int(merged.get("minNodeCount", 0)) > int(merged.get("maxNodeCount", 0)):
            raise ArmError(400, "BadRequest", f"minNodeCount ({merged.get('minNodeCount')}) cannot exceed "
                           f"maxNodeCount ({merged.get('maxNodeCount')}).", target="scaleSettings")
        inner["scaleSettings"] = merged
    _check_quota(service, scope, name, inner, location)
    updated["properties"]["modifiedOn"] = utc_now_iso()
    op = service.start_operation(TYPE, scope, name, "update",
                                 on_success=_state(updated, "Succeeded"), on_failure=existing)
    service.store.put(TYPE, scope.key, name, _state(existing, "Updating"))
    return json_response(200, public(_state(updated, "Updating")), _async_headers(service, req, op, location))


def delete_compute(service: EmulatedService, req: Request, scope: Scope, name: str) -> Response:
    service.workspace(scope)
    with service.store.lock:
        existing = service.store.get(TYPE, scope.key, name)
        if existing is None:
            return Response(204)
        op = _running_delete(service, scope, name) if existing["properties"].get("provisioningState") == "Deleting" \
            else None
        if op is None:
            _cancel_running(service, scope, name)
            # a failed delete leaves the cluster as it was: Failed stays Failed, anything else is Succeeded
            kept = existing if existing["properties"].get("provisioningState") in ("Failed", "Canceled") \
                else _state(existing, "Succeeded")
            op = service.start_operation(TYPE, scope, name, "delete", on_success=None, on_failure=kept)
            service.store.put(TYPE, scope.key, name, _state(existing, "Deleting"))
    headers = _async_headers(service, req, op, existing["location"])
    headers["Location"] = headers["Azure-AsyncOperation"]
    return Response(202, b"", headers)


def _cancel_running(service: EmulatedService, scope: Scope, name: str) -> None:
    """A delete cancels the create or update still running on the compute, as Azure does: that operation ends
    Canceled (its poller fails) and never writes the compute again, so a create whose caller was killed cannot
    bring back a cluster deleted after it (https://learn.microsoft.com/azure/azure-resource-manager/management/
    async-operations: Canceled is a terminal status of an operation)."""
    for op in service.store.operations(status="InProgress"):
        if (op.type, op.scope, op.name) == (TYPE, scope.key.lower(), name.lower()) and op.action in ("create", "update"):
            service.store.finish_operation(op.id, "Canceled", {
                "code": "Canceled", "message": f"The {op.action} operation on '{name}' was canceled: the compute was "
                                               "deleted before it completed."})


def _running_delete(service: EmulatedService, scope: Scope, name: str):
    """The delete already under way: DELETE is idempotent in ARM, a repeated one answers 202 with the same
    operation (https://github.com/Azure/azure-resource-manager-rpc/blob/master/v1.0/async-api-reference.md)."""
    for op in service.store.operations(status="InProgress"):
        if (op.type, op.scope, op.name, op.action) == (TYPE, scope.key, name.lower(), "delete"):
            return op
    return None


def _check_node_network(workspace: dict, inner: dict) -> None:
    """Nodes without public IPs live in a subnet of the user's virtual network, or in the workspace's managed one
    (https://learn.microsoft.com/azure/machine-learning/how-to-managed-network-compute): without either, refused."""
    if inner.get("enableNodePublicIp", True) is not False or _field(inner, ("subnet", "id"), None):
        return
    mode = ((workspace.get("properties") or {}).get("managedNetwork") or {}).get("isolationMode") or "Disabled"
    if mode == "Disabled":
        raise ArmError(400, "BadRequest", "A compute with enableNodePublicIp false needs a subnet, unless its "
                       "workspace has a managed virtual network (managedNetwork.isolationMode is Disabled). Set "
                       "properties.subnet.id, or enable the workspace's managed network.", target="subnet")


def _check_size(service: EmulatedService, size: str, location: str) -> None:
    offer = service.world.offer(location, size)
    if offer is None:
        raise ArmError(400, "SkuNotAvailable", f"The requested VM size {size} is not offered in location "
                       f"'{location}'. List the sizes offered there with GET .../locations/{location}/vmSizes.",
                       target="vmSize")
    if offer.restriction:
        raise ArmError(400, "SkuNotAvailable", f"The requested VM size {offer.sku.name} is currently not available "
                       f"in location '{location}' for this subscription ({offer.restriction}). Choose another "
                       "size or region, or request access.", target="vmSize")


def _refuse_low_priority(service: EmulatedService, inner: dict, body: dict) -> None:
    """A low-priority cluster of a size Azure ML runs only as dedicated (validators/skus.yaml `low_priority: false`)
    is created as Azure creates it, provisioning Succeeded, with UnsupportedVMSizeForLowPriority in its errors (as
    recorded in the size's low_priority_source): the request itself is not refused, and the error stays."""
    sku = service.world.catalog.get(inner["vmSize"])
    if sku is None or sku.low_priority or str(inner.get("vmPriority") or "").lower() != "lowpriority":
        return
    body["properties"]["properties"]["errors"] = [{"error": {
        "code": "UnsupportedVMSizeForLowPriority",
        "message": f"The VM size {sku.name.upper()} is not allowed for LowPriority. Please convert to Dedicated or "
                   "use a different VM size."}}]


def _check_quota(service: EmulatedService, scope: Scope, name: str, inner: dict, location: str) -> None:
    """Azure ML's quota, as its usages list shows it (compute_rp.ml_usages): dedicated nodes draw on their
    family's pool and the region's dedicated total, low-priority nodes on the region's low-priority total."""
    sku = service.world.catalog.get(inner["vmSize"])
    if sku is None:
        return
    needed = int((inner.get("scaleSettings") or {}).get("maxNodeCount", 0)) * sku.vcpus
    priority = "LowPriority" if str(inner.get("vmPriority") or "").lower() == "lowpriority" else "Dedicated"
    pools: list[tuple[str, str | None, int]] = [
        (f"Total Cluster {priority} Regional vCPUs", None, service.world.total_limit(location, priority))]
    if priority == "Dedicated":
        pools.append((ml_family_quota_name(sku.family, priority), sku.family,
                      service.world.family_limit(location, sku.family)))
    for pool, family, limit in pools:
        used = compute_usage(service, scope.subscription, location, family, priority=priority,
                             excluding=(scope.key, name.lower()))
        if used + needed > limit:
            raise ArmError(400, "QuotaExceeded",
                           f"Operation could not be completed as it results in exceeding approved quota of '{pool}'. "
                           f"Location: {location}, Current Limit: {limit}, Current Usage: {used}, Additional "
                           f"Required: {needed}, (Minimum) New Limit Required: {used + needed}. Lower max_instances "
                           f"or request an Azure ML quota increase in {location}.", target="maxNodeCount")


def ml_family_quota_name(family: str, priority: str) -> str:
    """Azure ML's name for a size family's quota: standardNDASv4_A100Family, Dedicated ->
    'Standard NDASv4_A100 Family Cluster Dedicated vCPUs' (Usage/list.json of the 2024-10-01 spec)."""
    core = family[len("standard"):] if family.lower().startswith("standard") else family
    core = core[: -len("family")] if core.lower().endswith("family") else core
    return f"Standard {core} Family Cluster {priority} vCPUs"


def _attach_kubernetes(service: EmulatedService, scope: Scope, name: str, request: dict, props: dict,
                       workspace: dict) -> Response:
    """`az ml compute attach --type Kubernetes`: a Kubernetes (Arc) cluster's ARM id attached under a name, with
    its namespace and instance types (Compute/createOrUpdate/KubernetesCompute.json); nothing is created, so it
    is there at once. Its jobs run here as a cluster's do."""
    resource_id = props.get("resourceId")
    if not (isinstance(resource_id, str) and resource_id.startswith("/subscriptions/")):
        raise ArmError(400, "BadRequest", "properties.resourceId must be the ARM id of the Kubernetes cluster to "
                       "attach.", target="properties.resourceId")
    now = utc_now_iso()
    with service.store.lock:
        if service.store.get(TYPE, scope.key, name) is not None:
            raise ArmError(409, "Conflict", f"Compute '{name}' already exists; detach it first.")
        location = workspace["location"]
        body = {"id": f"{scope.arm_id}/computes/{name}", "name": name,
                "type": "Microsoft.MachineLearningServices/workspaces/computes", "location": location,
                "tags": request.get("tags") or {}, "systemData": system_data(now),
                "properties": {"computeType": "Kubernetes", "computeLocation": location, "resourceId": resource_id,
                               "description": props.get("description"), "createdOn": now, "modifiedOn": now,
                               "isAttachedCompute": True, "provisioningState": "Succeeded",
                               "provisioningErrors": None, "properties": dict(props.get("properties") or {})}}
        service.store.put(TYPE, scope.key, name, body)
    return json_response(200, public(body))


def _new_body(scope: Scope, name: str, request: dict, inner: dict, location: str) -> dict:
    now = utc_now_iso()
    props = request.get("properties") or {}
    creds = inner.pop("userAccountCredentials", None)
    # Azure's shapes, as its recorded answers show them (Compute/get/AmlCompute.json): the size upper-cased,
    # the idle time as an ISO 8601 duration, the subnet as {"id"}, a null image and errors when there are none.
    shown = {
        "vmSize": inner["vmSize"].upper(), "vmPriority": inner.get("vmPriority", "Dedicated"),
        "osType": inner.get("osType", "Linux"), "virtualMachineImage": inner.get("virtualMachineImage"),
        "scaleSettings": {"minNodeCount": 0, "maxNodeCount": 1, "nodeIdleTimeBeforeScaleDown": "PT120S",
                          **(inner.get("scaleSettings") or {})},
        "enableNodePublicIp": inner.get("enableNodePublicIp", True),
        "remoteLoginPortPublicAccess": _ssh_access(inner),
        "isolatedNetwork": inner.get("isolatedNetwork", False),
        "allocationState": "Steady", "allocationStateTransitionTime": now, "errors": None,
        "currentNodeCount": 0, "targetNodeCount": 0,
        "nodeStateCounts": {"idleNodeCount": 0, "runningNodeCount": 0, "preparingNodeCount": 0,
                            "unusableNodeCount": 0, "leavingNodeCount": 0, "preemptedNodeCount": 0},
    }
    shown["subnet"] = {"id": inner["subnet"]["id"]} if _field(inner, ("subnet", "id"), None) else None
    if creds:
        shown["userAccountCredentials"] = {"adminUserName": creds.get("adminUserName")}
    body = {
        "_private": {"credentialsDigest": _credentials_fingerprint(creds)},
        "id": f"{scope.arm_id}/computes/{name}", "name": name,
        "type": "Microsoft.MachineLearningServices/workspaces/computes", "location": location,
        "tags": request.get("tags") or {}, "systemData": system_data(now),
        "properties": {"computeType": "AmlCompute", "computeLocation": location,
                       "description": props.get("description"), "createdOn": now, "modifiedOn": now,
                       "isAttachedCompute": False, "disableLocalAuth": props.get("disableLocalAuth", True),
                       "provisioningErrors": None, "properties": shown},
    }
    if request.get("identity"):   # Azure leaves identity out when there is none (never null: it is an object)
        body["identity"] = request["identity"]
    return body


def _ssh_access(inner: dict) -> str:
    # Azure resolves NotSpecified at creation: the public SSH port is closed behind a VNet, open otherwise.
    access = inner.get("remoteLoginPortPublicAccess") or "NotSpecified"
    if access != "NotSpecified":
        return access
    return "Disabled" if _field(inner, ("subnet", "id"), None) else "Enabled"


def _state(body: dict, state: str) -> dict:
    """The body in a provisioning state, with the node counts Azure shows in it: while the cluster is created or
    rescaled below its minimum it is Resizing towards minNodeCount (Compute/get/AmlCompute.json records
    Resizing with targetNodeCount 1); once done it is Steady with its minimum allocated, idle."""
    out = copy.deepcopy(body)
    out["properties"]["provisioningState"] = state
    inner = out["properties"].get("properties")
    if isinstance(inner, dict) and "allocationState" in inner:
        minimum = int((inner.get("scaleSettings") or {}).get("minNodeCount") or 0)
        resizing = state in ("Creating", "Updating") and minimum != inner.get("currentNodeCount", 0)
        allocation = "Resizing" if resizing else "Steady"
        if allocation != inner.get("allocationState"):
            inner["allocationState"], inner["allocationStateTransitionTime"] = allocation, utc_now_iso()
        inner["targetNodeCount"] = minimum
        if state in ("Succeeded", "Failed"):
            inner["currentNodeCount"] = minimum if state == "Succeeded" else inner.get("currentNodeCount", 0)
            inner.setdefault("nodeStateCounts", {})["idleNodeCount"] = inner["currentNodeCount"]
    return out


def _failed(body: dict) -> dict:
    """Failed as Azure records it: the compute's provisioningErrors and the cluster's errors, each an
    ErrorResponse ({"error": {"code", "message"}})."""
    out = _state(body, "Failed")
    errors = [{"error": {"code": "InternalServerError", "message": "Provisioning failed (injected by the emulator)."}}]
    out["properties"]["provisioningErrors"] = errors
    if isinstance(out["properties"].get("properties"), dict):
        out["properties"]["properties"]["errors"] = copy.deepcopy(errors)
    return out


def _async_headers(service: EmulatedService, req: Request, op, location: str) -> dict[str, str]:
    api_version = req.query.get("api-version", "2023-08-01-preview")
    return {"Azure-AsyncOperation": service.operation_url(op, location, api_version), **service.poll_after(op)}

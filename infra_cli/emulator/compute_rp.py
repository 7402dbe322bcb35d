"""Region facts: Microsoft.Compute resource SKUs and usages, Azure ML vmSizes and usages, and the status of
long-running operations. SKUs come from the catalog (validators/skus.yaml); offers, restrictions and quota
from the emulator's world (world.yaml)."""

from __future__ import annotations

import re
from typing import Any

from infra_cli.knowledge.skus import Sku
from infra_cli.emulator.service import EmulatedService
from infra_cli.emulator.ml_computes import compute_usage, ml_family_quota_name
from infra_cli.emulator.wire import ArmError, Request, Response, json_response

_LOCATION_FILTER = re.compile(r"location\s+eq\s+'([^']+)'", re.IGNORECASE)


def _capabilities(sku: Sku) -> list[dict]:
    values = {"vCPUs": sku.vcpus, "vCPUsAvailable": sku.vcpus, "GPUs": sku.gpus, "MemoryGB": sku.memory_gib,
              "RdmaEnabled": "True" if sku.rdma else "False", "LowPriorityCapable": "True",
              "HyperVGenerations": "V1,V2", "AcceleratedNetworkingEnabled": "True"}
    return [{"name": k, "value": str(v)} for k, v in values.items()]


def _location(location: str) -> str:
    return location.replace(" ", "").lower()


def resource_skus(service: EmulatedService, req: Request, subscription: str) -> Response:
    match = _LOCATION_FILTER.search(req.query.get("$filter", ""))
    regions = [_location(match.group(1))] if match else service.world.regions
    entries = []
    for region in regions:
        for offer in service.world.offers(region):
            sku = offer.sku
            restrictions = [] if offer.restriction is None else [{
                "type": "Location", "values": [region], "restrictionInfo": {"locations": [region], "zones": []},
                "reasonCode": offer.restriction}]
            entries.append({
                "resourceType": "virtualMachines", "name": sku.name, "tier": "Standard",
                "size": sku.name.removeprefix("Standard_"), "family": sku.family, "locations": [region],
                "locationInfo": [{"location": region, "zones": [], "zoneDetails": []}],
                "capabilities": _capabilities(sku), "restrictions": restrictions})
    return json_response(200, {"value": entries})


def _usages(service: EmulatedService, subscription: str, location: str) -> list[dict]:
    region = _location(location)
    rows = []
    for family in service.world.families(region):
        used = compute_usage(service, subscription, region, family)
        rows.append({"unit": "Count", "currentValue": used, "limit": service.world.family_limit(region, family),
                     "name": {"value": family, "localizedValue": f"{family} vCPUs"}})
    return rows


def compute_usages(service: EmulatedService, req: Request, subscription: str, location: str) -> Response:
    rows = _usages(service, subscription, location)
    total = {"unit": "Count", "currentValue": sum(r["currentValue"] for r in rows),
             "limit": sum(r["limit"] for r in rows), "name": {"value": "cores", "localizedValue": "Total Regional vCPUs"}}
    return json_response(200, {"value": [total, *rows]})


def ml_usages(service: EmulatedService, req: Request, subscription: str, location: str) -> Response:
    """Azure ML's quota as its usages list gives it (Usage/list.json of the 2024-10-01 spec): the region's
    dedicated and low-priority totals, and each family's dedicated and low-priority pools (the latter with no
    limit of their own, -1)."""
    region = _location(location)
    sub_id = f"/subscriptions/{subscription}"

    def row(kind: str, name: str, used: int, limit: int, suffix: str = "") -> dict:
        return {"id": f"{sub_id}/usages{suffix}", "amlWorkspaceLocation": region,
                "type": f"Microsoft.MachineLearningServices/{kind}/usages", "unit": "Count",
                "currentValue": used, "limit": limit, "name": {"value": name, "localizedValue": name}}

    rows = []
    for priority, kind in (("Dedicated", "dedicatedCores"), ("LowPriority", "lowPriorityCores")):
        rows.append(row(kind, f"Total Cluster {priority} Regional vCPUs",
                        compute_usage(service, subscription, region, None, priority=priority),
                        service.world.total_limit(region, priority)))
        for family in service.world.families(region):
            name = ml_family_quota_name(family, priority)
            rows.append(row("vmFamily", name, compute_usage(service, subscription, region, family, priority=priority),
                            service.world.family_limit(region, family) if priority == "Dedicated" else -1,
                            "/" + name.replace(" ", "_")))
    return json_response(200, {"value": rows})


def ml_vm_sizes(service: EmulatedService, req: Request, subscription: str, location: str) -> Response:
    # Azure ML lists only the sizes this subscription can use in the region.
    sizes = [{"name": o.sku.name, "family": o.sku.family, "vCPUs": o.sku.vcpus, "gpus": o.sku.gpus,
              "memoryGB": float(o.sku.memory_gib), "lowPriorityCapable": True, "premiumIO": True,
              "supportedComputeTypes": ["AmlCompute", "ComputeInstance"]}
             for o in service.world.offers(_location(location)) if o.restriction is None]
    return json_response(200, {"value": sizes})


def operation_status(service: EmulatedService, req: Request, subscription: str, location: str, op_id: str) -> Response:
    op = service.store.operation(op_id)
    if op is None or not op.scope.startswith(subscription.lower() + "/"):
        raise ArmError(404, "ResourceNotFound", f"The operation '{op_id}' was not found.")
    body: dict[str, Any] = {"id": req.path, "name": op_id, "status": op.status}
    if op.error:
        body["error"] = op.error
    return json_response(200, body, service.poll_after(op))

"""Live preflight: would the plan's clusters actually be created? Pure rules over data the provider read.

Checks: the workspace exists and is where the clusters are; each size exists and is not restricted in the
region (Microsoft.Compute resource SKUs); the live RdmaEnabled capability against the catalog (whose SR-IOV
knowledge wins for NC24r-class sizes); the vCPU quota of each family covers the clusters' max_instances.
"""

from __future__ import annotations

import datetime
from collections import defaultdict

from infra_cli.knowledge.skus import Catalog
from infra_cli.diagnostics import Diagnostic
from infra_cli.plan.live import LiveFacts
from infra_cli.plan.model import CREATE, DELETE, REPLACE, UPDATE, Resource, ResourceChange
from infra_cli.stack.source import SourceMap


# Offline rules whose verdict depends on what exists in Azure: `validate` reports them as for a new resource,
# and the plan leaves them out of its validation and judges them here, against the live state.
LIVE_JUDGED_RULES = frozenset({"cluster.size-retired"})


def _vcpus_delta(change: ResourceChange, facts: LiveFacts) -> tuple[str, int] | None:
    """(family, extra vCPUs this change reserves) for a cluster change, else None."""
    after, before = change.after or {}, change.before or {}
    sku = facts.skus.get(str(after.get("size", "")).lower())
    if sku is None:
        return None
    new = after.get("max_instances", 0) * sku.vcpus
    if change.actions == CREATE:
        return sku.family, new
    old_sku = facts.skus.get(str(before.get("size", "")).lower())
    old = before.get("max_instances", 0) * (old_sku.vcpus if old_sku else 0)
    if change.actions == REPLACE:
        return sku.family, new - (old if old_sku and old_sku.family == sku.family else 0)
    if change.actions == UPDATE:
        return sku.family, new - old
    return None


def preflight(changes: list[ResourceChange], desired: list[Resource], facts: LiveFacts, catalog: Catalog,
              source: SourceMap, workspace_name: str) -> list[Diagnostic]:
    """`source`: where each key of the stack file is, so each finding points at the value that causes it."""
    out: list[Diagnostic] = []

    def error(at: tuple, rule: str, message: str, hint: str, severity: str = "error") -> None:
        out.append(source.diagnostic(at, rule, message, hint, severity))

    if facts.workspace_location is None:
        error(("workspace", "name"), "preflight.workspace-missing", f"workspace {workspace_name!r} does not exist",
              "create it (az ml workspace create) or fix workspace.name / resource_group / subscription_id")
    clusters = [c for c in changes if c.type == "cluster" and c.actions in (CREATE, REPLACE, UPDATE)]
    for change in clusters:
        after = change.after or {}
        size, location = after.get("size", ""), after.get("location") or facts.location
        at = ("clusters", change.name)
        if facts.workspace_location and location != facts.workspace_location:
            error(at + ("location",) if after.get("location") else ("workspace", "location"), "preflight.location-mismatch",
                  f"{change.address} is in {location} but workspace {workspace_name!r} is in {facts.workspace_location}",
                  f"remove the cluster's location or set it to {facts.workspace_location}")
        if change.actions == UPDATE:
            continue
        sku = facts.skus.get(size.lower())
        if sku is None:
            error(at + ("size",), "preflight.size-unavailable", f"{change.address}: size {size} is not offered in {location}",
                  "pick a region that offers it (infra skus --location REGION) or another size")
            continue
        if sku.restrictions:
            error(at + ("size",), "preflight.size-restricted",
                  f"{change.address}: size {size} is restricted in {location} for this subscription "
                  f"({', '.join(sku.restrictions)})",
                  "request access through an Azure support ticket, or use another region or size")
        known = catalog.get(size)
        if known is not None and sku.rdma_enabled is not None:
            if sku.rdma_enabled and not known.infiniband_eligible and known.rdma:
                error(at + ("size",), "preflight.rdma-without-sriov",
                      f"{size} reports RdmaEnabled=True, but it has no SR-IOV: NCCL and MPI in Azure ML cannot use it",
                      "the catalog's SR-IOV knowledge overrides the SKU API here; use an SR-IOV size", "warning")
            elif sku.rdma_enabled != known.rdma:
                error(at + ("size",), "preflight.rdma-disagrees",
                      f"{size}: Azure says RdmaEnabled={sku.rdma_enabled} but the catalog says rdma={known.rdma}",
                      f"check validators/skus.yaml's row for {size} against its source", "warning")

    out += retired_sizes(changes, catalog, source)
    needed: dict[str, int] = defaultdict(int)
    sizes: dict[str, set[str]] = defaultdict(set)
    first_cluster: dict[str, str] = {}
    for change in clusters:
        delta = _vcpus_delta(change, facts)
        if delta and delta[1] > 0:
            needed[delta[0]] += delta[1]
            sizes[delta[0]].add((change.after or {}).get("size", ""))
            first_cluster.setdefault(delta[0], change.name)
    for family, extra in sorted(needed.items()):
        usage = facts.quota.get(family)
        if usage is None:
            continue
        available = usage.limit - usage.current
        if extra > available:
            error(("clusters", first_cluster[family], "max_instances"), "preflight.quota",
                  f"not enough vCPU quota for {', '.join(sorted(sizes[family]))} in {facts.location}: the plan needs "
                  f"{extra} more vCPUs of {family}, {available} are available ({usage.current} used of {usage.limit})",
                  "request a quota increase for the family in this region, or lower max_instances")
    return out


def retired_sizes(changes: list[ResourceChange], catalog: Catalog, source: SourceMap,
                  today: datetime.date | None = None) -> list[Diagnostic]:
    """cluster.size-retired as the live state says: an error where the plan would create a cluster of a retired
    size (Azure refuses), a warning where the cluster exists and stays (it runs until Azure deallocates it)."""
    today = today or datetime.date.today()
    out: list[Diagnostic] = []
    for change in changes:
        if change.type != "cluster" or change.actions == DELETE:
            continue
        sku = catalog.get(str((change.after or {}).get("size", "")))
        if sku is None or not sku.retired_as_of(today):
            continue
        new = change.actions in (CREATE, REPLACE)
        out.append(source.diagnostic(
            ("clusters", change.name, "size"), "cluster.size-retired",
            f"{change.address}: {sku.name} is retired by Azure"
            + (": the plan would create a cluster of it, which Azure refuses" if new else
               "; the cluster exists and keeps running until Azure deallocates its nodes"),
            "choose a current size (`infra skus`)" + ("" if new else "; changing the size replaces the cluster"),
            "error" if new else "warning"))
    return out

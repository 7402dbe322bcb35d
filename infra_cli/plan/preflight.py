"""Live preflight: would the plan's clusters actually be created? Pure rules over data the provider read.

Checks: the workspace exists where the stack says; a cluster placed in another region (a preview of Azure ML's,
a warning) names a region Azure has; each size exists and is not restricted in the
region (Microsoft.Compute resource SKUs); the live RdmaEnabled capability against the catalog (whose SR-IOV
knowledge wins for NC24r-class sizes); Azure ML's vCPU quota (the region's total for the tier, the size
family's, the workspace's) covers the clusters' max_instances.
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from typing import Any

from infra_cli.arguments import NextStep
from infra_cli.knowledge.skus import Catalog, Sku
from infra_cli.diagnostics import Diagnostic, Severity, says
from infra_cli.plan.kinds import KINDS
from infra_cli.plan.live import LiveFacts, LiveQuota, LiveSku
from infra_cli.plan.diff import settings_unreported
from infra_cli.plan.model import CREATE, DELETE, REPLACE, UPDATE, Resource, ResourceChange
from infra_cli.stack.source import SourceMap


# Offline rules whose verdict depends on what exists in Azure: `validate` reports them as for a new resource,
# and the plan leaves them out of its validation and judges them here, against the live state.
LIVE_JUDGED_RULES = frozenset({"cluster.size-retired", "cluster.public-ip-without-subnet"})


def _at(change: ResourceChange, *field: str) -> tuple[str, ...]:
    """Where the stack declares what `change` makes (its kind's section, its name, a field): what a finding names."""
    return (KINDS[change.type].section, change.name, *field)


def _size(size: Any, facts: LiveFacts, catalog: Catalog) -> LiveSku | Sku | None:
    """A size's family and vCPUs: as the region's SKUs say, or as the catalog knows it when they were unread."""
    live = facts.skus.get(str(size or "").lower())
    return live if live is not None or "skus" not in facts.unread else catalog.get(str(size or ""))


def _vcpus_delta(change: ResourceChange, facts: LiveFacts, catalog: Catalog) -> tuple[str, str, int] | None:
    """(family, tier, extra vCPUs this change reserves at max_instances) for a cluster change, else None."""
    after, before = change.after or {}, change.before or {}
    sku = _size(after.get("size"), facts, catalog)
    if sku is None:
        return None
    tier = str(after.get("tier") or "dedicated")
    new = after.get("max_instances", 0) * sku.vcpus
    if change.actions == CREATE:
        return sku.family, tier, new
    if settings_unreported(before):
        return None  # still being created: Azure's usage already counts it, and its own numbers are not known yet
    old_sku = _size(before.get("size"), facts, catalog)
    old = before.get("max_instances", 0) * (old_sku.vcpus if old_sku else 0)
    same_pool = old_sku is not None and old_sku.family == sku.family and (before.get("tier") or "dedicated") == tier
    if change.actions == REPLACE:
        return sku.family, tier, new - (old if same_pool else 0)
    if change.actions == UPDATE:
        return sku.family, tier, new - old
    return None


def preflight(changes: list[ResourceChange], desired: list[Resource], facts: LiveFacts, catalog: Catalog,
              source: SourceMap, workspace_name: str) -> list[Diagnostic]:
    """`source`: where each key of the stack file is, so each finding points at the value that causes it."""
    out: list[Diagnostic] = []

    def error(at: tuple, rule: str, message: str, hint: str, severity: Severity = "error") -> None:
        out.append(source.diagnostic(at, rule, message, hint, severity))

    if facts.workspace_location is None:
        error(("workspace", "name"), "preflight.workspace-missing", f"workspace {workspace_name!r} does not exist",
              "create it (az ml workspace create) or fix workspace.name / resource_group / subscription_id")
    clusters = [c for c in changes if KINDS[c.type].sized and c.actions in (CREATE, REPLACE, UPDATE)]
    # Clusters placed in a region other than the workspace's (the cluster's own `location`): the region's sizes and
    # quota read here are the workspace region's, so theirs are left to Azure at apply, as the warning says.
    elsewhere: set[str] = set()
    for change in clusters:
        after = change.after or {}
        size, location = after.get("size", ""), after.get("location") or facts.location
        at = _at(change)
        if location != facts.location:
            elsewhere.add(change.name)
            _other_region(error, change, location, facts, catalog, workspace_name)
            continue
        if facts.workspace_location and location != facts.workspace_location:
            error(("workspace", "location"), "preflight.location-mismatch",
                  f"{change.address} is in {location} but workspace {workspace_name!r} is in {facts.workspace_location}",
                  f"set workspace.location to {facts.workspace_location}, where the workspace is")
        if change.actions == UPDATE or "skus" in facts.unread:
            continue
        sku = facts.skus.get(size.lower())
        if sku is None and catalog.get(size) is None:   # neither this region nor the catalog has it: no such size
            alike = catalog.written_alike(size)
            error(at + ("size",), "preflight.size-unavailable",
                  f"{change.address}: unknown size {size}: not offered in {location}, and not in the SKU catalog "
                  "(validators/skus.yaml)", (f"did you mean {alike!r}? " if alike else "check its spelling: ") +
                  says(NextStep(("infra", "skus")), " lists the sizes, ",
                       NextStep(("infra", "skus"), ("--location", "REGION")), " a region's"))
            continue
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
    out += public_ip_without_subnet(changes, facts, source, workspace_name)
    for what in facts.unread if clusters else ():
        checks, permission = _UNREAD[what]
        error(_at(clusters[0]), f"preflight.{what}-unread",
              f"this identity may not read {checks[0]} in {facts.location} (Azure answered 403): {checks[1]} "
              "not checked, and apply may still fail on them",
              f"grant a role with {permission} at the subscription (Reader has it), or check in the portal", "warning")
    # Azure ML's quota (not the subscription's VM quota): each cluster draws on its tier's regional total, its
    # family's pool and the workspace's share of it, wherever Azure sets a limit.
    needed: dict[LiveQuota, int] = defaultdict(int)
    sizes: dict[LiveQuota, set[str]] = defaultdict(set)
    first_cluster: dict[LiveQuota, ResourceChange] = {}
    for change in clusters:
        if change.name in elsewhere:
            continue  # another region's quota, not the one read here
        delta = _vcpus_delta(change, facts, catalog)
        if not delta or delta[2] <= 0:
            continue
        family, tier, extra = delta
        for pool in facts.quota.pools(family, tier, workspace_name):
            needed[pool] += extra
            sizes[pool].add((change.after or {}).get("size", ""))
            first_cluster.setdefault(pool, change)
    for pool, extra in sorted(needed.items(), key=lambda item: (item[0].workspace or "", item[0].name)):
        available = pool.limit - pool.current
        if extra > available:
            share = f" in workspace {pool.workspace!r}" if pool.workspace else ""
            error(_at(first_cluster[pool], "max_instances"), "preflight.quota",
                  f"not enough Azure ML quota for {', '.join(sorted(sizes[pool]))} in {facts.location}: the plan needs "
                  f"{extra} more vCPUs of '{pool.name}'{share} at max_instances, {max(available, 0)} are available "
                  f"({pool.current} used of {pool.limit})",
                  "request an Azure ML quota increase for this region (https://learn.microsoft.com/azure/"
                  "machine-learning/how-to-manage-quotas), or lower max_instances")
    return out


# Azure ML creates a compute cluster in a region other than its workspace's as a preview feature, for clusters
# only and not in a workspace with a private endpoint; it warns of network latency and data transfer costs
# (https://learn.microsoft.com/azure/machine-learning/how-to-create-attach-compute-cluster, Limitations). A region
# Azure does not have is refused.
CROSS_REGION_SOURCE = "https://learn.microsoft.com/azure/machine-learning/how-to-create-attach-compute-cluster"


def _other_region(error, change: ResourceChange, location: str, facts: LiveFacts, catalog: Catalog,
                  workspace_name: str) -> None:
    at = _at(change, "location")
    if not catalog.knows_region(location):
        error(at, "preflight.location-unknown", f"{change.address}: {location!r} is not an Azure region",
              "use a region's programmatic name (az account list-locations), e.g. eastus, or remove `location` to "
              "create the cluster in the workspace's region")
        return
    workspace_region = facts.workspace_location or facts.location
    if location == workspace_region:
        return
    error(at, "preflight.location-mismatch",
          f"{change.address} is in {location}, workspace {workspace_name!r} in {workspace_region}: Azure ML creates "
          "compute in another region as a preview feature (not in a workspace with a private endpoint), with more "
          f"network latency and data transfer costs; the size and quota in {location} are checked by Azure at apply",
          f"remove `location` to keep the cluster beside its workspace, or keep it knowingly ({CROSS_REGION_SOURCE})",
          "warning")


# what could not be read -> (what it is, the checks skipped), the permission that reads it
_UNREAD = {
    "skus": (("the region's VM sizes", "whether each size is offered and not restricted was"),
             "Microsoft.Compute/skus/read"),
    "quota": (("Azure ML's quota", "whether max_instances fit it was"),
              "Microsoft.MachineLearningServices/locations/usages/read"),
}


def retired_sizes(changes: list[ResourceChange], catalog: Catalog, source: SourceMap,
                  today: datetime.date | None = None) -> list[Diagnostic]:
    """cluster.size-retired as the live state says: an error where the plan would create a cluster of a retired
    size (Azure refuses), a warning where the cluster exists and stays (it runs until Azure deallocates it)."""
    today = today or datetime.date.today()
    out: list[Diagnostic] = []
    for change in changes:
        if not KINDS[change.type].sized or change.actions == DELETE:
            continue
        sku = catalog.get(str((change.after or {}).get("size", "")))
        if sku is None or not sku.retired_as_of(today):
            continue
        new = change.actions in (CREATE, REPLACE)
        out.append(source.diagnostic(
            _at(change, "size"), "cluster.size-retired",
            f"{change.address}: {sku.name} is retired by Azure"
            + (": the plan would create a cluster of it, which Azure refuses" if new else
               "; the cluster exists and keeps running until Azure deallocates its nodes"),
            says("choose a current size (", NextStep(("infra", "skus")), ")")
            + ("" if new else "; changing the size replaces the cluster"),
            "error" if new else "warning"))
    return out


# Azure ML creates a cluster without node public IPs and without a subnet only in a workspace with a managed
# virtual network: its nodes live in that network (https://learn.microsoft.com/azure/machine-learning/
# how-to-managed-network-compute); elsewhere the nodes need a subnet of the user's virtual network
# (https://learn.microsoft.com/azure/machine-learning/how-to-secure-training-vnet). The workspace says which in
# properties.managedNetwork.isolationMode (workspaceRP.json ManagedNetworkSettings).
MANAGED_NETWORK_MODES = frozenset({"allowinternetoutbound", "allowonlyapprovedoutbound"})


def public_ip_without_subnet(changes: list[ResourceChange], facts: LiveFacts, source: SourceMap,
                             workspace_name: str) -> list[Diagnostic]:
    """cluster.public-ip-without-subnet as the workspace decides it, for the clusters the plan creates or replaces
    (one that exists was accepted): an error in a workspace without a managed network, nothing in one with it, and
    validate's warning where the workspace was not read."""
    out: list[Diagnostic] = []
    for change in changes:
        after = change.after or {}
        if not KINDS[change.type].public_ip_needs_subnet or change.actions not in (CREATE, REPLACE):
            continue   # no nodes of its own, or one that exists (accepted already)
        if after.get("enable_node_public_ip", True) or after.get("subnet"):
            continue
        mode = facts.isolation_mode
        if mode is not None and mode.lower() in MANAGED_NETWORK_MODES:
            continue
        at = _at(change, "enable_node_public_ip")
        if mode is None:
            out.append(source.diagnostic(
                at, "cluster.public-ip-without-subnet",
                f"{change.address} turns node public IPs off without a subnet: Azure ML creates it only in a "
                f"workspace with a managed virtual network, and workspace {workspace_name!r} could not be read",
                "add network_settings: {subnet: ...}, or create the workspace with a managed network", "warning"))
            continue
        out.append(source.diagnostic(
            at, "cluster.public-ip-without-subnet",
            f"{change.address} turns node public IPs off without a subnet, and workspace {workspace_name!r} has no "
            f"managed virtual network (isolation mode {mode}): Azure ML refuses the cluster",
            "add network_settings: {subnet: ...} of a virtual network with outbound access "
            "(https://learn.microsoft.com/azure/machine-learning/how-to-secure-training-vnet), give the workspace a "
            "managed network (https://learn.microsoft.com/azure/machine-learning/how-to-managed-network), or remove "
            "enable_node_public_ip: false"))
    return out

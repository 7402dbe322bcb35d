"""What plan knows of Azure: the live state and live facts, read through a Provider (azure/protocol.py).

The provider (azure/provider.py AzureProvider) answers plain data: values as Azure's entities hold them. Here they
become plan's types: each kind's normalised Resources (plan/kinds/ Kind.read_live and Kind.live_resources) in a
LiveState, the size offers and quota of a region in LiveFacts, the smoke records. Reads are issued at once: each
kind's is one batch whatever the stack's size (the workspace's computes one list call; its environments one list,
then one read of each live environment's version, whose tags are in no list, started as the list's pages arrive:
azure/provider.py read_environments), beside the region's sizes and quota.
"""

from __future__ import annotations

import re

from dataclasses import dataclass, field
from typing import Any

from infra_cli.azure.protocol import Provider, read_pool
from infra_cli.plan.kinds import KINDS
from infra_cli.plan.model import LiveState, Resource, fingerprint_of
from infra_cli.state.records import SmokeRecord
from infra_cli.state.serial import StateSerial
from infra_cli.state.store import StateStore


@dataclass(frozen=True)
class LiveSku:
    name: str
    family: str
    vcpus: int
    rdma_enabled: bool | None
    restrictions: tuple[str, ...] = ()  # reason codes that apply to this subscription in the region


@dataclass(frozen=True)
class LiveQuota:
    """One pool of Azure ML cluster vCPUs: a size family's, or a region's total, as Azure names it."""

    name: str       # "Standard NDASv4_A100 Family Cluster Dedicated vCPUs", "Total Cluster Dedicated Regional vCPUs"
    current: int
    limit: int      # -1: the pool sets no limit of its own
    workspace: str | None = None   # a workspace's share of a family pool, else the subscription's pool


def family_key(name: str) -> str:
    """A size family as both namings reduce to it: the SKU's `standardNDASv4_A100Family` and Azure ML's quota
    `Standard NDASv4_A100 Family Cluster Dedicated vCPUs` are both `ndasv4a100`."""
    key = re.sub(r"[^a-z0-9]", "", name.lower()).removeprefix("standard")
    for tail in ("familyclusterdedicatedvcpus", "familyclusterlowpriorityvcpus", "family"):
        key = key.removesuffix(tail)
    return key


@dataclass
class AmlQuota:
    """Azure ML's own quota in a region (Microsoft.MachineLearningServices/locations/{loc}/usages), which every
    AmlCompute node draws on; a VM quota of Microsoft.Compute does not apply to it.
    https://learn.microsoft.com/azure/machine-learning/how-to-manage-quotas"""

    dedicated_total: LiveQuota | None = None
    low_priority_total: LiveQuota | None = None
    # family key -> pool, subscription-wide; and per workspace (lower-case name), where Azure sets one
    families: dict[tuple[str, str], LiveQuota] = field(default_factory=dict)   # (tier, family) -> pool
    workspace_families: dict[tuple[str, str, str], LiveQuota] = field(default_factory=dict)  # (ws, tier, family)

    def pools(self, family: str, tier: str, workspace: str) -> list[LiveQuota]:
        """The pools a cluster of `family` (the SKU's family name) and `tier` draws on, limited ones only."""
        key, tier = family_key(family), "low_priority" if tier == "low_priority" else "dedicated"
        found = [self.low_priority_total if tier == "low_priority" else self.dedicated_total,
                 self.families.get((tier, key)), self.workspace_families.get((workspace.lower(), tier, key))]
        return [q for q in found if q is not None and q.limit >= 0]


@dataclass
class LiveFacts:
    location: str
    workspace_location: str | None  # None: the workspace does not exist
    skus: dict[str, LiveSku] = field(default_factory=dict)  # lower-case size -> sku
    quota: AmlQuota = field(default_factory=AmlQuota)
    unread: tuple[str, ...] = ()    # "skus", "quota": what this identity may not read (preflight says so)
    # the workspace's managed virtual network (Disabled, AllowInternetOutbound, AllowOnlyApprovedOutbound); None: unread
    isolation_mode: str | None = None


def region_facts(location: str, workspace_location: str | None, offers: dict[str, dict[str, Any]] | None,
                 usages: list[dict[str, Any]] | None, isolation_mode: str | None = None) -> LiveFacts:
    """LiveFacts from the provider's answers; a None answer (403) is noted as unread, never as "nothing there"."""
    unread = tuple(what for what, answer in (("skus", offers), ("quota", usages)) if answer is None)
    return LiveFacts(location, workspace_location, live_skus(offers or {}), live_quota(usages or []), unread,
                     isolation_mode)


# ---- plain data -> plan's types ---------------------------------------------------------------------------

def live_skus(offers: dict[str, dict[str, Any]]) -> dict[str, LiveSku]:
    return {k: LiveSku(o["name"], o["family"], o["vcpus"], o["rdma_enabled"], tuple(o["restrictions"]))
            for k, o in offers.items()}


# the live reads a plan runs at once (`infra plan -parallelism=N`; its default is the CLI's, 8: more than the six
# kinds of read one plan issues, so each starts at once)
DEFAULT_READS = 8

_WORKSPACE_USAGE = re.compile(r"/workspaces/([^/]+)/usages/", re.IGNORECASE)


def live_quota(usages: list[dict[str, Any]]) -> AmlQuota:
    """Azure ML's usage rows (id, type, name, current, limit) as the pools they describe. Rows of one compute
    (`.../computes/X/usages/...`) say how a pool is used, not a limit of their own, and are passed over."""
    quota = AmlQuota()
    for u in usages:
        kind, name, row_id = str(u.get("type") or "").lower(), str(u.get("name") or ""), str(u.get("id") or "")
        workspace = _WORKSPACE_USAGE.search(row_id)
        limit = u.get("limit")
        pool = LiveQuota(name, int(u.get("current") or 0), int(limit if limit is not None else -1),
                         workspace.group(1) if workspace else None)
        tier = "low_priority" if "lowpriority" in name.lower().replace(" ", "") else "dedicated"
        if kind.endswith("/dedicatedcores/usages"):
            quota.dedicated_total = pool
        elif kind.endswith("/lowprioritycores/usages"):
            quota.low_priority_total = pool
        elif "/computes/" in row_id.lower() or "family" not in name.lower():
            continue
        elif pool.workspace is not None:
            quota.workspace_families[(pool.workspace.lower(), tier, family_key(name))] = pool
        elif kind.endswith("/vmfamily/usages"):
            quota.families[(tier, family_key(name))] = pool
    return quota


# ---- reads through a provider -----------------------------------------------------------------------------

@dataclass
class LiveRead:
    """One refresh: the live state, and what the plan's preflight and smoke decisions read beside it."""

    state: LiveState
    facts: LiveFacts | None = None
    resolved: dict[str, str | None] = field(default_factory=dict)
    records: dict[str, SmokeRecord | None] = field(default_factory=dict)
    serial: StateSerial = field(default_factory=StateSerial)   # the stack's lineage and serial (with `serial_of`)


def read_live(provider: Provider, desired: list[Resource], *, location: str | None = None,
              curated: dict[str, str] | None = None, stack: str | None = None,
              distributions: list[str] | None = None, serial_of: str | None = None,
              parallelism: int = DEFAULT_READS) -> LiveRead:
    """Every read at once: the workspace's computes, the declared environments, the smoke records and with
    `serial_of` that stack's lineage and serial (one list of the workspace's environments, then each one that
    exists), and with `location` the live facts (workspace, size offers, quota), with `curated` the references to
    resolve. At most `parallelism` of them run at once (`infra plan -parallelism=N`)."""
    wanted = {name: kind.wanted(desired) for name, kind in KINDS.items()}
    records = {d: StateStore(provider).record_name(stack, d) for d in distributions or []} if stack else {}
    serial = {StateStore.serial_name(serial_of): None} if serial_of else {}
    kept = {**{n: None for n in records.values()}, **serial}   # infra's records, read in their kind's batch
    with read_pool(parallelism) as pool:
        reads = {name: pool.submit(kind.read_live, provider, {**wanted[name], **kept} if kind.keeps_state else
                                   wanted[name]) for name, kind in KINDS.items()}
        regional = (pool.submit(provider.read_workspace), pool.submit(provider.sku_offers, location),
                    pool.submit(provider.usages, location)) if location else None
        resolved_f = pool.submit(provider.resolve_environments, curated or {})
        # the kind keeping infra's records answers first (as the records' read always did), then the others
        read = {name: reads[name].result() for name in sorted(KINDS, key=lambda n: not KINDS[n].keeps_state)}
        state, environments = LiveState(), {}
        for name, kind in KINDS.items():   # a resource the plan needs that Azure answered unreadably stops it here
            kind.live(state).update(kind.live_resources(read[name], wanted[name]))
            if kind.keeps_state:
                environments = read[name]
        out = LiveRead(state, resolved=resolved_f.result())
        if location and regional is not None:   # read together: the workspace, its region's offers and quota
            ws_f, skus_f, quota_f = regional
            workspace = ws_f.result() or {}
            out.facts = region_facts(location, workspace.get("location"), skus_f.result(), quota_f.result(),
                                     workspace.get("isolation_mode"))
    out.records = StateStore.records_from(stack or "", records, environments)
    if serial_of:
        out.serial = StateStore.serial_from(serial_of, environments.get(StateStore.serial_name(serial_of)))
    return out


def live_fingerprint(live: LiveState) -> str:
    """The fingerprint a plan records of `live` and apply compares under the lock: every kind's live resources,
    under its stack section (an empty map for a kind with none), as plan files have always recorded them."""
    return fingerprint_of({kind.section: kind.live(live) for kind in KINDS.values()})


def refresh(provider: Provider, desired: list[Resource]) -> LiveState:
    """Live state of every cluster in the workspace (one list call) and of each declared environment."""
    return read_live(provider, desired).state

"""What plan knows of Azure: the live state and live facts, read through a Provider (azure/protocol.py).

The provider (azure/provider.py AzureProvider) answers plain data: values as
Azure's entities hold them. Here they become plan's types: normalised Resources (plan/normalise.py) in a
LiveState, the size offers and quota of a region in LiveFacts, the smoke records. Reads are issued at once:
the workspace's computes and environments are one list call each, whatever the stack's size, beside the region's
sizes and quota; then one read of each live environment's version (its tags are in no list), started as the
environment list's pages arrive, concurrently (azure/provider.py read_environments).
"""

from __future__ import annotations

import hashlib
import re

from dataclasses import dataclass, field
from typing import Any

from infra_cli.azure.protocol import Provider, read_pool
from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.plan.desired import environment_content_hash, secret_digest
from infra_cli.plan.model import Resource, canonical_json
from infra_cli.stack.environment import inline_conda_text
from infra_cli.stack.secret import revealed
from infra_cli.stack.source import MAX_STACK_BYTES, load_yaml
from infra_cli.plan.normalise import cluster_resource, environment_resource, other_compute_resource
from infra_cli.state.records import SmokeRecord
from infra_cli.state.serial import StateSerial
from infra_cli.state.store import StateStore


@dataclass
class LiveState:
    """Normalised live resources by Azure name. An environment's attributes describe one live version
    (the pinned one, or the latest) plus `next_version`."""

    clusters: dict[str, Resource] = field(default_factory=dict)
    environments: dict[str, Resource] = field(default_factory=dict)

    def fingerprint(self) -> str:
        """What tells this live state from another (a plan records it; apply compares). The live attributes hold
        secrets in clear (a description from a sensitive variable), and plan JSON and plan files show the
        fingerprint, so it is scrypt (memory-hard, ~30 ms a guess), never a fast hash a short secret is found from."""
        return secret_digest("infra-live-fingerprint", [canonical_json(revealed({
            "clusters": {n: [r.attributes, r.tags] for n, r in sorted(self.clusters.items())},
            "environments": {n: [r.attributes, r.tags] for n, r in sorted(self.environments.items())},
        }))])


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

def compute_resource(values: dict[str, Any]) -> Resource:
    """An AmlCompute cluster, normalised; a compute of another kind holding the name (a workspace's computes
    share one namespace: AKS, compute instances, ...) as what it is, which plan never adopts or changes."""
    compute_type = str(values.get("compute_type") or "")
    if compute_type.lower() != "amlcompute":
        return other_compute_resource(values["name"], compute_type.strip("* ") or "unknown")
    return cluster_resource(values)


def live_environment(values: dict[str, Any]) -> Resource:
    resource = environment_resource(values["name"], values["version"], values["tags"], values["next_version"])
    if resource.attributes["content_hash"] is None and values.get("content"):
        # made outside infra (no hash tag): its content hashed as the stack's would be, for an import block
        resource.attributes["content_hash"] = recorded_content_hash(values["content"])
    return resource


def recorded_content_hash(content: dict[str, Any]) -> str | None:
    """The content hash (plan/desired.py) of an environment version as Azure recorded it, when infra can know it:
    an image with an inline conda file (as `plan --generate-config-out` declares it). A build context lives in
    Azure's storage, not in the project: None (an adopted one gets a new version built from the stack's)."""
    if not content.get("image") or content.get("build"):
        return None
    conda = content.get("conda_file")
    parsed, _ = recorded_conda(conda) if conda else (None, None)
    text = inline_conda_text(parsed) if parsed is not None else None
    if conda and text is None:
        return None
    return environment_content_hash({"kind": "image", "image": content["image"], "build": None,
                                     "conda_sha256": hashlib.sha256(text.encode()).hexdigest() if text else None})


RECORDED_CONDA = "the conda file recorded in Azure"


def recorded_conda(conda: Any) -> tuple[dict | None, str | None]:
    """An environment version's conda file as Azure recorded it (YAML text), read as the stack loader reads a conda
    file a stack names (stack/source.py load_yaml: size, nesting, values and the text its aliases expand to bounded;
    `${` is text), so a few hundred bytes of nested YAML aliases read from Azure cannot keep plan or
    `--generate-config-out` expanding it for minutes. Returns (the mapping, None), or (None, why it was not read)."""
    if not isinstance(conda, str):
        return None, "it is not YAML text"
    if len(conda) > MAX_STACK_BYTES:
        return None, f"it is larger than {MAX_STACK_BYTES >> 20} MiB"
    try:
        parsed = load_yaml(conda, RECORDED_CONDA, interpolate=False)[0]
    except DiagnosticError as exc:
        first = exc.diagnostics[0]
        return None, "it is empty" if first.rule == "stack.empty" else first.message
    if not isinstance(parsed, dict):
        return None, "it is a list" if isinstance(parsed, list) else "it is a single value"
    return parsed, None


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
        pool = LiveQuota(name, int(u.get("current") or 0), int(u.get("limit") if u.get("limit") is not None else -1),
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


def _wanted_environments(desired: list[Resource]) -> dict[str, str | None]:
    # by name: this reader sits below plan/kinds (which read its LiveState), and reads each kind its own way
    return {r.name: r.attributes.get("version") for r in desired
            if r.type == "environment" and r.attributes.get("kind") != "curated"}


def unreadable_diagnostics(values: dict[str, Any]) -> list[Diagnostic]:
    """One error per value of a compute whose shape the provider could not read (compute_values' `unreadable`),
    naming the compute and the field as Azure's answer spells it."""
    name = values.get("name")
    named = isinstance(name, str) and bool(name)
    what, show = (f"cluster.{name}", f"az ml compute show --name {name}") if named else \
        ("a compute of the workspace", "az ml compute list")
    return [Diagnostic(
        "error", "plan.live-unreadable",
        f"{what}: Azure answered {p['path'] or 'the compute'} as {p['value']}, which infra cannot read (it reads "
        f"{p['expected']} there); plan stops rather than compare a misreading, which could replace the cluster",
        hint=f"nothing was changed; see what Azure holds with `{show}`") for p in values.get("unreadable") or []]


def _state(computes: list[dict[str, Any]], environments: dict[str, dict[str, Any] | None],
           wanted: dict[str, str | None], clusters: set[str]) -> LiveState:
    """The live state. A compute the stack declares (`clusters`), or one whose name could not be read, that Azure
    answered in a shape infra cannot read stops the plan (DiagnosticError). Any other is only ever left alone, or
    deleted by its ownership tags (which, unread, make it not infra's), whatever its other fields say."""
    live, problems = LiveState(), []
    for values in computes:
        name = values.get("name")
        if values.get("unreadable") and (name in clusters or not isinstance(name, str) or not name):
            problems += unreadable_diagnostics(values)
            continue
        res = compute_resource(values)
        live.clusters[res.name] = res
    if problems:
        raise DiagnosticError(problems)
    for name in wanted:
        if environments.get(name) is not None:
            live.environments[name] = live_environment(environments[name])
    return live


def read_live(provider: Provider, desired: list[Resource], *, location: str | None = None,
              curated: dict[str, str] | None = None, stack: str | None = None,
              distributions: list[str] | None = None, serial_of: str | None = None,
              parallelism: int = DEFAULT_READS) -> LiveRead:
    """Every read at once: the workspace's computes, the declared environments, the smoke records and with
    `serial_of` that stack's lineage and serial (one list of the workspace's environments, then each one that
    exists), and with `location` the live facts (workspace, size offers, quota), with `curated` the references to
    resolve. At most `parallelism` of them run at once (`infra plan -parallelism=N`)."""
    wanted = _wanted_environments(desired)
    records = {d: StateStore(provider).record_name(stack, d) for d in distributions or []} if stack else {}
    serial = {StateStore.serial_name(serial_of): None} if serial_of else {}
    with read_pool(parallelism) as pool:
        computes_f = pool.submit(provider.list_computes)
        envs_f = pool.submit(provider.read_environments, {**wanted, **{n: None for n in records.values()}, **serial})
        ws_f = pool.submit(provider.read_workspace) if location else None
        skus_f = pool.submit(provider.sku_offers, location) if location else None
        quota_f = pool.submit(provider.usages, location) if location else None
        resolved_f = pool.submit(provider.resolve_environments, curated or {})
        environments = envs_f.result()
        clusters = {r.name for r in desired if r.type == "cluster"}   # by name: see _wanted_environments
        out = LiveRead(_state(computes_f.result(), environments, wanted, clusters), resolved=resolved_f.result())
        if location:
            workspace = ws_f.result() or {}
            out.facts = region_facts(location, workspace.get("location"), skus_f.result(), quota_f.result(),
                                     workspace.get("isolation_mode"))
    out.records = StateStore.records_from(stack or "", records, environments)
    if serial_of:
        out.serial = StateStore.serial_from(serial_of, environments.get(StateStore.serial_name(serial_of)))
    return out


def refresh(provider: Provider, desired: list[Resource]) -> LiveState:
    """Live state of every cluster in the workspace (one list call) and of each declared environment."""
    return read_live(provider, desired).state


def read_cluster(provider: Provider, name: str) -> Resource | None:
    """One compute, normalised; a shape infra cannot read is a DiagnosticError (import, apply), never a guess."""
    values = provider.read_compute(name)
    if values is not None and values.get("unreadable"):
        raise DiagnosticError(unreadable_diagnostics({**values, "name": values.get("name") or name}))
    return None if values is None else compute_resource(values)


def read_environment(provider: Provider, name: str, pinned: str | None) -> Resource | None:
    values = provider.read_environments({name: pinned})[name]
    return None if values is None else live_environment(values)

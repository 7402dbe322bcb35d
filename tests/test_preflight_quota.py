"""Azure ML's quota in the plan's preflight, as pure functions over the pools a provider read: which pools a
cluster draws on (its tier's regional total, its family's dedicated pool, the workspace's share), and what a
replacement or a scale change adds to them. The recorded answer is replayed in tests/contract."""

from __future__ import annotations

import pytest

from infra_cli.knowledge.skus import load_catalog
from infra_cli.plan.live import AmlQuota, LiveFacts, LiveQuota, LiveSku, family_key
from infra_cli.plan.model import CREATE, REPLACE, UPDATE, ResourceChange
from infra_cli.plan.preflight import preflight
from infra_cli.stack.load import load_stack

A100 = LiveSku("Standard_ND96asr_v4", "standardNDASv4_A100Family", 96, True)
H100 = LiveSku("Standard_ND96isr_H100_v5", "standardNDSH100v5Family", 96, True)
FAMILY = "Standard NDASv4_A100 Family Cluster Dedicated vCPUs"


def quota(total=(0, 10_000), family=(0, 10_000), workspace=None, low=(0, 10_000)) -> AmlQuota:
    q = AmlQuota(LiveQuota("Total Cluster Dedicated Regional vCPUs", *total),
                 LiveQuota("Total Cluster LowPriority Regional vCPUs", *low),
                 {("dedicated", "ndasv4a100"): LiveQuota(FAMILY, *family)})
    if workspace:
        q.workspace_families[("mlw", "dedicated", "ndasv4a100")] = LiveQuota(FAMILY, *workspace, "mlw")
    return q


def run(tmp_path, q: AmlQuota, actions, after: dict, before: dict | None = None) -> list[str]:
    stack = tmp_path / "s.yaml"
    stack.write_text("stack: s\nworkspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg,"
                     " name: mlw, location: eastus}\nclusters:\n  gpu:\n    size: Standard_ND96asr_v4\n"
                     "    max_instances: 4\n", encoding="utf-8")
    facts = LiveFacts("eastus", "eastus", {"standard_nd96asr_v4": A100, "standard_nd96isr_h100_v5": H100}, q)
    change = ResourceChange("cluster.gpu", "cluster", "gpu", actions, before, after)
    return [d.message for d in preflight([change], [], facts, load_catalog(), load_stack(stack).source, "mlw")
            if d.rule == "preflight.quota"]


def test_the_two_namings_of_a_family_meet():
    assert family_key("standardNDASv4_A100Family") == family_key(FAMILY) == "ndasv4a100"
    assert family_key("Standard NDASv4_A100 Family Cluster LowPriority vCPUs") == "ndasv4a100"
    assert family_key("standardNCSv3Family") != family_key("standardNCFamily")


@pytest.mark.parametrize("q, short", [
    (quota(), None),
    (quota(total=(100, 400)), "Total Cluster Dedicated Regional vCPUs"),
    (quota(family=(0, 300)), FAMILY),
    (quota(workspace=(96, 384)), f"{FAMILY}' in workspace 'mlw"),        # the workspace's share binds first
])
def test_a_new_dedicated_cluster_is_held_to_every_pool_it_draws_on(tmp_path, q, short):
    found = run(tmp_path, q, CREATE, {"size": "Standard_ND96asr_v4", "tier": "dedicated", "max_instances": 4})
    assert found == [] if short is None else (len(found) == 1 and f"'{short}'" in found[0] and "384 more" in found[0])


def test_low_priority_draws_on_the_low_priority_total_only(tmp_path):
    q = quota(total=(0, 0), family=(0, 0), low=(0, 384))
    assert run(tmp_path, q, CREATE, {"size": "Standard_ND96asr_v4", "tier": "low_priority", "max_instances": 4}) == []
    q.low_priority_total = LiveQuota("Total Cluster LowPriority Regional vCPUs", 1, 384)
    [msg] = run(tmp_path, q, CREATE, {"size": "Standard_ND96asr_v4", "tier": "low_priority", "max_instances": 4})
    assert "'Total Cluster LowPriority Regional vCPUs'" in msg and "383 are available (1 used of 384)" in msg


def test_a_replacement_within_its_pool_needs_only_the_difference_and_across_tiers_the_whole(tmp_path):
    before = {"size": "Standard_ND96asr_v4", "tier": "dedicated", "max_instances": 2}
    q = quota(family=(192, 384))   # the old cluster's 192 are counted in `current`
    grown = {**before, "max_instances": 4, "description": "x"}
    assert run(tmp_path, q, REPLACE, grown, before) == []                     # 192 more of 192 left
    assert run(tmp_path, q, UPDATE, {**before, "max_instances": 4}, before) == []
    assert run(tmp_path, q, UPDATE, {**before, "max_instances": 5}, before) != []
    # dedicated -> low priority frees dedicated vCPUs and needs the whole cluster in the low-priority total
    q.low_priority_total = LiveQuota("Total Cluster LowPriority Regional vCPUs", 0, 200)
    [msg] = run(tmp_path, q, REPLACE, {**before, "tier": "low_priority", "max_instances": 4}, before)
    assert "'Total Cluster LowPriority Regional vCPUs'" in msg and "384 more" in msg


def test_a_pool_azure_does_not_list_is_not_guessed(tmp_path):
    q = AmlQuota()   # no totals, no family rows (an older API, a family named otherwise)
    assert run(tmp_path, q, CREATE, {"size": "Standard_ND96isr_H100_v5", "tier": "dedicated", "max_instances": 99}) == []


def test_facts_this_identity_may_not_read_are_warned_about_never_taken_as_nothing(tmp_path):
    """A role on the workspace only (no subscription-scope read) gets 403 for the region's SKUs and Azure ML's
    usages: the plan goes on with a warning for each, instead of calling every size "not offered"."""
    create = {"size": "Standard_ND96asr_v4", "tier": "dedicated", "max_instances": 4}
    stack = tmp_path / "s.yaml"
    stack.write_text("stack: s\nworkspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg,"
                     " name: mlw, location: eastus}\nclusters:\n  gpu:\n    size: Standard_ND96asr_v4\n"
                     "    max_instances: 4\n", encoding="utf-8")

    def found(facts: LiveFacts) -> list[tuple[str, str]]:
        change = ResourceChange("cluster.gpu", "cluster", "gpu", CREATE, None, create)
        return [(d.rule, d.severity) for d in preflight([change], [], facts, load_catalog(),
                                                        load_stack(stack).source, "mlw")]

    assert found(LiveFacts("eastus", "eastus", {}, AmlQuota(), ("skus", "quota"))) == [
        ("preflight.skus-unread", "warning"), ("preflight.quota-unread", "warning")]
    # the quota still read: the catalog's vCPUs for the size stand in for the unread SKUs
    assert found(LiveFacts("eastus", "eastus", {}, quota(family=(0, 300)), ("skus",))) == [
        ("preflight.skus-unread", "warning"), ("preflight.quota", "error")]
    # both read, the size absent: that is "not offered"
    assert found(LiveFacts("eastus", "eastus", {}, quota())) == [("preflight.size-unavailable", "error")]

"""What a plan's clusters cost, as Infracost shows it for Terraform: per node-hour and at max_instances, for the
cluster's tier and region, from the list prices in validators/skus.yaml; "price unknown" where none is kept."""

from __future__ import annotations

import json

from infra_cli.knowledge.skus import load_catalog
from infra_cli.plan.model import Plan, ResourceChange
from infra_cli.commands.views.plan import render_plan


def cluster(size="Standard_ND96asr_v4", tier="dedicated", location="eastus", max_instances=2, **more) -> dict:
    return {"size": size, "tier": tier, "location": location, "min_instances": 0, "max_instances": max_instances,
            **more}


def change(actions, before, after, name="gpu", replace_paths=(), reason=None) -> ResourceChange:
    return ResourceChange(f"cluster.{name}", "cluster", name, actions, before, after,
                          [list(p) for p in replace_paths], reason)


def plan(*changes) -> Plan:
    return Plan("demo", "normal", list(changes), [], [], "fp")


def test_a_new_cluster_shows_its_price_per_node_hour_and_at_max_instances():
    price = load_catalog().price("Standard_ND96asr_v4", "eastus")
    p = plan(change(["create"], None, cluster(max_instances=4)))
    [cost] = p.to_json()["costs"]["resources"]
    assert cost["action"] == "create" and cost["before"] is None
    assert cost["after"]["per_node_hour"] == price.dedicated
    assert cost["after"]["at_max_instances_hour"] == round(price.dedicated * 4, 4)
    assert cost["after"]["as_of"] == price.as_of.isoformat() and cost["after"]["source"] == price.source
    text = render_plan(p)
    assert f"# cost: ${price.dedicated:,.2f} per node-hour (Standard_ND96asr_v4 dedicated in eastus" in text
    assert f"up to ${price.dedicated * 4:,.2f}/hour at max_instances 4" in text
    assert f"Cost at max_instances: ${price.dedicated * 4:,.2f}/hour (was $0.00/hour), list prices." in text


def test_low_priority_uses_the_low_priority_price():
    price = load_catalog().price("Standard_ND96asr_v4", "westus2")
    p = plan(change(["create"], None, cluster(tier="low_priority", location="westus2")))
    after = p.to_json()["costs"]["resources"][0]["after"]
    assert after["per_node_hour"] == price.low_priority < price.dedicated
    assert after["unconfirmed"] is ("low_priority" in price.unconfirmed)


def test_a_replacement_says_what_the_new_nodes_cost():
    catalog = load_catalog()
    old, new = catalog.price("Standard_ND96asr_v4", "eastus"), catalog.price("Standard_ND96amsr_A100_v4", "eastus")
    before, after = cluster(), cluster(size="Standard_ND96amsr_A100_v4")
    p = plan(change(["delete", "create"], before, after, replace_paths=[["size"]],
                    reason="replace_because_cannot_update: vmSize cannot change"))
    text = render_plan(p)
    assert f"# cost: the replacement's nodes cost ${new.dedicated:,.2f} per node-hour" in text
    assert f"(the nodes it replaces: ${old.dedicated:,.2f} per node-hour" in text
    total = p.to_json()["costs"]["total_at_max_instances_hour"]
    assert total["before"] == round(old.dedicated * 2, 4) and total["after"] == round(new.dedicated * 2, 4)
    assert total["diff"] == round(total["after"] - total["before"], 4)


def test_a_scale_change_shows_the_cost_before_and_after():
    p = plan(change(["update"], cluster(max_instances=2), cluster(max_instances=8)))
    [line_before, line_after] = [ln.strip() for ln in render_plan(p).splitlines() if "per node-hour" in ln]
    assert line_before.startswith("# cost:") and "max_instances 2" in line_before
    assert line_after.startswith("#    ->") and "max_instances 8" in line_after


def test_an_unknown_region_or_size_is_price_unknown_not_a_guess():
    p = plan(change(["create"], None, cluster(location="japaneast"), name="a"),
             change(["create"], None, cluster(size="Standard_ND96isr_H200_v5"), name="b"),
             change(["create"], None, cluster(size="Standard_ND96asr_v4"), name="c"))
    costs = p.to_json()["costs"]
    unknown = [c for c in costs["resources"] if c["after"]["per_node_hour"] is None]
    assert [c["address"] for c in unknown] == ["cluster.a", "cluster.b"]
    assert all(c["after"]["at_max_instances_hour"] is None and "unknown_because" in c["after"] for c in unknown)
    assert costs["total_at_max_instances_hour"]["unknown_after"] == 2
    text = render_plan(p)
    assert "# cost: price unknown (Standard_ND96asr_v4 dedicated in japaneast)" in text
    assert "# cost: price unknown (Standard_ND96isr_H200_v5 dedicated in eastus)" in text
    assert "; 2 clusters price unknown." in text


def test_plan_json_keeps_its_keys_and_adds_costs():
    p = plan(change(["delete"], cluster(), None), change(["no-op"], cluster(), cluster(), name="kept"))
    data = json.loads(json.dumps(p.to_json()))
    assert {"format_version", "stack", "mode", "resource_changes", "smoke_jobs", "diagnostics",
            "live_fingerprint", "costs"} <= set(data)
    assert data["costs"]["currency"] == "USD" and "not fetched" in data["costs"]["note"]
    by_address = {c["address"]: c for c in data["costs"]["resources"]}
    assert by_address["cluster.gpu"]["after"] is None and by_address["cluster.gpu"]["action"] == "delete"
    assert by_address["cluster.kept"]["before"] == by_address["cluster.kept"]["after"]
    assert "# cost: stops $" in render_plan(p)


def test_other_resources_and_other_computes_have_no_cost():
    env = ResourceChange("environment.e", "environment", "e", ["create"], None, {"kind": "image"})
    other = ResourceChange("cluster.k8s", "cluster", "k8s", ["no-op"], {"compute_type": "kubernetes"}, None)
    assert plan(env, other).to_json()["costs"]["resources"] == []
    assert "Cost at max_instances" not in render_plan(plan(env))

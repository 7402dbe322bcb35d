"""What a plan's clusters cost, as Infracost shows it for Terraform: per cluster, the list price of one
node-hour for its size, region and tier, and of max_instances nodes (what the cluster costs an hour when
it scales out fully), before and after the change. Prices are data (validators/skus.yaml `prices:`, each
with its day and source); a size or region without one is "price unknown", never a guess.

Pure: a change's attributes and the catalog in, plain data out (the plan's JSON `costs`, the text lines).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from infra_cli.knowledge.skus import Catalog, load_catalog

UNKNOWN = "price unknown"


@dataclass(frozen=True)
class NodeCost:
    """One side (before or after) of a cluster change, priced."""

    size: str
    tier: str
    region: str | None
    max_instances: int
    per_node_hour: float | None          # None: price unknown
    as_of: str | None = None
    source: str | None = None
    unconfirmed: bool = False

    @property
    def at_max_instances_hour(self) -> float | None:
        return None if self.per_node_hour is None else round(self.per_node_hour * self.max_instances, 4)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"size": self.size, "tier": self.tier, "location": self.region,
                               "max_instances": self.max_instances, "per_node_hour": self.per_node_hour,
                               "at_max_instances_hour": self.at_max_instances_hour}
        if self.per_node_hour is None:
            out["unknown_because"] = (f"validators/skus.yaml lists no {self.tier} price for {self.size} in "
                                      f"{self.region or 'an unknown region'}")
        else:
            out.update(as_of=self.as_of, source=self.source, unconfirmed=self.unconfirmed)
        return out


def node_cost(attributes: dict | None, catalog: Catalog) -> NodeCost | None:
    if not attributes or not attributes.get("size"):
        return None
    size, tier, region = str(attributes["size"]), str(attributes.get("tier") or "dedicated"), attributes.get("location")
    count = int(attributes.get("max_instances") or 0)
    price = catalog.price(size, region)
    per_node = price.per_node_hour(tier) if price else None
    if price is None or per_node is None:
        return NodeCost(size, tier, region, count, None)
    return NodeCost(size, tier, region, count, per_node, price.as_of.isoformat(), price.source,
                    tier in price.unconfirmed)


@dataclass(frozen=True)
class ClusterCost:
    address: str
    action: str                 # create | update | replace | delete | no-op
    before: NodeCost | None
    after: NodeCost | None

    def to_json(self) -> dict[str, Any]:
        return {"address": self.address, "action": self.action,
                "before": self.before.to_json() if self.before else None,
                "after": self.after.to_json() if self.after else None}


def _action(actions: list[str]) -> str:
    if actions == ["delete", "create"]:
        return "replace"
    return actions[0] if len(actions) == 1 else "-".join(actions)


def cluster_costs(changes: Iterable[Any], catalog: Catalog | None = None) -> list[ClusterCost]:
    """Each change that carries a VM size priced (ResourceChange-like: address, type, actions, before, after)."""
    out = []
    for change in changes:
        # by its `size`, which only a `sized` kind's changes carry (plan/kinds/, held by tests/test_kind_table.py):
        # this module cannot look the kind up, as plan/model.py reads it and the kinds read plan/model.py
        if not ((change.after or {}).get("size") or (change.before or {}).get("size")):
            continue  # not a sized kind's (a cluster's), nor another kind of compute, which has no size
        catalog = catalog or load_catalog()
        action = _action(list(change.actions))
        before = node_cost(change.before, catalog) if action != "create" else None
        after = node_cost(change.after, catalog) if action != "delete" else None
        out.append(ClusterCost(change.address, action, before, after))
    return out


def _total(sides: list[NodeCost | None]) -> tuple[float, int]:
    # at_max_instances_hour is None exactly where per_node_hour is
    known = [hour for s in sides if s is not None and (hour := s.at_max_instances_hour) is not None]
    return round(sum(known), 4), sum(1 for s in sides if s is not None and s.per_node_hour is None)


def costs_json(changes: Iterable[Any], catalog: Catalog | None = None) -> dict[str, Any]:
    """The plan JSON's `costs`: per cluster, and the stack's hourly cost at max_instances before and after."""
    costs = cluster_costs(changes, catalog)
    before, unknown_before = _total([c.before for c in costs])
    after, unknown_after = _total([c.after for c in costs])
    return {
        "currency": (catalog or load_catalog()).currency if costs else "USD",
        "unit": "hour",
        "note": "list prices (pay-as-you-go, Linux) recorded in validators/skus.yaml with their day and source; "
                "not fetched: refresh them before relying on a total",
        "resources": [c.to_json() for c in costs],
        "total_at_max_instances_hour": {"before": before, "after": after, "diff": round(after - before, 4),
                                        "unknown_before": unknown_before, "unknown_after": unknown_after},
    }


def money(amount: float, currency: str = "USD") -> str:
    return f"${amount:,.2f}" if currency == "USD" else f"{amount:,.2f} {currency}"


def describe(side: NodeCost, currency: str = "USD") -> str:
    """'$27.20 per node-hour (dedicated, eastus, list price 2025-01-01); up to $54.39/hour at max_instances 2'."""
    where = f"{side.size} {side.tier} in {side.region or 'an unknown region'}"
    if side.per_node_hour is None:
        return f"{UNKNOWN} ({where})"
    note = ", unconfirmed" if side.unconfirmed else ""
    return (f"{money(side.per_node_hour, currency)} per node-hour ({where}, list price {side.as_of}{note}); "
            f"up to {money(side.at_max_instances_hour or 0.0, currency)}/hour at max_instances {side.max_instances}")


def change_lines(cost: ClusterCost, currency: str = "USD") -> list[str]:
    """The `# cost:` lines under a cluster's change in the plan text."""
    if cost.action == "create" and cost.after:
        return [f"# cost: {describe(cost.after, currency)}"]
    if cost.action == "delete" and cost.before:
        return [f"# cost: stops {describe(cost.before, currency)}"]
    if cost.action == "replace" and cost.after:
        lines = [f"# cost: the replacement's nodes cost {describe(cost.after, currency)}"]
        if cost.before and cost.before != cost.after:
            lines.append(f"#       (the nodes it replaces: {describe(cost.before, currency)})")
        return lines
    if cost.action == "update" and cost.before and cost.after and cost.before != cost.after:
        return [f"# cost: {describe(cost.before, currency)}", f"#    -> {describe(cost.after, currency)}"]
    return []


def _priced(costs: dict[str, Any], side: str) -> int:
    """How many clusters' `side` (before or after) has a list price."""
    return sum(1 for r in costs["resources"] if (r.get(side) or {}).get("per_node_hour") is not None)


def _hourly(amount: float, priced: int, unknown: int, currency: str) -> str:
    """A side's total as the summary says it: never "$0.00" for clusters none of which has a price, and "at
    least" where some have none."""
    if unknown and not priced:
        return UNKNOWN
    return f"{'at least ' if unknown else ''}{money(amount, currency)}/hour"


def summary_line(costs: dict[str, Any]) -> str | None:
    """One line after the plan's counts, as Infracost's total: the stack's hourly cost at max_instances; a
    cluster without a list price is counted as unknown, never as $0.00."""
    if not costs["resources"]:
        return None
    total, currency = costs["total_at_max_instances_hour"], costs["currency"]
    unknown = total["unknown_after"]
    tail = f"; {unknown} cluster{'s' if unknown != 1 else ''} {UNKNOWN}" if unknown else ""
    change = ""
    if total["before"] != total["after"] or total["unknown_before"] != total["unknown_after"]:
        change = f" (was {_hourly(total['before'], _priced(costs, 'before'), total['unknown_before'], currency)})"
    now = _hourly(total["after"], _priced(costs, "after"), unknown, currency)
    if now == UNKNOWN:   # validators/skus.yaml has no price for any of them: say which, not a total
        sizes = sorted({r["after"]["size"] for r in costs["resources"] if r.get("after")})
        was = change if _priced(costs, "before") or total["unknown_before"] else ""   # nothing before: no "was"
        return (f"Cost at max_instances: {UNKNOWN}{was} ({unknown} cluster{'s' if unknown != 1 else ''} "
                f"{UNKNOWN}: validators/skus.yaml lists no price for {', '.join(sizes)}).")
    return f"Cost at max_instances: {now}{change}, list prices{tail}."

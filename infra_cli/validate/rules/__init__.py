"""Offline rules: pure functions from a loaded stack (and the knowledge in validators/) to diagnostics.

Each rule has an id (its `rule` field), a message naming the offending value and a hint saying how to fix
it. They never touch the network; live checks (quota, region) belong to the plan's preflight.

A rule registers itself as its module is imported (registry.py), so the order of the imports below is the order
the rules run in, and the order their diagnostics come out in (tests/test_rules_catalogue.py pins it). Each check
declares the rules it reports (registry.py `declare`: id, default severity, summary; `infra rules` lists them,
docs/rules/ID.md explains each); a stack's `rules:` switches some off (switches.py).
"""

from __future__ import annotations

import datetime

from infra_cli.diagnostics import Diagnostic
from infra_cli.knowledge.skus import Catalog
from infra_cli.stack.load import LoadedStack
from infra_cli.validate.rules.registry import Context, RULES, catalogue
from infra_cli.validate.rules.switches import switch_problems, without_switched_off

# imported for the rules they register, in the order they run (not sorted: the order is the point)
from infra_cli.validate.rules import resources, clusters, environments, distributions, launch  # noqa: F401


__all__ = ["RULES", "catalogue", "run_rules"]


def run_rules(loaded: LoadedStack, catalog: Catalog, today: datetime.date | None = None) -> list[Diagnostic]:
    ctx = Context(loaded, catalog, today or datetime.date.today())
    out: list[Diagnostic] = []
    for fn in RULES:
        out.extend(fn(ctx))
    out.extend(switch_problems(ctx))
    return without_switched_off(ctx.stack, out)

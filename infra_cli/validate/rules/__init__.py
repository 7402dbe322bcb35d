"""Offline rules: pure functions from a loaded stack (and the knowledge in validators/) to diagnostics.

Each rule has an id (its `rule` field), a message naming the offending value and a hint saying how to fix
it. They never touch the network; live checks (quota, region) belong to the plan's preflight.

A rule registers itself as its module is imported (registry.py), so the order of the imports below is the order
the rules run in, and the order their diagnostics come out in (tests/test_validate_rules.py pins it).
"""

from __future__ import annotations

import datetime

from infra_cli.diagnostics import Diagnostic
from infra_cli.knowledge.skus import Catalog
from infra_cli.stack.load import LoadedStack
from infra_cli.validate.rules.registry import Context, RULES

# imported for the rules they register, in the order they run (not sorted: the order is the point)
from infra_cli.validate.rules import resources, clusters, environments, distributions, launch  # noqa: F401


def run_rules(loaded: LoadedStack, catalog: Catalog, today: datetime.date | None = None) -> list[Diagnostic]:
    ctx = Context(loaded, catalog, today or datetime.date.today())
    out: list[Diagnostic] = []
    for fn in RULES:
        out.extend(fn(ctx))
    return out

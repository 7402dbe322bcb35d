"""The kinds of resource infra manages, one module each (cluster.py, environment.py), listed in KINDS in the order
the diff takes them. What differs by kind lives in its module; the engines look a resource's kind up here
(`KINDS[resource.type]`) instead of branching on its name. A new kind: its module here, its Azure codec
(azure/), its emulator routes and its tests."""

from __future__ import annotations

from infra_cli.plan.kinds.base import DiffContext, Kind
from infra_cli.plan.kinds.cluster import CLUSTER
from infra_cli.plan.kinds.environment import ENVIRONMENT

KINDS: dict[str, Kind] = {k.name: k for k in (CLUSTER, ENVIRONMENT)}

__all__ = ["KINDS", "Kind", "DiffContext", "CLUSTER", "ENVIRONMENT"]

"""desired: a validated stack -> the resources it asks for, normalised and secret-free.

Each kind says what it asks for (plan/kinds/ Kind.desired: its attributes exactly what the diff compares with
live state, which the kind's `normalise` brings to the same shape, and the ownership tags an apply writes); here
they are taken in KINDS' order. Secrets never enter them: SSH credentials are represented by a salted hash, which
is also written as a tag so a later plan can tell whether they changed (Azure never returns them).
"""

from __future__ import annotations

from infra_cli.plan.kinds import KINDS
from infra_cli.plan.model import Resource
from infra_cli.stack.load import LoadedStack
from infra_cli.stack.model import Stack


def desired_resources(loaded: LoadedStack) -> list[Resource]:
    return [resource for kind in KINDS.values() for resource in kind.desired(loaded)]


def distribution_dependencies(stack: Stack) -> dict[str, tuple[str, ...]]:
    """smoke.DIST -> the addresses it runs on."""
    return {f"smoke.{name}": ((f"cluster.{d.cluster}",) if d.cluster is not None else ())   # serverless, or a
            + (f"environment.{d.environment}",) for name, d in stack.distributions.items()}   # compute read live

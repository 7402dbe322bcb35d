"""How apply carries out a change of one kind of resource (`KindSteps`): the kind's own module under apply/kinds/
(cluster.py, environment.py), registered in apply/kinds/__init__.py STEPS. What a change is, and why, is the
kind's plan module (plan/kinds/); this is how it is made on Azure through the provider. The executor
(apply/executor.py) looks a change's kind up here instead of branching on its name."""

from __future__ import annotations

from typing import Callable, Protocol

from infra_cli.azure.protocol import Provider
from infra_cli.plan.api import Resource, ResourceChange
from infra_cli.stack.load import LoadedStack

Say = Callable[[str, str], None]   # (phase, text): a step's progress, as the executor reports it


class Applying(Protocol):
    """What a step is handed of the apply that runs it (apply/executor.py Applier)."""
    provider: Provider
    loaded: LoadedStack
    poll_s: float
    settle_timeout_s: float


class KindSteps:
    def step(self, run: Applying, change: ResourceChange, desired: Resource | None, say: Say, *, first: bool) -> None:
        """Make `change` (after an import block's adoption, if any). `first`: the first attempt (a retry starts
        from what Azure then shows)."""
        raise NotImplementedError

    def adopt(self, run: Applying, change: ResourceChange, desired: Resource, say: Say) -> None:
        """An import block (Terraform's import): infra's ownership tags on the existing resource; idempotent."""
        raise NotImplementedError

    def past(self, change: ResourceChange) -> str:
        """What the change did, once done."""
        return change.action.past

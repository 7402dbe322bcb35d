"""How apply makes each kind's changes, one module a kind (cluster.py, environment.py), looked up by the
change's type in STEPS. What differs by kind in the plan is plan/kinds/."""

from __future__ import annotations

from infra_cli.apply.kinds.base import KindSteps, import_error
from infra_cli.apply.kinds.cluster import CLUSTER_STEPS, SizeMismatch
from infra_cli.apply.kinds.environment import ENVIRONMENT_STEPS
from infra_cli.diagnostics import DiagnosticError
from infra_cli.plan.api import LiveState, Plan

STEPS: dict[str, KindSteps] = {"cluster": CLUSTER_STEPS, "environment": ENVIRONMENT_STEPS}

__all__ = ["STEPS", "KindSteps", "SizeMismatch", "import_error", "refuse_unsafe_destroys"]


def refuse_unsafe_destroys(plan: Plan, live: LiveState, file: str, hint: str) -> None:
    """Every delete and replace of a saved plan, whatever the plan says, as its kind judges it against the live
    state (a cluster: it exists, carries this stack's ownership tag, and nothing sets lifecycle.prevent_destroy;
    an environment: never deleted)."""
    problems = []
    for change in plan.changes:
        if "delete" not in change.actions:
            continue
        verb = "destroy" if change.actions == ["delete"] else "replace (destroy and create)"
        refusal = STEPS[change.type].destroy_refusal(change, plan, live, verb, file, hint)
        if refusal is not None:
            problems.append(refusal)
    if problems:
        raise DiagnosticError(problems)

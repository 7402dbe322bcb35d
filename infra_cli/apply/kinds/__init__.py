"""How apply makes each kind's changes, one module a kind (cluster.py, environment.py), looked up by the
change's type in STEPS. What differs by kind in the plan is plan/kinds/."""

from __future__ import annotations

from infra_cli.apply.kinds.base import KindSteps
from infra_cli.apply.kinds.cluster import CLUSTER_STEPS, SizeMismatch
from infra_cli.apply.kinds.environment import ENVIRONMENT_STEPS

STEPS: dict[str, KindSteps] = {"cluster": CLUSTER_STEPS, "environment": ENVIRONMENT_STEPS}

__all__ = ["STEPS", "KindSteps", "SizeMismatch"]

"""What another engine may use of plan/ (apply derives, reads and executes plan's result through these names).

Everything else in plan/ is plan's own business: tests/test_import_graph.py refuses an engine importing any other
plan module.
"""

from infra_cli.plan.desired import desired_resources, distribution_dependencies
from infra_cli.plan.diff import provisioning_problem, settings_unreported
from infra_cli.plan.dockerfile_builds import template_build_diagnostics
from infra_cli.plan.engine import PlanOutcome, load_for_plan, plan_stack, planned_changes
from infra_cli.plan.kinds import KINDS
from infra_cli.plan.kinds.cluster import (ClusterSecrets, cluster_secrets, is_other_compute, live_comparable,
                                          read_cluster, ssh_credentials_hash)
from infra_cli.plan.kinds.environment import read_environment
from infra_cli.plan.live import live_fingerprint, refresh
from infra_cli.plan.model import (CREATE, DELETE, NO_OP, REPLACE, UPDATE, LiveState, Plan, PlanMode, Resource,
                                  ResourceChange, canonical_json, content_hash)
from infra_cli.plan.planfile import (REPLAN_HINT, as_saved, load_planned_stack, other_workspace, read_plan_file,
                                    replan_hint, replan_step, stack_changed_since)
from infra_cli.plan.smoke_pending import changed_smokes

__all__ = [
    # plan's types
    "CREATE", "DELETE", "NO_OP", "REPLACE", "UPDATE", "Plan", "PlanMode", "Resource", "ResourceChange", "canonical_json",
    "content_hash",
    # deriving a plan again under the lock, and a saved plan with its seals checked
    "PlanOutcome", "load_for_plan", "plan_stack", "planned_changes",
    "REPLAN_HINT", "replan_hint", "load_planned_stack", "read_plan_file", "stack_changed_since", "as_saved",
    # where and when a saved plan was made: its workspace, the command that makes it again
    "other_workspace", "replan_step",
    # the desired state, the live reads and the judgements apply repeats as plan makes them
    "ClusterSecrets", "cluster_secrets", "desired_resources", "distribution_dependencies", "live_comparable", "ssh_credentials_hash",
    "LiveState", "live_fingerprint", "read_cluster", "read_environment", "refresh", "provisioning_problem", "settings_unreported",
    "is_other_compute",
    # the Dockerfiles template environments render to, judged before anything is written or built
    "template_build_diagnostics",
    # the smokes a change makes pending
    "changed_smokes",
    # the kinds of resource (plan/kinds/): their names and sections, by Resource.type
    "KINDS",
]

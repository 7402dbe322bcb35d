"""apply / destroy / import / force-unlock: the engine functions the CLI calls.

A no-op apply makes no write request: the lock (a write) is taken only when there is something to change,
and then the live state is read again under the lock and must still match what the plan saw.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

from infra_cli.apply.executor import DEFAULT_PARALLELISM, ApplyResult, Event, execute
from infra_cli.apply.lock import StackLock, force_unlock
from infra_cli.conventions import TAG_ADDRESS, TAG_HASH, TAG_STACK
from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.plan.desired import ClusterSecrets, distribution_dependencies, live_comparable
from infra_cli.plan.engine import PlanOutcome, plan_stack
from infra_cli.plan.live import read_cluster, record_smoke, refresh
from infra_cli.plan.model import Plan, Resource, canonical_json, content_hash
from infra_cli.plan.normalise import is_other_compute
from infra_cli.plan.planfile import load_planned_stack, read_plan_file, stack_changed_since
from infra_cli.plan.preflight import LIVE_JUDGED_RULES
from infra_cli.plan.smoke_pending import PENDING, SmokeRecord, changed_smokes
from infra_cli.validate.engine import load_valid_stack


class StalePlan(DiagnosticError):
    pass


def _stale(message: str, file: str) -> StalePlan:
    return StalePlan([Diagnostic("error", "apply.stale-plan", message, file, None, None,
                                 "run `infra plan` again and apply the new plan")])


def prepare_from_plan_file(path: Path, *, local: bool) -> PlanOutcome:
    """Load a saved plan and the stack it came from; refuse if the stack's desired state changed."""
    from infra_cli.azure.clients import build_clients

    from infra_cli.azure.provider import Provider

    saved = read_plan_file(path)
    loaded = load_planned_stack(saved)
    if stack_changed_since(saved, loaded):
        raise _stale(f"the stack file {saved.stack_path} changed since this plan was made", str(path))

    return PlanOutcome(saved.plan, loaded, Provider(build_clients(loaded.stack.workspace, local=local)), live=None)


def apply_outcome(outcome: PlanOutcome, *, parallelism: int = DEFAULT_PARALLELISM,
                  emit: Callable[[Event], None] = lambda e: None, operation: str = "apply",
                  stop: threading.Event | None = None) -> ApplyResult:
    """Lock, check the live state still matches the plan, execute, unlock.

    A saved plan (outcome.live is None) must find the live state it was made against. A plan made moments ago
    by this command is planned again under the lock when Azure moved meanwhile (a cluster another apply left
    Creating finished): it goes on if the new plan makes the same changes, and is stale otherwise."""
    plan, loaded, provider = outcome.plan, outcome.loaded, outcome.provider
    with StackLock(provider.clients.ml, plan.stack, operation):
        live = refresh(provider, plan.desired)
        if live.fingerprint() != plan.live_fingerprint:
            again = plan_stack(loaded, provider, mode=plan.mode).plan if outcome.live is not None else None
            if again is None or again.has_errors() or _changes(again) != _changes(plan):
                raise _stale("the live state changed since the plan was made (someone else applied, or Azure "
                             "changed)", str(loaded.path))
            plan = again
        mark_smokes_pending(plan, loaded, provider)
        return execute(plan, loaded, provider, parallelism=parallelism, emit=emit, stop=stop)


def _changes(plan: Plan) -> list[tuple[str, list[str], str]]:
    """What a plan would do: each change's address, actions and the values it writes."""
    return [(c.address, c.actions, canonical_json(c.after)) for c in plan.changes]


def mark_smokes_pending(plan: Plan, loaded: Any, provider: Any) -> None:
    """Before changing a distribution's cluster or environment, record its smoke as pending (with why) on Azure:
    until a smoke passes on what apply leaves, the plan shows it, even for a cluster recreated as it was."""
    for job, why in changed_smokes(plan.resource_changes, distribution_dependencies(loaded.stack)).items():
        record_smoke(provider, plan.stack, SmokeRecord(job.split(".", 1)[1], PENDING, None, reason=why))


def force_unlock_stack(stack_path: Path, *, local: bool) -> Any:
    from infra_cli.azure.clients import build_clients

    loaded, _ = load_valid_stack(stack_path)
    clients = build_clients(loaded.stack.workspace, local=local)
    return force_unlock(clients.ml, loaded.stack.stack)


def import_resource(address: str, azure_name: str, stack_path: Path, *, local: bool, clients: Any = None) -> str:
    """Adopt an existing cluster: write this stack's ownership tags on it, changing nothing else."""
    from infra_cli.azure.clients import build_clients
    loaded, _ = load_valid_stack(stack_path, judged_live=LIVE_JUDGED_RULES)  # an imported cluster exists
    file = str(loaded.path)
    kind, _, name = address.partition(".")

    def error(message: str, hint: str) -> DiagnosticError:
        return DiagnosticError([Diagnostic("error", "import.invalid", message, file, None, None, hint)])

    if kind == "environment":
        raise error(f"{address}: only clusters can be imported",
                    "environments need no import: infra registers new versions next to existing ones")
    if kind != "cluster" or not name:
        raise error(f"{address!r} is not a cluster address", "write cluster.NAME, NAME as in the stack's clusters")
    if name not in loaded.stack.clusters:
        raise error(f"{address} is not declared in the stack", f"add clusters.{name} to {file} first")
    if azure_name != name:
        raise error(f"the stack names this cluster {name!r} but the Azure cluster is {azure_name!r}",
                    f"import it under its Azure name: declare clusters.{azure_name} (Azure ML cannot rename a "
                    f"cluster) and run `infra import cluster.{azure_name} {azure_name} {file}`")
    clients = clients or build_clients(loaded.stack.workspace, local=local)
    from infra_cli.azure.provider import Provider
    provider = Provider(clients)
    live = read_cluster(provider, azure_name)
    if live is None:
        raise error(f"there is no cluster {azure_name!r} in workspace {loaded.stack.workspace.name!r}",
                    "check the name with `az ml compute list`")
    if is_other_compute(live):
        raise error(f"{azure_name!r} is a {live.attributes['compute_type']} compute, not an AmlCompute cluster",
                    "infra imports AmlCompute clusters only: give the stack's cluster another name")
    if live.owner_stack and live.owner_stack != loaded.stack.stack:
        raise error(f"cluster {azure_name!r} belongs to stack {live.owner_stack!r}", "remove it from that stack first")
    tags = {TAG_STACK: loaded.stack.stack, TAG_ADDRESS: address, TAG_HASH: content_hash(live_comparable(live.attributes))}
    # the same PUT with the same values plus our tags (Azure never returns secrets, so none are sent)
    provider.put_cluster(Resource(address, "cluster", azure_name, live.attributes, tags),
                         ClusterSecrets(admin_username=live.attributes["ssh_admin_username"]),
                         live.attributes["subnet"], None)
    return f"Imported {azure_name} as {address}. Run `infra plan {stack_path}` to see how it differs from the stack."

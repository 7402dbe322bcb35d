"""plan: stack file -> Plan. load -> validate -> desired -> refresh (+ live facts) -> diff -> preflight."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra_cli.catalog import load_catalog
from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.plan.desired import desired_resources, distribution_dependencies
from infra_cli.plan.diff import LiveState, diff, drift, select_targets, smoke_jobs
from infra_cli.plan.model import Plan, Resource
from infra_cli.stack.load import LoadedStack
from infra_cli.validate.engine import load_valid_stack
from infra_cli.validate.image_requirements import image_requirement_diagnostics
from infra_cli.validate.preflight import LIVE_JUDGED_RULES, preflight


@dataclass
class PlanOutcome:
    plan: Plan
    loaded: LoadedStack
    clients: Any
    live: LiveState


def check_targets(loaded: LoadedStack, desired: list[Resource], targets: list[str]) -> None:
    known = {r.address for r in desired} | {f"smoke.{d}" for d in loaded.stack.distributions}
    bad = [t for t in targets if t not in known]
    if bad:
        raise DiagnosticError([Diagnostic("error", "plan.unknown-target", f"--target {t} is not an address of this stack",
                                          str(loaded.path), None, None, f"addresses: {', '.join(sorted(known))}")
                               for t in bad])


def plan_stack(loaded: LoadedStack, clients: Any, *, mode: str = "normal", targets: list[str] | None = None,
               warnings: list[Diagnostic] | None = None, check_images: bool = False) -> PlanOutcome:
    from infra_cli.azure.provider import Provider

    stack = loaded.stack
    desired = desired_resources(loaded)
    targets = targets or []
    check_targets(loaded, desired, targets)
    provider = Provider(clients)
    with ThreadPoolExecutor(max_workers=3) as pool:
        live_f = pool.submit(provider.refresh, desired)
        facts_f = pool.submit(provider.live_facts, stack.workspace.location) if mode == "normal" else None
        images_f = pool.submit(image_requirement_diagnostics, loaded) if check_images else None
        live = live_f.result()
        facts = facts_f.result() if facts_f else None
        image_diagnostics = images_f.result() if images_f else []
    result = diff(desired, live, stack=stack.stack, source=loaded.source, mode="destroy" if mode == "destroy" else "normal")
    deps = distribution_dependencies(stack)
    changes = result.changes
    if targets:
        changes = select_targets(changes, targets, deps)
    diagnostics = list(warnings or []) + result.diagnostics + image_diagnostics
    if facts is not None:
        diagnostics += preflight(changes, desired, facts, load_catalog(), loaded.source, stack.workspace.name)
    drifted = drift(desired, live, stack=stack.stack) if mode == "refresh-only" else []
    plan = Plan(
        stack=stack.stack, mode=mode,
        resource_changes=[] if mode == "refresh-only" else changes,
        smoke_jobs=[] if mode != "normal" else smoke_jobs(changes, deps),
        diagnostics=[d.to_json() for d in diagnostics],
        live_fingerprint=live.fingerprint(), desired=desired, drift=drifted,
    )
    return PlanOutcome(plan, loaded, clients, live)


def plan_file(stack_path: Path, *, local: bool, mode: str = "normal", targets: list[str] | None = None,
              check_images: bool = False) -> PlanOutcome:
    from infra_cli.azure.clients import build_clients

    loaded, warnings = load_valid_stack(stack_path, judged_live=LIVE_JUDGED_RULES)  # preflight judges them
    clients = build_clients(loaded.stack.workspace, local=local)
    return plan_stack(loaded, clients, mode=mode, targets=targets, warnings=warnings, check_images=check_images)

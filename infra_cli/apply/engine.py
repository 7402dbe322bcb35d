"""apply / destroy / import: the engine functions the CLI calls.

A no-op apply makes no write request: the lock (a write) is taken only when there is something to change,
and then the live state is read again under the lock and must still match what the plan saw.

A plan file is a request, not an order (as Terraform treats its plans, and more): its seals (digest, HMAC) are
checked as it is read (plan/planfile.py), and apply derives the actions again from the file's desired state (which
must be the stack's now) and the live state, once before and once under the lock, and refuses a file whose
recorded actions differ. What runs is the derived plan, never the file's. Whatever a plan says, every delete and
replace is checked under the lock against the live state: the cluster must carry the stack's ownership tag and
must not be protected by lifecycle.prevent_destroy (in the stack, or in the live tag of the last apply).

A saved plan applies only where and when it was made, as Terraform's: the stack must still name the workspace the
plan records, and the stack's lineage and serial (state/serial.py), read under the lock, must be those the plan
was made against; every apply that writes registers the next serial under the lock before its first write.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from infra_cli.arguments import NextStep
from infra_cli.apply.executor import DEFAULT_PARALLELISM, ApplyResult, Event, execute
from infra_cli.apply.kinds import STEPS, import_error, refuse_unsafe_destroys
from infra_cli.azure.protocol import Provider
from infra_cli.diagnostics import Diagnostic, DiagnosticError, Text, says
from infra_cli.plan.api import (KINDS, Plan, PlanMode, PlanOutcome, ResourceChange, as_saved, canonical_json,
                                changed_smokes, distribution_dependencies, live_fingerprint, load_for_plan,
                                load_planned_stack, other_workspace, plan_stack, planned_changes, read_plan_file,
                                refresh, replan_step, replan_hint, stack_changed_since)
from infra_cli.stack.addresses import AddressError, check_name, parsed, refused
from infra_cli.stack.model import Workspace
from infra_cli.stack.variables import Inputs, needing
from infra_cli.state.records import PENDING, SmokeRecord
from infra_cli.state.serial import StateSerial
from infra_cli.state.store import StateStore

# The provider for a workspace, built by the command (commands/backend.py): Azure, or the local emulator. Engines
# that load the stack themselves ask for it once the stack passed their checks.
Backend = Callable[[Workspace], Provider]

class StalePlan(DiagnosticError):
    pass


def _stale(message: str, file: str, hint: str) -> StalePlan:
    return StalePlan([Diagnostic("error", "apply.stale-plan", message, file, None, None, hint)])


def _saved_plan_hint(replan: NextStep, file: str) -> Text:
    """What to do with a saved plan that no longer applies: the exact `infra plan` that makes it again
    (replan_step), then apply that file."""
    return says("run ", replan, " again and apply the new file (", NextStep(("infra", "apply"), (file,)), ")")


def _stale_state(planned: StateSerial, now: StateSerial, stack: str, file: str, hint: str) -> StalePlan:
    """Terraform's "Saved plan is stale": the stack's state was written (its serial bumped, or another lineage
    started) after the plan was made."""
    if now.lineage is not None and now.lineage == planned.lineage:
        moved = f"it is now at serial {now.serial} of the same lineage"
    elif now.lineage is None:
        moved = f"it is now at {now.describe()}"
    else:
        moved = (f"it is now at {now.describe()}: another lineage, a state made since or elsewhere than the one the "
                 "plan read")
    return _stale(f"Saved plan is stale: the given plan file can no longer be applied because the state of stack "
                  f"{stack!r} was changed by another operation after the plan was created (the plan was made "
                  f"against {planned.describe()}; {moved}); nothing was changed", file, hint)


@dataclass
class SavedOutcome(PlanOutcome):
    """A plan from a file, already derived again from the stack and the live state (`plan` is the derived one);
    `targets` the file's --target addresses, which the derivation under the lock keeps to; `replan` the command
    that makes it again."""
    file: str = ""
    replan: NextStep | None = None


def prepare_from_plan_file(path: Path, *, backend: Backend, key: bytes | None, local: bool = False) -> SavedOutcome:
    """Load a saved plan (its seals checked; `key`: INFRA_PLAN_KEY) and the stack it came from; refuse it if the
    stack's desired state changed, or if the actions it records are not those the stack and the live state call
    for now. `local`: `backend` is the project's local Azure; a plan made with --local is refused by any other
    (the file records it, sealed: planfile.made_locally), so no local plan reaches Azure. Reads only: nothing is
    locked or written."""
    saved = read_plan_file(path, key=key)
    if saved.local and not local:
        raise DiagnosticError([Diagnostic(
            "error", "apply.plan-cloud", "this plan was made with --local, against the local Azure: it cannot be "
            "applied to Azure", str(path), None, None,
            says("apply it with --local (", NextStep(("infra", "apply"), ("FILE",)), " does, reading the file), or make "
                 "a plan against Azure: ", NextStep(("infra", "plan"), ("STACK", "--out", "FILE"))))])
    loaded = load_planned_stack(saved)
    elsewhere = other_workspace(saved, loaded, path)
    if elsewhere is not None:   # before anything is read: the plan is no request for this workspace at all
        raise DiagnosticError([elsewhere])
    replan = replan_step(saved, path)
    hint = _saved_plan_hint(replan, str(path))
    if stack_changed_since(saved, loaded):
        raise _stale(f"the stack file {saved.stack_path} changed since this plan was made", str(path), hint)
    provider = backend(loaded.stack.workspace)
    derived_outcome = plan_stack(loaded, provider, mode=saved.plan.mode, targets=saved.targets, replace=saved.replace)
    derived = derived_outcome.plan
    if derived.state != saved.plan.state:
        raise _stale_state(saved.plan.state, derived.state, saved.plan.stack, str(path), hint)
    if derived.live_fingerprint != saved.plan.live_fingerprint:
        raise _stale("the live state changed since the plan was made (someone else applied, or Azure changed)",
                     str(path), hint)
    assert saved.seal is not None   # read strictly: a file keyed with a key this run lacks was refused
    _refuse_mismatch(saved.plan.changes, as_saved(derived.changes, saved.seal), str(path), hint, values=True)
    errors = [d for d in derived.diagnostics if d.severity == "error"]
    if errors:   # what plan would have refused (prevent_destroy, ownership, quota...), whatever the file says
        raise DiagnosticError(errors)
    return SavedOutcome(derived, loaded, provider, live=None, smoke_inputs=derived_outcome.smoke_inputs,
                        targets=saved.targets, file=str(path), replan=replan, replace=saved.replace)


def apply_outcome(outcome: PlanOutcome, *, parallelism: int = DEFAULT_PARALLELISM,
                  emit: Callable[[Event], None] = lambda e: None, operation: str = "apply",
                  stop: threading.Event | None = None) -> ApplyResult:
    """Lock, check the live state still matches the plan, execute, unlock; after a
    complete destroy, archive the stack's lock and smoke records (StateStore.retire).

    A saved plan (outcome.live is None) must find the live state it was made against, and the actions derived
    again from it must be the plan's. A plan made moments ago by this command is planned again under the lock
    when Azure moved meanwhile (a cluster another apply left Creating finished): it goes on if the new plan makes
    the same changes, and is stale otherwise. A saved plan must also find the stack's lineage and serial it was
    made against (a plan made moments ago is planned again when they moved). Every delete and replace is then
    checked against the live state (apply/kinds/__init__.py refuse_unsafe_destroys) before anything is written,
    and the next serial is registered before the first write."""
    plan, loaded, provider = outcome.plan, outcome.loaded, outcome.provider
    hint = _saved_plan_hint(outcome.replan, outcome.file) if isinstance(outcome, SavedOutcome) and outcome.replan \
        else replan_hint(loaded.source.file)
    store = StateStore(provider)
    with store.lock(plan.stack, operation) as lock:
        live = refresh(provider, plan.desired)
        serial = store.serial(plan.stack)
        if isinstance(outcome, SavedOutcome) and serial != plan.state:
            raise _stale_state(plan.state, serial, plan.stack, outcome.file, hint)
        if live_fingerprint(live) != plan.live_fingerprint or serial != plan.state:
            again = (plan_stack(loaded, provider, mode=plan.mode, replace=outcome.replace, targets=outcome.targets)
                     if outcome.live is not None else None)
            if again is None or again.plan.has_errors() or _differences(plan.changes, again.plan.changes, values=True):
                raise _stale("the live state changed since the plan was made (someone else applied, or Azure "
                             "changed)", outcome.file if isinstance(outcome, SavedOutcome) else loaded.file, hint)
            assert again.live is not None   # plan_stack reads the live state
            plan, live = again.plan, again.live
        if isinstance(outcome, SavedOutcome):
            derived, found = ([], []) if plan.mode == PlanMode.REFRESH_ONLY else planned_changes(
                loaded, plan.desired, live, mode=plan.mode, targets=outcome.targets, replace=outcome.replace)
            _refuse_mismatch(plan.changes, [c for c in derived if c.is_change], outcome.file, hint, values=False)
            if any(d.severity == "error" for d in found):
                raise DiagnosticError([d for d in found if d.severity == "error"])
        refuse_unsafe_destroys(plan, live, loaded.file, hint)
        if plan.changes:   # every plan made before this write is stale from here on
            store.bump_serial(plan.stack, serial, operation)
        mark_smokes_pending(plan, loaded, provider)
        result = execute(plan, loaded, provider, parallelism=parallelism, emit=emit, stop=stop)
    if plan.mode == PlanMode.DESTROY and result.ok and not outcome.targets:   # a targeted destroy leaves the rest
        # nothing of the stack is left: infra's own records of it go too (after the lock's release, whose
        # "free" version is archived with the others), so nothing in the workspace carries the stack's tag
        result.retired = store.retire(plan.stack, lock)
    return result


def _differences(recorded: list[ResourceChange], derived: list[ResourceChange], *, values: bool) -> list[str]:
    """How the changes a plan records differ from those derived from the stack and the live state, one line per
    address (empty when they agree): actions, the Azure resource named, and with `values` the values written."""
    def actions(change: ResourceChange | None) -> str:
        return json.dumps(change.actions) if change is not None else "no change"

    mine, theirs = {c.address: c for c in recorded}, {c.address: c for c in derived}
    out = []
    for address in sorted(set(mine) | set(theirs)):
        r, d = mine.get(address), theirs.get(address)
        if r is None or d is None or r.actions != d.actions:
            out.append(f"{address}: the plan records {actions(r)}, the stack and the live state call for {actions(d)}")
        elif (r.type, r.name) != (d.type, d.name):
            out.append(f"{address}: the plan names {r.type} {r.name!r}, the stack {d.type} {d.name!r}")
        elif values and canonical_json(r.after) != canonical_json(d.after):
            fields = sorted(k for k in set(r.after or {}) | set(d.after or {})
                            if (r.after or {}).get(k) != (d.after or {}).get(k))
            out.append(f"{address}: the plan writes other values than the stack asks for ({', '.join(fields)})")
    return out


def _refuse_mismatch(recorded: list[ResourceChange], derived: list[ResourceChange], file: str, hint: str, *,
                     values: bool) -> None:
    lines = _differences(recorded, derived, values=values)
    if lines:
        raise DiagnosticError([Diagnostic(
            "error", "apply.plan-mismatch",
            "the plan file's actions are not what the stack and the live state call for (the file was changed "
            "after infra plan wrote it, or was not written by it), so nothing was changed: " + "; ".join(lines),
            file, None, None, hint)])


def mark_smokes_pending(plan: Plan, loaded: Any, provider: Provider) -> None:
    """Before changing a distribution's cluster or environment, record its smoke as pending (with why) on Azure:
    until a smoke passes on what apply leaves, the plan shows it, even for a cluster recreated as it was."""
    for job, why in changed_smokes(plan.resource_changes, distribution_dependencies(loaded.stack)).items():
        StateStore(provider).record_smoke(plan.stack, SmokeRecord(job.split(".", 1)[1], PENDING, None, reason=why))


def forget_resource(address: str, stack_path: Path, *, backend: Backend, inputs: Inputs | None = None) -> str:
    """`infra state rm ADDR STACK` (Terraform's `state rm`): remove this stack's ownership tags from the resource,
    changing nothing else, under the stack's lock; the serial moves on (plans made before are stale). The plan
    then no longer owns it: a cluster still declared is a same-named resource to adopt (`infra import`)."""
    target = parsed(address, file=str(stack_path))   # the grammar first: nothing is read or written before it
    # the resource's declaration is read (a cluster's PUT sends its SSH secrets back), nothing else declared
    loaded, _ = load_for_plan(stack_path, inputs=needing(inputs, (KINDS[target.kind].section, target.name)))
    file, stack = loaded.file, loaded.stack.stack
    kind, name = target.kind, target.name

    def error(message: str, hint: str) -> DiagnosticError:
        return DiagnosticError([Diagnostic("error", "state-rm.invalid", message, file, None, None, hint)])

    provider = backend(loaded.stack.workspace)
    store = StateStore(provider)
    with store.lock(stack, "state rm"):
        serial = store.serial(stack)
        return STEPS[kind].forget(loaded, address, name, provider, lambda: store.bump_serial(stack, serial, "state rm"),
                                  error)


def import_resource(address: str, azure_name: str, stack_path: Path, *, backend: Backend,
                    inputs: Inputs | None = None) -> str:
    """Adopt an existing cluster or environment: write this stack's ownership tags on it, changing nothing else.
    Under the stack's lock, moving its serial on as apply does: a plan made before the import is stale (it
    planned to create, or refused, what the stack now owns), and no apply runs beside it."""
    target = parsed(address, file=str(stack_path))   # the grammar first: nothing is read or written before it
    try:
        check_name(target.kind, azure_name, what="AZURE_NAME")
    except AddressError as exc:
        raise refused(exc, str(stack_path)) from None
    # as plan: an imported cluster exists, the live state judges it; of the stack's declarations only the one
    # adopted is read (its SSH secrets, its desired environment, lifecycle.prevent_destroy)
    loaded, _ = load_for_plan(stack_path, inputs=needing(inputs, (KINDS[target.kind].section, target.name)))
    file = loaded.file
    kind, name = target.kind, target.name
    section = KINDS[kind].section
    if name not in KINDS[kind].declared(loaded.stack):
        raise import_error(loaded, f"{address} is not declared in the stack", f"add {section}.{name} to {file} first")
    if azure_name != name:
        raise import_error(loaded, f"the stack names this {kind} {name!r} but the Azure {kind} is {azure_name!r}",
                            says(f"import it under its Azure name: declare {section}.{azure_name} (Azure ML cannot "
                                 f"rename a {kind}) and run ",
                            NextStep(("infra", "import"), (f"{kind}.{azure_name}", azure_name, str(file)))))
    provider = backend(loaded.stack.workspace)
    steps = STEPS[kind]
    steps.importable(loaded, address, name, provider)   # refused before anything is written, not even the lock
    store = StateStore(provider)
    with store.lock(loaded.stack.stack, "import"):
        live = steps.importable(loaded, address, name, provider)   # again under the lock: what the write is made of
        store.bump_serial(loaded.stack.stack, store.serial(loaded.stack.stack), "import")
        done = steps.adopt_imported(loaded, address, name, provider, live)
    return done + steps.after_import(stack_path)

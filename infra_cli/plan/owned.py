"""What a stack owns in Azure now: `infra state list` and `infra show STACK`.

infra keeps no state file (live state is the only state): Terraform's state is read here from the ownership
tags infra writes on everything it creates (plan/model.py TAG_STACK, TAG_ADDRESS). Owned are the clusters
tagged with the stack (also those no longer in the stack: the next plan destroys them) and the live version
of each environment the stack declares when that version carries the tag (infra never deletes environment
versions, so one the stack no longer declares is no longer its to manage). Secrets never appear: values are
masked as the plan masks them. commands/views/state.py draws the result as Terraform shows a state.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from infra_cli.plan.desired import desired_resources
from infra_cli.plan.engine import with_sensitive
from infra_cli.plan.kinds import KINDS
from infra_cli.plan.live import LiveState, refresh
from infra_cli.plan.model import NO_OP, SENSITIVE_MARK, Resource, ResourceChange, masked
from infra_cli.plan.preflight import LIVE_JUDGED_RULES
from infra_cli.stack.variables import Inputs
from infra_cli.validate.engine import load_valid_stack
from infra_cli.validate.rules.resources import IMPORT_UNDECLARED

# Plan bookkeeping on a live environment, not a value of the resource.
_NOT_VALUES = frozenset({"next_version"})


@dataclass(frozen=True)
class OwnedResource:
    address: str
    type: str
    name: str  # the Azure name
    values: dict[str, Any]  # as shown: secrets and ${VAR} values masked
    sensitive: dict[str, Any]  # Terraform's sensitive_values: {key: true} or, inside a map, {key: {map key: true}}


@dataclass(frozen=True)
class StackState:
    stack: str
    resources: list[OwnedResource]

    def addresses(self) -> list[str]:
        return [r.address for r in self.resources]


def owned(live: LiveState, stack: str) -> list[Resource]:
    """The live resources that carry `stack`'s tag, sorted by address as `terraform state list` sorts."""
    return sorted((r for kind in KINDS.values() for r in kind.live(live).values()
                   if r.owner_stack == stack and kind.exists(r) and not kind.held_by_other(r)), key=lambda r: r.address)


def _sensitive_values(values: dict, shown: dict) -> dict:
    out: dict[str, Any] = {}
    for k, v in values.items():
        if shown[k] == SENSITIVE_MARK and v != SENSITIVE_MARK:
            out[k] = True
        elif isinstance(v, dict) and shown[k] != v:
            out[k] = {mk: True for mk, mv in shown[k].items() if mv == SENSITIVE_MARK and v.get(mk) != SENSITIVE_MARK}
    return out


def stack_state(stack: str, live: LiveState, sensitive: dict[str, tuple] | None = None) -> StackState:
    """`sensitive`: address -> attribute paths the stack interpolates from ${VAR} (ResourceChange.sensitive),
    shown masked as in the plan."""
    out = []
    for r in owned(live, stack):
        paths = (sensitive or {}).get(r.address, ())
        values = {"name": r.name, **{k: v for k, v in r.attributes.items() if k not in _NOT_VALUES}}
        shown = masked(values, paths)
        out.append(OwnedResource(r.address, r.type, r.name, shown, _sensitive_values(values, shown)))
    return StackState(stack, out)


# ---- reading it (the only I/O here) -------------------------------------------------------------------------

def sensitive_paths(loaded: Any, live: LiveState) -> dict[str, tuple]:
    """address -> the attribute paths the stack fills from ${VAR}, as the plan computes them."""
    resources = [r for kind in KINDS.values() for r in kind.live(live).values()]
    changes = [ResourceChange(r.address, r.type, r.name, NO_OP, r.attributes, r.attributes) for r in resources]
    return {c.address: c.sensitive for c in with_sensitive(changes, loaded.source) if c.sensitive}


def read_stack_state(stack_path: Path, *, backend: Callable[[Any], Any], inputs: Inputs | None = None) -> StackState:
    """Load the stack (for its name, workspace and environments), read Azure through the provider `backend`
    builds, and keep what carries the stack's tag. Raises DiagnosticError for a stack that does not load or
    validate."""
    # as plan: a state read judges none; and an import block whose target the stack does not declare yet (what
    # `infra plan --generate-config-out` is for) does not change what the stack owns
    loaded, _ = load_valid_stack(stack_path, judged_live=LIVE_JUDGED_RULES | {IMPORT_UNDECLARED}, inputs=inputs)
    live = refresh(backend(loaded.stack.workspace), desired_resources(loaded))
    return stack_state(loaded.stack.stack, live, sensitive_paths(loaded, live))

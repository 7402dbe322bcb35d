"""diff: desired resources x live resources -> changes. Pure: no I/O, no SDK.

Each resource's change is its kind's to judge (plan/kinds/: a cluster's update semantics and provisioning
states, an environment's immutable versions); this module walks the stack's resources and the kinds in order.
Resources are touched only when they carry this stack's ownership tag; a same-named resource without it is an
error that says how to adopt it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from infra_cli.diagnostics import Diagnostic
from infra_cli.plan.kinds import KINDS, DiffContext
from infra_cli.plan.kinds.cluster import provisioning_problem, settings_unreported
from infra_cli.plan.live import LiveState
from infra_cli.plan.model import Resource, ResourceChange
from infra_cli.stack.source import SourceMap

__all__ = ["DiffResult", "LiveState", "diff", "drift", "force_replace", "provisioning_problem", "select_targets",
           "settings_unreported"]


@dataclass
class DiffResult:
    changes: list[ResourceChange]
    diagnostics: list[Diagnostic]
    drift: list[ResourceChange] = field(default_factory=list)


def force_replace(changes: list[ResourceChange], replace: list[str], source: SourceMap
                  ) -> tuple[list[ResourceChange], list[Diagnostic]]:
    """`--replace ADDR` (Terraform's -replace): what each kind makes of it (a cluster is deleted and created again,
    `-/+`, even without a change; an environment gets a new version of the same content). One the plan creates
    anyway stays a create."""
    out, diagnostics = [], []
    for c in changes:
        done = KINDS[c.type].replace_requested(c, source) if c.address in replace else None
        if done is None:
            out.append(c)
            continue
        out += done[0]
        diagnostics += done[1]
    return out, diagnostics


def diff(desired: list[Resource], live: LiveState, *, stack: str, source: SourceMap,
         mode: str = "normal", now: float | None = None, imports: dict[str, str] | None = None) -> DiffResult:
    """`source`: where each key of the stack file is, so diagnostics point at the line that causes them.
    `now` (epoch seconds, default the clock): when a long-running create counts as stuck.
    `imports`: address -> Azure name of the stack's import blocks: an existing resource no stack owns is adopted
    (the change says `importing`) and compared as if owned; once this stack owns it the block changes nothing."""
    ctx = DiffContext(stack, source, imports or {}, mode, now)
    changes: list[ResourceChange] = []
    diagnostics: list[Diagnostic] = []
    if mode != "destroy":
        for res in desired:
            found, said = KINDS[res.type].diff_declared(res, live, ctx)
            changes += found
            diagnostics += said
    for kind in KINDS.values():   # what the stack no longer declares (all of it, on destroy)
        found, said = kind.diff_undeclared(desired, live, ctx)
        changes += found
        diagnostics += said
    return DiffResult(changes, diagnostics)


def drift(desired: list[Resource], live: LiveState, *, stack: str) -> list[ResourceChange]:
    """The stack's live resources changed outside infra, as each kind tells them."""
    return [c for kind in KINDS.values() for c in kind.drift(desired, live, stack)]


def select_targets(changes: list[ResourceChange], targets: list[str],
                   dependencies: dict[str, tuple[str, ...]], *, destroying: bool = False) -> list[ResourceChange]:
    """--target: keep the targeted addresses and what they depend on; when destroying, the targeted addresses
    and what depends on them (as Terraform's `destroy -target`: a dependency outlives what runs on it)."""
    wanted: set[str] = set(targets)
    for t in targets:
        if destroying:
            wanted.update(a for a, on in dependencies.items() if t in on)
        else:
            wanted.update(dependencies.get(t, ()))
    return [c for c in changes if c.address in wanted]

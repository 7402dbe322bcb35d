"""A plan drawn for a person, in the style users know from `terraform plan` (plan and show print it).

  + create   ~ update in place   -/+ replace (with "# forces replacement")   - destroy
Colour only when the stream is a terminal.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from infra_cli.arguments import NextStep
from infra_cli.diagnostics import says
from infra_cli.plan.cost import change_lines, cluster_costs, costs_json, summary_line
from infra_cli.plan.kinds import KINDS
from infra_cli.plan.model import NO_OP, SENSITIVE_MARK, Action, Plan, PlanMode, ResourceChange, masked


def _kind(change: ResourceChange) -> str | None:
    """The action's name in this module's tables ("create", "update", "replace", "delete"); None for no-op."""
    action = change.action
    return None if action is Action.NO_OP else action.name.lower()


def _value(v: Any) -> str:
    if v is None:
        return "null"
    if v == SENSITIVE_MARK:
        return v
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True) if v else ("{}" if isinstance(v, dict) else "[]")
    return str(v)


class _Painter:
    def __init__(self, colour: bool):
        self.colour = colour

    def __call__(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.colour else text


def _headline(change: ResourceChange, kind: str) -> str:
    said = KINDS[change.type].headline(change, kind)
    if said is not None:
        return said
    if kind == "replace" and (change.action_reason or "").startswith(_TAINTED):
        return f"# {change.address} is tainted, so must be replaced"
    if kind == "update" and (change.action_reason or "").startswith(_UNREPORTED):
        state = (change.before or {}).get("provisioning_state")
        doing = {"Creating": "being created", "Updating": "being updated"}.get(state or "", f"{state}" if state else "")
        return (f"# {change.address} is still {doing}: apply waits for it" if doing else
                f"# {change.address} will be updated in-place (Azure reported no settings for it)")
    if kind == "replace" and (change.action_reason or "").startswith(_REQUESTED):
        return f"# {change.address} will be replaced, as requested"
    return {
        "create": f"# {change.address} will be created",
        "update": f"# {change.address} will be updated in-place",
        "replace": f"# {change.address} must be replaced",
        "delete": f"# {change.address} will be destroyed",
    }[kind]


# The plan's reasons (plan/diff.py) as Terraform words them under a headline: why a resource is tainted or
# goes away; a replacement forced by an attribute says so on that attribute's line instead.
_TAINTED = "replace_because_tainted: "
_UNREPORTED = "update_after_create: "  # plan/diff.py: Azure has not reported the cluster's settings yet
_CANNOT_UPDATE = "replace_because_cannot_update: "
_REQUESTED = "replace_by_request: "
_DELETE_WHY = {"no longer in the stack": "because {address} is not in the stack",
               "destroy requested": "because infra destroy (or plan --destroy) was requested"}


def _reason(change: ResourceChange, kind: str) -> str | None:
    reason = change.action_reason or ""
    if kind == "replace" and reason.startswith(_TAINTED):
        return reason[len(_TAINTED):]
    if kind == "replace" and reason.startswith(_REQUESTED):
        return reason[len(_REQUESTED):]
    if kind == "replace" and reason.startswith(_CANNOT_UPDATE):
        return None   # each forcing attribute carries "# forces replacement"
    if kind == "update" and reason.startswith(_UNREPORTED):
        return reason[len(_UNREPORTED):]
    if kind == "delete":
        # only infra's own sentences are templates: a reason read from a plan file is text, never formatted
        return (_DELETE_WHY[reason].format(address=change.address) if reason in _DELETE_WHY else reason) or None
    return None


def legend(changes: list[ResourceChange]) -> list[str]:
    """Terraform's key to the symbols, for the actions this plan has, in Terraform's order."""
    present = {c.action for c in changes}
    order = (Action.CREATE, Action.UPDATE, Action.REPLACE, Action.DELETE)
    rows = [f"{a.symbol:>3} {a.legend}" for a in order if a in present]
    return ["Resource actions are indicated with the following symbols:", *rows, ""] if rows else []


def render_change(change: ResourceChange, paint: _Painter, cost: Sequence[str] = ()) -> list[str]:
    """The change's block; `cost` lines (plan/cost.py) go under it, as Infracost's breakdown does."""
    kind = _kind(change)
    if kind is None and change.importing is None:
        return []
    symbol, code = change.action.symbol, change.action.colour
    if kind is None:  # adopted as it is (Terraform: "will be imported")
        lines = [paint(f"  # {change.address} will be imported", "1")]
        kind, reason = "import", None
    else:
        lines = [paint(f"  {_headline(change, kind)}", "1")]
        reason = _reason(change, kind)
        if change.importing is not None:
            lines.append(f"  # (imported from \"{change.importing}\")")
    if reason:
        lines.append(f"  # ({reason})")
    lines.append(f"  {paint(symbol, code)} resource \"{change.type}\" \"{change.name}\" {{")
    before, after = change.before or {}, change.after or {}
    shown_before, shown_after = masked(before, change.sensitive), masked(after, change.sensitive)  # compared raw
    forcing = {p[0] for p in change.replace_paths}
    keys = sorted(set(before) | set(after))
    width = max((len(k) for k in keys), default=0)
    unchanged = 0
    for key in keys:
        b, a = before.get(key), after.get(key)
        shown_b, shown_a = _value(shown_before.get(key)), _value(shown_after.get(key))
        if b is None and reason and (change.action_reason or "").startswith(_UNREPORTED):
            shown_b = "(not reported yet)"
        if kind == "create":
            if a is None:
                continue
            lines.append(f"      {paint('+', '32')} {key.ljust(width)} = {shown_a}")
        elif kind == "delete":
            if b is None:
                continue
            lines.append(f"      {paint('-', '31')} {key.ljust(width)} = {shown_b}")
        elif a != b:
            marker = paint(" # forces replacement", "31") if key in forcing else ""
            lines.append(f"      {paint('~', '33')} {key.ljust(width)} = {shown_b} -> {shown_a}{marker}")
        else:
            unchanged += 1
    if unchanged:
        lines.append(f"        # ({unchanged} unchanged attribute{'s' if unchanged != 1 else ''} hidden)")
    lines.append("    }")
    lines.extend(f"    {line}" for line in cost)
    return lines


def render_plan(plan: Plan, *, colour: bool = False, generated: int = 0) -> str:
    """The plan as Terraform draws one. `generated`: how many import targets `--generate-config-out` wrote the
    declarations of (imports once merged into the stack, counted as Terraform counts them: "N to import")."""
    paint = _Painter(colour)
    out: list[str] = []
    if plan.mode is PlanMode.REFRESH_ONLY:
        if not plan.drift:
            out.append("No changes. Your infrastructure still matches what infra last applied.")
        else:
            out.append("Objects have changed outside of infra:\n")
            for change in plan.drift:
                out.append(paint(f"  # {change.address} has changed", "1"))
                out.append(f"  # ({change.action_reason})")
                if change.before is not None:
                    before, after = change.before, change.after or {}
                    shown_before, shown_after = masked(before, change.sensitive), masked(after, change.sensitive)
                    for key in sorted(after):
                        if before.get(key) != after.get(key):
                            out.append(f"      {paint('~', '33')} {key} = {_value(shown_before.get(key))} -> "
                                       f"{_value(shown_after.get(key))}")
                else:
                    out.append("      (the stack changed since the last apply, so the previous values are unknown)")
                out.append("")
            out.append(f"Drift: {len(plan.drift)} object(s) changed outside of infra. "
                       "Run `infra plan` to see what applying the stack would do.")
        return "\n".join(out)

    changes = plan.changes
    # A plan with errors never claims to be fine: the changes are shown for context, without a "Plan:" count of
    # what apply would do (it refuses); error_summary() says so beside the errors, on their stream.
    errors = plan_errors(plan)
    if not changes:
        if generated and not errors:
            out.append(paint(f"Plan: {generated} to import (their declarations generated), 0 to add, 0 to change, "
                             "0 to destroy.", "1"))
        elif not errors and not plan.smoke_jobs:   # a destroy with nothing to destroy: nothing "matches" (Terraform's)
            out.append("No changes. No objects need to be destroyed." if plan.mode is PlanMode.DESTROY else
                       "No changes. Your infrastructure matches the stack.")
        elif not errors:
            out.append("No changes to resources, but smoke jobs are pending: apply runs them.")
    else:
        out.extend(legend(changes))
        out.append("infra will perform the following actions:\n")
        order = {"delete": 0, "replace": 1, "update": 2, "create": 3}
        costs = {c.address: c for c in cluster_costs(changes)}
        for change in sorted(changes, key=lambda c: (order.get(_kind(c) or "", 9), c.address)):
            cost = costs.get(change.address)
            out.extend(render_change(change, paint, change_lines(cost) if cost else []))
            out.append("")
        add, change_n, destroy = plan.counts()
        imported = sum(c.importing is not None for c in changes) + generated
        if errors:
            which = "the error is" if errors == 1 else f"the {errors} errors are"
            out.append(paint(f"Not applicable until {which} fixed: {f'{imported} to import, ' if imported else ''}"
                             f"{add} to add, {change_n} to change, {destroy} to destroy.", "1"))
        else:
            out.append(paint(f"Plan: {f'{imported} to import, ' if imported else ''}{add} to add, {change_n} to change, "
                             f"{destroy} to destroy.", "1"))
        total = summary_line(costs_json(plan.resource_changes))
        if total:
            out.append(total)
    curated = [c for c in plan.resource_changes if c.actions == NO_OP and c.action_reason
               and c.action_reason.startswith("curated")]
    for c in curated:
        after = c.after or {}
        if ("curated",) in c.sensitive:   # what it resolves to names the same (sensitive) registry
            after = {**after, "curated": SENSITIVE_MARK, "resolved": None}
        now = f" = {after['resolved']}" if after.get("resolved") and after["resolved"] != after.get("curated") else ""
        out.append(f"  (reads {c.address}: {after.get('curated')}{now})")
    out.extend(render_smoke_jobs(plan, paint))
    return "\n".join(out)


def generated_config_summary(addresses: list[str], path: str, stack: str) -> str:
    """What `infra plan --generate-config-out FILE` did and what to do next (Terraform: "generated configuration
    and written it to FILE. Please review the configuration...")."""
    n = len(addresses)
    return says(f"infra generated the declarations of {n} resource{'s' if n != 1 else ''} to import "
            f"({', '.join(addresses)}), read from Azure, and wrote them to {path}.\n"
            f"Review {path} (set the variables it names for secrets Azure never returns), paste its blocks into "
            f"{stack}, then run ", NextStep(("infra", "plan"), (stack,)),
            " again: it shows the imports, and apply makes them.")


def render_smoke_jobs(plan: Plan, paint: _Painter) -> list[str]:
    """`# smoke.NAME will run (why)` for each smoke job apply will run, as Terraform marks a tainted resource."""
    if not plan.smoke_jobs:
        return []
    lines = ["", "Smoke jobs after apply:"]
    for job in plan.smoke_jobs:
        why = plan.smoke_reasons.get(job)
        lines.append(paint(f"  # {job} will run" + (f" ({why})" if why else ""), "1"))
    if not plan.changes and not plan_errors(plan):   # a plan with errors runs nothing
        lines.append(paint(f"\nPlan: {len(plan.smoke_jobs)} smoke job{'s' if len(plan.smoke_jobs) != 1 else ''} "
                           "to run, no resource changes.", "1"))
    return lines


def plan_errors(plan: Plan) -> int:
    return sum(d.severity == "error" for d in plan.diagnostics)


def _errors(n: int) -> str:
    return f"{n} error{'s' if n != 1 else ''}"


def error_summary(plan: Plan) -> str | None:
    """The line that closes a plan's errors, written on the same stream as they are (standard error), so a
    redirected stdout never says "(above)" of what is elsewhere; None when the plan has none."""
    errors = plan_errors(plan)
    if not errors:
        return None
    return (f"The plan has {_errors(errors)}: apply refuses it until {'they are' if errors != 1 else 'it is'} "
            "fixed." + (" The changes it would make are shown for context." if plan.changes else ""))

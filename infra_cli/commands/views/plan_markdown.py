"""A plan as GitHub-flavoured Markdown (https://github.github.com/gfm/), for a pull request comment or a job summary,
as Atlantis and tfcmt show Terraform's: the stack and workspace, the counts, a table of the resources that change
(fields forcing a replacement marked), the cost per hour before and after, errors, warnings and policy results,
the smoke jobs pending, and the full text plan folded in `<details>`. `infra plan --markdown` and
`infra show PLANFILE --markdown` print it.

Everything the plan holds is data here, never Markdown: a name or value from a stack or from Azure is escaped so it
cannot become a link, an image, HTML or a table cell of its own. Sensitive values are masked as the text plan masks
them (the plan's own `masked`), and no colour or other escape code is written.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from infra_cli.diagnostics import Diagnostic
from infra_cli.plan.cost import costs_json, money
from infra_cli.plan.model import Action, Plan, PlanMode, ResourceChange, masked

_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[\x00-\x1f\x7f-\x9f]")
_BLOCK_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[\x00-\x08\x0b-\x1f\x7f-\x9f]")   # keeps line breaks, tabs
_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+!|~:-])")
MAX_ATTRIBUTES = 8     # a created resource's attributes shown in its row; the full plan below has them all
MAX_VALUE = 120
ICONS = {"create": "+ create", "update": "~ update", "replace": "-/+ replace", "delete": "- destroy",
         "import": "import", "drift": "~ changed outside infra"}


def text(value: Any) -> str:
    """Any text as inline Markdown that shows exactly that text: no control codes, no HTML, no Markdown syntax, no
    line break, no table cell separator."""
    plain = _CONTROL.sub(" ", str(value))
    return _PUNCTUATION.sub(r"\\\1", html.escape(plain, quote=False))


def code(value: Any) -> str:
    return f"<code>{text(value)}</code>"


def _value(v: Any) -> str:
    shown = v if isinstance(v, str) else json.dumps(v, sort_keys=True)
    return shown if len(shown) <= MAX_VALUE else shown[:MAX_VALUE] + "..."


def _kind(change: ResourceChange) -> str | None:
    if change.action is Action.NO_OP:
        return "import" if change.importing is not None else None
    return {Action.CREATE: "create", Action.UPDATE: "update", Action.REPLACE: "replace",
            Action.DELETE: "delete"}[change.action]


def _what_changes(change: ResourceChange, kind: str) -> str:
    before = masked(change.before or {}, change.sensitive) or {}
    after = masked(change.after or {}, change.sensitive) or {}
    raw_before, raw_after = change.before or {}, change.after or {}
    forcing = {p[0] for p in change.replace_paths}
    if kind == "create":
        keys = [k for k in sorted(after) if after[k] is not None]
        shown = [f"{code(k)} = {code(_value(after[k]))}" for k in keys[:MAX_ATTRIBUTES]]
        if len(keys) > MAX_ATTRIBUTES:
            shown.append(f"(+{len(keys) - MAX_ATTRIBUTES} more in the full plan)")
        return "<br>".join(shown)
    if kind == "delete":
        return text(change.action_reason or "")
    if kind == "import":
        return f"imported from {code(change.importing)}"
    lines = []
    for key in sorted(set(raw_before) | set(raw_after)):
        if raw_before.get(key) == raw_after.get(key):
            continue
        mark = " **(forces replacement)**" if key in forcing else ""
        lines.append(f"{code(key)}: {code(_value(before.get(key)))} → {code(_value(after.get(key)))}{mark}")
    if not lines and change.action_reason:
        lines.append(text(change.action_reason))
    return "<br>".join(lines)


def _table(rows: list[tuple[str, str, str]]) -> list[str]:
    out = ["| Action | Resource | What changes |", "| --- | --- | --- |"]
    out.extend(f"| {action} | {code(address)} | {what} |" for action, address, what in rows)
    return out


def _workspace(plan: Plan) -> str:
    ws = plan.workspace or {}
    if not ws.get("name"):
        return ""
    where = ", ".join(f"{label} {code(ws[key])}" for key, label in (("resource_group", "resource group"),
                                                                        ("subscription_id", "subscription"),
                                                                        ("cloud", "cloud")) if ws.get(key))
    return f"workspace {code(ws['name'])}" + (f" ({where})" if where else "")


def _diagnostic_line(d: Diagnostic) -> str:
    where = d.file
    if where and d.line:
        where = f"{where}:{d.line}"
    return (f"- **{text(d.severity)}** {code(d.rule)}: {text(d.message)}"
            + (f" ({code(where)})" if where else ""))


def _cost(plan: Plan) -> list[str]:
    costs = costs_json(plan.resource_changes)
    if not costs["resources"]:
        return []
    total, currency = costs["total_at_max_instances_hour"], costs["currency"]
    diff = total["diff"]
    sign = "+" if diff > 0 else "-" if diff < 0 else "±"
    line = (f"**Cost per hour** at max_instances (list prices): {text(money(total['before'], currency))} → "
            f"{text(money(total['after'], currency))} ({text(sign + money(abs(diff), currency))})")
    unknown = total.get("unknown_before", 0) + total.get("unknown_after", 0)
    if unknown:
        line += f"; {unknown} price{'s' if unknown != 1 else ''} unknown (not counted)"
    return [line, ""]


def _fence(body: str) -> str:
    ticks = "`" * max(3, max((len(m) for m in re.findall(r"`+", body)), default=0) + 1)
    body = _BLOCK_CONTROL.sub(lambda m: "" if m.group(0).startswith("\x1b") else " ", body)
    return f"{ticks}text\n{body.rstrip()}\n{ticks}"


def render_markdown(plan: Plan, full_text: str) -> str:
    """The plan as Markdown; `full_text` is the text plan (`render_plan`, no colour) folded in at the end."""
    title = f"### infra plan: {code(plan.stack)}"
    workspace = _workspace(plan)
    header = title + (f" in {workspace}" if workspace else "")
    drift = plan.mode is PlanMode.REFRESH_ONLY
    rows = []
    for change in (plan.drift if drift else plan.changes + [c for c in plan.resource_changes
                                                             if not c.is_change and c.importing is not None]):
        kind = "drift" if drift else _kind(change)
        if kind is None:
            continue
        what = _what_changes(change, "update" if drift else kind)
        rows.append((ICONS[kind], change.address, what))
    errors = [d for d in plan.diagnostics if d.severity == "error"]
    warnings = [d for d in plan.diagnostics if d.severity == "warning"]
    policy = [d for d in errors + warnings if d.rule.startswith("policy.")]
    errors = [d for d in errors if d not in policy]
    warnings = [d for d in warnings if d not in policy]
    if not rows and not plan.diagnostics and not plan.smoke_jobs:   # nothing to say but that
        return header + (": no changes, the infrastructure still matches what infra last applied." if drift else
                         ": no changes, no objects need to be destroyed." if plan.mode is PlanMode.DESTROY else
                         ": no changes, the infrastructure matches the stack.")
    out = [header, ""]
    add, change_n, destroy = plan.counts()
    if drift:
        out.append(f"**Drift: {len(plan.drift)} object{'s' if len(plan.drift) != 1 else ''} changed outside of infra.**"
                   if plan.drift else "**No drift.**")
    else:
        imported = sum(c.importing is not None for c in plan.resource_changes)
        counts = f"{f'{imported} to import, ' if imported else ''}{add} to add, {change_n} to change, {destroy} to destroy"
        out.append(f"**Plan: {counts}.**")
    if errors or any(d.severity == "error" for d in policy):
        out[-1] += " Apply refuses this plan until its errors are fixed."
    out.append("")
    if rows:
        out.extend(_table(rows))
        out.append("")
    out.extend(_cost(plan))
    for title_, items in (("Errors", errors), ("Warnings", warnings), ("Policy results", policy)):
        if items:
            out.append(f"#### {title_} ({len(items)})")
            out.extend(_diagnostic_line(d) for d in items)
            out.append("")
    if plan.smoke_jobs:
        out.append(f"#### Smoke jobs pending ({len(plan.smoke_jobs)})")
        for job in plan.smoke_jobs:
            why = plan.smoke_reasons.get(job)
            out.append(f"- {code(job)}" + (f": {text(why)}" if why else ""))
        out.append("")
    out.extend(["<details><summary>Full plan</summary>", "", _fence(full_text), "", "</details>"])
    return "\n".join(out)

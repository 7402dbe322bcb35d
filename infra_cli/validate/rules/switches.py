"""A stack's `rules:` switches, as tflint's `rule "ID" { enabled = false }` blocks: a stack may switch a rule off,
saying why (`rules: {distribution.gpus-underused: {enabled: false, reason: "single-GPU debug runs"}}`), and what
the rule warns of is then not reported for that stack, by validate or plan.

Only warnings are switched off. An error is what Azure ML refuses (a name, a size, a key it does not read) or a job
that cannot work (a rendezvous that never forms), so a rule that reports only errors cannot be switched off, and a
rule that reports both (cluster.size-unknown) keeps its errors. The switch itself is checked: an id `infra rules`
does not list is an error with a did-you-mean, and `enabled: false` without a reason is refused by the stack model
(stack/model.py RuleSwitch)."""

from __future__ import annotations

import difflib
from typing import Any, Iterator

from infra_cli.arguments import NextStep
from infra_cli.diagnostics import Diagnostic, says
from infra_cli.stack.source import short_repr
from infra_cli.validate.rules.registry import Context, catalogue, declare

RULES_UNKNOWN = declare("rules.unknown", "error", says("a stack's `rules:` names a rule ", NextStep(("infra", "rules")),
                                                      " does not list"))
RULES_NOT_SWITCHABLE = declare("rules.not-switchable", "error",
                               "a stack's `rules:` switches off a rule that reports only errors")


def switch_problems(ctx: Context) -> Iterator[Diagnostic]:
    """The stack's `rules:` entries that name no rule, or switch off one that reports only errors."""
    if not ctx.stack.rules:
        return
    known = {info.id: info for info in catalogue()}
    for rule_id, switch in ctx.stack.rules.items():
        info = known.get(rule_id)
        if info is None:
            close = difflib.get_close_matches(rule_id, list(known), n=1, cutoff=0.6)
            yield ctx.at(("rules", rule_id), RULES_UNKNOWN.id, f"rules: {short_repr(rule_id)} is not a rule infra has",
                         says(f"did you mean {close[0]!r}? " if close else "", NextStep(("infra", "rules")),
                              " lists every rule"),
                         key=True)
        elif not switch.enabled and not info.switchable:
            yield ctx.at(("rules", rule_id), RULES_NOT_SWITCHABLE.id,
                         f"rule {rule_id} reports only errors (what Azure ML refuses, or a job that cannot work): it "
                         "cannot be switched off", f"fix what it reports ({info.doc} says how), and remove this entry",
                         key=True)


def switched_off(stack: Any) -> dict[str, str]:
    """The rules the stack switched off, with its reason for each, in the order it wrote them."""
    return {rule_id: switch.reason or "" for rule_id, switch in stack.rules.items() if not switch.enabled}


def without_switched_off(stack: Any, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """`diagnostics` less the warnings of the rules the stack switched off (its errors stay)."""
    off = switched_off(stack)
    if not off:
        return diagnostics
    return [d for d in diagnostics if d.severity == "error" or d.rule not in off]


def rules_disabled(stack: Any) -> list[dict[str, str]]:
    """What plan lists (text and `rules_disabled` in its JSON): each rule the stack switched off, with the reason."""
    return [{"id": rule_id, "reason": reason} for rule_id, reason in switched_off(stack).items()]

"""A stack's switch for one rule of `infra rules` (the model's `rules:` entries), as tflint's
`rule "ID" { enabled = false }`: validate/rules/switches.py judges the ids and drops what a switched-off rule warns of."""

from __future__ import annotations

from infra_cli.stack.fields import Field, Model
from infra_cli.stack.value_kinds import Bool, Str
from infra_cli.stack.secret import Secret

REASON_MAX = 300   # characters of a switched-off rule's reason: one line of plan's output


def _reason_text(v: str) -> str:
    if len(v) > REASON_MAX:
        raise ValueError(f"a reason is one line of plan's output: at most {REASON_MAX} characters (this has {len(v)})")
    return v


class RuleSwitch(Model):
    """One rule of `infra rules` switched for this stack, as tflint's `rule "ID" { enabled = false }`: what it warns
    of is not reported for this stack (validate/rules/switches.py; an error always is)."""

    enabled = Field(Bool(), True, description="false: the rule's warnings are not reported for this stack")
    # kept a Secret when sensitive, to be refused: plan prints the reason, on one line
    reason = Field(Str(keeps_secret=True, after=_reason_text) | None, None,
                   description="why this stack does not need the rule (required with enabled: false), one line")

    def _check(self) -> None:
        if isinstance(self.reason, Secret):
            raise ValueError("a reason is shown by plan: write it as plain text, not a sensitive variable or ${ENV} value")
        if not self.enabled and not (self.reason or "").strip():
            raise ValueError("a rule switched off needs a reason: add reason: \"why this stack does not need it\"")

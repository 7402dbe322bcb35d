"""Output values drawn as Terraform draws them: `terraform output` (`NAME = VALUE`, a sensitive one as
`<sensitive>`), `-json` (`{NAME: {value, type, sensitive}}`), `-raw` (one string, number or bool, bare), apply's
closing `Outputs:` and the plan's `Changes to Outputs:` (`(known after apply)`)
(https://developer.hashicorp.com/terraform/cli/commands/output)."""

from __future__ import annotations

from typing import Any

from infra_cli.plan.model import Plan
from infra_cli.plan.outputs import OutputValue
from infra_cli.stack.outputs import shown
from infra_cli.stack.variables import type_name

SENSITIVE = "<sensitive>"
KNOWN_AFTER_APPLY = "(known after apply)"


def output_lines(values: dict[str, OutputValue]) -> list[str]:
    """`NAME = VALUE` per output, sorted; sensitive ones masked, unknown ones `(known after apply)`."""
    width = max((len(n) for n in values), default=0)
    out = []
    for name in sorted(values):
        v = values[name]
        text = SENSITIVE if v.sensitive else KNOWN_AFTER_APPLY if not v.known else shown(v.value)
        out.append(f"{name.ljust(width)} = {text}")
    return out


def outputs_json(values: dict[str, OutputValue]) -> dict[str, Any]:
    """Terraform's `output -json`: every value, sensitive ones included, with its type and whether it is sensitive."""
    return {name: {"value": v.value, "type": type_name(v.value) if v.value is not None else "null",
                   "sensitive": v.sensitive} for name, v in sorted(values.items())}


def raw_refusal(value: Any) -> str | None:
    """Why `-raw` refuses an output's value, or None: as Terraform's `output -raw`, only a string, number or bool
    is printed bare; a list or map (or nothing) is an error, whatever a later change lets an output hold."""
    if value is None:
        return "has no value (is the stack applied?)"
    if isinstance(value, (str, int, float, bool)):
        return None
    return f"is a {type_name(value) if isinstance(value, (list, dict)) else type(value).__name__}"


def planned_outputs(plan: Plan, values: dict[str, OutputValue]) -> dict[str, OutputValue]:
    """The outputs a plan shows (text, Markdown and JSON's output_changes alike): none for a plan with errors, as
    Terraform shows none for a plan that failed; they would be those of an apply that will not run (`null` for a
    cluster the plan refuses). Judged before policies: a policy judges the plan, outputs included, and its denial
    leaves the plan as made."""
    return {} if plan.has_errors() else values


def plan_outputs(values: dict[str, OutputValue]) -> str:
    """The plan's section: every output as it will be after apply."""
    if not values:
        return ""
    return "\nOutputs after apply:\n" + "".join(f"  {line}\n" for line in output_lines(values))


def apply_outputs(values: dict[str, OutputValue]) -> str:
    if not values:
        return ""
    return "\nOutputs:\n\n" + "".join(f"{line}\n" for line in output_lines(values))


def plan_outputs_json(values: dict[str, OutputValue]) -> dict[str, Any]:
    """The plan JSON's `output_changes` (Terraform's shape, values after apply; a sensitive one never shown)."""
    return {name: {"after": None if v.sensitive or not v.known else v.value, "after_unknown": not v.known,
                   "after_sensitive": v.sensitive} for name, v in sorted(values.items())}

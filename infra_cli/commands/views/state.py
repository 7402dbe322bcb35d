"""`infra show STACK` and `infra state list STACK` drawn: what plan/owned.py read of a stack's resources in Azure.

The shapes are Terraform's: `state list` prints addresses sorted alphabetically
(https://developer.hashicorp.com/terraform/cli/commands/state/list), `show -json` has
`values.root_module.resources[]` with address, mode, type, name and values
(https://developer.hashicorp.com/terraform/internals/json-format#values-representation), and the text is
`terraform show`'s `# ADDRESS:` / `resource "TYPE" "NAME" { ... }` blocks.
"""

from __future__ import annotations

import json
from typing import Any

from infra_cli.plan.model import FORMAT_VERSION, SENSITIVE_MARK
from infra_cli.plan.owned import StackState


def state_json(state: StackState) -> dict:
    """`terraform show -json`'s state shape (values of the root module; infra has no modules)."""
    resources = []
    for r in state.resources:
        resources.append({"address": r.address, "mode": "managed", "type": r.type, "name": r.name,
                          "values": r.values, "sensitive_values": r.sensitive})
    return {"format_version": FORMAT_VERSION, "stack": state.stack,
            "values": {"root_module": {"resources": resources}}}


def _scalar(v: Any) -> str:
    if v == SENSITIVE_MARK:
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    return str(v)


def _attribute_lines(key: str, value: Any, width: int, indent: str) -> list[str]:
    head = f"{indent}{key.ljust(width)} = "
    if isinstance(value, dict) and value:
        inner = max(len(json.dumps(k)) for k in value)
        return [head + "{", *(f"{indent}    {json.dumps(k).ljust(inner)} = {_scalar(v)}" for k, v in value.items()),
                f"{indent}}}"]
    if isinstance(value, list) and value:
        return [head + "[", *(f"{indent}    {_scalar(v)}," for v in value), f"{indent}]"]
    if isinstance(value, (dict, list)):
        return [head + ("{}" if isinstance(value, dict) else "[]")]
    return [head + _scalar(value)]


def render_state(state: StackState) -> str:
    """`terraform show` of a state: one block per resource, null attributes left out, `=` aligned."""
    if not state.resources:
        return f"Stack {state.stack!r} owns no resources in Azure."
    blocks = []
    for r in state.resources:
        values = {k: v for k, v in sorted(r.values.items()) if v is not None}
        width = max((len(k) for k in values), default=0)
        lines = [f"# {r.address}:", f'resource "{r.type}" "{r.name}" {{']
        for key, value in values.items():
            lines.extend(_attribute_lines(key, value, width, "    "))
        lines.append("}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)

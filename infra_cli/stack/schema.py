"""The JSON Schema of stack files, generated from the pydantic model (one source of truth).

Editors' YAML language servers use it for completion and checks:
`# yaml-language-server: $schema=stack.schema.json` at the top of a stack file.
"""

from __future__ import annotations

from typing import Any

from infra_cli.stack.model import Stack

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


# pydantic writes a bound on an optional field (`Count | None = Field(None, ge=1)`) as its own constraint names
# inside the anyOf branch, which JSON Schema validators ignore: editors would accept 0 processes.
_BOUNDS = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum"}


def _json_schema_bounds(node: Any) -> Any:
    if isinstance(node, dict):
        return {_BOUNDS.get(k, k) if isinstance(v, (int, float)) and not isinstance(v, bool) else k:
                _json_schema_bounds(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_json_schema_bounds(v) for v in node]
    return node


def stack_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a stack file: every field with title and description, no extra keys."""
    body = _json_schema_bounds(Stack.model_json_schema(mode="validation"))
    return {"$schema": SCHEMA_DIALECT, **body}

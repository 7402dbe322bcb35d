"""The JSON Schema of stack files, generated from the stack model (one source of truth).

Editors' YAML language servers use it for completion and checks:
`# yaml-language-server: $schema=stack.schema.json` at the top of a stack file.
"""

from __future__ import annotations

from typing import Any

from infra_cli.stack.fields import json_schema
from infra_cli.stack.model import Stack

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def stack_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a stack file: every field with title and description, no extra keys.
    Bounds are JSON Schema's minimum/maximum/exclusiveMinimum, inside the `anyOf` branch of an optional field."""
    return {"$schema": SCHEMA_DIALECT, **json_schema(Stack)}

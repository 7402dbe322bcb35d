"""What a generated declaration (plan/generate.py, a kind's `declaration`) writes a value read from Azure as:
text the stack reads back as it is, a secret as a `${VAR}` placeholder, a comment on one line."""

from __future__ import annotations

import re
from typing import Any


def literal(value: Any) -> Any:
    """A value read from Azure, written so the stack reads it back as it is: `$` doubled (the loader's escape), so a
    tag value `${GITHUB_TOKEN}` stays text and never pulls an environment variable's value into Azure."""
    if isinstance(value, str):
        return value.replace("$", "$$")
    if isinstance(value, dict):
        return {k: literal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [literal(v) for v in value]
    return value


def placeholder(name: str, what: str) -> str:
    return "${" + re.sub(r"[^A-Za-z0-9]", "_", f"{name}_{what}").upper() + "}"


def one_line(text: str) -> str:
    """A comment's text: a line break or other control character read from Azure (or a file name) never ends the
    comment and starts YAML of its own."""
    return re.sub(r"[\x00-\x1f\x7f\u2028\u2029\x85]", "?", text)

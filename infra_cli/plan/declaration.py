"""What a generated declaration (plan/generate.py, a kind's `declaration`) writes a value read from Azure as:
text the stack reads back as it is, a secret as a sensitive variable's `${var.NAME}`, a comment on one line."""

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


def secret_variable(name: str, what: str) -> str:
    """The stack variable a generated declaration's secret stands as (`${var.gpu_admin_password}`): declared
    sensitive beside it (plan/generate.py), never an environment variable's `${NAME}`."""
    return re.sub(r"[^A-Za-z0-9_]", "_", f"{name}_{what}").lower()


# a generated declaration's `${var.NAME}` (a `$$` before it is a read value's own `$`, kept as text)
SECRET_VARIABLE = re.compile(r"(?<!\$)\$\{var\.([a-z0-9_]+)\}")


def one_line(text: str) -> str:
    """A comment's text: a line break or other control character read from Azure (or a file name) never ends the
    comment and starts YAML of its own."""
    return re.sub(r"[\x00-\x1f\x7f\u2028\u2029\x85]", "?", text)

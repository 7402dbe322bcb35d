"""The kinds of value many sections of the stack model share (stack/model.py and the modules of its sections):
text that says something, free text, text that may hold a sensitive value, a path, a whole number."""

from __future__ import annotations

from typing import Any

from infra_cli.stack.value_kinds import Int, Str

INT32_MAX = 2**31 - 1  # Azure ML's integer fields (seconds, counts) are 32-bit


def filled(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty")
    return v


def _number_not_bool(v: Any) -> Any:
    if isinstance(v, bool):  # YAML true/false would otherwise read as 1/0
        raise ValueError("expected a whole number, not true/false")
    return v


# A string that says something: "" or "  " is never a usable name, path or reference.
Text = Str(after=filled)
# Free text (a command, a description): the same, with its tabs and line breaks.
FreeText = Str(after=filled, free_text=True)
# Where a sensitive value may stand and stays one (stack/secret.py): tags, descriptions, a job's variables.
Secretive = Str(keeps_secret=True)
SecretiveText = Str(free_text=True, keeps_secret=True)


def path_text(v: str) -> str:
    """A path no file system refuses by its length alone (Linux: NAME_MAX 255 bytes a name, PATH_MAX 4096 bytes)."""
    filled(v)
    if len(v.encode("utf-8", "surrogatepass")) >= 4096:
        raise ValueError("is longer than a path can be (4,095 bytes)")
    if any(len(part.encode("utf-8", "surrogatepass")) > 255 for part in v.replace("\\", "/").split("/")):
        raise ValueError("has a name longer than a file name can be (255 bytes)")
    return v


# A file or folder the stack names, relative to the stack file.
PathText = Str(after=path_text)
# A whole number written as one (not true/false).
Count = Int(before=_number_not_bool)
# Enumerated values (OneOf) are read in any case; `aliases` maps other spellings Azure uses (REST's LowPriority).

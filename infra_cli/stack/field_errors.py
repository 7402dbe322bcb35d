"""How the stack model's engine (stack/fields.py) says a value is wrong: pydantic 2's error types and messages
(https://docs.pydantic.dev/latest/errors/validation_errors/), one `Problem` per fault, `ValidationError` for all of
one validation, and the control characters no text of a stack holds."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

# Error messages by type, pydantic's own texts (https://docs.pydantic.dev/latest/errors/validation_errors/).
MESSAGES = {
    "missing": "Field required",
    "extra_forbidden": "Extra inputs are not permitted",
    "model_type": "Input should be a valid dictionary or instance of {}",
    "dict_type": "Input should be a valid dictionary",
    "list_type": "Input should be a valid list",
    "string_type": "Input should be a valid string",
    "string_pattern_mismatch": "String should match pattern '{}'",
    "int_type": "Input should be a valid integer",
    "int_parsing": "Input should be a valid integer, unable to parse string as an integer",
    "int_from_float": "Input should be a valid integer, got a number with a fractional part",
    "int_parsing_size": "Unable to parse input string as an integer, exceeded maximum size",
    "finite_number": "Input should be a finite number",
    "float_type": "Input should be a valid number",
    "float_parsing": "Input should be a valid number, unable to parse string as a number",
    "bool_type": "Input should be a valid boolean",
    "bool_parsing": "Input should be a valid boolean, unable to interpret input",
    "literal_error": "Input should be {}",
    "less_than_equal": "Input should be less than or equal to {}",
    "less_than": "Input should be less than {}",
    "greater_than_equal": "Input should be greater than or equal to {}",
    "greater_than": "Input should be greater than {}",
    "value_error": "Value error, {}",
    # not pydantic's: text Azure ML refuses
    "control_characters": "Text should hold no control characters, found {}",
}
# Unicode's control characters (categories Cc, Zl, Zp, as knowledge/grammars.py's control_characters: C0, DEL, C1
# such as U+0085, U+2028 and U+2029): no name, path, tag or variable of a stack holds one. Free text (a command,
# a description) keeps its tabs and line breaks.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
CONTROL_IN_FREE_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029]")


def controls_found(pattern: re.Pattern, text: str) -> str | None:
    """The control characters of `text` that `pattern` refuses, as escapes (`\\x00, \\u2028`), or None."""
    found = dict.fromkeys(pattern.findall(text)) if pattern.search(text) else None
    return ", ".join(repr(c)[1:-1] for c in found) if found else None


class Problem(NamedTuple):
    """One validation error: where (keys and indices from the top), pydantic's error type, message, the input."""

    loc: tuple
    type: str
    msg: str
    input: Any


class ValidationError(ValueError):
    """Every problem of one validation, in the order pydantic reports them (field order, then unknown keys)."""

    def __init__(self, title: str, problems: list[Problem]):
        self.title, self.problems = title, problems
        lines = [f"{len(problems)} validation error{'s' if len(problems) != 1 else ''} for {title}"]
        for p in problems:
            lines += [".".join(map(str, p.loc)) or "(top level)", f"  {p.msg} [type={p.type}]"]
        super().__init__("\n".join(lines))

    def errors(self) -> list[Problem]:
        return list(self.problems)



FAIL = object()  # returned by a kind whose value did not validate (its problems are already recorded)


def fail(problems: list[Problem], loc: tuple, kind: str, value: Any, *args: Any) -> object:
    problems.append(Problem(loc, kind, MESSAGES[kind].format(*args), value))
    return FAIL

"""Numbers and switches read from text as pydantic 2 reads them in lax mode (its Rust core: `trim()`, JSON's integer
syntax with digit separators, f64 parsing, its boolean words), for the stack model's Int, Float and Bool kinds
(stack/value_kinds.py). None where the text is not one."""

from __future__ import annotations

import re
from typing import Any

# Rust's trim() and f64 parsing, which pydantic's number parsing uses (Python's strip() also trims \x1c-\x1f).
WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009" \
              "\u200a\u2028\u2029\u202f\u205f\u3000"
_JSON_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_FLOAT_TEXT = re.compile(r"[+-]?(?:(?i:inf|infinity|nan)|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)")
I64 = 2 ** 63


TOO_LONG = object()
_MAX_DIGITS = 4300  # Python's own limit on int() of text


def int_text(text: str) -> Any:
    """An integer from text as pydantic reads one: JSON's integer syntax; else the text without surrounding
    whitespace, a sign, leading zeros (and separators among them), a `.000` tail and digit separators, which
    must then be JSON's integer syntax. None: not an integer; TOO_LONG: too many digits."""
    if _JSON_INT.fullmatch(text):
        return int(text) if len(text) <= _MAX_DIGITS else TOO_LONG
    cleaned = _cleaned_int_text(text)
    if cleaned is None or not _JSON_INT.fullmatch(cleaned) or len(cleaned) > _MAX_DIGITS:
        return None
    return int(cleaned)


def _cleaned_int_text(original: str) -> str | None:
    text = original.strip(WHITESPACE)
    if text.startswith("+"):
        text = text[1:]
        if text.startswith("-"):
            return None
    sign = ""
    if text.startswith("-"):
        text, sign = text[1:], "-"
        if text[:1] in ("-", "+"):
            return None
    significant = _without_leading_zeros(text)
    if significant is None:
        return None
    text = significant
    whole, dot, fraction = text.partition(".")
    if dot and fraction and not fraction.strip("0"):
        text = whole
    if "_" in text and text[0] != "_" and text[-1] != "_" and "__" not in text:
        return sign + text.replace("_", "")
    return None if len(text) == len(original) else sign + text  # nothing to clean: not an integer


def _without_leading_zeros(text: str) -> str | None:
    """The text from its first significant character; one zero stays before a `.`, and of an all-zero text."""
    if not text or text[0] in "123456789-":
        return text or None
    if text[0] != "0":
        return None
    for i, c in enumerate(text):
        if c in "123456789-":
            return text[i:]
        if c == ".":
            return text[i - 1:]
        if c not in "0_":
            return None
    return text[-1]


def float_text(value: str) -> float | None:
    text = value.strip(WHITESPACE)
    if _FLOAT_TEXT.fullmatch(text):
        return float(text)
    # digit separators: not first or last, never two together; the text is then not trimmed
    if value[:1] != "_" and value[-1:] != "_" and "__" not in value and _FLOAT_TEXT.fullmatch(value.replace("_", "")):
        return float(value.replace("_", ""))
    return None



BOOL_TEXT = {**dict.fromkeys(("0", "off", "f", "false", "n", "no"), False),
              **dict.fromkeys(("1", "on", "t", "true", "y", "yes"), True)}

"""Image metadata read strictly: index.json, manifests, image configs, `docker save`'s manifest.json.

Every one of them comes from outside (a registry, an archive, a directory anyone may have edited), so each
shape is checked where it is read: a malformed document is an ImageReadError (exit 2) that names the
document and says what is wrong, never a KeyError or AttributeError deep in the reader (a traceback, exit 1,
which CI would read as "requirement not met").
"""

from __future__ import annotations

import json

from infra_cli.image.errors import ImageReadError

CORRUPT_HINT = "the image metadata is corrupt; push or save the image again"


def json_type(value: object) -> str:
    """What a JSON value is, in words: 'a list', 'a string', 'null'."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__)


def malformed(what: str, problem: str, where: str | None = None, hint: str = CORRUPT_HINT) -> ImageReadError:
    return ImageReadError(f"{what} is malformed: {problem}", hint, where=where)


def load_json(data: bytes, what: str, where: str | None = None) -> object:
    try:
        return json.loads(data)
    except ValueError as exc:     # JSONDecodeError and UnicodeDecodeError both
        raise malformed(what, f"not valid JSON ({exc})", where) from None


def load_object(data: bytes, what: str, where: str | None = None) -> dict:
    doc = load_json(data, what, where)
    if not isinstance(doc, dict):
        raise malformed(what, f"it is {json_type(doc)} where a JSON object belongs", where)
    return doc


def _optional(doc: dict, key: str, kind: type, noun: str, what: str, where: str | None):
    """doc[key] checked to be `kind`; absent or null reads as empty (OCI leaves optional fields out)."""
    value = doc.get(key)
    if value is None:
        return None if kind is str else kind()
    if not isinstance(value, kind):
        raise malformed(what, f"{key!r} is {json_type(value)} where {noun} belongs", where)
    return value


def optional_object(doc: dict, key: str, what: str, where: str | None = None) -> dict:
    return _optional(doc, key, dict, "an object", what, where)


def optional_list(doc: dict, key: str, what: str, where: str | None = None) -> list:
    return _optional(doc, key, list, "a list", what, where)


def optional_string(doc: dict, key: str, what: str, where: str | None = None) -> str | None:
    return _optional(doc, key, str, "a string", what, where)


def list_of_strings(doc: dict, key: str, what: str, where: str | None = None) -> list[str]:
    items = optional_list(doc, key, what, where)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise malformed(what, f"{key}[{i}] is {json_type(item)} where a string belongs", where)
    return items

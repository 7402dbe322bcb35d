"""Image metadata read strictly: index.json, manifests, image configs, `docker save`'s manifest.json.

Every one of them comes from outside (a registry, an archive, a directory anyone may have edited), so each
shape is checked where it is read: a malformed document is an ImageReadError (exit 2) that names the
document and says what is wrong, never a KeyError or AttributeError deep in the reader (a traceback, exit 1,
which CI would read as "requirement not met").
"""

from __future__ import annotations

import json

from infra_cli.image.errors import ImageReadError
from infra_cli.image.limits import MAX_DOCUMENT_BYTES, MAX_JSON_DEPTH

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


def _too_deep(doc: object) -> bool:
    """Whether a parsed document nests deeper than MAX_JSON_DEPTH (iteratively: no recursion to exhaust)."""
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return True
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def load_json(data: bytes, what: str, where: str | None = None) -> object:
    if len(data) > MAX_DOCUMENT_BYTES:
        raise malformed(what, f"it is larger than the {MAX_DOCUMENT_BYTES >> 20} MiB bound for one document", where)
    too_deep = malformed(what, f"nested deeper than {MAX_JSON_DEPTH} levels", where)
    try:
        doc = json.loads(data)
    except ValueError as exc:     # JSONDecodeError and UnicodeDecodeError both
        raise malformed(what, f"not valid JSON ({exc})", where) from None
    except RecursionError:        # the parser recurses per level and stops at the interpreter's limit
        raise too_deep from None
    if _too_deep(doc):
        raise too_deep
    return doc


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

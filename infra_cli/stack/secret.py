"""One value type for everything sensitive: a `sensitive` variable's value, a `${ENV}` value, and text or maps built
from them (Terraform's sensitive values, https://developer.hashicorp.com/terraform/language/values/outputs#sensitive).

A `Secret` holds its clear value privately. Every way a writer turns a value into text gives the redacted form
"(sensitive value)": `str`, `repr`, `format` and f-strings, every `json.dumps` and JSONEncoder of the process (the
encoder's default is replaced below, so a writer added tomorrow inherits it), every YAML dumper, `canonical_json`.
A plan file keeps a keyed digest instead (`sealed` with plan/planfile.py secret_seal: `keyed_digest`). The clear
value comes out only through `reveal` (one value) or `revealed` (a whole structure), and only where infra builds
what it sends to Azure (azure/arm.py: every request body; azure/provider.py: an environment azure-ai-ml registers;
azure/jobs.py: a smoke job), where a content hash is compared with what Azure reads back (plan/model.py
content_hash, LiveState.fingerprint), where a rule judges a value without showing it, and where the user asks
for one by name (`infra output STACK NAME`). Equality is by clear value (a Secret equals the plain text Azure
reports back), so a diff compares secrets as it compares text; `len` is the clear value's (a bound is judged).

The loader (stack/source.py) makes the Secrets; text fields that are parsed or become part of a URL (names, a
command, a curated reference) keep their clear text and are marked instead (stack/load.py mark_sensitive_fields):
their dumps redact them, views mask them by the loader's sensitive paths, and diagnostics at a stack position never
quote a secret's text (SourceMap.scrubbed).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any, Callable

import yaml

SHOWN = "(sensitive value)"


class Secret:
    """A sensitive value (text; a number where a dump marks one). Never shown: see the module's doc."""

    __slots__ = ("_clear",)
    _clear: Any

    def __init__(self, clear: Any):
        if isinstance(clear, Secret):
            clear = clear._clear
        object.__setattr__(self, "_clear", clear)

    def reveal(self) -> Any:
        """The clear value: only for what infra sends to Azure (the request body), never for anything shown."""
        return self._clear

    def __str__(self) -> str:
        return SHOWN

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        return format(SHOWN, spec)

    def __eq__(self, other: object) -> bool:
        return self._clear == (other._clear if isinstance(other, Secret) else other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self._clear)

    def __bool__(self) -> bool:
        return bool(self._clear)

    def __len__(self) -> int:   # a bound on its length (Azure's tag values) is judged without revealing it
        return len(self._clear)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a Secret is immutable")

    def __reduce__(self):   # pickle and copy would otherwise need the clear value spelled out; copy keeps the type
        return (Secret, (self._clear,))

    def __deepcopy__(self, memo: dict) -> "Secret":
        return self

    def __copy__(self) -> "Secret":
        return self


def is_secret(value: Any) -> bool:
    return isinstance(value, Secret)


def contains_secret(value: Any) -> bool:
    """Whether a value holds a Secret anywhere (keys and values of mappings, items of lists), without recursion."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, Secret):
            return True
        if isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            pending.extend(item)
    return False


def _mapped(value: Any, leaf: Callable[[Secret], Any]) -> Any:
    if isinstance(value, Secret):
        return leaf(value)
    if isinstance(value, dict):
        return {_mapped(k, leaf): _mapped(v, leaf) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_mapped(v, leaf) for v in value]
    return value


def redacted(value: Any) -> Any:
    """A copy of `value` with every Secret as its redacted form: what any view may show."""
    return _mapped(value, lambda s: SHOWN)


def revealed(value: Any) -> Any:
    """A copy of `value` with every Secret as its clear value: the one way out, for the body of a request to Azure
    (azure/arm.py, azure/provider.py) and for a content hash compared with what Azure reads back."""
    return _mapped(value, Secret.reveal)


def sealed(value: Any, seal: Callable[[Any], str]) -> Any:
    """A copy of `value` with every Secret as `seal(clear)` (a keyed digest): what a plan file keeps, so a later
    apply can tell a changed secret from an unchanged one without the file holding it."""
    return _mapped(value, lambda s: seal(s.reveal()))


def json_default(value: Any) -> Any:
    """`json.dumps(..., default=json_default)`: a Secret as its redacted form; anything else as `str` does."""
    return SHOWN if isinstance(value, Secret) else str(value)


def keyed_digest(clear: Any, key: bytes | None, salt: str) -> str:
    """What a plan file keeps of a sensitive value: HMAC-SHA256 under the plan-signing key (INFRA_PLAN_KEY) when
    there is one, else scrypt (memory-hard, ~30 ms a guess) under `salt`, a random value per plan kept beside it.
    Never a fast hash: a salted SHA-256 of a 6-digit PIN is found offline in seconds."""
    text = clear if isinstance(clear, str) else repr(clear)
    data = f"{salt}\0{text}".encode()
    if key is not None:
        return "hmac-sha256:" + hmac.new(key, data, hashlib.sha256).hexdigest()
    return "scrypt:" + hashlib.scrypt(text.encode(), salt=salt.encode(), n=2**14, r=8, p=1,
                                      maxmem=64 * 1024 * 1024, dklen=32).hex()


def wrap(value: Any) -> Any:
    """A sensitive variable's value given whole: text as a Secret, a list or map with every text in it one (its keys
    stay as written); numbers, booleans and null as they are (a field reads them as numbers: the loader's sensitive
    paths still mask them)."""
    if isinstance(value, dict):
        return {k: wrap(v) for k, v in value.items()}
    if isinstance(value, list):
        return [wrap(v) for v in value]
    if isinstance(value, str):
        return Secret(value)
    return value


def secret_leaves(value: Any) -> Any:
    """`value` with every text and number in it a Secret (a list's and map's too; keys, booleans and null as they
    are): a field the loader found a sensitive value in, as its dumps give it."""
    if isinstance(value, dict):
        return {k: secret_leaves(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [secret_leaves(v) for v in value]
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return Secret(value)
    return value


# Every JSON writer in the process inherits the redaction: json.dumps without a `default` (and any JSONEncoder that
# does not override `default`) writes a Secret as its redacted form instead of failing or finding its clear value.
_JSON_DEFAULT = json.JSONEncoder.default


def _redacting_default(self: json.JSONEncoder, value: Any) -> Any:
    return SHOWN if isinstance(value, Secret) else _JSON_DEFAULT(self, value)


if getattr(json.JSONEncoder.default, "__name__", "") != "_redacting_default":
    setattr(json.JSONEncoder, "default", _redacting_default)   # on purpose, process-wide (above)
# and every YAML writer (yaml.safe_dump, yaml.dump): the redacted form
for _dumper in (yaml.SafeDumper, yaml.Dumper, *([yaml.CSafeDumper, yaml.CDumper] if hasattr(yaml, "CSafeDumper") else [])):
    _dumper.add_representer(Secret, lambda dumper, value: dumper.represent_str(SHOWN))

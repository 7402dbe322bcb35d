"""The kinds of value the stack model's fields hold (stack/fields.py): Str, Int, Float, Bool, OneOf (an enumeration),
ListOf, DictOf, ANY, SECRET, a Model class (read through `as_kind`), and `kind | None`. Each reads a value as pydantic
2's lax mode does, records its problems (stack/field_errors.py) and writes its JSON Schema.
A kind's `before` runs on the input, its `after` on the value read; a ValueError from either is a `value_error`."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, Callable

from infra_cli.stack.field_errors import CONTROL, CONTROL_IN_FREE_TEXT, FAIL, Problem, controls_found, fail
from infra_cli.stack.lax_numbers import BOOL_TEXT, I64, TOO_LONG, float_text, int_text
from infra_cli.stack.secret import Secret as SensitiveValue, revealed as reveal_all

if TYPE_CHECKING:
    from infra_cli.stack.fields import Model


class Secret:
    """A text never shown: repr, str and the JSON dump give `**********` ("" when empty, as SecretStr)."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def get_secret_value(self) -> str:
        return self._value

    def __str__(self) -> str:
        return "**********" if self._value else ""

    def __repr__(self) -> str:
        return f"Secret({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)



# ---- kinds ------------------------------------------------------------------------------------------------

class Kind:
    """How one value is read. `before(input)` and `after(value read)` may transform it or raise ValueError."""

    before: Callable[[Any], Any] | None = None
    after: Callable[[Any], Any] | None = None

    def __init__(self, *, before: Callable[[Any], Any] | None = None, after: Callable[[Any], Any] | None = None):
        self.before, self.after = before, after

    # A number, a switch or a choice is read from a sensitive value's clear text (stack/secret.py): only text keeps
    # one (Str's keeps_secret), and kinds that hold others (optional, list, mapping, model, any) pass it on.
    passes_secrets = False

    def check(self, value: Any, loc: tuple, problems: list[Problem]) -> Any:
        if isinstance(value, SensitiveValue) and not self.passes_secrets:
            value = value.reveal()
        raw = value
        if self.before is not None:
            try:
                value = self.before(value)
            except ValueError as exc:
                return fail(problems, loc, "value_error", raw, exc)
        out = self.read(value, loc, problems)
        if out is FAIL or self.after is None:
            return out
        try:
            return self.after(out)
        except ValueError as exc:
            return fail(problems, loc, "value_error", raw, exc)

    def read(self, value: Any, loc: tuple, problems: list[Problem]) -> Any:
        raise NotImplementedError

    def schema(self, defs: dict) -> dict:
        raise NotImplementedError

    def but(self, **changes: Any) -> "Kind":
        """A copy with some settings changed (kinds such as Text are shared by many fields)."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__, **changes)
        return new

    def __or__(self, other: None) -> "Kind":
        if other is not None:
            return NotImplemented
        return Nullable(self)


class Nullable(Kind):
    """`kind | None`: None is taken as is, before the kind's own validators run."""
    passes_secrets = True


    def __init__(self, inner: Kind):
        self.inner = inner

    def read(self, value, loc, problems):
        return None if value is None else self.inner.check(value, loc, problems)

    def schema(self, defs):
        return {"anyOf": [self.inner.schema(defs), {"type": "null"}]}


class Wrapped(Kind):
    """A field's own before/after validators, around its kind (and around `| None`), as pydantic's
    field_validator wraps the whole field."""
    passes_secrets = True


    def __init__(self, inner: Kind, before, after):
        super().__init__(before=before, after=after)
        self.inner = inner

    def read(self, value, loc, problems):
        return self.inner.check(value, loc, problems)

    def schema(self, defs):
        return self.inner.schema(defs)


class Str(Kind):
    """Text. `free_text`: tabs and line breaks allowed (a command, a description); no other control character
    is, in any text."""

    def __init__(self, *, pattern: str | None = None, before=None, after=None, free_text: bool = False,
                 grammar_checked: bool = False, keeps_secret: bool = False):
        super().__init__(before=before, after=after)
        self.pattern = pattern
        # keeps_secret: a sensitive value here (stack/secret.py: a sensitive variable, a ${ENV} value, text built
        # from one) stays a Secret for every stage after the loader (a description, a tag, a job's command). Other
        # text (names, ids, sizes: what becomes part of a URL) is checked and kept as its clear text; the loader's
        # sensitive paths (SourceMap.interpolated) still mask it in views.
        self.keeps_secret = keeps_secret
        # grammar_checked: a rule holds the value to a grammar that names its control characters itself (an image
        # reference, an environment variable's name), with a hint about that grammar
        self._controls = None if grammar_checked else CONTROL_IN_FREE_TEXT if free_text else CONTROL
        # pydantic matches with Rust's regex, whose `$` is the end of the text only (Python's \Z): "a\n" fails
        self._regex = re.compile(pattern.replace("$", r"\Z")) if pattern else None

    def check(self, value, loc, problems):
        if isinstance(value, SensitiveValue):   # judged as its clear text; kept a Secret where the field keeps one
            out = super().check(value.reveal(), loc, problems)
            return SensitiveValue(out) if self.keeps_secret and isinstance(out, str) else out
        return super().check(value, loc, problems)

    def read(self, value, loc, problems):
        if not isinstance(value, str):
            return fail(problems, loc, "string_type", value)
        if self._regex is not None and not self._regex.search(value):
            return fail(problems, loc, "string_pattern_mismatch", value, self.pattern)
        found = controls_found(self._controls, value) if self._controls is not None else None
        return fail(problems, loc, "control_characters", value, found) if found else value

    def schema(self, defs):
        return {"pattern": self.pattern, "type": "string"} if self.pattern else {"type": "string"}


class _SecretText(Kind):
    passes_secrets = True

    def read(self, value, loc, problems):
        if isinstance(value, Secret):
            return value
        if isinstance(value, SensitiveValue):
            value = value.reveal()
        return Secret(value) if isinstance(value, str) else fail(problems, loc, "string_type", value)

    def schema(self, defs):
        return {"format": "password", "type": "string", "writeOnly": True}


SECRET = _SecretText()


def _number_text(bound: float) -> str:
    return str(int(bound)) if isinstance(bound, float) and bound.is_integer() else str(bound)


class Number(Kind):
    """Bounds shared by Int and Float, checked in pydantic's order (a NaN fails `le` first)."""

    ge = le = gt = None

    def bounded(self, value, number, loc, problems):
        checks = (("le", "less_than_equal", lambda b: number <= b), ("ge", "greater_than_equal", lambda b: number >= b),
                  ("gt", "greater_than", lambda b: number > b))
        for name, kind, ok in checks:
            bound = getattr(self, name)
            if bound is not None and not ok(bound):
                return fail(problems, loc, kind, value, _number_text(bound))
        return number

    def schema(self, defs):
        bounds = {"exclusiveMinimum": self.gt, "minimum": self.ge, "maximum": self.le}
        return {**{k: v for k, v in bounds.items() if v is not None}, "type": self.json_type}


class Int(Number):
    json_type = "integer"

    def read(self, value, loc, problems):
        if isinstance(value, int):
            number = int(value)
        elif isinstance(value, float):
            if not math.isfinite(value):
                return fail(problems, loc, "finite_number", value)
            if not value.is_integer():
                return fail(problems, loc, "int_from_float", value)
            if abs(value) >= I64:
                return fail(problems, loc, "int_parsing_size", value)
            number = int(value)
        elif isinstance(value, str):
            number = int_text(value)
            if number is None or number is TOO_LONG:
                return fail(problems, loc, "int_parsing" if number is None else "int_parsing_size", value)
        else:
            return fail(problems, loc, "int_type", value)
        return self.bounded(value, number, loc, problems)



class Float(Number):
    json_type = "number"

    def read(self, value, loc, problems):
        if isinstance(value, float):
            number = value
        elif isinstance(value, int):
            try:
                number = float(value)
            except OverflowError:
                return fail(problems, loc, "float_type", value)
        elif isinstance(value, str):
            number = float_text(value)
            if number is None:
                return fail(problems, loc, "float_parsing", value)
        else:
            return fail(problems, loc, "float_type", value)
        return self.bounded(value, number, loc, problems)



class Bool(Kind):
    def read(self, value, loc, problems):
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            found = BOOL_TEXT.get(value.lower())
            return fail(problems, loc, "bool_parsing", value) if found is None else found
        if isinstance(value, (int, float)):
            if value == 0 or value == 1:
                return value == 1
            # whole numbers within 64 bits are "unable to interpret"; others are not booleans at all
            in_range = -I64 <= value < I64 if isinstance(value, int) else value.is_integer() and -I64 < value < I64
            if in_range:
                return fail(problems, loc, "bool_parsing", value)
        return fail(problems, loc, "bool_type", value)

    def schema(self, defs):
        return {"type": "boolean"}


class OneOf(Kind):
    """One of some texts, read in any case; `aliases` maps other spellings (lower case) to a value."""

    def __init__(self, *values: str, aliases: dict[str, str] | None = None):
        self.values, table = values, {k.lower(): v for k, v in (aliases or {}).items()}
        self.before = lambda v: table.get(v.lower(), v.lower()) if isinstance(v, str) else v

    def read(self, value, loc, problems):
        if value in self.values:
            return value
        quoted = [repr(v) for v in self.values]
        expected = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
        return fail(problems, loc, "literal_error", value, expected)

    def schema(self, defs):
        if len(self.values) == 1:
            return {"const": self.values[0], "type": "string"}
        return {"enum": list(self.values), "type": "string"}


class _Anything(Kind):
    """Any YAML value (a job's inputs, services, properties as azure-ai-ml reads them); its texts, keys and values
    at any depth, are free text: no control character but tabs and line breaks. `grammar_checked`: a rule holds
    every value to its own grammar (a Dockerfile template's parameters)."""
    passes_secrets = True


    def __init__(self, *, grammar_checked: bool = False):
        super().__init__()
        self.grammar_checked = grammar_checked

    def read(self, value, loc, problems):
        if self.grammar_checked:   # a template's parameters: judged by their grammar and rendered as their clear
            return reveal_all(value)   # text (the loader's sensitive paths mask them where they are shown)
        pending = [(value, loc)]
        while pending:
            item, at = pending.pop()
            if isinstance(item, SensitiveValue):
                item = item.reveal()
            if isinstance(item, str):
                found = controls_found(CONTROL_IN_FREE_TEXT, item)
                if found:
                    return fail(problems, at, "control_characters", item, found)
            elif isinstance(item, dict):
                pending.extend((x, at + (k,)) for k, x in item.items())
                pending.extend((k, at + (k, "[key]")) for k in item if isinstance(k, str))
            elif isinstance(item, list):
                pending.extend((x, at + (i,)) for i, x in enumerate(item))
        return value

    def schema(self, defs):
        return {}


ANY = _Anything()
GRAMMAR_CHECKED = _Anything(grammar_checked=True)


class ListOf(Kind):
    passes_secrets = True

    def __init__(self, item: Any):
        self.item = as_kind(item)

    def read(self, value, loc, problems):
        if not isinstance(value, (list, tuple)):
            return fail(problems, loc, "list_type", value)
        out = [self.item.check(v, loc + (i,), problems) for i, v in enumerate(value)]
        return FAIL if FAIL in out else out

    def schema(self, defs):
        return {"items": self.item.schema(defs), "type": "array"}


class DictOf(Kind):
    """A mapping with text keys; the key's own problems are at (key, "[key]"), as pydantic reports them."""
    passes_secrets = True


    def __init__(self, value: Any, *, before=None, key: "Str | None" = None):
        self.value, self.before = as_kind(value), before
        self.key = key or Str()

    def read(self, value, loc, problems):
        if not isinstance(value, dict):
            return fail(problems, loc, "dict_type", value)
        out, failed = {}, False
        for k, v in value.items():
            key = self.key.check(k, loc + (k, "[key]"), problems)
            item = self.value.check(v, loc + (k,), problems)
            failed |= key is FAIL or item is FAIL
            out[key if key is not FAIL else k] = item
        return FAIL if failed else out

    def schema(self, defs):
        inner = self.value.schema(defs)
        return {"additionalProperties": inner or True, "type": "object"}


class Nested(Kind):
    passes_secrets = True

    def __init__(self, model: type["Model"]):
        self.model = model

    def read(self, value, loc, problems):
        return self.model._read(value, loc, problems)

    def schema(self, defs):
        name = self.model.__name__
        if name not in defs:
            defs[name] = None  # placeholder: a model that refers to itself stops here
            defs[name] = self.model._schema(defs)
        return {"$ref": f"#/$defs/{name}"}


def as_kind(kind: Any) -> Kind:
    """A kind as given: a Kind, or a model class (stack/fields.py Model, known by its `model_fields`, as this module
    cannot import the models it reads) read as a nested model."""
    return Nested(kind) if isinstance(kind, type) and hasattr(kind, "model_fields") else kind


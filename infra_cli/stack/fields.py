"""A small declarative model engine for the stack file: each model class declares its fields once, and that one
declaration validates parsed YAML into frozen instances, reports every problem as (loc, type, msg, input), dumps
instances back to plain data, and writes the JSON Schema.

It reads values as pydantic 2 does in lax mode, with its error types and messages, so diagnostics and the
schema stayed the same when the stack model left pydantic (whose import and model build were ~40% of
`infra validate`'s start-up): https://docs.pydantic.dev/latest/errors/validation_errors/ lists the types.

    class Smoke(Model):
        steps = Field(Count, 5, ge=1, le=1000, description="timed iterations")
        experiment_name = Field(Text | None, None, description="Azure ML experiment")

Kinds (what a value must be): Str, Int, Float, Bool, OneOf (an enumeration), ListOf, DictOf, ANY, SECRET, a
Model class, and `kind | None`. A kind's `before` runs on the input, its `after` on the value read; a ValueError
from either is a `value_error`. A model's `_prepare` (classmethod) runs on its input mapping and its `_check` on
the built instance, the latter only when every field was valid, as pydantic's before/after model validators.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, NamedTuple

from infra_cli.stack.secret import Secret as SensitiveValue, revealed as reveal_all, secret_leaves

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
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL_IN_FREE_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029]")


def _controls_found(pattern: re.Pattern, text: str) -> str | None:
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


_FAIL = object()  # returned by a kind whose value did not validate (its problems are already recorded)
_REQUIRED = object()


def _fail(problems: list[Problem], loc: tuple, kind: str, value: Any, *args: Any) -> object:
    problems.append(Problem(loc, kind, MESSAGES[kind].format(*args), value))
    return _FAIL


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
                return _fail(problems, loc, "value_error", raw, exc)
        out = self.read(value, loc, problems)
        if out is _FAIL or self.after is None:
            return out
        try:
            return self.after(out)
        except ValueError as exc:
            return _fail(problems, loc, "value_error", raw, exc)

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
        return _Optional(self)


class _Optional(Kind):
    """`kind | None`: None is taken as is, before the kind's own validators run."""
    passes_secrets = True


    def __init__(self, inner: Kind):
        self.inner = inner

    def read(self, value, loc, problems):
        return None if value is None else self.inner.check(value, loc, problems)

    def schema(self, defs):
        return {"anyOf": [self.inner.schema(defs), {"type": "null"}]}


class _Wrapped(Kind):
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
        self._controls = None if grammar_checked else _CONTROL_IN_FREE_TEXT if free_text else _CONTROL
        # pydantic matches with Rust's regex, whose `$` is the end of the text only (Python's \Z): "a\n" fails
        self._regex = re.compile(pattern.replace("$", r"\Z")) if pattern else None

    def check(self, value, loc, problems):
        if isinstance(value, SensitiveValue):   # judged as its clear text; kept a Secret where the field keeps one
            out = super().check(value.reveal(), loc, problems)
            return SensitiveValue(out) if self.keeps_secret and isinstance(out, str) else out
        return super().check(value, loc, problems)

    def read(self, value, loc, problems):
        if not isinstance(value, str):
            return _fail(problems, loc, "string_type", value)
        if self._regex is not None and not self._regex.search(value):
            return _fail(problems, loc, "string_pattern_mismatch", value, self.pattern)
        found = _controls_found(self._controls, value) if self._controls is not None else None
        return _fail(problems, loc, "control_characters", value, found) if found else value

    def schema(self, defs):
        return {"pattern": self.pattern, "type": "string"} if self.pattern else {"type": "string"}


class _SecretText(Kind):
    passes_secrets = True

    def read(self, value, loc, problems):
        if isinstance(value, Secret):
            return value
        if isinstance(value, SensitiveValue):
            value = value.reveal()
        return Secret(value) if isinstance(value, str) else _fail(problems, loc, "string_type", value)

    def schema(self, defs):
        return {"format": "password", "type": "string", "writeOnly": True}


SECRET = _SecretText()

# Rust's trim() and f64 parsing, which pydantic's number parsing uses (Python's strip() also trims \x1c-\x1f).
_WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009" \
              "\u200a\u2028\u2029\u202f\u205f\u3000"
_JSON_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_FLOAT_TEXT = re.compile(r"[+-]?(?:(?i:inf|infinity|nan)|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)")
_I64 = 2 ** 63


def _number_text(bound: float) -> str:
    return str(int(bound)) if isinstance(bound, float) and bound.is_integer() else str(bound)


class _Number(Kind):
    """Bounds shared by Int and Float, checked in pydantic's order (a NaN fails `le` first)."""

    ge = le = gt = None

    def bounded(self, value, number, loc, problems):
        checks = (("le", "less_than_equal", lambda b: number <= b), ("ge", "greater_than_equal", lambda b: number >= b),
                  ("gt", "greater_than", lambda b: number > b))
        for name, kind, ok in checks:
            bound = getattr(self, name)
            if bound is not None and not ok(bound):
                return _fail(problems, loc, kind, value, _number_text(bound))
        return number

    def schema(self, defs):
        bounds = {"exclusiveMinimum": self.gt, "minimum": self.ge, "maximum": self.le}
        return {**{k: v for k, v in bounds.items() if v is not None}, "type": self.json_type}


class Int(_Number):
    json_type = "integer"

    def read(self, value, loc, problems):
        if isinstance(value, int):
            number = int(value)
        elif isinstance(value, float):
            if not math.isfinite(value):
                return _fail(problems, loc, "finite_number", value)
            if not value.is_integer():
                return _fail(problems, loc, "int_from_float", value)
            if abs(value) >= _I64:
                return _fail(problems, loc, "int_parsing_size", value)
            number = int(value)
        elif isinstance(value, str):
            number = _int_text(value)
            if number is None or number is _TOO_LONG:
                return _fail(problems, loc, "int_parsing" if number is None else "int_parsing_size", value)
        else:
            return _fail(problems, loc, "int_type", value)
        return self.bounded(value, number, loc, problems)


_TOO_LONG = object()
_MAX_DIGITS = 4300  # Python's own limit on int() of text


def _int_text(text: str) -> Any:
    """An integer from text as pydantic reads one: JSON's integer syntax; else the text without surrounding
    whitespace, a sign, leading zeros (and separators among them), a `.000` tail and digit separators, which
    must then be JSON's integer syntax. None: not an integer; _TOO_LONG: too many digits."""
    if _JSON_INT.fullmatch(text):
        return int(text) if len(text) <= _MAX_DIGITS else _TOO_LONG
    cleaned = _cleaned_int_text(text)
    if cleaned is None or not _JSON_INT.fullmatch(cleaned) or len(cleaned) > _MAX_DIGITS:
        return None
    return int(cleaned)


def _cleaned_int_text(original: str) -> str | None:
    text = original.strip(_WHITESPACE)
    if text.startswith("+"):
        text = text[1:]
        if text.startswith("-"):
            return None
    sign = ""
    if text.startswith("-"):
        text, sign = text[1:], "-"
        if text[:1] in ("-", "+"):
            return None
    text = _without_leading_zeros(text)
    if text is None:
        return None
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


def _float_text(value: str) -> float | None:
    text = value.strip(_WHITESPACE)
    if _FLOAT_TEXT.fullmatch(text):
        return float(text)
    # digit separators: not first or last, never two together; the text is then not trimmed
    if value[:1] != "_" and value[-1:] != "_" and "__" not in value and _FLOAT_TEXT.fullmatch(value.replace("_", "")):
        return float(value.replace("_", ""))
    return None


class Float(_Number):
    json_type = "number"

    def read(self, value, loc, problems):
        if isinstance(value, float):
            number = value
        elif isinstance(value, int):
            try:
                number = float(value)
            except OverflowError:
                return _fail(problems, loc, "float_type", value)
        elif isinstance(value, str):
            number = _float_text(value)
            if number is None:
                return _fail(problems, loc, "float_parsing", value)
        else:
            return _fail(problems, loc, "float_type", value)
        return self.bounded(value, number, loc, problems)


_BOOL_TEXT = {**dict.fromkeys(("0", "off", "f", "false", "n", "no"), False),
              **dict.fromkeys(("1", "on", "t", "true", "y", "yes"), True)}


class Bool(Kind):
    def read(self, value, loc, problems):
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            found = _BOOL_TEXT.get(value.lower())
            return _fail(problems, loc, "bool_parsing", value) if found is None else found
        if isinstance(value, (int, float)):
            if value == 0 or value == 1:
                return value == 1
            # whole numbers within 64 bits are "unable to interpret"; others are not booleans at all
            in_range = -_I64 <= value < _I64 if isinstance(value, int) else value.is_integer() and -_I64 < value < _I64
            if in_range:
                return _fail(problems, loc, "bool_parsing", value)
        return _fail(problems, loc, "bool_type", value)

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
        return _fail(problems, loc, "literal_error", value, expected)

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
                found = _controls_found(_CONTROL_IN_FREE_TEXT, item)
                if found:
                    return _fail(problems, at, "control_characters", item, found)
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
            return _fail(problems, loc, "list_type", value)
        out = [self.item.check(v, loc + (i,), problems) for i, v in enumerate(value)]
        return _FAIL if _FAIL in out else out

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
            return _fail(problems, loc, "dict_type", value)
        out, failed = {}, False
        for k, v in value.items():
            key = self.key.check(k, loc + (k, "[key]"), problems)
            item = self.value.check(v, loc + (k,), problems)
            failed |= key is _FAIL or item is _FAIL
            out[key if key is not _FAIL else k] = item
        return _FAIL if failed else out

    def schema(self, defs):
        inner = self.value.schema(defs)
        return {"additionalProperties": inner or True, "type": "object"}


class _Nested(Kind):
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
    return _Nested(kind) if isinstance(kind, type) and issubclass(kind, Model) else kind


# ---- fields and models ------------------------------------------------------------------------------------

class Field:
    """One field of a model: its kind, default (or `factory`), YAML key when not its name (`alias`), numeric
    bounds, description, and its own before/after validators."""

    def __init__(self, kind: Any, default: Any = _REQUIRED, *, factory: Callable[[], Any] | None = None,
                 alias: str | None = None, description: str | None = None, ge: float | None = None,
                 le: float | None = None, gt: float | None = None, before=None, after=None):
        self.kind = _bounded(as_kind(kind), {k: v for k, v in (("ge", ge), ("le", le), ("gt", gt)) if v is not None})
        if before is not None or after is not None:
            self.kind = _Wrapped(self.kind, before, after)
        self.default, self.factory, self.alias, self.description = default, factory, alias, description
        self.name = ""  # set by the model class

    @property
    def key(self) -> str:
        return self.alias or self.name

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED and self.factory is None

    @property
    def keyed(self) -> bool:
        """Values sit one level below the field, under a map key or a list index."""
        return isinstance(_unwrapped(self.kind), (ListOf, DictOf))

    @property
    def model(self) -> type["Model"] | None:
        """The model class of the field's values (through `| None`, a list or a mapping), else None."""
        kind = _unwrapped(self.kind)
        if isinstance(kind, (ListOf, DictOf)):
            kind = _unwrapped(kind.item if isinstance(kind, ListOf) else kind.value)
        return kind.model if isinstance(kind, _Nested) else None

    def initial(self) -> Any:
        return self.factory() if self.factory is not None else self.default

    def schema(self, defs: dict) -> dict:
        out = self.kind.schema(defs)
        if self.model is None or self.keyed:  # pydantic titles every field but one typed by a model
            out["title"] = self.key.title().replace("_", " ")
        if self.description:
            out["description"] = self.description
        if self.default is not _REQUIRED:
            out["default"] = _dumped(self.default, "json", False)
        return dict(sorted(out.items()))


def _unwrapped(kind: Kind) -> Kind:
    while isinstance(kind, (_Optional, _Wrapped)):
        kind = kind.inner
    return kind


def _bounded(kind: Kind, bounds: dict) -> Kind:
    if not bounds:
        return kind
    if isinstance(kind, _Optional):
        return _Optional(_bounded(kind.inner, bounds))
    assert isinstance(kind, _Number), f"bounds on a {type(kind).__name__}"
    return kind.but(**bounds)


class _ModelType(type):
    def __or__(cls, other: None) -> Kind:
        return _Optional(_Nested(cls)) if other is None else NotImplemented


class Model(metaclass=_ModelType):
    """Frozen instances of declared fields; unknown keys are refused. Build with `Model.model_validate(data)` or
    `Model(**data)` (both validate and raise ValidationError)."""

    # _given and _secret_fields stay out of the field values in __dict__
    __slots__ = ("__dict__", "_given", "_secret_fields")
    model_fields: dict[str, Field] = {}

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        own = {name: f for name, f in vars(cls).items() if isinstance(f, Field)}
        for name, f in own.items():
            f.name = name
            delattr(cls, name)  # instances keep the values; the class keeps the declarations in model_fields
        cls.model_fields = {**cls.model_fields, **own}
        cls._by_key = {f.key: f for f in cls.model_fields.values()}

    def __init__(self, **data: Any):
        built = type(self).model_validate(data)
        object.__setattr__(self, "__dict__", dict(built.__dict__))
        object.__setattr__(self, "_given", built._given)

    # hooks: pydantic's mode="before" and mode="after" model validators
    _prepare: Callable[[Any], Any] | None = None
    _check: Callable[["Model"], None] | None = None

    @classmethod
    def model_validate(cls, data: Any) -> "Model":
        problems: list[Problem] = []
        out = cls._read(data, (), problems)
        if out is _FAIL:
            raise ValidationError(cls.__name__, problems)
        return out

    @classmethod
    def _read(cls, data: Any, loc: tuple, problems: list[Problem]) -> Any:
        if cls._prepare is not None:
            try:
                data = cls._prepare(data)
            except ValueError as exc:
                return _fail(problems, loc, "value_error", data, exc)
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            return _fail(problems, loc, "model_type", data, cls.__name__)
        before = len(problems)
        values, given = {}, set()
        for f in cls.model_fields.values():
            if f.key in data:
                values[f.name] = f.kind.check(data[f.key], loc + (f.key,), problems)
                given.add(f.name)
            elif f.required:
                _fail(problems, loc + (f.key,), "missing", data)
            else:
                values[f.name] = f.initial()
        for key, value in data.items():
            if key not in cls._by_key:
                _fail(problems, loc + (key,), "extra_forbidden", value)
        if len(problems) > before:
            return _FAIL
        out = object.__new__(cls)
        object.__setattr__(out, "__dict__", values)
        object.__setattr__(out, "_given", frozenset(given))
        if cls._check is not None:
            try:
                out._check()
            except ValueError as exc:
                return _fail(problems, loc, "value_error", data, exc)
        return out

    @property
    def model_fields_set(self) -> frozenset[str]:
        """The fields the input gave (the others have their defaults)."""
        return self._given

    def model_dump(self, *, mode: str = "python", exclude_none: bool = False) -> dict[str, Any]:
        """Plain data; mode "json" writes secrets redacted. A field the loader found a sensitive value in but keeps
        as plain text (mark_sensitive: a command, a reference, a name) is dumped as Secrets (stack/secret.py), so a
        writer of the dump shows it redacted as it shows every secret; reading the field itself gives the text."""
        marked = getattr(self, "_secret_fields", frozenset())
        return {name: _dumped(secret_leaves(value) if name in marked else value, mode, exclude_none)
                for name, value in self.__dict__.items() if not (exclude_none and value is None)}

    def mark_sensitive(self, name: str) -> None:
        """Field `name` holds a sensitive value as plain text (the loader's sensitive paths): its dumps redact it."""
        object.__setattr__(self, "_secret_fields", getattr(self, "_secret_fields", frozenset()) | {name})

    def model_copy(self, *, update: dict[str, Any] | None = None) -> "Model":
        """A shallow copy with `update`'s fields replaced, not validated."""
        out = object.__new__(type(self))
        object.__setattr__(out, "__dict__", {**self.__dict__, **(update or {})})
        object.__setattr__(out, "_given", self._given | set(update or ()))
        object.__setattr__(out, "_secret_fields", getattr(self, "_secret_fields", frozenset()) - set(update or ()))
        return out

    @classmethod
    def _schema(cls, defs: dict) -> dict:
        properties = {f.key: f.schema(defs) for f in cls.model_fields.values()}
        required = [f.key for f in cls.model_fields.values() if f.required]
        out = {"additionalProperties": False, "description": _cleandoc(cls.__doc__ or ""),
               "properties": properties, "title": cls.__name__, "type": "object"}
        return dict(sorted({**out, "required": required}.items())) if required else out

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: use model_copy(update=...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.__dict__ == self.__dict__

    def __hash__(self) -> int:
        return hash((type(self), *self.__dict__.values()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.__dict__.items())})"


def _dumped(value: Any, mode: str, exclude_none: bool) -> Any:
    if isinstance(value, Model):
        return value.model_dump(mode=mode, exclude_none=exclude_none)
    if isinstance(value, dict):
        return {k: _dumped(v, mode, exclude_none) for k, v in value.items()}  # exclude_none: fields only
    if isinstance(value, (list, tuple)):
        return [_dumped(v, mode, exclude_none) for v in value]
    if mode == "json":
        if isinstance(value, (Secret, SensitiveValue)):
            return str(value)
        if isinstance(value, float) and not math.isfinite(value):
            return None  # JSON has no NaN or Infinity
        if hasattr(value, "isoformat"):
            return value.isoformat()
    return value


def _cleandoc(doc: str) -> str:
    """inspect.cleandoc without importing inspect: the first line as is, the rest dedented."""
    lines = doc.expandtabs().split("\n")
    rest = [line for line in lines[1:] if line.strip()]
    margin = min((len(line) - len(line.lstrip()) for line in rest), default=0)
    out = [lines[0].strip()] + [line[margin:].rstrip() for line in lines[1:]]
    while out and not out[-1]:
        out.pop()
    while out and not out[0]:
        out.pop(0)
    return "\n".join(out)


def json_schema(model: type[Model]) -> dict[str, Any]:
    """The JSON Schema of `model`, the models it uses in $defs (sorted by name)."""
    defs: dict = {}
    body = model._schema(defs)
    return {"$defs": dict(sorted(defs.items())), **body} if defs else body

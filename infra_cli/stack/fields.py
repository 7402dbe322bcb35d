"""A small declarative model engine for the stack file: each model class declares its fields once, and that one
declaration validates parsed YAML into frozen instances, reports every problem as (loc, type, msg, input), dumps
instances back to plain data, and writes the JSON Schema.

It reads values as pydantic 2 does in lax mode, with its error types and messages, so diagnostics and the
schema stayed the same when the stack model left pydantic (whose import and model build were ~40% of
`infra validate`'s start-up): https://docs.pydantic.dev/latest/errors/validation_errors/ lists the types.

    class Smoke(Model):
        steps = Field(Count, 5, ge=1, le=1000, description="timed iterations")
        experiment_name = Field(Text | None, None, description="Azure ML experiment")

Kinds (what a value must be) are stack/value_kinds.py's; how a value is wrong, stack/field_errors.py's.
A model's `_prepare` (classmethod) runs on its input mapping and its `_check` on the built instance, the latter
only when every field was valid, as pydantic's before/after model validators.
"""

from __future__ import annotations

import math
from typing import Any, Callable, ClassVar, Self, cast

from infra_cli.stack.field_errors import FAIL, Problem, ValidationError, fail
from infra_cli.stack.secret import Secret as SensitiveValue, secret_leaves
from infra_cli.stack.value_kinds import DictOf, Kind, ListOf, Nested, Nullable, Number, Secret, Wrapped, as_kind

_REQUIRED = object()


class FieldSpec:
    """One field of a model: its kind, default (or `factory`), YAML key when not its name (`alias`), numeric
    bounds, description, and its own before/after validators. Declared with `Field(...)`."""

    def __init__(self, kind: Any, default: Any = _REQUIRED, *, factory: Callable[[], Any] | None = None,
                 alias: str | None = None, description: str | None = None, ge: float | None = None,
                 le: float | None = None, gt: float | None = None, before=None, after=None):
        self.kind = _bounded(as_kind(kind), {k: v for k, v in (("ge", ge), ("le", le), ("gt", gt)) if v is not None})
        if before is not None or after is not None:
            self.kind = Wrapped(self.kind, before, after)
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
        return kind.model if isinstance(kind, Nested) else None

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
    while isinstance(kind, (Nullable, Wrapped)):
        kind = kind.inner
    return kind


def _bounded(kind: Kind, bounds: dict) -> Kind:
    if not bounds:
        return kind
    if isinstance(kind, Nullable):
        return Nullable(_bounded(kind.inner, bounds))
    assert isinstance(kind, Number), f"bounds on a {type(kind).__name__}"
    return kind.but(**bounds)


def Field(kind: Any, default: Any = _REQUIRED, *, factory: Callable[[], Any] | None = None, alias: str | None = None,
          description: str | None = None, ge: float | None = None, le: float | None = None, gt: float | None = None,
          before: Callable[[Any], Any] | None = None, after: Callable[[Any], Any] | None = None) -> Any:
    """Declare a field of a model (a FieldSpec). Typed Any, as pydantic's Field is: on an instance the attribute
    holds the field's value, and a type checker reads it so (`cluster.min_instances > 1`), not as the spec."""
    return FieldSpec(kind, default, factory=factory, alias=alias, description=description, ge=ge, le=le, gt=gt,
                     before=before, after=after)


class _ModelType(type):
    # `Model | None` declares an optional nested model (a Kind), where type's own `|` would make a typing union
    def __or__(cls, other: None) -> Kind:  # type: ignore[override]
        return Nullable(Nested(cast("type[Model]", cls))) if other is None else NotImplemented


class Model(metaclass=_ModelType):
    """Frozen instances of declared fields; unknown keys are refused. Build with `Model.model_validate(data)` or
    `Model(**data)` (both validate and raise ValidationError)."""

    # _given and _secret_fields stay out of the field values in __dict__
    __slots__ = ("__dict__", "_given", "_secret_fields")
    _given: frozenset[str]
    model_fields: ClassVar[dict[str, FieldSpec]] = {}
    _by_key: ClassVar[dict[str, FieldSpec]] = {}

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        own = {name: f for name, f in vars(cls).items() if isinstance(f, FieldSpec)}
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
    @classmethod
    def _prepare(cls, data: Any) -> Any:
        """The input mapping as the fields read it (a model that reads another shape too overrides this)."""
        return data

    def _check(self) -> None:
        """Raise ValueError where the fields, each valid, do not fit together (a model with such a rule overrides
        this)."""

    @classmethod
    def model_validate(cls, data: Any) -> Self:
        problems: list[Problem] = []
        out = cls._read(data, (), problems)
        if out is FAIL:
            raise ValidationError(cls.__name__, problems)
        return out

    @classmethod
    def _read(cls, data: Any, loc: tuple, problems: list[Problem]) -> Any:
        try:
            data = cls._prepare(data)
        except ValueError as exc:
            return fail(problems, loc, "value_error", data, exc)
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            return fail(problems, loc, "model_type", data, cls.__name__)
        before = len(problems)
        values, given = {}, set()
        for f in cls.model_fields.values():
            if f.key in data:
                values[f.name] = f.kind.check(data[f.key], loc + (f.key,), problems)
                given.add(f.name)
            elif f.required:
                fail(problems, loc + (f.key,), "missing", data)
            else:
                values[f.name] = f.initial()
        for key, value in data.items():
            if key not in cls._by_key:
                fail(problems, loc + (key,), "extra_forbidden", value)
        if len(problems) > before:
            return FAIL
        out = object.__new__(cls)
        object.__setattr__(out, "__dict__", values)
        object.__setattr__(out, "_given", frozenset(given))
        try:
            out._check()
        except ValueError as exc:
            return fail(problems, loc, "value_error", data, exc)
        return out

    @property
    def model_fields_set(self) -> frozenset[str]:
        """The fields the input gave (the others have their defaults)."""
        return self._given

    def model_dump(self, *, mode: str = "python", exclude_none: bool = False) -> dict[str, Any]:
        """Plain data; mode "json" writes secrets redacted. A field the loader found a sensitive value in but keeps
        as plain text (mark_sensitive: a command, a reference, a name) is dumped as Secrets (stack/secret.py), so a
        writer of the dump shows it redacted as it shows every secret; reading the field itself gives the text."""
        marked: frozenset[str] = getattr(self, "_secret_fields", frozenset())
        return {name: _dumped(secret_leaves(value) if name in marked else value, mode, exclude_none)
                for name, value in self.__dict__.items() if not (exclude_none and value is None)}

    def mark_sensitive(self, name: str) -> None:
        """Field `name` holds a sensitive value as plain text (the loader's sensitive paths): its dumps redact it."""
        object.__setattr__(self, "_secret_fields", getattr(self, "_secret_fields", frozenset()) | {name})

    def model_copy(self, *, update: dict[str, Any] | None = None) -> Self:
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

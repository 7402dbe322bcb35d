"""The stack model's engine (infra_cli/stack/fields.py): values read as pydantic 2 reads them in lax mode, with
its error types and messages (https://docs.pydantic.dev/latest/errors/validation_errors/), a JSON Schema, dumps,
frozen instances, and secrets that never show."""

from __future__ import annotations

import json

import pytest

from infra_cli.stack.field_errors import ValidationError
from infra_cli.stack.fields import Field, Model, json_schema
from infra_cli.stack.value_kinds import ANY, SECRET, Bool, DictOf, Float, Int, ListOf, OneOf, Secret, Str


def _filled(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty")
    return v


class Inner(Model):
    """An inner model."""

    n = Field(Int(), 1, ge=1, le=10, description="a count")


class Outer(Model):
    """An outer model
    on two lines."""

    name = Field(Str(after=_filled), description="a name")
    schema_url = Field(Str() | None, None, alias="$schema", description="pasted")
    kind = Field(OneOf("dedicated", "low_priority", aliases={"LowPriority": "low_priority"}), "dedicated",
                 description="any case")
    ratio = Field(Float(), 0.5, gt=0, le=1.0, description="a fraction")
    flag = Field(Bool() | None, None, description="a flag")
    size = Field(Int() | None, None, gt=0, le=1 << 34, description="optional and bounded")
    tags = Field(DictOf(Str()), factory=dict, description="text values")
    extra = Field(DictOf(ANY), factory=dict, description="anything")
    items = Field(ListOf(Inner) | None, None, description="inner models")
    inner = Field(Inner, factory=Inner)
    password = Field(SECRET | None, None, description="a secret")

    def _check(self) -> None:
        if self.name == "forbidden":
            raise ValueError("not that name")


def problems(data) -> list[tuple]:
    with pytest.raises(ValidationError) as info:
        Outer.model_validate(data)
    return [(p.loc, p.type, p.msg, p.input) for p in info.value.errors()]


def one(kind, value):
    found = []
    out = kind.check(value, (), found)
    return [(p.type, p.msg) for p in found] or out


@pytest.mark.parametrize("value, read", [(5, 5), (5.0, 5), ("5", 5), (" 7 ", 7), ("+3", 3), ("1_000", 1000),
                                         ("5.00", 5), ("007", 7), ("0-5", -5), (True, 1)])
def test_int_reads_what_pydantic_reads(value, read):
    assert one(Int(), value) == read


@pytest.mark.parametrize("value, kind, msg", [
    (5.5, "int_from_float", "Input should be a valid integer, got a number with a fractional part"),
    ("x", "int_parsing", "Input should be a valid integer, unable to parse string as an integer"),
    ("5.5", "int_parsing", "Input should be a valid integer, unable to parse string as an integer"),
    ("1__0", "int_parsing", "Input should be a valid integer, unable to parse string as an integer"),
    (float("inf"), "finite_number", "Input should be a finite number"),
    (1e30, "int_parsing_size", "Unable to parse input string as an integer, exceeded maximum size"),
    ("1" * 4301, "int_parsing_size", "Unable to parse input string as an integer, exceeded maximum size"),
    (None, "int_type", "Input should be a valid integer"),
    ([1], "int_type", "Input should be a valid integer"),
])
def test_int_refuses_with_pydantics_error(value, kind, msg):
    assert one(Int(), value) == [(kind, msg)]


def test_a_count_forbids_true_false_before_reading_a_number():
    count = Int(before=lambda v: (_ for _ in ()).throw(ValueError("no booleans")) if isinstance(v, bool) else v)
    assert one(count, True) == [("value_error", "Value error, no booleans")]
    assert one(count, 3) == 3


def test_bounds_and_their_messages():
    assert problems({"name": "a", "ratio": 0, "size": 0}) == [
        (("ratio",), "greater_than", "Input should be greater than 0", 0),
        (("size",), "greater_than", "Input should be greater than 0", 0)]
    # a float bound that is whole reads as an integer, as pydantic writes it; NaN fails `le` first
    assert problems({"name": "a", "ratio": float("inf")})[0][1:3] == (
        "less_than_equal", "Input should be less than or equal to 1")
    assert problems({"name": "a", "ratio": float("nan")})[0][1] == "less_than_equal"
    assert problems({"name": "a", "inner": {"n": "0"}}) == [
        (("inner", "n"), "greater_than_equal", "Input should be greater than or equal to 1", "0")]


@pytest.mark.parametrize("value, read", [(1, 1.0), ("0.5", 0.5), (" 1e-1 ", 0.1), ("1_0.5", 10.5), (True, 1.0)])
def test_float_reads_what_pydantic_reads(value, read):
    assert one(Float(), value) == read


def test_float_refusals():
    assert one(Float(), "0x10") == [("float_parsing", "Input should be a valid number, unable to parse string as a number")]
    assert one(Float(), None) == [("float_type", "Input should be a valid number")]
    assert one(Float(), 10 ** 400) == [("float_type", "Input should be a valid number")]


@pytest.mark.parametrize("value, read", [(True, True), (0, False), (1.0, True), ("yes", True), ("Off", False),
                                         ("t", True), ("0", False)])
def test_bool_reads_what_pydantic_reads(value, read):
    assert one(Bool(), value) is read


@pytest.mark.parametrize("value, kind", [(2, "bool_parsing"), ("maybe", "bool_parsing"), (" true", "bool_parsing"),
                                         (0.5, "bool_type"), (None, "bool_type"), (2 ** 63, "bool_type")])
def test_bool_refusals(value, kind):
    assert one(Bool(), value)[0][0] == kind


def test_text_is_never_coerced_from_a_number():
    assert one(Str(), 5) == [("string_type", "Input should be a valid string")]
    assert one(Str(pattern=r"^[a-z]+$"), "abc\n") == [
        ("string_pattern_mismatch", "String should match pattern '^[a-z]+$'")]  # `$` is the end of the text


def test_enumerations_fold_case_and_aliases():
    assert Outer.model_validate({"name": "a", "kind": "Dedicated"}).kind == "dedicated"
    assert Outer.model_validate({"name": "a", "kind": "lowpriority"}).kind == "low_priority"
    assert problems({"name": "a", "kind": "Spot"}) == [
        (("kind",), "literal_error", "Input should be 'dedicated' or 'low_priority'", "spot")]
    assert one(OneOf("a", "b", "c"), 5) == [("literal_error", "Input should be 'a', 'b' or 'c'")]


def test_all_problems_in_field_order_then_unknown_keys():
    assert problems({"zzz": 1, "name": 5, "tags": {"a": 1, 2: "b"}, "items": [{"n": 0}, "x"], "inner": 3}) == [
        (("name",), "string_type", "Input should be a valid string", 5),
        (("tags", "a"), "string_type", "Input should be a valid string", 1),
        (("tags", 2, "[key]"), "string_type", "Input should be a valid string", 2),
        (("items", 0, "n"), "greater_than_equal", "Input should be greater than or equal to 1", 0),
        (("items", 1), "model_type", "Input should be a valid dictionary or instance of Inner", "x"),
        (("inner",), "model_type", "Input should be a valid dictionary or instance of Inner", 3),
        (("zzz",), "extra_forbidden", "Extra inputs are not permitted", 1)]
    assert problems({}) == [(("name",), "missing", "Field required", {})]
    assert problems({"name": ""}) == [(("name",), "value_error", "Value error, must not be empty", "")]


def test_a_model_check_runs_only_when_its_fields_are_valid():
    assert problems({"name": "forbidden"}) == [((), "value_error", "Value error, not that name", {"name": "forbidden"})]
    assert [p[1] for p in problems({"name": "forbidden", "size": 0})] == ["greater_than"]


def test_alias_is_the_key_and_the_location():
    assert Outer.model_validate({"name": "a", "$schema": "s"}).schema_url == "s"
    assert problems({"name": "a", "schema_url": "s"})[0][:2] == (("schema_url",), "extra_forbidden")
    assert problems({"name": "a", "$schema": 1})[0][0] == ("$schema",)


def test_instances_are_frozen_equal_and_copied_with_changes():
    a = Outer.model_validate({"name": "a", "tags": {"t": "v"}})
    assert a == Outer(name="a", tags={"t": "v"}) and a != Outer(name="b")
    with pytest.raises(AttributeError):
        a.name = "b"
    b = a.model_copy(update={"name": "b"})
    assert (b.name, b.tags, a.name) == ("b", {"t": "v"}, "a")
    assert a.model_fields_set == {"name", "tags"} and b.model_fields_set == {"name", "tags"}
    assert Outer(name="a", kind="dedicated").model_fields_set == {"name", "kind"}  # given, even as the default


def test_dumps():
    a = Outer.model_validate({"name": "a", "items": [{"n": 2}], "extra": {"k": None}})
    assert a.model_dump()["items"] == [{"n": 2}] and a.model_dump()["inner"] == {"n": 1}
    assert "flag" not in a.model_dump(exclude_none=True)
    assert a.model_dump(exclude_none=True)["extra"] == {"k": None}  # None is left out of fields only
    assert list(a.model_dump()) == list(Outer.model_fields)


def test_secrets_never_show():
    a = Outer.model_validate({"name": "a", "password": "hunter2"})
    assert a.password.get_secret_value() == "hunter2"
    for text in (repr(a), str(a), repr(a.password), str(a.password), json.dumps(a.model_dump(mode="json"))):
        assert "hunter2" not in text
    assert a.model_dump(mode="json")["password"] == "**********"
    assert isinstance(a.model_dump()["password"], Secret)
    assert one(SECRET, 5) == [("string_type", "Input should be a valid string")]
    assert str(Secret("")) == ""  # as SecretStr: an empty secret is shown empty


def test_errors_say_what_and_where():
    with pytest.raises(ValidationError) as info:
        Outer.model_validate({"name": 5, "inner": {"n": 0}})
    assert isinstance(info.value, ValueError)
    assert str(info.value).splitlines()[:3] == ["2 validation errors for Outer", "name",
                                                "  Input should be a valid string [type=string_type]"]


def test_json_schema():
    schema = json_schema(Outer)
    assert schema["title"] == "Outer" and schema["description"] == "An outer model\non two lines."
    assert schema["additionalProperties"] is False and schema["required"] == ["name"]
    props = schema["properties"]
    assert props["$schema"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None,
                                "description": "pasted", "title": "$Schema"}
    assert props["kind"]["enum"] == ["dedicated", "low_priority"] and props["kind"]["default"] == "dedicated"
    assert props["ratio"]["exclusiveMinimum"] == 0 and props["ratio"]["maximum"] == 1.0
    assert props["size"]["anyOf"][0] == {"exclusiveMinimum": 0, "maximum": 1 << 34, "type": "integer"}
    assert props["tags"] == {"additionalProperties": {"type": "string"}, "description": "text values",
                             "title": "Tags", "type": "object"}
    assert props["extra"]["additionalProperties"] is True
    assert props["items"]["anyOf"][0] == {"items": {"$ref": "#/$defs/Inner"}, "type": "array"}
    assert props["inner"] == {"$ref": "#/$defs/Inner"}  # a model-typed field has no title of its own
    assert props["password"]["anyOf"][0] == {"format": "password", "type": "string", "writeOnly": True}
    assert "default" not in props["tags"] and "default" not in props["inner"]
    assert schema["$defs"]["Inner"]["properties"]["n"] == {
        "default": 1, "description": "a count", "maximum": 10, "minimum": 1, "title": "N", "type": "integer"}


def test_field_walk_for_locations():
    assert Outer.model_fields["items"].model is Inner and Outer.model_fields["items"].keyed
    assert Outer.model_fields["inner"].model is Inner and not Outer.model_fields["inner"].keyed
    assert Outer.model_fields["tags"].model is None and Outer.model_fields["schema_url"].key == "$schema"

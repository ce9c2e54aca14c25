"""Path-local validation of a change must agree with validating the whole new state."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from skillstate.server.engine.mergepatch import apply, strip_nulls
from skillstate.server.engine.undo import apply_in_place
from skillstate.server.engine.validation import SchemaValidator, has_type, types_only
from skillstate.server.errors import InvalidArgumentError, SchemaViolationError

from ...strategies import json_values

SCHEMAS = [
    {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}},
    {
        "type": "object",
        "additionalProperties": False,
        "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}, "maxProperties": 2}, "c": {}},
    },
    {
        "type": "object",
        "patternProperties": {"^[ab]": {"type": ["integer", "object"]}},
        "propertyNames": {"maxLength": 1},
    },
    {"$defs": {"n": {"type": "integer", "minimum": 0}}, "type": "object", "properties": {"a": {"$ref": "#/$defs/n"}}},
    {"type": "object", "properties": {"a": {"type": "object", "dependentRequired": {"b": ["c"]}}}},
    {"type": "object", "allOf": [{"properties": {"b": {"type": "array", "maxItems": 2}}}], "minProperties": 1},
    {
        "type": "object",
        "properties": {"a": {"type": "object", "additionalProperties": {"type": "object", "required": ["x"]}}},
    },
]
KEYS = st.sampled_from(["a", "b", "c", "x", "ab"])
OBJECTS = st.dictionaries(KEYS, json_values(8), max_size=4)


@pytest.mark.parametrize("schema", SCHEMAS, ids=range(len(SCHEMAS)))
@given(old=OBJECTS, patch=st.dictionaries(KEYS, json_values(8), max_size=3))
def test_local_validation_agrees_with_full_validation(schema: dict, old: dict, patch: dict) -> None:
    validator = SchemaValidator(schema)
    old = strip_nulls(old)
    try:
        validator.validate(old)
    except SchemaViolationError:
        return  # the engine only ever holds valid states
    new = copy.deepcopy(old)
    undo = apply_in_place(new, patch)
    assert new == apply(old, patch)
    try:
        validator.validate(new)
        full_ok = True
    except SchemaViolationError:
        full_ok = False
    try:
        validator.validate_change(new, patch, undo)
        local_ok = True
    except SchemaViolationError:
        local_ok = False
    assert local_ok == full_ok


def test_violations_name_path_and_keyword() -> None:
    validator = SchemaValidator(SCHEMAS[0])
    with pytest.raises(SchemaViolationError) as caught:
        validator.validate({"a": "x"})
    assert caught.value.violations == ["/a: 'x' is not of type 'integer' (type)"]


def test_an_invalid_schema_is_refused_with_its_location() -> None:
    with pytest.raises(InvalidArgumentError, match="schema_json: not a valid Draft 2020-12 schema at /properties/a"):
        SchemaValidator({"properties": {"a": {"type": "nope"}}})


TYPE_NAMES = st.sampled_from(["object", "array", "string", "integer", "number", "boolean", "null"])


@given(
    value=json_values(8) | st.floats(allow_nan=False, allow_infinity=False),
    names=st.lists(TYPE_NAMES, min_size=1, max_size=3, unique=True),
    as_list=st.booleans(),
)
def test_the_type_shortcut_agrees_with_jsonschema(value: object, names: list[str], as_list: bool) -> None:
    schema = {"type": names if as_list or len(names) > 1 else names[0], "x-merge": "lww"}
    assert types_only(schema) == tuple(names)
    assert has_type(value, tuple(names)) == Draft202012Validator(schema).is_valid(value)


def test_the_type_shortcut_leaves_other_keywords_to_jsonschema() -> None:
    assert types_only({"type": "integer", "minimum": 0}) is None
    assert types_only({"type": "decimal"}) is None
    assert types_only({"properties": {}}) is None

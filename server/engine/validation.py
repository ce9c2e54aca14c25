"""JSON Schema (Draft 2020-12) validation of candidate states, local to what a patch changed.

Every committed state is valid, so a new state only needs checking where the patch touched it: along each
patched path, the object keywords of each ancestor (type, required, property counts, names of new keys)
and the full schema of each replaced value. That is exact for schemas built from object keywords; at any
node using other keywords (allOf, $ref, if/then, dependentRequired, ...) the whole subtree below that node
is validated instead, so the answer is always the same as validating the whole state.
"""

from __future__ import annotations

import re
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError

from ..errors import InvalidArgumentError, SchemaViolationError
from .mergepatch import Path, pointer
from .schemarefs import checked_registry
from .undo import Undo

MAX_REPORTED = 10
"""How many violations an error message lists at most."""

_LOCAL_KEYWORDS = frozenset(
    {
        "type", "properties", "patternProperties", "additionalProperties", "required", "minProperties",
        "maxProperties", "propertyNames", "x-merge", "title", "description", "default", "examples",
        "$comment", "deprecated", "readOnly", "writeOnly", "$schema", "$defs", "definitions", "$id",
    }
)  # fmt: skip
_SHALLOW_KEYWORDS = ("type", "required", "minProperties", "maxProperties")
_ANNOTATIONS = frozenset(
    {"x-merge", "title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly"}
)
_TYPE_CHECKS = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
}


def types_only(schema: Any) -> tuple[str, ...] | None:
    """The type names of a schema that checks nothing but `type` (annotations aside), else None."""
    if not isinstance(schema, dict) or "type" not in schema or not schema.keys() - _ANNOTATIONS <= {"type"}:
        return None
    names = (schema["type"],) if isinstance(schema["type"], str) else tuple(schema["type"])
    return names if all(name in _TYPE_CHECKS for name in names) else None


def has_type(value: Any, names: tuple[str, ...]) -> bool:
    """Whether value has one of the JSON Schema types (an integral float is an integer, a bool no number)."""
    return any(_TYPE_CHECKS[name](value) for name in names)


class SchemaValidator:
    """Validates states of one execution against its schema."""

    def __init__(self, schema: dict[str, Any]) -> None:
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as e:
            where = pointer(tuple(str(p) for p in e.absolute_path)) or "(root)"
            raise InvalidArgumentError(f"schema_json: not a valid Draft 2020-12 schema at {where}: {e.message}") from e
        self._validator = Draft202012Validator(schema, registry=checked_registry(schema))
        self._root = schema
        self._evolved: dict[int, Draft202012Validator] = {}
        """Validators for subschemas of this schema, by id: every one stays alive in _root or _shallow."""
        self._shallow: dict[int, dict[str, Any]] = {}
        self._types_only: dict[int, tuple[str, ...] | None] = {}
        """For subschemas that check only `type`, its names: checked here, with jsonschema only to explain."""

    def validate(self, state: Any) -> None:
        """Check a whole state; raises SchemaViolationError listing the failing paths."""
        violations: list[str] = []
        self._check(state, self._root, (), violations)
        _raise_if_any(violations)

    def validate_change(self, new: dict[str, Any], applied_patch: dict[str, Any], undo: Undo) -> None:
        """Check `new`, the state after applying `applied_patch` (whose undo is `undo`) to a valid state.

        Raises like validate. The undo tells where the patch merged into an existing object (a nested undo)
        and where it replaced a value (a Restore), which decides what must be checked.
        """
        if not self._root:  # the empty schema accepts every state
            return
        violations: list[str] = []
        self._local(self._root, undo, new, applied_patch, (), violations)
        _raise_if_any(violations)

    def _local(
        self, schema: Any, undo: Undo, new: Any, patch: dict[str, Any], path: Path, violations: list[str]
    ) -> None:
        """Add to `violations` what the patch broke along the paths it wrote, below `path`."""
        if schema is True:
            return
        if not isinstance(schema, dict) or not isinstance(new, dict) or not schema.keys() <= _LOCAL_KEYWORDS:
            self._check(new, schema, path, violations)
            return
        shallow = self._shallow.get(id(schema))
        if shallow is None:
            shallow = self._shallow[id(schema)] = {key: schema[key] for key in _SHALLOW_KEYWORDS if key in schema}
        self._check(new, shallow, path, violations)
        for key, change in patch.items():
            if key not in new:
                continue
            here = (*path, key)
            if "propertyNames" in schema:
                self._check(key, schema["propertyNames"], here, violations)
            merged, after = undo.get(key), new[key]
            for child_schema in self._child_schemas(schema, key):
                if child_schema is False:
                    violations.append(
                        f"{pointer(path) or '(root)'}: property {key!r} is not allowed (additionalProperties)"
                    )
                elif isinstance(change, dict) and isinstance(merged, dict):  # merged into an existing object
                    self._local(child_schema, merged, after, change, here, violations)
                else:
                    self._check(after, child_schema, here, violations)

    def _child_schemas(self, schema: dict[str, Any], key: str) -> list[Any]:
        """The subschemas a member is validated against, as `properties` and its siblings define them."""
        matched = []
        properties = schema.get("properties")
        if properties and key in properties:
            matched.append(properties[key])
        patterns = schema.get("patternProperties")
        if patterns:
            matched.extend(sub for pattern, sub in patterns.items() if re.search(pattern, key))
        if not matched and "additionalProperties" in schema:
            matched.append(schema["additionalProperties"])
        return matched

    def _check(self, value: Any, schema: Any, path: Path, violations: list[str]) -> None:
        """Add to `violations` how `value` (at `path`) fails `schema`, if it does."""
        if schema is True or schema == {}:
            return
        key = id(schema)
        if key not in self._types_only:
            self._types_only[key] = types_only(schema)
        names = self._types_only[key]
        if names is not None and has_type(value, names):
            return
        validator = self._evolved.get(key)
        if validator is None:
            validator = self._evolved[key] = self._validator.evolve(schema=schema)
        violations.extend(_describe(error, path) for error in validator.iter_errors(value))


def _describe(error: ValidationError, prefix: Path) -> str:
    where = pointer((*prefix, *(str(p) for p in error.absolute_path))) or "(root)"
    return f"{where}: {error.message} ({error.validator})"


def _raise_if_any(violations: list[str]) -> None:
    if violations:
        found = sorted(set(violations))
        raise SchemaViolationError(
            found[:MAX_REPORTED] + ([f"and {len(found) - MAX_REPORTED} more"] if len(found) > MAX_REPORTED else [])
        )

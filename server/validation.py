"""JSON Schema (Draft 2020-12) validation of candidate states, local to what a patch changed.

Every committed state is valid, so a new state only needs checking where the patch touched it: along each
patched path, the object keywords of each ancestor (type, required, property counts, names of new keys)
and the full schema of each replaced value. That is exact for schemas built from object keywords; at any
node using other keywords (allOf, $ref, if/then, dependentRequired, ...) the whole subtree below that node
is validated instead, so the answer is always the same as validating the whole state.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError

from .errors import InvalidArgumentError, SchemaViolationError
from .mergepatch import Path, pointer

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


class SchemaValidator:
    """Validates states of one execution against its schema."""

    def __init__(self, schema: dict[str, Any]) -> None:
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as e:
            where = pointer(tuple(str(p) for p in e.absolute_path)) or "(root)"
            raise InvalidArgumentError(f"schema_json: not a valid Draft 2020-12 schema at {where}: {e.message}") from e
        self._validator = Draft202012Validator(schema)
        self._root = schema
        self._evolved: dict[int, Draft202012Validator] = {}
        """Validators for subschemas of this schema, by id: every one stays alive in _root or _shallow."""
        self._shallow: dict[int, dict[str, Any]] = {}

    def validate(self, state: Any) -> None:
        """Check a whole state; raises SchemaViolationError listing the failing paths."""
        _raise_if_any(self._errors(state, self._root, ()))

    def validate_change(self, old: dict[str, Any], new: dict[str, Any], applied_patch: dict[str, Any]) -> None:
        """Check `new` == old ⊕ applied_patch, given that `old` is valid; raises like validate."""
        _raise_if_any(self._local(self._root, old, new, applied_patch, ()))

    def _local(self, schema: Any, old: Any, new: Any, patch: dict[str, Any], path: Path) -> Iterator[str]:
        if schema is True:
            return
        if not isinstance(schema, dict) or not isinstance(new, dict) or not schema.keys() <= _LOCAL_KEYWORDS:
            yield from self._errors(new, schema, path)
            return
        shallow = self._shallow.get(id(schema))
        if shallow is None:
            shallow = self._shallow[id(schema)] = {key: schema[key] for key in _SHALLOW_KEYWORDS if key in schema}
        yield from self._errors(new, shallow, path)
        old_members = old if isinstance(old, dict) else {}
        for key, change in patch.items():
            if key not in new:
                continue
            here = (*path, key)
            if "propertyNames" in schema:
                yield from self._errors(key, schema["propertyNames"], here)
            before, after = old_members.get(key), new[key]
            for child_schema in self._child_schemas(schema, key):
                if child_schema is False:
                    yield f"{pointer(path) or '(root)'}: property {key!r} is not allowed (additionalProperties)"
                elif isinstance(change, dict) and isinstance(before, dict):
                    yield from self._local(child_schema, before, after, change, here)
                else:
                    yield from self._errors(after, child_schema, here)

    def _child_schemas(self, schema: dict[str, Any], key: str) -> Iterable[Any]:
        """The subschemas a member is validated against, as `properties` and its siblings define them."""
        matched = []
        properties = schema.get("properties", {})
        if key in properties:
            matched.append(properties[key])
        matched.extend(sub for pattern, sub in schema.get("patternProperties", {}).items() if re.search(pattern, key))
        if not matched and "additionalProperties" in schema:
            matched.append(schema["additionalProperties"])
        return matched

    def _errors(self, value: Any, schema: Any, path: Path) -> Iterator[str]:
        if schema is True or schema == {}:
            return
        validator = self._evolved.get(id(schema))
        if validator is None:
            validator = self._evolved[id(schema)] = self._validator.evolve(schema=schema)
        for error in validator.iter_errors(value):
            yield _describe(error, path)


def _describe(error: ValidationError, prefix: Path) -> str:
    where = pointer((*prefix, *(str(p) for p in error.absolute_path))) or "(root)"
    return f"{where}: {error.message} ({error.validator})"


def _raise_if_any(violations: Iterable[str]) -> None:
    found = sorted(set(violations))
    if found:
        raise SchemaViolationError(
            found[:MAX_REPORTED] + ([f"and {len(found) - MAX_REPORTED} more"] if len(found) > MAX_REPORTED else [])
        )

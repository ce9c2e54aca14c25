"""Canonical JSON: the one byte form of a JSON value that hashes, compares and replays identically.

Canonical means object keys sorted by code point, no insignificant whitespace, UTF-8. Parsing is strict:
NaN and Infinity are not JSON, integers must fit in 64 bits, and nesting and size are bounded.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

import orjson

from ..errors import InvalidArgumentError
from ..limits import Limits

JSON = Any
"""A decoded JSON value: dict, list, str, int, float, bool or None."""

_CANONICAL = orjson.OPT_SORT_KEYS


def dumps(value: JSON) -> bytes:
    """Canonical JSON bytes of a decoded value; InvalidArgumentError if it holds what JSON cannot."""
    try:
        return orjson.dumps(value, option=_CANONICAL)
    except orjson.JSONEncodeError as e:
        raise InvalidArgumentError(f"cannot encode the result as JSON: {e}") from e


def dumps_str(value: JSON) -> str:
    """Canonical JSON as text, for string fields of the wire contract."""
    return dumps(value).decode()


def parse(text: str | bytes, field: str, limits: Limits, *, max_bytes: int | None = None) -> JSON:
    """Decode one JSON document from a request field, enforcing size and depth limits.

    Raises InvalidArgumentError naming `field` and the broken rule.
    """
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    limit = limits.max_json_bytes if max_bytes is None else max_bytes
    if len(data) > limit:
        raise InvalidArgumentError(f"{field}: {len(data)} bytes exceeds the limit of {limit} bytes", field=field)
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        if str(e).startswith("depth limit exceeded"):  # orjson stops at 1024 levels, before our own check
            raise InvalidArgumentError(
                f"{field}: nesting depth over 1024 exceeds the limit of {limits.max_depth}", field=field
            ) from e
        raise InvalidArgumentError(f"{field}: not valid JSON: {e}", field=field) from e
    if _LONG_DIGIT_RUN.search(data):
        _check_integer_range(data, field)
    if b":" in data:
        _check_unique_keys(data, value, field)
    if data.count(b"{") + data.count(b"[") > limits.max_depth:  # else the depth cannot exceed it: skip the walk
        depth = nesting_depth(value)
        if depth > limits.max_depth:
            raise InvalidArgumentError(
                f"{field}: nesting depth {depth} exceeds the limit of {limits.max_depth}", field=field
            )
    return value


_LONG_DIGIT_RUN = re.compile(rb"\d{19}")
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"')
"""A JSON string; possessive, so that a long string is consumed a run at a time (16x faster on 1 MiB)."""


def _check_unique_keys(data: bytes, value: JSON, field: str) -> None:
    """Refuse an object with a key twice: parsers disagree on which one counts (orjson keeps the last).

    Every member has one colon outside strings, so a document has a duplicate exactly when it has more such
    colons than its parsed objects have members; only then is it read again, slowly, to name the key.
    """
    members = _member_count(value)
    if data.count(b":") == members or _STRING.sub(b"", data).count(b":") == members:
        return

    def refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for key, item in pairs:
            if key in seen:
                raise InvalidArgumentError(f"{field}: duplicate key {key!r} in an object", field=field)
            seen[key] = item
        return seen

    json.loads(data, object_pairs_hook=refuse_duplicates)


def _member_count(value: JSON) -> int:
    count, stack = 0, [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            count += len(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return count


MIN_INTEGER, MAX_INTEGER = -(2**63), 2**64 - 1


def _check_integer_range(data: bytes, field: str) -> None:
    """orjson reads integers outside 64 bits as floats, silently losing digits: find them exactly."""

    def integer(text: str) -> int:
        number = int(text)
        if not MIN_INTEGER <= number <= MAX_INTEGER:
            raise InvalidArgumentError(
                f"{field}: integer {text} is outside the 64-bit range [-2^63, 2^64-1]", field=field
            )
        return number

    json.loads(data, parse_int=integer)


def parse_object(text: str | bytes, field: str, limits: Limits, *, max_bytes: int | None = None) -> dict[str, JSON]:
    """Like parse, but the document must be a JSON object."""
    value = parse(text, field, limits, max_bytes=max_bytes)
    if not isinstance(value, dict):
        raise InvalidArgumentError(f"{field}: must be a JSON object, got {type_name(value)}", field=field)
    return value


def nesting_depth(value: JSON) -> int:
    """How deeply objects and arrays nest in value (a scalar has depth 0); iterative, so any input is safe."""
    deepest = 0
    stack: list[tuple[JSON, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        children: Iterable[JSON]
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children)
    return deepest


def type_name(value: JSON) -> str:
    """The JSON type of a decoded value, as JSON Schema names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    return "integer" if isinstance(value, int) else "number"


def sha256_hex(*parts: bytes) -> str:
    """Hex SHA-256 of parts, each length-prefixed so that no two sequences of parts collide."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()

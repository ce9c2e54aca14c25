"""Merge policies, declared per path in an execution's JSON Schema with the `x-merge` keyword.

A path's policy is the `x-merge` of the deepest schema node on the way to it that declares one; a path
with none is `reject`. The way down follows `properties`, then the first matching `patternProperties`
(patterns in sorted order), then `additionalProperties`, resolving local `$ref`s ("#/...") on the way.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator
from typing import Any

from .errors import InvalidArgumentError
from .mergepatch import Path

KEYWORD = "x-merge"


class MergePolicy(enum.Enum):
    """How a path written concurrently by a stale patch is resolved (see docs/merge.md)."""

    REJECT = "reject"
    LWW = "lww"
    COUNTER = "counter"
    MAX = "max"
    MIN = "min"
    SET = "set"
    APPEND = "append"
    TEXT = "text"


class PolicyMap:
    """Answers `policy_at(path)` for one schema."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self._root = schema
        self._patterns: dict[str, re.Pattern[str]] = {}
        for location, node in _walk(schema, ""):
            if KEYWORD in node:
                declared = node[KEYWORD]
                if declared not in _BY_NAME:
                    raise InvalidArgumentError(
                        f"schema_json: {location or '/'}: {KEYWORD} must be one of "
                        f"{', '.join(sorted(_BY_NAME))}, got {declared!r}"
                    )
            for pattern in node.get("patternProperties", {}) if isinstance(node.get("patternProperties"), dict) else ():
                try:
                    self._patterns[pattern] = re.compile(pattern)
                except re.error as e:
                    raise InvalidArgumentError(
                        f"schema_json: {location}/patternProperties: bad pattern {pattern!r}: {e}"
                    ) from e

    def policy_at(self, path: Path) -> MergePolicy:
        """The policy governing writes at path."""
        node: Any = self._resolve(self._root)
        policy = _declared(node, MergePolicy.REJECT)
        for key in path:
            node = self._child(node, key)
            if node is None:
                break
            policy = _declared(node, policy)
        return policy

    def _child(self, node: Any, key: str) -> Any:
        if not isinstance(node, dict):
            return None
        properties = node.get("properties")
        if isinstance(properties, dict) and key in properties:
            return self._resolve(properties[key])
        patterns = node.get("patternProperties")
        if isinstance(patterns, dict):
            for pattern in sorted(patterns):
                if self._patterns[pattern].search(key):
                    return self._resolve(patterns[pattern])
        additional = node.get("additionalProperties")
        return self._resolve(additional) if isinstance(additional, dict) else None

    def _resolve(self, node: Any, hops: int = 0) -> Any:
        """Follow a local `$ref` (bounded, so a cycle cannot hang the server)."""
        while (
            isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#") and hops < 32
        ):
            declared = node.get(KEYWORD)
            target: Any = self._root
            for part in node["$ref"][1:].split("/")[1:]:
                part = part.replace("~1", "/").replace("~0", "~")
                target = target.get(part) if isinstance(target, dict) else None
            node = {**target, KEYWORD: declared} if declared is not None and isinstance(target, dict) else target
            hops += 1
        return node


_BY_NAME = {policy.value: policy for policy in MergePolicy}


def _declared(node: Any, inherited: MergePolicy) -> MergePolicy:
    return _BY_NAME[node[KEYWORD]] if isinstance(node, dict) and KEYWORD in node else inherited


def _walk(node: Any, location: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema object in node with its JSON Pointer, for checking declarations once at creation."""
    if isinstance(node, dict):
        yield location, node
        for key, child in node.items():
            yield from _walk(child, f"{location}/{key}")
    elif isinstance(node, list):
        for index, child in enumerate(node):
            yield from _walk(child, f"{location}/{index}")

"""Walking an execution's JSON Schema along a state path, for the keywords declared per path (`x-merge`,
`x-owner`): the way down follows `properties`, then the first matching `patternProperties` (patterns in
sorted order), then `additionalProperties`, resolving local `$ref`s ("#/...") on the way."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..errors import InvalidArgumentError
from .mergepatch import Path

MAX_REF_HOPS = 32
"""A `$ref` chain longer than this ends the walk (a cycle cannot hang the server)."""


class SchemaTree:
    """One schema, walked along state paths; `keyword` is the per-path keyword a `$ref` site may override."""

    def __init__(self, schema: dict[str, Any], keyword: str) -> None:
        self.root, self._keyword = schema, keyword
        self._patterns: dict[str, re.Pattern[str]] = {}
        for location, node in walk(schema, ""):
            for pattern in node.get("patternProperties", {}) if isinstance(node.get("patternProperties"), dict) else ():
                try:
                    self._patterns[pattern] = re.compile(pattern)
                except re.error as e:
                    raise InvalidArgumentError(
                        f"schema_json: {location}/patternProperties: bad pattern {pattern!r}: {e}"
                    ) from e

    def nodes_along(self, path: Path) -> Iterator[Any]:
        """The schema node of the root, then of each key of path, as far as the schema describes it."""
        node: Any = self.resolve(self.root)
        yield node
        for key in path:
            node = self.child(node, key)
            if node is None:
                return
            yield node

    def child(self, node: Any, key: str) -> Any:
        if not isinstance(node, dict):
            return None
        properties = node.get("properties")
        if isinstance(properties, dict) and key in properties:
            return self.resolve(properties[key])
        patterns = node.get("patternProperties")
        if isinstance(patterns, dict):
            for pattern in sorted(patterns):
                if self._patterns[pattern].search(key):
                    return self.resolve(patterns[pattern])
        additional = node.get("additionalProperties")
        return self.resolve(additional) if isinstance(additional, dict) else None

    def children(self, node: Any) -> Iterator[Any]:
        """Every subschema a member of node could be validated against."""
        if not isinstance(node, dict):
            return
        for group in ("properties", "patternProperties"):
            members = node.get(group)
            if isinstance(members, dict):
                yield from (self.resolve(child) for child in members.values())
        if isinstance(node.get("additionalProperties"), dict):
            yield self.resolve(node["additionalProperties"])

    def resolve(self, node: Any, hops: int = 0) -> Any:
        """Follow local `$ref`s; the referring node's own keyword, if it declares one, is kept."""
        keyword = self._keyword
        while (
            isinstance(node, dict)
            and isinstance(node.get("$ref"), str)
            and node["$ref"].startswith("#")
            and hops < MAX_REF_HOPS
        ):
            declared = node.get(keyword)
            target: Any = self.root
            for part in node["$ref"][1:].split("/")[1:]:
                part = part.replace("~1", "/").replace("~0", "~")
                target = target.get(part) if isinstance(target, dict) else None
            node = {**target, keyword: declared} if declared is not None and isinstance(target, dict) else target
            hops += 1
        return node


def walk(node: Any, location: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema object in node with its JSON Pointer, for checking declarations once at creation."""
    if isinstance(node, dict):
        yield location, node
        for key, child in node.items():
            yield from walk(child, f"{location}/{key}")
    elif isinstance(node, list):
        for index, child in enumerate(node):
            yield from walk(child, f"{location}/{index}")

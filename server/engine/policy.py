"""Merge policies, declared per path in an execution's JSON Schema with the `x-merge` keyword.

A path's policy is the `x-merge` of the deepest schema node on the way to it that declares one (see
schematree.py for the way down); a path with none is `reject`.
"""

from __future__ import annotations

import enum
from typing import Any

from ..errors import InvalidArgumentError
from .mergepatch import Path
from .schematree import SchemaTree, walk

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
        for location, node in walk(schema, ""):
            if KEYWORD in node and (not isinstance(node[KEYWORD], str) or node[KEYWORD] not in _BY_NAME):
                raise InvalidArgumentError(
                    f"schema_json: {location or '/'}: {KEYWORD} must be one of "
                    f"{', '.join(sorted(_BY_NAME))}, got {node[KEYWORD]!r}"
                )
        self._tree = SchemaTree(schema, KEYWORD)

    def policy_at(self, path: Path) -> MergePolicy:
        """The policy governing writes at path."""
        policy = MergePolicy.REJECT
        for node in self._tree.nodes_along(path):
            if isinstance(node, dict) and KEYWORD in node:
                policy = _BY_NAME[node[KEYWORD]]
        return policy


_BY_NAME = {policy.value: policy for policy in MergePolicy}

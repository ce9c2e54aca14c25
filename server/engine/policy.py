"""Merge policies, declared per path in an execution's JSON Schema with the `x-merge` keyword.

A path's policy is the `x-merge` of the deepest schema node on the way to it that declares one (see
schematree.py for the way down); a path with none is `reject`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from ..errors import InvalidArgumentError
from .canonical import type_name
from .mergepatch import Path, pointer
from .schematree import SchemaTree, walk

KEYWORD = "x-merge"
MAX_REACH_CACHE = 4096
"""Top-level members remembered per schema by `PolicyMap.reaches` (members of additionalProperties are
unbounded)."""


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
        self._declared = {_BY_NAME[node[KEYWORD]] for _, node in walk(schema, "") if KEYWORD in node}
        self._typed = bool(self._declared & _NEEDS.keys())
        self._reaching: dict[tuple[MergePolicy, str], bool] = {}

    def reaches(self, policy: MergePolicy, key: str) -> bool:
        """Whether `policy` governs top-level member `key` or any path below it."""
        if policy not in self._declared:
            return False
        found = self._reaching.get((policy, key))
        if found is None:
            if len(self._reaching) >= MAX_REACH_CACHE:
                self._reaching.clear()
            found = self.policy_at((key,)) is policy or self._declared_below(
                self._tree.child(self._tree.resolve(self._tree.root), key), policy, set()
            )
            self._reaching[(policy, key)] = found
        return found

    def _declared_below(self, node: Any, policy: MergePolicy, seen: set[int]) -> bool:
        """Whether a schema node below `node` declares `policy` (each node visited once: refs may cycle)."""
        for child in self._tree.children(node):
            if not isinstance(child, dict) or id(child) in seen:
                continue
            seen.add(id(child))
            if child.get(KEYWORD) == policy.value or self._declared_below(child, policy, seen):
                return True
        return False

    def check_values(self, document: dict[str, Any], field: str) -> None:
        """Raise InvalidArgumentError naming the first value the document (a patch, or an initial state)
        writes where its path's policy cannot hold it: counter, max and min need numbers, set and append
        arrays, text strings. Whatever a patch's base, no re-read makes such a value mergeable."""
        if self._typed:
            self._check(self._tree.resolve(self._tree.root), document, (), MergePolicy.REJECT, field)

    def _check(self, node: Any, value: dict[str, Any], path: Path, inherited: MergePolicy, field: str) -> None:
        for key, member in value.items():
            if member is None:
                continue  # a deletion: any policy may merge or refuse it
            here = (*path, key)
            child = self._tree.child(node, key)
            policy = _BY_NAME[child[KEYWORD]] if isinstance(child, dict) and KEYWORD in child else inherited
            if isinstance(member, dict):  # a policy on an object governs its members
                if child is not None or policy in _NEEDS:
                    self._check(child, member, here, policy, field)
                continue
            needs = _NEEDS.get(policy)
            if needs is not None and not needs[1](member):
                written = type_name(member)
                raise InvalidArgumentError(
                    f"{field}: {pointer(here)}: {policy.value} needs {needs[0]}, got {written}", field=field
                )

    def policy_at(self, path: Path) -> MergePolicy:
        """The policy governing writes at path."""
        policy = MergePolicy.REJECT
        for node in self._tree.nodes_along(path):
            if isinstance(node, dict) and KEYWORD in node:
                policy = _BY_NAME[node[KEYWORD]]
        return policy


_BY_NAME = {policy.value: policy for policy in MergePolicy}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_NEEDS: dict[MergePolicy, tuple[str, Callable[[Any], bool]]] = {
    MergePolicy.COUNTER: ("numbers", _number),
    MergePolicy.MAX: ("numbers", _number),
    MergePolicy.MIN: ("numbers", _number),
    MergePolicy.SET: ("arrays", lambda value: isinstance(value, list)),
    MergePolicy.APPEND: ("arrays", lambda value: isinstance(value, list)),
    MergePolicy.TEXT: ("strings", lambda value: isinstance(value, str)),
}
"""The policies that hold one JSON type, and that type."""

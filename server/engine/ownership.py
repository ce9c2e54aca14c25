"""Per-path write ownership, declared in an execution's JSON Schema with the `x-owner` keyword.

`"x-owner": "receiving"` or `["receiving", "skill:warehouse-shipping"]` on a schema node: only those agents,
or agents running that skill, may write the paths it describes. A path's owners are those of the deepest
node on the way to it that declares some (see schematree.py for the way down); a path with none is anyone's.
Replacing or deleting a value also writes everything below it, so the owners declared below must agree too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..errors import InvalidArgumentError, PermissionDeniedError
from .mergepatch import Path, pointer
from .schematree import SchemaTree, walk

KEYWORD = "x-owner"
SKILL_PREFIX = "skill:"


class OwnerMap:
    """Checks a patch's writes against the owners one schema declares."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.declares_any = False
        for location, node in walk(schema, ""):
            if KEYWORD in node:
                _check_declaration(location, node[KEYWORD])
                self.declares_any = True
        self._tree = SchemaTree(schema, KEYWORD)
        self._below: dict[int, tuple[tuple[str, ...], ...]] = {}

    def check(self, patch: dict[str, Any], agent: str, skills: frozenset[str]) -> None:
        """Raise PermissionDeniedError naming the first path of the patch its writer does not own."""
        if not self.declares_any:
            return
        for path, value in _writes(patch, ()):
            nodes = list(self._tree.nodes_along(path))
            required = [owners for owners in (_declared(node) for node in nodes) if owners][-1:]
            if len(nodes) == len(path) + 1 and not (isinstance(value, dict) and value):
                required += self._owners_below(nodes[-1])
            for owners in required:
                if agent not in owners and not any(SKILL_PREFIX + skill in owners for skill in skills):
                    raise PermissionDeniedError(
                        f"{pointer(path) or '/'}: owned by {', '.join(owners)}; {agent!r} may not write it"
                    )

    def _owners_below(self, node: Any) -> tuple[tuple[str, ...], ...]:
        """Every owner list declared strictly below node (through `$ref`s, each node once)."""
        key = id(node)
        if key not in self._below:
            found: dict[tuple[str, ...], None] = {}
            seen, stack = {key}, list(self._tree.children(node))
            while stack:
                child = stack.pop()
                if id(child) in seen:
                    continue
                seen.add(id(child))
                if owners := _declared(child):
                    found[owners] = None
                stack.extend(self._tree.children(child))
            self._below[key] = tuple(found)
        return self._below[key]


def _declared(node: Any) -> tuple[str, ...]:
    if not isinstance(node, dict) or KEYWORD not in node:
        return ()
    owners = node[KEYWORD]
    return (owners,) if isinstance(owners, str) else tuple(owners)


def _writes(patch: dict[str, Any], prefix: Path) -> Iterator[tuple[Path, Any]]:
    """Each path a merge patch writes: objects are merged into, so a write is a non-object or an empty one."""
    for key, value in patch.items():
        path = (*prefix, key)
        if isinstance(value, dict) and value:
            yield from _writes(value, path)
        else:
            yield path, value


def _check_declaration(location: str, owners: Any) -> None:
    names = [owners] if isinstance(owners, str) else owners
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise InvalidArgumentError(
            f"schema_json: {location or '/'}: {KEYWORD} must be an agent name, 'skill:NAME', or a non-empty list "
            f"of them, got {owners!r}"
        )

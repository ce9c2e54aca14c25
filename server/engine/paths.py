"""What each path of an execution was written by: all a merge needs to know, found without replaying anything.

A node per path written since the index began (the execution's creation, or the snapshot it was loaded
from) keeps:
- `below`: the newest revision that wrote the path or one below it (or named it in its patch, having
  written a path above it), so whether a path was written since a base is one comparison;
- its versions: each revision that wrote exactly the path, with the value it replaced (etcd's revisions per
  key), so its value at a base is the value replaced by the first write after the base, found by bisection;
- `stamp`: the greatest stamp of a write that named the path (a value, a deletion, or an object merged into
  it), and `cover`: of one that replaced or deleted it, covering everything below (what `lww` decides by).
Children are kept in the order of their newest writes, so the ones written since a base are read from the
end without visiting the others. What a merge reads therefore follows the patch and the writes to its own
paths since its base, never the execution's history.

The nodes are kept by PathIndex (path_index.py); this module reads them.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .canonical import JSON
from .mergepatch import MISSING

Stamp = tuple[int, str]
"""(base_revision, agent_id): the order `lww` decides by; arrival order never enters it."""
LOWEST: Stamp = (-1, "")
"""Below every stamp a write can carry: the stamp of what no write since the index began named."""
KEPT: Any = object()
"""Replaced nothing: the write left the path as it was, or merged into the object there."""
NOT_TEXT: Any = object()
"""What a write put at a text path when it was neither a string nor a deletion (a text merge then uses head)."""


@dataclass(frozen=True, slots=True)
class TextWrite:
    """A write of a path under the `text` policy: what a three-way text merge needs of a concurrent writer."""

    before: Any
    """The value it replaced."""
    stamp: Stamp
    client_patch_id: str
    intent: Any
    """The writer's string at this path (its submitted patch's member): a str, None or MISSING, or NOT_TEXT."""


class PathNode:
    """One path's metadata. Changed only by its PathIndex, on the event loop."""

    __slots__ = ("below", "bundle", "children", "cover", "key", "parent", "replaced", "revisions", "stamp", "text")

    def __init__(self, key: str, parent: PathNode | None, text: bool = False) -> None:
        self.key = key
        self.parent = parent
        self.children: dict[str, PathNode] | None = None
        """By the newest write at or below each, oldest first."""
        self.below = 0
        self.stamp = self.cover = LOWEST
        self.revisions: array[int] | None = None
        """The revisions that wrote exactly this path, oldest first."""
        self.replaced: list[Any] | None = None
        """What each of them replaced (a TextWrite on a text path)."""
        self.bundle = -1
        """The bundle of revisions that last changed it (PathIndex.fold)."""
        self.text = text

    @property
    def written(self) -> int:
        """The newest revision that wrote exactly this path (0: none since the index began)."""
        return self.revisions[-1] if self.revisions else 0

    def child(self, key: str) -> PathNode | None:
        return self.children.get(key) if self.children else None

    def written_since(self, base: int) -> Iterator[PathNode]:
        """The children written (at or below) after revision `base`, newest first."""
        if self.children:
            for child in reversed(self.children.values()):
                if child.below <= base:
                    return
                yield child

    def writes_after(self, base: int, until: int | None = None) -> tuple[int, int]:
        """The slice of `revisions` (and `replaced`) after `base` and before `until`."""
        revisions = self.revisions
        if not revisions:
            return 0, 0
        end = len(revisions) if until is None else bisect.bisect_left(revisions, until)
        return bisect.bisect_right(revisions, base, hi=end), end

    def first_write_after(self, base: int, until: int | None = None) -> tuple[int, Any] | None:
        """(revision, the value it replaced) of the first write of exactly this path after `base` (and before
        `until`) that replaced it, or None. Writes that left the path as it was, or only merged into it (their
        members' own writes say what they changed), are passed over."""
        first, end = self.writes_after(base, until)
        assert first == end or (self.revisions is not None and self.replaced is not None)
        for index in range(first, end):
            replaced = self.replaced[index]  # type: ignore[index]
            before = replaced.before if self.text else replaced
            if before is not KEPT:
                return self.revisions[index], before  # type: ignore[index]
        return None


def value_at(node: PathNode | None, value: JSON, base: int, until: int | None = None) -> JSON:
    """The value of `node`'s path at revision `base`, given `value`, its value just before revision `until`
    (at head if None). Reverts only what was written at and below the path in between, which no write of a
    path above it may have replaced (a merge's conflict point never has been)."""
    if node is None or node.below <= base:
        return value
    first = node.first_write_after(base, until)
    if first is not None:  # what the base held, but for what was written below the path before that write
        until, value = first
    if isinstance(value, dict):
        changed = list(node.written_since(base))
        if changed:
            value = dict(value)
            for child in changed:
                member = value_at(child, value.get(child.key, MISSING), base, until)
                if member is MISSING:
                    value.pop(child.key, None)
                else:
                    value[child.key] = member
    return value


def object_at(node: PathNode | None, value: JSON, base: int) -> bool:
    """Whether the path held an object at `base`, given `value`, its value at head (as value_at assumes):
    writes below a path never change its type."""
    first = node.first_write_after(base) if node is not None else None
    return isinstance(value if first is None else first[1], dict)


def text_writes_since(node: PathNode, base: int) -> list[TextWrite] | None:
    """The writes of a text path since `base`, if every one of them wrote the string itself on that same base
    (then each is a diff from one original); None otherwise."""
    if not node.text or next(node.written_since(base), None) is not None:
        return None
    first, end = node.writes_after(base)
    writes: list[TextWrite] = node.replaced[first:end] if node.replaced is not None else []
    if any(write.stamp[0] != base or write.intent is NOT_TEXT for write in writes):
        return None
    return writes

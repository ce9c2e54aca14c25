"""`lww` decided from the stamps kept per path (paths.py), as CRDT maps decide: no write is replayed.

docs/merge.md defines an lww result as every write to the subtree applied in stamp order. In that fold a path
ends as the last write to reach it left it: one that names the path (a value, a deletion, or an object merged
into it), or one that replaced or deleted a path above it. The last is the one with the greatest stamp, so a
patch's write takes a path exactly when its stamp is at least the path's own `stamp` and the `cover` of every
path above it (equal stamps go to the later commit: the patch). Where a later write holds the path instead,
the patch's replacement or deletion still removes what it covers that is older than itself.

Cost: the patch, plus, where a replacement or deletion lost to a later write, the members of what it
replaces: the ones it removes (part of the change) and the ones later writes keep (written since its base).
"""

from __future__ import annotations

from typing import Any

from .canonical import JSON
from .mergepatch import MISSING, NO_CHANGE, NoChange, effective
from .paths import LOWEST, PathNode, Stamp


def lww_change(node: PathNode | None, head: Any, value: JSON, stamp: Stamp, covered: Stamp = LOWEST) -> JSON | NoChange:
    """The member patch that turns `head`, this path's value, into what the patch's `value` (written with
    `stamp`) makes of it in stamp order; `covered` is the greatest cover of the paths above."""
    held = max(node.stamp, covered) if node is not None else covered
    if held <= stamp:  # the patch's write is the last to reach this path, and all below it (stamps only grow up)
        return effective(head, value)
    if not isinstance(value, dict):  # a replacement or deletion a later write overtook here
        return _older_below(node, head, stamp)
    if not isinstance(head, dict) or node is None:  # a later write replaced or deleted the path: it holds
        return NO_CHANGE
    covered = max(covered, node.cover)
    changes = {}
    for key, member in value.items():
        change = lww_change(node.child(key), head.get(key, MISSING), member, stamp, covered)
        if change is not NO_CHANGE:
            changes[key] = change
    return changes or NO_CHANGE


def _older_below(node: PathNode | None, head: Any, stamp: Stamp) -> JSON | NoChange:
    """The deletions of what `head` holds below this path with stamps no greater than `stamp` (a member
    present holds its own greatest stamp)."""
    if not isinstance(head, dict) or node is None:
        return NO_CHANGE
    changes: dict[str, JSON] = {}
    for key, member in head.items():
        child = node.child(key)
        if child is None or child.stamp <= stamp:
            changes[key] = None
        elif isinstance(member, dict):
            change = _older_below(child, member, stamp)
            if change is not NO_CHANGE:
                changes[key] = change
    return changes or NO_CHANGE

"""The merge operator ⊕ for concurrent writers: a three-way merge of a stale patch into head.

A patch written against `base` meets head after other revisions committed. Paths it writes that nothing
wrote since base apply as they are. Where it overlaps a write since base (the same path, or one a prefix of
the other) the conflict point is the shorter of the two paths, and the policy declared for that point
decides (resolvers.py). What was written since the base, and what a point held at the base, are read from the
execution's path index (paths.py), along the patch's own paths only: cost follows the patch and the writes
to its paths since its base, never the size of the state or the length of its history. docs/merge.md
states the semantics and the properties the tests prove.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..errors import ConflictError, InvalidArgumentError
from . import canonical
from .canonical import JSON
from .mergepatch import MISSING, NO_CHANGE, NoChange, Path, apply, effective, json_equal, pointer, strip_nulls
from .paths import PathNode, Stamp, object_at, value_at
from .policy import MergePolicy, PolicyMap
from .resolvers import OPERATIONS, RESOLVERS, Point, TextMerger, _Unmergeable, _WrongType, same
from .textmerge import merge_text


@dataclass(frozen=True, slots=True)
class Resolution:
    """How one conflict point was resolved."""

    path: str
    policy: MergePolicy
    outcome: str
    """One of PATCH_WON, HEAD_KEPT, COMBINED, UNCHANGED."""


def encode_resolutions(resolutions: Sequence[Resolution]) -> str:
    """Resolutions as canonical JSON, for the revision log."""
    if not resolutions:  # most revisions: nothing was concurrent
        return "[]"
    return canonical.dumps_str([[r.path, r.policy.value, r.outcome] for r in resolutions])


def decode_resolutions(text: str) -> tuple[Resolution, ...]:
    return tuple(Resolution(path, MergePolicy(policy), outcome) for path, policy, outcome in orjson.loads(text))


@dataclass(frozen=True, slots=True)
class MergeResult:
    applied_patch: dict[str, JSON]
    resolutions: list[Resolution]


@dataclass(slots=True)
class _Merge:
    """One merge in progress: what the resolvers need to know, and what they decided."""

    policies: PolicyMap
    stamp: Stamp
    client_patch_id: str
    head_revision: int
    texts: TextMerger
    resolutions: list[Resolution] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def members(self, path: Path, patch: dict[str, JSON], head: dict[str, Any], node: PathNode) -> dict[str, JSON]:
        out: dict[str, JSON] = {}
        base = self.stamp[0]
        for key, value in patch.items():
            current = head.get(key, MISSING)
            child = node.child(key)
            if child is None or child.below <= base:  # nothing wrote at or below it since the base
                change: Any = effective(current, value)
            elif isinstance(value, dict) and value and child.written <= base and isinstance(current, dict):
                change = self.members((*path, key), value, current, child) or NO_CHANGE
            else:
                change = self.resolve((*path, key), current, value, child)
            if change is not NO_CHANGE:
                out[key] = change
        return out

    def resolve(self, path: Path, head: Any, value: JSON, node: PathNode) -> JSON | NoChange:
        """Decide one conflict point; returns the member patch to apply, NO_CHANGE, or records a conflict."""
        policy = self.policies.policy_at(path)
        if policy not in OPERATIONS and merges_to(node, head, value, self.stamp[0]):
            self.resolutions.append(Resolution(pointer(path), policy, "UNCHANGED"))
            return NO_CHANGE
        point = Point(path, node, head, value, self.stamp, self.client_patch_id, self.head_revision, self.texts)
        try:
            change, outcome = RESOLVERS[policy](point)
        except _Unmergeable as e:
            self.conflicts.append(pointer(path))
            if e.reason:
                self.reasons.append(f"{pointer(path)}: {e.reason}")
            return NO_CHANGE
        except _WrongType as e:
            raise InvalidArgumentError(f"patch_json: {pointer(path)}: {e}") from None
        self.resolutions.append(Resolution(pointer(path), policy, outcome))
        return change


def merges_to(node: PathNode | None, head: Any, value: JSON, base: int) -> bool:
    """Whether `value` merged into what the path held at `base` gives `head`: writing what head already holds
    is never a conflict. Compares along the patch and what was written since the base; only a path replaced
    since the base is compared whole."""
    if value is None:
        return head is MISSING
    if not isinstance(value, dict):
        return head is not MISSING and json_equal(head, value)
    if not isinstance(head, dict):
        return False
    if not object_at(node, head, base):
        return json_equal(head, strip_nulls(value))
    if node is None:  # unwritten since the index began: the base is head
        return effective(head, value) is NO_CHANGE
    if node.first_write_after(base) is not None:
        return json_equal(head, apply(value_at(node, head, base), value))
    for key, member in value.items():
        if not merges_to(node.child(key), head.get(key, MISSING), member, base):
            return False
    for child in node.written_since(base):  # what the patch leaves must be as the base had it
        if child.key not in value:
            current = head.get(child.key, MISSING)
            if not same(value_at(child, current, base), current):
                return False
    return True


def merge(
    *,
    head: dict[str, JSON],
    head_revision: int,
    paths: PathNode,
    patch: dict[str, JSON],
    stamp: Stamp,
    policies: PolicyMap,
    client_patch_id: str = "",
    texts: TextMerger = merge_text,
) -> MergeResult:
    """Merge `patch` (written against revision `stamp[0]`) into `head`, given the root of the execution's path
    index (which must reach back to that base).

    Raises ConflictError, changing nothing, when any conflict point's policy cannot merge it. `texts`
    merges concurrent edits of a string (the engine's keeps large ones off the event loop).
    """
    run = _Merge(policies, stamp, client_patch_id, head_revision, texts)
    applied = run.members((), patch, head, paths)
    if run.conflicts:
        raise ConflictError(run.conflicts, head_revision, run.reasons)
    return MergeResult(applied, run.resolutions)

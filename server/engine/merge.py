"""The merge operator ⊕ for concurrent writers: a three-way merge of a stale patch into head.

A patch written against `base` meets head after other revisions committed. Paths it writes that nothing
touched since base apply as they are. Where it overlaps a change (the same path, or one a prefix of the
other) the conflict point is the shorter of the two paths, and the policy declared for that point decides.
Cost follows the patch and the changes since its base, never the size of the state. docs/merge.md states
the semantics and the properties the tests prove.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..errors import ConflictError, InvalidArgumentError
from . import canonical
from .canonical import JSON
from .mergepatch import (
    MISSING,
    NO_CHANGE,
    Missing,
    Path,
    apply_value,
    effective,
    get_path,
    json_equal,
    member_patch,
    pointer,
)
from .policy import MergePolicy, PolicyMap
from .textmerge import TextEdit, merge_text

Stamp = tuple[int, str]
"""(base_revision, agent_id): the order `lww` decides by; arrival order never enters it."""


@dataclass(slots=True)
class Change:
    """What one committed revision did, as the merge needs to know it. Never changed (not frozen: one is made
    per patch)."""

    revision: int
    base_revision: int
    agent_id: str
    touched: Sequence[Path]
    submitted_patch: dict[str, JSON]
    client_patch_id: str = ""

    @property
    def stamp(self) -> Stamp:
        return (self.base_revision, self.agent_id)


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


class _Trie:
    """The paths written since the base, below one node; gathered only when a resolver reads them.

    A merge visits only the keys its patch writes, and a resolver that needs only base, head and patch
    (counter, max, min) never gathers them: its cost does not grow with the changes since the base.
    """

    __slots__ = ("_gathered", "_key", "_parent")

    def __init__(self, parent: _Trie, key: str) -> None:
        self._parent = parent
        self._key = key
        self._gathered: list[tuple[Path, Change]] | None = None

    def _entries(self) -> list[tuple[Path, Change]]:
        """(path below this node, change that wrote it)"""
        if self._gathered is None:
            key = self._key
            self._gathered = [(path[1:], change) for path, change in self._parent._entries() if path and path[0] == key]
        return self._gathered

    def _written(self, key: str) -> bool:
        return any(path and path[0] == key for path, _ in self._entries())

    @property
    def leaf(self) -> bool:
        """True when a change replaced or deleted this path as a whole."""
        return any(not path for path, _ in self._entries())

    @property
    def changes(self) -> list[Change]:
        """Every change that wrote this path or a path below it, in commit order, once each."""
        return list({id(change): change for _, change in self._entries()}.values())

    def child(self, key: str) -> _Trie | None:
        """The node of member `key`, or None if no change wrote it or below it."""
        return _Trie(self, key) if self._written(key) else None

    def at(self, path: Path) -> _Trie | None:
        """The node of `path`, or None if no change wrote it or below it."""
        node: _Trie | None = self
        for key in path:
            node = node.child(key) if node is not None else None
        return node

    @staticmethod
    def empty() -> _Trie:
        return _RootTrie(())


class _RootTrie(_Trie):
    """The root: whether a member was written is read straight from the changes, stopping at the first."""

    __slots__ = ("_changes",)

    def __init__(self, changes: Sequence[Change]) -> None:
        self._changes = changes

    def _entries(self) -> list[tuple[Path, Change]]:
        return [(path, change) for change in self._changes for path in change.touched]

    def _written(self, key: str) -> bool:
        return any(path[0] == key for change in self._changes for path in change.touched)

    @property
    def leaf(self) -> bool:
        return False  # a merge patch is an object: no change replaces the root

    @property
    def changes(self) -> list[Change]:
        return list(self._changes)


TextMerger = Callable[[str, Sequence[TextEdit]], str]
"""Merges concurrent edits of one string: merge_text, or the engine's TextMerges."""


@dataclass(slots=True)
class _Merge:
    """One merge in progress: what the resolvers need to know, and what they decided."""

    policies: PolicyMap
    patch: dict[str, JSON]
    stamp: Stamp
    client_patch_id: str
    head_revision: int
    texts: TextMerger
    lww_base: dict[str, JSON] | None
    """The state at the earliest base an lww merge must start from (see merge), or None: the patch's."""
    lww_changes: _Trie | None
    resolutions: list[Resolution] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def members(self, path: Path, patch: dict[str, JSON], base: Any, head: Any, trie: _Trie) -> dict[str, JSON]:
        out: dict[str, JSON] = {}
        base_members = base if isinstance(base, dict) else {}
        for key, value in patch.items():
            here = (*path, key)
            current = head.get(key, MISSING)
            node = trie.child(key)
            if node is None:
                change: Any = effective(current, value)
            elif isinstance(value, dict) and value and not node.leaf and isinstance(current, dict):
                change = self.members(here, value, base_members.get(key), current, node) or NO_CHANGE
            else:
                previous = base_members.get(key, MISSING)
                change = self.resolve(here, previous, current, apply_value(previous, value), node)
            if change is not NO_CHANGE:
                out[key] = change
        return out

    def resolve(self, path: Path, base: Any, head: Any, intended: Any, node: _Trie) -> Any:
        """Decide one conflict point; returns the member patch to apply, NO_CHANGE, or records a conflict."""
        policy = self.policies.policy_at(path)
        if policy not in _OPERATIONS and _same(head, intended):
            self.resolutions.append(Resolution(pointer(path), policy, "UNCHANGED"))
            return NO_CHANGE
        try:
            merged, outcome = _RESOLVERS[policy](self, path, base, head, intended, node)
        except _Unmergeable as e:
            self.conflicts.append(pointer(path))
            if e.reason:
                self.reasons.append(f"{pointer(path)}: {e.reason}")
            return NO_CHANGE
        except _WrongType as e:
            raise InvalidArgumentError(f"patch_json: {pointer(path)}: {e}") from None
        self.resolutions.append(Resolution(pointer(path), policy, outcome))
        return NO_CHANGE if _same(head, merged) else member_patch(head, merged)


class _Unmergeable(Exception):
    def __init__(self, reason: str = "") -> None:
        self.reason = reason


class _WrongType(Exception):
    """The patch's own value is of a type its path's policy cannot hold: no re-read makes it mergeable."""


PATCH = "the patch's value"


def _wrong_type(policy: str, needs: str, role: str, value: Any) -> Exception:
    reason = f"{policy} needs {needs}, {role} is {_kind(value)}"
    return _WrongType(reason) if role == PATCH and value is not MISSING else _Unmergeable(reason)


def _same(a: Any, b: Any) -> bool:
    return a is b or (a is not MISSING and b is not MISSING and json_equal(a, b))


def _reject(m: _Merge, path: Path, base: Any, head: Any, intended: Any, node: _Trie) -> tuple[Any, str]:
    raise _Unmergeable()


def _lww(m: _Merge, path: Path, base: Any, head: Any, intended: Any, node: _Trie) -> tuple[Any, str]:
    """Every write to this subtree since the base, and the patch's, applied to the base in stamp order.

    That is what "the greatest stamp wins" means for nested writes too, and it cannot depend on arrival.
    """
    if m.lww_changes is not None and m.lww_base is not None:  # start where no later write has an earlier stamp
        base, node = get_path(m.lww_base, path), m.lww_changes.at(path) or _Trie.empty()
    later = float("inf")  # the patch commits after every change so far: an equal stamp ties to the later commit
    writes = sorted(
        [(change.stamp, change.revision, change.submitted_patch) for change in node.changes]
        + [(m.stamp, later, m.patch)],
        key=lambda write: (write[0], write[1]),
    )
    value = base
    for _, _, patch in writes:
        written = get_path(patch, path)
        if written is not MISSING:
            value = apply_value(value, written)
    if _same(value, head):
        return head, "HEAD_KEPT"
    return value, ("PATCH_WON" if writes[-1][2] is m.patch else "COMBINED")


def _number(value: Any, policy: str, role: str, *, missing: Any = MISSING) -> Any:
    if value is MISSING and missing is not MISSING:
        return missing
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _wrong_type(policy, "numbers", role, value)
    return value


def _counter(m: _Merge, path: Path, base: Any, head: Any, intended: Any, node: _Trie) -> tuple[Any, str]:
    delta = _number(intended, "counter", PATCH) - _number(base, "counter", "base", missing=0)
    total = _number(head, "counter", "head", missing=0) + delta
    if isinstance(total, int) and not canonical.MIN_INTEGER <= total <= canonical.MAX_INTEGER:
        raise _Unmergeable(f"counter result {total} is outside the 64-bit integer range")
    return total, "COMBINED"


def _extreme(pick: Any, name: str) -> Any:
    """max or min; numbers equal in value but not in form (1 and 1.0) are ordered by canonical text."""

    def resolve(m: _Merge, path: Path, base: Any, head: Any, intended: Any, node: _Trie) -> tuple[Any, str]:
        if intended is MISSING:
            raise _Unmergeable(f"{name} cannot merge a deletion")
        mine = _number(intended, name, PATCH)
        if head is MISSING:
            return mine, "PATCH_WON"
        theirs = _number(head, name, "head")
        winner = pick((theirs, canonical.dumps(theirs)), (mine, canonical.dumps(mine)))[0]
        return winner, ("PATCH_WON" if winner is mine else "HEAD_KEPT")

    return resolve


def _array(value: Any, policy: str, role: str) -> list[Any]:
    if value is MISSING:
        return []
    if not isinstance(value, list):
        raise _wrong_type(policy, "arrays", role, value)
    return value


def _set(m: _Merge, path: Path, base: Any, head: Any, intended: Any, node: _Trie) -> tuple[Any, str]:
    def keyed(items: list[Any]) -> dict[bytes, Any]:
        return {canonical.dumps(item): item for item in items}

    before = keyed(_array(base, "set", "base"))
    after = keyed(_array(intended, "set", PATCH))
    result = keyed(_array(head, "set", "head"))
    result.update((k, v) for k, v in after.items() if k not in before)
    for k in before.keys() - after.keys():
        result.pop(k, None)
    return [result[k] for k in sorted(result)], "COMBINED"


def _append(m: _Merge, path: Path, base: Any, head: Any, intended: Any, node: _Trie) -> tuple[Any, str]:
    log = _array(base, "append", "base")
    mine = _array(intended, "append", PATCH)
    theirs = _array(head, "append", "head")
    if not _extends(mine, log):
        raise _Unmergeable("append needs the patch's array to extend the log at its base")
    if not _extends(theirs, log):
        raise _Unmergeable("append cannot merge into a log that was rewritten since the base")
    return theirs + mine[len(log) :], "COMBINED"


def _extends(longer: list[Any], prefix: list[Any]) -> bool:
    return len(longer) >= len(prefix) and all(json_equal(a, b) for a, b in zip(longer, prefix, strict=False))


def _text(m: _Merge, path: Path, base: Any, head: Any, intended: Any, node: _Trie) -> tuple[Any, str]:
    for value, role in ((intended, PATCH), (base, "base"), (head, "head")):
        if value is not MISSING and not isinstance(value, str):
            raise _wrong_type("text", "strings", role, value)
    original = "" if base is MISSING else base
    mine = TextEdit(m.stamp, m.client_patch_id, "" if intended is MISSING else intended)
    concurrent = _concurrent_text_edits(m, path, node, original)
    if concurrent is None:
        theirs = [TextEdit((m.head_revision, ""), "", "" if head is MISSING else head)]
    else:
        theirs = concurrent
    return m.texts(original, [*theirs, mine]), "COMBINED"


def _concurrent_text_edits(m: _Merge, path: Path, node: _Trie, original: str) -> list[TextEdit] | None:
    """The intents of the revisions that wrote this string since the base, when all share the base.

    Merging intents (each a diff from the same base) rather than head makes the result independent of
    the order in which the patches arrived. When any writer had another base, None: merge with head.
    """
    edits = []
    for change in node.changes:
        if change.base_revision != m.stamp[0] or path not in change.touched:
            return None
        written = get_path(change.submitted_patch, path)
        if written is not MISSING and written is not None and not isinstance(written, str):
            return None
        edits.append(TextEdit(change.stamp, change.client_patch_id, written if isinstance(written, str) else ""))
    return edits


def _kind(value: Any) -> str:
    return "absent" if isinstance(value, Missing) else canonical.type_name(value)


_OPERATIONS = frozenset({MergePolicy.COUNTER, MergePolicy.APPEND, MergePolicy.TEXT})
"""Policies whose result folds every concurrent write (deltas, appended entries, edits), so a patch equal
to head still counts: skipping it would make the result depend on arrival order."""

_RESOLVERS = {
    MergePolicy.REJECT: _reject,
    MergePolicy.LWW: _lww,
    MergePolicy.COUNTER: _counter,
    MergePolicy.MAX: _extreme(max, "max"),
    MergePolicy.MIN: _extreme(min, "min"),
    MergePolicy.SET: _set,
    MergePolicy.APPEND: _append,
    MergePolicy.TEXT: _text,
}


def merge(
    *,
    base: dict[str, JSON],
    head: dict[str, JSON],
    head_revision: int,
    changes: Sequence[Change],
    patch: dict[str, JSON],
    stamp: Stamp,
    policies: PolicyMap,
    client_patch_id: str = "",
    texts: TextMerger = merge_text,
    lww_history: tuple[dict[str, JSON], Sequence[Change]] | None = None,
) -> MergeResult:
    """Merge `patch` (written against `base`) into `head`, given the changes committed since the base.

    Raises ConflictError, changing nothing, when any conflict point's policy cannot merge it. `texts`
    merges concurrent edits of a string (the engine's keeps large ones off the event loop).

    `lww_history` is the state at an earlier revision B* and every change since it, when some change since
    the patch's base was itself merged on a base before it: lww replays writes in stamp order, and a write
    already in the patch's base may carry a greater stamp than one committed after that base, so the replay
    must start where every later write has a later stamp (every write at or before B* has a base below B*,
    every write after it a base at or after B*). Other policies merge from the patch's own base.
    """
    lww_base, lww_changes = (lww_history[0], _RootTrie(lww_history[1])) if lww_history else (None, None)
    run = _Merge(policies, patch, stamp, client_patch_id, head_revision, texts, lww_base, lww_changes)
    applied = run.members((), patch, base, head, _RootTrie(changes))
    if run.conflicts:
        raise ConflictError(run.conflicts, head_revision, run.reasons)
    return MergeResult(applied, run.resolutions)

"""What each policy makes of a conflict point: the policy table of docs/merge.md, one function a policy.

A resolver sees the point's value at head, the patch's member there, and (read from the path index only when
it asks) the value at the patch's base. It returns the member patch to apply (or NO_CHANGE) and its outcome,
or raises: _Unmergeable (the patch is refused, ABORTED) or _WrongType (the patch's own value is of a type the
policy cannot hold: INVALID_ARGUMENT).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import canonical
from .canonical import JSON
from .lww import lww_change
from .mergepatch import MISSING, NO_CHANGE, Missing, NoChange, Path, apply_value, json_equal, member_patch
from .paths import PathNode, Stamp, text_writes_since, value_at
from .policy import MergePolicy
from .textmerge import TextEdit

TextMerger = Callable[[str, Sequence[TextEdit]], str]
"""Merges concurrent edits of one string: merge_text, or the engine's TextMerges."""
_UNREAD: Any = object()


@dataclass(slots=True)
class Point:
    """A conflict point: where the patch and a write since its base overlap."""

    path: Path
    node: PathNode
    """The path's index node: something wrote at or below it since the base."""
    head: Any
    """The value at head (MISSING: none)."""
    value: JSON
    """The patch's member here."""
    stamp: Stamp
    """The patch's (base_revision, agent_id)."""
    client_patch_id: str
    head_revision: int
    texts: TextMerger
    _base: Any = field(default=_UNREAD)

    @property
    def base(self) -> Any:
        """The value at the patch's base (MISSING: none)."""
        if self._base is _UNREAD:
            self._base = value_at(self.node, self.head, self.stamp[0])
        return self._base

    @property
    def intended(self) -> Any:
        """The base value with the patch's member applied (MISSING: deleted)."""
        if isinstance(self.value, dict):
            return apply_value(self.base, self.value)
        return MISSING if self.value is None else self.value


class _Unmergeable(Exception):
    def __init__(self, reason: str = "") -> None:
        self.reason = reason


class _WrongType(Exception):
    """The patch's own value is of a type its path's policy cannot hold: no re-read makes it mergeable."""


PATCH = "the patch's value"
Resolver = Callable[[Point], tuple[JSON | NoChange, str]]


def _wrong_type(policy: str, needs: str, role: str, value: Any) -> Exception:
    reason = f"{policy} needs {needs}, {role} is {_kind(value)}"
    return _WrongType(reason) if role == PATCH and value is not MISSING else _Unmergeable(reason)


def same(a: Any, b: Any) -> bool:
    return a is b or (a is not MISSING and b is not MISSING and json_equal(a, b))


def _valued(resolve: Callable[[Point], tuple[Any, str]]) -> Resolver:
    """A resolver that decides the point's new value, as a change to head."""

    def change(point: Point) -> tuple[JSON | NoChange, str]:
        merged, outcome = resolve(point)
        return (NO_CHANGE if same(point.head, merged) else member_patch(point.head, merged)), outcome

    return change


def _reject(point: Point) -> tuple[JSON | NoChange, str]:
    raise _Unmergeable()


def _lww(point: Point) -> tuple[JSON | NoChange, str]:
    """The patch's writes take what their stamp is the greatest for (lww.py): whatever the writers' bases."""
    change = lww_change(point.node, point.head, point.value, point.stamp)
    if change is NO_CHANGE:
        return NO_CHANGE, "HEAD_KEPT"
    return change, ("PATCH_WON" if point.node.stamp <= point.stamp else "COMBINED")


def _number(value: Any, policy: str, role: str, *, missing: Any = MISSING) -> Any:
    if value is MISSING and missing is not MISSING:
        return missing
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _wrong_type(policy, "numbers", role, value)
    return value


@_valued
def _counter(point: Point) -> tuple[Any, str]:
    delta = _number(point.intended, "counter", PATCH) - _number(point.base, "counter", "base", missing=0)
    total = _number(point.head, "counter", "head", missing=0) + delta
    if isinstance(total, int) and not canonical.MIN_INTEGER <= total <= canonical.MAX_INTEGER:
        raise _Unmergeable(f"counter result {total} is outside the 64-bit integer range")
    return total, "COMBINED"


def _extreme(pick: Any, name: str) -> Resolver:
    """max or min; numbers equal in value but not in form (1 and 1.0) are ordered by canonical text."""

    @_valued
    def resolve(point: Point) -> tuple[Any, str]:
        intended = point.intended
        if intended is MISSING:
            raise _Unmergeable(f"{name} cannot merge a deletion")
        mine = _number(intended, name, PATCH)
        if point.head is MISSING:
            return mine, "PATCH_WON"
        theirs = _number(point.head, name, "head")
        winner = pick((theirs, canonical.dumps(theirs)), (mine, canonical.dumps(mine)))[0]
        return winner, ("PATCH_WON" if winner is mine else "HEAD_KEPT")

    return resolve


def _array(value: Any, policy: str, role: str) -> list[Any]:
    if value is MISSING:
        return []
    if not isinstance(value, list):
        raise _wrong_type(policy, "arrays", role, value)
    return value


@_valued
def _set(point: Point) -> tuple[Any, str]:
    def keyed(items: list[Any]) -> dict[bytes, Any]:
        return {canonical.dumps(item): item for item in items}

    before = keyed(_array(point.base, "set", "base"))
    after = keyed(_array(point.intended, "set", PATCH))
    result = keyed(_array(point.head, "set", "head"))
    result.update((k, v) for k, v in after.items() if k not in before)
    for k in before.keys() - after.keys():
        result.pop(k, None)
    return [result[k] for k in sorted(result)], "COMBINED"


@_valued
def _append(point: Point) -> tuple[Any, str]:
    log = _array(point.base, "append", "base")
    mine = _array(point.intended, "append", PATCH)
    theirs = _array(point.head, "append", "head")
    if not _extends(mine, log):
        raise _Unmergeable("append needs the patch's array to extend the log at its base")
    if not _extends(theirs, log):
        raise _Unmergeable("append cannot merge into a log that was rewritten since the base")
    return theirs + mine[len(log) :], "COMBINED"


def _extends(longer: list[Any], prefix: list[Any]) -> bool:
    return len(longer) >= len(prefix) and all(json_equal(a, b) for a, b in zip(longer, prefix, strict=False))


@_valued
def _text(point: Point) -> tuple[Any, str]:
    """A three-way merge with the writes of the string since the base, when all were made on that base: their
    intents then merge whatever order they arrived in. Otherwise a three-way merge with head."""
    intended, base, head = point.intended, point.base, point.head
    for value, role in ((intended, PATCH), (base, "base"), (head, "head")):
        if value is not MISSING and not isinstance(value, str):
            raise _wrong_type("text", "strings", role, value)
    original = "" if base is MISSING else base
    mine = TextEdit(point.stamp, point.client_patch_id, "" if intended is MISSING else intended)
    writes = text_writes_since(point.node, point.stamp[0])
    if writes is None:
        theirs = [TextEdit((point.head_revision, ""), "", "" if head is MISSING else head)]
    else:
        theirs = [TextEdit(w.stamp, w.client_patch_id, w.intent if isinstance(w.intent, str) else "") for w in writes]
    return point.texts(original, [*theirs, mine]), "COMBINED"


def _kind(value: Any) -> str:
    return "absent" if isinstance(value, Missing) else canonical.type_name(value)


OPERATIONS = frozenset({MergePolicy.COUNTER, MergePolicy.APPEND, MergePolicy.TEXT})
"""Policies whose result folds every concurrent write (deltas, appended entries, edits), so a patch equal
to head still counts: skipping it would make the result depend on arrival order."""

RESOLVERS: dict[MergePolicy, Resolver] = {
    MergePolicy.REJECT: _reject,
    MergePolicy.LWW: _lww,
    MergePolicy.COUNTER: _counter,
    MergePolicy.MAX: _extreme(max, "max"),
    MergePolicy.MIN: _extreme(min, "min"),
    MergePolicy.SET: _set,
    MergePolicy.APPEND: _append,
    MergePolicy.TEXT: _text,
}

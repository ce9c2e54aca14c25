"""What docs/merge.md says the state must be after each patch: a reference written from the specification alone.

It imports nothing of the server (compare tests/robustness/model.py), so a policy that the server gets wrong
cannot be wrong here in the same way. `ReferenceExecution` follows the page step by step: written paths,
conflict points, the policy table, refusal of the whole patch. It does not model another policy declared
inside an lww subtree (the page says what merged values below an lww point hold), nor `text` (a CRDT): for that,
`text_insertion_violations` and `text_three_way_violations` check what the page promises of a three-way merge
of concurrent edits. The closed forms below (`lww_fold`, `extreme`, `set_items`) state the table's promises for
a whole set of concurrent writes, independently of the step-by-step rules.
Numbers are compared and ordered by their JSON text as Python's `json` writes it, which is the server's
canonical text for the integers, short decimals and strings the tests draw.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Path = tuple[str, ...]


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()
"""No member (JSON null in a patch means this)."""

OPERATIONS = frozenset({"counter", "append", "text"})
"""Policies whose patch is an operation merged even when its value equals head."""


def canonical(value: Any) -> bytes:
    """Sorted keys, compact, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def same(a: Any, b: Any) -> bool:
    """Equal by JSON text: `true` is not `1`, `1` is not `1.0`, `0.0` is not `-0.0`; absent equals only absent."""
    if a is ABSENT or b is ABSENT:
        return a is b
    return canonical(a) == canonical(b)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396, section 2."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def applied(current: Any, patch_value: Any) -> Any:
    """A member's value after a patch's member `patch_value` is merged into it (ABSENT when deleted)."""
    if patch_value is None:
        return ABSENT
    return merge_patch(None if current is ABSENT else current, patch_value)


def at(value: Any, path: Path) -> Any:
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return ABSENT
        value = value[key]
    return value


def put(state: dict[str, Any], path: Path, value: Any) -> dict[str, Any]:
    """A copy of state with the member at path set (or removed, for ABSENT); its parents must be objects."""
    out = dict(state)
    if len(path) == 1:
        if value is ABSENT:
            out.pop(path[0], None)
        else:
            out[path[0]] = value
        return out
    parent = out.get(path[0])
    assert isinstance(parent, dict), f"no object at {path[:1]} to write {path} into"
    out[path[0]] = put(parent, path[1:], value)
    return out


def written(state: Any, patch: dict[str, Any], prefix: Path = ()) -> list[Path]:
    """The paths a patch writes in state: where it holds a non-object, or an object where the state held none;
    an empty object is a write of its own path."""
    paths: list[Path] = []
    members = state if isinstance(state, dict) else {}
    for key, value in patch.items():
        path = (*prefix, key)
        if isinstance(value, dict) and value and isinstance(members.get(key), dict):
            paths.extend(written(members[key], value, path))
        else:
            paths.append(path)
    return paths


def diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The minimal merge patch from old to new (neither holds null members)."""
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        if key in old and same(old[key], value):
            continue
        patch[key] = diff(old[key], value) if isinstance(value, dict) and isinstance(old.get(key), dict) else value
    return patch


def pointer(path: Path) -> str:
    return "".join("/" + key.replace("~", "~0").replace("/", "~1") for key in path)


def prefix_of(a: Path, b: Path) -> bool:
    return b[: len(a)] == a


def policy_at(schema: Any, path: Path) -> str:
    """The `x-merge` of the deepest schema node on the way to path that declares one; `reject` if none.

    The way down follows `properties`, then the first matching `patternProperties` (sorted), then
    `additionalProperties`; the schemas the tests draw hold no `$ref`.
    """
    node = schema
    policy = node.get("x-merge", "reject") if isinstance(node, dict) else "reject"
    for key in path:
        node = _child(node, key)
        if node is None:
            break
        policy = node.get("x-merge", policy)
    return policy


def _child(node: Any, key: str) -> Any:
    if not isinstance(node, dict):
        return None
    assert "$ref" not in node, "the reference does not follow $ref"
    if key in node.get("properties", {}):
        return node["properties"][key]
    for pattern in sorted(node.get("patternProperties", {})):
        if re.search(pattern, key):
            return node["patternProperties"][pattern]
    extra = node.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


TYPES = {"counter": "number", "max": "number", "min": "number", "set": "array", "append": "array", "text": "string"}


def holds(policy: str, value: Any) -> bool:
    """Whether a policy can merge a patch's value of this type (`counter`, `max` and `min` need numbers, `set`
    and `append` arrays, `text` strings); a deletion is no type error."""
    kind = TYPES.get(policy)
    if value is ABSENT or kind is None:
        return True
    return _is_number(value) if kind == "number" else isinstance(value, list if kind == "array" else str)


class NotModelled(Exception):
    """The reference cannot say the result exactly (a `text` merge): check the text_*_violations instead."""


class _Conflict(Exception):
    pass


class _WrongType(Exception):
    """The patch's own value at the conflict point is a type the policy cannot hold."""


@dataclass(frozen=True)
class Revision:
    number: int
    base: int
    agent: str
    patch: dict[str, Any]
    written: frozenset[Path]
    state: dict[str, Any]

    @property
    def stamp(self) -> tuple[int, str]:
        return (self.base, self.agent)


@dataclass(frozen=True)
class Verdict:
    """What must happen to one submitted patch."""

    accepted: bool
    conflicts: tuple[str, ...] = ()
    """Conflict points no policy could merge (JSON Pointers, sorted)."""
    wrong_types: tuple[str, ...] = ()
    """Paths where the patch's own value has a type the policy cannot merge (INVALID_ARGUMENT)."""
    stale: bool = False
    """Revisions committed since the patch's base."""
    merged: tuple[str, ...] = ()
    """Conflict points a policy merged (including ones where the patch equalled head)."""


@dataclass
class ReferenceExecution:
    """One execution: the state after every revision, and what each revision wrote."""

    schema: Mapping[str, Any]
    initial: dict[str, Any]
    revisions: list[Revision] = field(default_factory=list)

    def __post_init__(self) -> None:
        start = merge_patch({}, self.initial)  # null means absent: the initial state is applied to {}
        self.revisions = [Revision(0, 0, "", {}, frozenset(), start)]

    @property
    def head(self) -> Revision:
        return self.revisions[-1]

    @property
    def state(self) -> dict[str, Any]:
        return self.head.state

    def submit(self, agent: str, base: int, patch: dict[str, Any]) -> Verdict:
        """Commit the patch, or refuse it whole (the state then stays as it was)."""
        assert 0 <= base <= self.head.number
        base_state, head_state = self.revisions[base].state, self.head.state
        since = self.revisions[base + 1 :]
        points: list[Path] = []
        free: list[Path] = []
        wrong_types = [  # the patch's own mistake, whatever its base: no re-read makes it mergeable
            pointer(path)
            for path in written(base_state, patch)
            if at(patch, path) is not None and not holds(policy_at(self.schema, path), applied(ABSENT, at(patch, path)))
        ]
        if wrong_types:
            return Verdict(False, (), tuple(sorted(wrong_types)), bool(since))
        for path in written(base_state, patch):
            overlapping = [q for change in since for q in change.written if prefix_of(q, path) or prefix_of(path, q)]
            if not overlapping:
                free.append(path)
                continue
            point = min([q for q in overlapping if len(q) < len(path)] + [path], key=len)  # the shorter path
            if point not in points:
                points.append(point)
        new = head_state
        for path in free:  # nothing wrote these since the base: they apply as they are
            new = put(new, path, applied(at(new, path), at(patch, path)))
        conflicts, merged = [], []
        for point in points:
            base_value, head_value = at(base_state, point), at(head_state, point)
            mine = applied(base_value, at(patch, point))
            policy = policy_at(self.schema, point)
            merged.append(pointer(point))
            if policy not in OPERATIONS and same(head_value, mine):
                continue  # writing what head holds is never a conflict, and changes nothing
            try:
                value = _RESOLVE[policy](self, point, base_value, head_value, mine, since, (base, agent), patch)
            except _Conflict:
                conflicts.append(pointer(point))
                continue
            except _WrongType:
                if pointer(point) not in wrong_types:
                    wrong_types.append(pointer(point))
                continue
            new = put(new, point, value)
        stale = bool(since)
        if conflicts or wrong_types:
            return Verdict(False, tuple(sorted(conflicts)), tuple(sorted(wrong_types)), stale)
        effective = diff(head_state, new)
        wrote = frozenset(written(head_state, effective)) | frozenset(written(head_state, patch))
        self.revisions.append(Revision(self.head.number + 1, base, agent, patch, wrote, new))
        return Verdict(True, stale=stale, merged=tuple(sorted(merged)))


Since = Sequence[Revision]


def _reject(*_: Any) -> Any:
    raise _Conflict


def _lww(
    ex: ReferenceExecution, point: Path, base: Any, head: Any, mine: Any, since: Since, stamp: Any, patch: Any
) -> Any:
    """The greatest stamp wins, also for nested writes and whatever the bases: every patch the execution
    committed, and this one, applied to the initial state in stamp order (equal stamps go to the later commit:
    the patch commits last); the point's value in the result. A write that lost to a greater stamp is never
    applied over it again, not even when a write above the point replaced the subtree in between."""
    writes = [(r.stamp, r.number, r.patch) for r in ex.revisions[1:]]
    writes.append((stamp, math.inf, patch))
    state = ex.revisions[0].state
    for _, _, submitted in sorted(writes, key=lambda w: (w[0], w[1])):
        state = merge_patch(state, submitted)
    return at(state, point)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number(value: Any, mine: bool, *, absent: Any = None) -> Any:
    if value is ABSENT and absent is not None:
        return absent
    if not _is_number(value):
        raise _WrongType if mine and value is not ABSENT else _Conflict
    return value


def _counter(ex: Any, point: Path, base: Any, head: Any, mine: Any, *_: Any) -> Any:
    """head + (mine - base); absent counts as 0; a deletion or a non-number is a conflict; so is a result
    outside the 64-bit integer range."""
    delta = _number(mine, True) - _number(base, False, absent=0)
    total = _number(head, False, absent=0) + delta
    if isinstance(total, int) and not -(2**63) <= total <= 2**64 - 1:
        raise _Conflict
    return total


def _extreme(pick: Any) -> Any:
    def resolve(ex: Any, point: Path, base: Any, head: Any, mine: Any, *_: Any) -> Any:
        """The greater (lesser) of head and mine, equal numbers ordered by their JSON text; a deletion is a
        conflict."""
        mine = _number(mine, True)
        if head is ABSENT:
            return mine
        head = _number(head, False)
        return pick((head, canonical(head)), (mine, canonical(mine)))[0]

    return resolve


def _array(value: Any, mine: bool) -> list[Any]:
    if value is ABSENT:
        return []
    if not isinstance(value, list):
        raise _WrongType if mine else _Conflict
    return value


def _set(ex: Any, point: Path, base: Any, head: Any, mine: Any, *_: Any) -> Any:
    """head | (mine - base) - (base - mine), items compared by canonical JSON and sorted by it; an absent
    array is the empty set."""

    def items(values: list[Any]) -> dict[bytes, Any]:
        return {canonical(v): v for v in values}

    after, before, result = items(_array(mine, True)), items(_array(base, False)), items(_array(head, False))
    result.update({k: v for k, v in after.items() if k not in before})
    for k in before.keys() - after.keys():
        result.pop(k, None)
    return [result[k] for k in sorted(result)]


def _append(ex: Any, point: Path, base: Any, head: Any, mine: Any, *_: Any) -> Any:
    """head + mine[len(base):], when both head and mine extend base; otherwise a conflict."""
    ours, log, theirs = _array(mine, True), _array(base, False), _array(head, False)
    for extended in (ours, theirs):
        if len(extended) < len(log) or not all(same(a, b) for a, b in zip(extended, log, strict=False)):
            raise _Conflict
    return theirs + ours[len(log) :]


def _text(ex: Any, point: Path, base: Any, head: Any, mine: Any, *_: Any) -> Any:
    if mine is not ABSENT and not isinstance(mine, str):
        raise _WrongType
    raise NotModelled("text")


_RESOLVE = {
    "reject": _reject,
    "lww": _lww,
    "counter": _counter,
    "max": _extreme(max),
    "min": _extreme(min),
    "set": _set,
    "append": _append,
    "text": _text,
}


# Closed forms: what the table promises of a whole set of concurrent writes, whatever their arrival order.


def lww_fold(initial: Any, writes: Sequence[tuple[tuple[int, str], Any]]) -> Any:
    """The initial value with every write's member (ABSENT: none) applied in stamp order: the greatest stamp
    wins, also for nested writes. Stamps must be distinct."""
    stamps = [stamp for stamp, _ in writes]
    assert len(set(stamps)) == len(stamps), "equal stamps go to the later commit: not a closed form"
    value = initial
    for _, member in sorted(writes, key=lambda w: w[0]):
        if member is not ABSENT:
            value = applied(value, member)
    return value


def extreme(pick: Any, values: Sequence[Any]) -> Any:
    """The greatest (least) number, equal ones ordered by their JSON text."""
    return pick(values, key=lambda v: (v, canonical(v)))


def set_items(values: Any) -> set[bytes]:
    return {canonical(v) for v in values}


# Text: what a three-way merge of concurrent edits must keep, when the reference cannot say the exact string.
#
# Exact when the edits are shaped as the tests draw them: the original's characters all differ, and each
# edit deletes some of them and inserts characters found neither in the original nor in another writer's
# insertions (two writers may submit the same text, which counts once).

Edits = Sequence[tuple[tuple[int, str], str]]
"""(stamp, the writer's text) for each concurrent writer."""
_Run = tuple[tuple[int, str], int, int, str]
"""(stamp, index in the original after which, index before which, the inserted characters)."""


def _insertions(original: str, edits: Edits) -> list[_Run]:
    """Each distinct edit's runs of inserted characters, with the original characters it kept around them."""
    assert len(set(original)) == len(original), "the original's characters must all differ"
    position = {c: i for i, c in enumerate(original)}
    distinct: dict[str, tuple[int, str]] = {}
    for stamp, text in sorted(edits):
        distinct.setdefault(text, stamp)  # the same edit made twice counts once
    runs: list[_Run] = []
    for text, stamp in distinct.items():
        left, run = -1, ""
        for c in [*text, None]:
            if c is not None and c not in position:
                run += c
                continue
            right = len(original) if c is None else position[c]
            if run:
                runs.append((stamp, left, right, run))
            left, run = right, ""
    return runs


def text_insertion_violations(original: str, edits: Edits, result: str) -> list[str]:
    """Every insertion of a merge of concurrent edits of `original` is in the result once, in one piece
    (identical edits count once)."""
    runs = _insertions(original, edits)
    inserted = "".join(run for *_, run in runs)
    if sorted(c for c in result if c not in set(original)) != sorted(inserted):
        return [f"inserted characters in the result: {result!r}, expected each of {inserted!r} once"]
    return [
        f"{stamp}'s insertion {run!r} is not in one piece in {result!r}" for stamp, *_, run in runs if run not in result
    ]


def text_three_way_violations(original: str, edits: Edits, result: str) -> list[str]:
    """What a three-way merge (each edit replayed as a diff from the base) does with the original: it keeps
    exactly the characters no edit deleted, once each and in their order; each insertion lies between the
    original characters around it in its edit (those that are left); insertions at one position (where the
    edit deleted nothing) come out in stamp order."""
    found: list[str] = []
    kept = [c for c in original if all(c in text for _, text in edits)]
    left = [c for c in result if c in set(original)]
    if left != kept:
        return [f"the original's characters left are {left}, expected {kept}"]
    where = {c: i for i, c in enumerate(result) if c in set(original)}
    runs = _insertions(original, edits)
    for stamp, after, before, run in runs:
        start = result.find(run)
        lower = max([where[c] for c in original[: after + 1] if c in where], default=-1)
        upper = min([where[c] for c in original[before:] if c in where], default=len(result))
        if not (lower < start and start + len(run) <= upper):
            found.append(f"{stamp}'s insertion {run!r} left its place between {after} and {before} in {result!r}")
    at_one_position: dict[int, list[tuple[tuple[int, str], str]]] = {}
    for stamp, after, before, run in runs:
        if before == after + 1:
            at_one_position.setdefault(after, []).append((stamp, run))
    for after, inserts in at_one_position.items():
        expected = [run for _, run in sorted(inserts)]
        if sorted(expected, key=result.find) != expected:
            found.append(f"insertions after original index {after} are not in stamp order in {result!r}: {expected}")
    return found

"""RFC 7396 JSON merge patch, and what a patch changes, without mutating anything.

`apply` is copy-on-write: it copies only the objects along the patched paths, so the result shares every
untouched subtree with its input (the head itself is changed in place, see undo.py). A state never holds
`null` as an object member: in merge-patch semantics `null` means absent.
"""

from __future__ import annotations

import math
from typing import Any, Final

from .canonical import JSON

Path = tuple[str, ...]


class Missing:
    """The absence of a value (distinct from JSON null)."""

    _instance: Missing | None = None

    def __new__(cls) -> Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = Missing()


def apply(target: JSON, patch: JSON) -> JSON:
    """Return target with patch merged in (RFC 7396 MergePatch), sharing every untouched subtree."""
    if not isinstance(patch, dict):
        return patch
    result: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply(result.get(key), value)
    return result


def apply_value(current: JSON | Missing, patch_value: JSON) -> JSON | Missing:
    """The value a member ends up with when `patch_value` is merged into `current` (MISSING if deleted)."""
    if patch_value is None:
        return MISSING
    return apply(None if current is MISSING else current, patch_value)


def diff(old: JSON, new: dict[str, JSON]) -> dict[str, JSON]:
    """The minimal merge patch p with apply(old, p) == new, for states without null members."""
    old_members: dict[str, JSON] = old if isinstance(old, dict) else {}
    patch: dict[str, JSON] = {key: None for key in old_members if key not in new}
    for key, value in new.items():
        previous = old_members.get(key, MISSING)
        if previous is value or (previous is not MISSING and json_equal(previous, value)):
            continue
        if isinstance(value, dict) and isinstance(previous, dict):
            patch[key] = diff(previous, value)
        else:
            patch[key] = value
    return patch


def member_patch(old: JSON | Missing, new: JSON | Missing) -> JSON:
    """The patch value that turns member `old` into `new`; `None` deletes."""
    if new is MISSING:
        return None
    if isinstance(new, dict) and isinstance(old, dict):
        return diff(old, new)
    return new


def touched_paths(before: JSON, patch: dict[str, JSON], prefix: Path = ()) -> list[Path]:
    """The paths a patch writes in `before`: it descends only where both sides are non-empty objects.

    An empty object is a write of its own path (a no-op on an object, a replacement of anything else).
    """
    paths: list[Path] = []
    members: dict[str, JSON] = before if isinstance(before, dict) else {}
    for key, value in patch.items():
        path = (*prefix, key)
        previous = members.get(key)
        if isinstance(value, dict) and value and isinstance(previous, dict):
            paths.extend(touched_paths(previous, value, path))
        else:
            paths.append(path)
    return paths


def written_paths(before: JSON, applied: dict[str, JSON], submitted: dict[str, JSON]) -> tuple[Path, ...]:
    """What a revision counts as having written: every path it changed, and every path its agent wrote.

    A write of the value already there changes nothing but still is a write, with a stamp: without it a
    later `lww` write would win or lose depending on arrival order.
    """
    paths = set(touched_paths(before, applied))
    if submitted != applied:  # equal patches (even where 1 == true) write the same paths
        paths.update(touched_paths(before, submitted))
    return tuple(sorted(paths))


def json_equal(a: JSON, b: JSON) -> bool:
    """Equality by JSON text: unlike `==`, `true` is not `1`, `1` is not `1.0`, and `0.0` is not `-0.0`."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(json_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):  # -0.0 == 0.0 in Python, but they are different JSON texts
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return bool(a == b)


def strip_nulls(value: JSON) -> JSON:
    """The value as a state holds it: object members that are null removed, at every depth."""
    return apply({}, value) if isinstance(value, dict) else value


def get_path(value: JSON, path: Path) -> JSON | Missing:
    """The member at path, or MISSING."""
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return MISSING
        value = value[key]
    return value


def pointer(path: Path) -> str:
    """A path as a JSON Pointer (RFC 6901); the root is the empty string."""
    return "".join("/" + key.replace("~", "~0").replace("/", "~1") for key in path)


def path_of(json_pointer: str) -> Path:
    """The path a JSON Pointer names (the inverse of `pointer`)."""
    if not json_pointer:
        return ()
    return tuple(key.replace("~1", "/").replace("~0", "~") for key in json_pointer[1:].split("/"))


class NoChange:
    def __repr__(self) -> str:
        return "NO_CHANGE"


NO_CHANGE: Final = NoChange()
"""Returned by `effective` when a patch value would change nothing."""


def effective(current: JSON | Missing, patch_value: JSON) -> JSON | NoChange:
    """The part of patch_value that changes current, or NO_CHANGE; cost follows the patch, not the state."""
    if patch_value is None:
        return NO_CHANGE if current is MISSING else None
    if isinstance(patch_value, dict) and isinstance(current, dict):
        changes = {}
        for key, value in patch_value.items():
            change = effective(current.get(key, MISSING), value)
            if change is not NO_CHANGE:
                changes[key] = change
        return changes or NO_CHANGE
    new = strip_nulls(patch_value)
    if current is not MISSING and json_equal(current, new):
        return NO_CHANGE
    return new

"""The head state changed in place, and an undo per revision to see the states before it.

Each execution holds one mutable head. Applying a revision's change records, for every member it replaced,
the value it replaced (`Restore`), and for every object it merged into, the undo of that merge: an `Undo`
costs what the change cost, whatever the size of the objects it changed. The states of recent revisions
are recovered by composing the undos after them and reverting a copy of the head, copying only the objects
on the undone paths. A value a revision replaced is never mutated again, so undos may share it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, TypeAlias

from .canonical import JSON
from .mergepatch import MISSING, Missing, strip_nulls


class Restore:
    """Put back the value a revision replaced, or remove the member if it had none."""

    __slots__ = ("value",)

    def __init__(self, value: JSON | Missing) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"Restore({self.value!r})"


Undo: TypeAlias = dict[str, "Restore | Undo"]


def apply_in_place(state: dict[str, Any], patch: dict[str, JSON]) -> Undo:
    """Merge `patch` into `state` (RFC 7396), changing it in place; returns the undo of that change."""
    undo: Undo = {}
    for key, value in patch.items():
        current = state.get(key, MISSING)
        if value is None:
            if current is not MISSING:
                undo[key] = Restore(current)
                del state[key]
        elif isinstance(value, dict) and isinstance(current, dict):
            undo[key] = apply_in_place(current, value)
        else:
            undo[key] = Restore(current)
            state[key] = strip_nulls(value)  # a fresh copy: the head never shares an object with a patch
    return undo


def revert_in_place(state: dict[str, Any], undo: Undo) -> None:
    """Undo a change applied by apply_in_place (the newest one not yet undone)."""
    _revert(state, undo, copy=False)


def reverted(state: dict[str, Any], undo: Undo) -> dict[str, Any]:
    """The state before a change, as a copy of `state` that shares every object the undo does not touch."""
    return _revert(state, undo, copy=True)


def _revert(state: dict[str, Any], undo: Undo, *, copy: bool) -> dict[str, Any]:
    target = dict(state) if copy else state
    for key, node in undo.items():
        if not isinstance(node, Restore):
            target[key] = _revert(target[key], node, copy=copy)
        elif node.value is MISSING:
            target.pop(key, None)
        else:
            target[key] = node.value
    return target


def compose(newest_first: Iterable[Undo], only: Collection[str] | None = None) -> Undo:
    """One undo equal to applying the given undos in order (the newest change is undone first).

    With `only`, just those top-level members are undone: cost follows what the undos hold for them.
    """
    combined: Undo = {}
    for undo in newest_first:
        if only is None:
            _then(combined, undo)
        else:
            _then(combined, {key: undo[key] for key in only if key in undo})
    return combined


def _then(combined: Undo, older: Undo) -> None:
    """Extend `combined` (owned by the caller) with `older`, applied after it."""
    for key, node in older.items():
        mine = combined.get(key)
        if isinstance(node, Restore) or mine is None:
            combined[key] = node if isinstance(node, Restore) else _copy(node)
        elif isinstance(mine, Restore):
            combined[key] = Restore(reverted(mine.value, node))  # type: ignore[arg-type]  # `older` descends: a dict
        else:
            _then(mine, node)


def _copy(undo: Undo) -> Undo:
    """A copy of the nested undos, so that composing never changes an undo a window entry holds."""
    return {key: node if isinstance(node, Restore) else _copy(node) for key, node in undo.items()}

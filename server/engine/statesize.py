"""The size of a state as canonical JSON, kept up to date from each change's undo at the cost of the
change, so the state-size limit is checked without serializing the whole state on every patch."""

from __future__ import annotations

from typing import Any

import orjson

from .canonical import dumps
from .mergepatch import MISSING
from .undo import Restore, Undo


def state_bytes(state: dict[str, Any]) -> int:
    return len(dumps(state))


def size_change(after: dict[str, Any], undo: Undo) -> int:
    """How many bytes the canonical JSON of `after` gained over the object `undo` restores."""
    change, members_before = 0, len(after)
    for key, node in undo.items():
        if isinstance(node, Restore):
            had, has = node.value is not MISSING, key in after
            if had:
                change -= _member(key, node.value)
            if has:
                change += _member(key, after[key])
            members_before += had - has
        else:
            change += size_change(after[key], node)
    return change + _commas(len(after)) - _commas(members_before)


def _member(key: str, value: Any) -> int:
    return len(orjson.dumps(key)) + 1 + len(dumps(value))


def _commas(members: int) -> int:
    return max(0, members - 1)

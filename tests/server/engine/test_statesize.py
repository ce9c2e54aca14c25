"""The incrementally kept state size always equals the size of the canonical JSON."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from skillstate.server.engine.mergepatch import strip_nulls
from skillstate.server.engine.statesize import size_change, state_bytes
from skillstate.server.engine.undo import apply_in_place, revert_in_place

keys = st.sampled_from(["a", "b", "c", "é", 'q"uote', "\u2028"])
leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3))
objects = st.dictionaries(keys, values, max_size=4)


@given(objects, st.lists(objects, max_size=5))
def test_tracked_size_matches_the_canonical_json(initial: dict[str, Any], patches: list[dict[str, Any]]) -> None:
    state = strip_nulls(initial)
    size = state_bytes(state)
    undos = []
    for patch in patches:
        undo = apply_in_place(state, patch)
        size += size_change(state, undo)
        assert size == state_bytes(state)
        undos.append((undo, size_change(state, undo)))
    for undo, grew_by in reversed(undos):
        revert_in_place(state, undo)
        size -= grew_by
        assert size == state_bytes(state)

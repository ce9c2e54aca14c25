"""Hypothesis strategies for JSON documents and merge patches."""

from __future__ import annotations

from hypothesis import strategies as st

KEYS = st.sampled_from(["a", "b", "c", "d", "é", "x/y", "~"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=5),
)


def json_values(max_leaves: int = 12) -> st.SearchStrategy[object]:
    return st.recursive(
        SCALARS,
        lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(KEYS, children, max_size=4)),
        max_leaves=max_leaves,
    )


def json_objects(max_leaves: int = 12) -> st.SearchStrategy[dict]:
    return st.dictionaries(KEYS, json_values(max_leaves), max_size=5)


def patches() -> st.SearchStrategy[dict]:
    return json_objects()

"""RFC 7396 merge patch: the Appendix A examples, and the properties the engine relies on."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given

from skillstate.server.engine.mergepatch import apply, diff, effective, json_equal, strip_nulls, touched_paths

from ...strategies import json_objects, json_values, patches

RFC7396_APPENDIX_A = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "expected"), RFC7396_APPENDIX_A)
def test_rfc7396_appendix_a(target: object, patch: object, expected: object) -> None:
    before = copy.deepcopy(target)
    assert apply(target, patch) == expected
    assert target == before, "apply must not mutate its target"


@given(json_objects(), patches())
def test_apply_never_mutates_and_shares_untouched_members(state: dict, patch: dict) -> None:
    before = copy.deepcopy(state)
    result = apply(state, patch)
    assert state == before
    for key, value in state.items():
        if key not in patch:
            assert result[key] is value


@given(json_objects(), json_objects())
def test_diff_is_the_patch_between_two_states(old: dict, new: dict) -> None:
    old, new = strip_nulls(old), strip_nulls(new)
    assert json_equal(apply(old, diff(old, new)), new)


@given(json_objects(), patches())
def test_effective_patch_has_the_same_result_and_no_noops(state: dict, patch: dict) -> None:
    state = strip_nulls(state)
    change = effective(state, patch)
    applied = {} if not isinstance(change, dict) else change
    assert json_equal(apply(state, applied), apply(state, patch))
    assert effective(apply(state, patch), applied) in ({}, effective.__globals__["NO_CHANGE"])


@given(json_objects(), patches())
def test_touched_paths_cover_exactly_what_changed(state: dict, patch: dict) -> None:
    state = strip_nulls(state)
    after = apply(state, patch)
    touched = touched_paths(state, patch)
    for key in set(state) | set(after):
        if not any(path[0] == key for path in touched):
            assert key in state and key in after and json_equal(state[key], after[key])


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (True, 1, False),
        (1, 1.0, False),
        (0, False, False),
        ([1, {"a": None}], [1, {"a": None}], True),
        ("x", "x", True),
    ],
)
def test_json_equal_distinguishes_json_types(a: object, b: object, equal: bool) -> None:
    assert json_equal(a, b) is equal


@given(json_values())
def test_json_equal_is_reflexive_on_copies(value: object) -> None:
    assert json_equal(value, copy.deepcopy(value))

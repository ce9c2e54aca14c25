"""In-place application with undo agrees with copy-on-write application, whatever the history."""

from __future__ import annotations

import copy

from hypothesis import given
from hypothesis import strategies as st

from skillstate.server.engine.execution import Entry, Execution
from skillstate.server.engine.mergepatch import NO_CHANGE, apply, effective, strip_nulls
from skillstate.server.engine.undo import apply_in_place, compose, revert_in_place, reverted

from ...strategies import json_objects, patches


@given(state=json_objects(), patch=patches())
def test_apply_in_place_equals_apply_and_revert_restores(state: dict, patch: dict) -> None:
    state = strip_nulls(state)
    before = copy.deepcopy(state)
    expected = apply(state, patch)
    head = copy.deepcopy(state)
    undo = apply_in_place(head, patch)
    assert head == expected
    assert reverted(head, undo) == before
    assert head == expected, "reverted() must not change the head"
    revert_in_place(head, undo)
    assert head == before


@given(initial=json_objects(), history=st.lists(patches(), max_size=6), data=st.data())
def test_composed_undos_give_every_earlier_state(initial: dict, history: list[dict], data: st.DataObject) -> None:
    states = [strip_nulls(initial)]
    for patch in history:
        states.append(apply(states[-1], patch))
    head = copy.deepcopy(states[0])
    undos = [apply_in_place(head, patch) for patch in history]
    frozen = copy.deepcopy(undos)
    back = data.draw(st.integers(0, len(history)))
    earlier = reverted(head, compose(reversed(undos[len(undos) - back :])))
    assert earlier == states[len(history) - back]
    assert head == states[-1] and repr(undos) == repr(frozen), "composing must change neither head nor undos"


def test_a_value_the_patch_holds_is_never_shared_with_the_head() -> None:
    patch = {"a": {"b": {"c": 1}}}
    head: dict = {}
    apply_in_place(head, patch)
    apply_in_place(head, {"a": {"b": {"d": 2}}})
    assert patch == {"a": {"b": {"c": 1}}}


@given(
    initial=json_objects(),
    history=st.lists(st.tuples(patches(), st.booleans()), min_size=1, max_size=8),
)
def test_an_execution_window_gives_every_recent_state(initial: dict, history: list[tuple[dict, bool]]) -> None:
    """Execution.state_at against copy-on-write states."""
    execution = Execution("x", {}, 0.0, window=len(history) + 1)
    states = [strip_nulls(initial)]
    execution.begin(0, copy.deepcopy(states[0]), "h0")
    for revision, (patch, rewrite_same) in enumerate(history, start=1):
        before = states[-1]
        if rewrite_same:  # an agent writing what is there: written, yet changing nothing
            patch = {**patch, **{k: before[k] for k in before if k not in patch}}
        applied = effective(before, patch)
        applied = {} if applied is NO_CHANGE else applied
        states.append(apply(before, applied))
        execution.push(Entry(revision, f"h{revision}", None, apply_in_place(execution.state, applied)))
    for revision, expected in enumerate(states):
        assert execution.state_at(revision) == expected
    assert execution.state == states[-1]

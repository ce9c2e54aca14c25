"""The determinism claims of docs/merge.md, as properties over the real engine."""

from __future__ import annotations

import itertools
import json

from hypothesis import given
from hypothesis import strategies as st

from skillstate.server.engine.merge import Change, merge
from skillstate.server.engine.mergepatch import NO_CHANGE, apply, effective, strip_nulls, written_paths
from skillstate.server.engine.policy import PolicyMap

from ...strategies import json_values
from .engine_harness import Write, run

AGENTS = ["ada", "bob", "cy", "dee"]
SMALL_TEXT = st.text(alphabet="abé😀 \n", max_size=8)
NUMBERS = st.integers(-1000, 1000)
POLICY_VALUES = {
    "lww": st.one_of(
        NUMBERS, SMALL_TEXT, st.lists(NUMBERS, max_size=3), st.dictionaries(st.sampled_from("xy"), NUMBERS)
    ),
    "counter": NUMBERS,
    "max": st.one_of(NUMBERS, st.floats(-1e6, 1e6, allow_nan=False)),
    "min": st.one_of(NUMBERS, st.floats(-1e6, 1e6, allow_nan=False)),
    "set": st.lists(st.one_of(NUMBERS, SMALL_TEXT), max_size=4),
    "text": SMALL_TEXT,
}


def schema_for(policy: str) -> dict:
    return {"type": "object", "properties": {"v": {"x-merge": policy}, "log": {"x-merge": "append"}}}


@st.composite
def concurrent_writes(draw: st.DrawFn, policy: str) -> tuple[dict, list[Write]]:
    """An initial value and 2-4 writes from distinct agents, all based on revision 0."""
    values = POLICY_VALUES[policy]
    initial = {"v": draw(values)}
    count = draw(st.integers(2, 4))
    writes = []
    for agent in AGENTS[:count]:
        patch: dict = {"v": draw(values)}
        if draw(st.booleans()):
            patch[f"own_{agent}"] = draw(NUMBERS)  # a disjoint key beside the contended one
        writes.append(Write(agent, 0, patch))
    return initial, writes


def assert_order_independent(policy: str, initial: dict, writes: list[Write]) -> None:
    outcomes = {run(schema_for(policy), initial, order).state_json for order in itertools.permutations(writes)}
    assert len(outcomes) == 1, f"{policy}: arrival order changed the result: {outcomes}"


@given(st.data())
def test_lww_is_order_independent(data: st.DataObject) -> None:
    assert_order_independent("lww", *data.draw(concurrent_writes("lww")))


@given(st.data())
def test_counter_is_order_independent_and_sums_deltas(data: st.DataObject) -> None:
    initial, writes = data.draw(concurrent_writes("counter"))
    assert_order_independent("counter", initial, writes)
    final = json.loads(run(schema_for("counter"), initial, writes).state_json)
    assert final["v"] == initial["v"] + sum(w.patch["v"] - initial["v"] for w in writes)


@given(st.data())
def test_max_and_min_are_order_independent(data: st.DataObject) -> None:
    for policy in ("max", "min"):
        assert_order_independent(policy, *data.draw(concurrent_writes(policy)))


@given(st.data())
def test_set_is_order_independent(data: st.DataObject) -> None:
    assert_order_independent("set", *data.draw(concurrent_writes("set")))


@given(st.data())
def test_text_is_order_independent(data: st.DataObject) -> None:
    assert_order_independent("text", *data.draw(concurrent_writes("text")))


@given(st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=3), min_size=2, max_size=4))
def test_append_keeps_every_concurrent_item_once_in_commit_order(appends: list[list[int]]) -> None:
    writes = [Write(AGENTS[i], 0, {"log": ["start", *items]}) for i, items in enumerate(appends)]
    final = json.loads(run(schema_for("append"), {"log": ["start"]}, writes).state_json)
    assert final["log"] == ["start", *itertools.chain.from_iterable(appends)]


@st.composite
def rejecting_writes(draw: st.DrawFn) -> tuple[dict, list[Write]]:
    keys = st.sampled_from(["a", "b", "c"])
    inner = st.dictionaries(st.sampled_from(["x", "y"]), st.one_of(st.none(), NUMBERS), max_size=2)
    initial = draw(st.dictionaries(keys, st.one_of(NUMBERS, inner), max_size=3))
    writes = [
        Write(agent, 0, draw(st.dictionaries(keys, st.one_of(st.none(), NUMBERS, inner), min_size=1, max_size=2)))
        for agent in AGENTS[: draw(st.integers(2, 4))]
    ]
    return initial, writes


@given(rejecting_writes())
def test_reject_equals_a_serial_order_of_the_accepted_patches(case: tuple[dict, list[Write]]) -> None:
    initial, writes = case
    outcome = run({"type": "object"}, initial, writes)
    serial = strip_nulls(initial)  # null means absent: the initial state is applied to {}
    for write in outcome.accepted:
        serial = apply(serial, write.patch)
    assert json.loads(outcome.state_json) == serial
    assert outcome.accepted, "the first patch on head always applies"


def test_regression_text_intent_equal_to_an_intermediate_merge() -> None:
    """Found by hypothesis: cy's intent equalled the merge of ada's and bob's, so it was skipped in one order."""
    writes = [Write("ada", 0, {"v": "a"}), Write("bob", 0, {"v": " "}), Write("cy", 0, {"v": "a "})]
    assert_order_independent("text", {"v": ""}, writes)


POLICY_NAMES = st.sampled_from(["reject", "lww", "counter", "max", "min", "set", "append", "text"])
LEFT_KEYS, RIGHT_KEYS = st.sampled_from(["a", "b", "c"]), st.sampled_from(["p", "q", "r"])


@given(
    initial=st.dictionaries(st.sampled_from("abcpqr"), json_values(6), max_size=6),
    changes=st.lists(st.dictionaries(LEFT_KEYS, json_values(4), min_size=1, max_size=2), max_size=4),
    patch=st.dictionaries(RIGHT_KEYS, json_values(4), min_size=1, max_size=3),
    policies=st.dictionaries(st.sampled_from("abcpqr"), POLICY_NAMES),
)
def test_a_patch_that_meets_no_change_since_its_base_merges_to_its_effect_on_head(
    initial: dict, changes: list[dict], patch: dict, policies: dict
) -> None:
    """The engine applies such a patch without a merge (Execution.untouched_since); the merge agrees."""
    schema = {"type": "object", "properties": {key: {"x-merge": policy} for key, policy in policies.items()}}
    base = head = strip_nulls(initial)
    committed = []
    for revision, change in enumerate(changes, start=1):
        committed.append(Change(revision, revision - 1, "other", written_paths(head, change, change), change))
        head = apply(head, change)
    result = merge(
        base=base,
        head=head,
        head_revision=len(changes),
        changes=committed,
        patch=patch,
        stamp=(0, "me"),
        policies=PolicyMap(schema),
    )
    expected = effective(head, patch)
    assert result.applied_patch == ({} if expected is NO_CHANGE else expected)
    assert result.resolutions == []

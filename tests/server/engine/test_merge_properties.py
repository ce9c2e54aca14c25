"""The claims of docs/merge.md, as properties over the real engine, checked against merge_reference.py.

Every arrival order of the drawn writes is run through a StateEngine, and each write's fate (accepted, or
refused naming its conflict points) and the state after it must be what the reference computes from the
specification alone; where the page promises that order never matters, every order must also end in one
state, and that state must be the table's closed form (the greatest stamp's write, the greatest number, the
set of items added and not removed).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from skillstate.server.engine.config import EngineConfig
from skillstate.server.engine.merge import merge
from skillstate.server.engine.mergepatch import NO_CHANGE, apply, effective, strip_nulls, written_paths
from skillstate.server.engine.path_index import PathIndex
from skillstate.server.engine.policy import PolicyMap
from skillstate.server.engine.state_engine import StateEngine
from skillstate.server.engine.undo import apply_in_place
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog

from ...strategies import json_values
from .engine_harness import Step, Write, run, run_each
from .merge_reference import (
    ABSENT,
    ReferenceExecution,
    at,
    canonical,
    extreme,
    lww_fold,
    merge_patch,
    same,
    set_items,
    text_insertion_violations,
    text_three_way_violations,
)

AGENTS = ["ada", "bob", "cy", "dee"]
SETUP_AGENTS = ["bea", "cal", "eve"]
"""Setup writes commit serially on head before the concurrent ones; their names sort between the others'."""
SMALL_TEXT = st.text(alphabet="abé😀 \n", max_size=8)
NUMBERS = st.integers(-1000, 1000)
FLOATS = st.one_of(st.integers(-1000, 1000).map(float), st.sampled_from([0.5, -0.0, 2.25, -7.5]))
"""Floats whose JSON text Python writes as the server does, and integral ones that tie with integers."""
POLICY_VALUES = {
    "lww": st.one_of(
        NUMBERS,
        SMALL_TEXT,
        st.lists(NUMBERS, max_size=3),
        st.dictionaries(st.sampled_from("xy"), st.one_of(st.none(), NUMBERS, st.dictionaries(st.just("z"), NUMBERS))),
    ),
    "counter": NUMBERS,
    "max": st.one_of(NUMBERS, FLOATS),
    "min": st.one_of(NUMBERS, FLOATS),
    "set": st.lists(st.one_of(st.integers(0, 5), st.sampled_from(["a", "b", "é"])), max_size=4),
    "append": st.lists(st.integers(0, 3), max_size=3),
    "text": SMALL_TEXT,
}
WRONG_VALUES = {
    "counter": st.one_of(st.booleans(), SMALL_TEXT, st.lists(NUMBERS, max_size=1)),
    "max": st.one_of(st.booleans(), SMALL_TEXT, st.dictionaries(st.just("x"), NUMBERS, min_size=1)),
    "min": st.one_of(st.booleans(), SMALL_TEXT, st.lists(NUMBERS, max_size=1)),
    "set": st.one_of(NUMBERS, SMALL_TEXT, st.booleans()),
    "append": st.one_of(NUMBERS, SMALL_TEXT),
    "text": st.one_of(NUMBERS, st.lists(SMALL_TEXT, max_size=1), st.booleans()),
}
TARGETS = [("v",), ("n", "m"), ("p", "k1"), ("p", "k2")]
"""Where the policy is declared: at the top, on a nested property, and by additionalProperties."""


def schema_for(policy: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "v": {"x-merge": policy},
            "n": {"properties": {"m": {"x-merge": policy}}},
            "p": {"additionalProperties": {"x-merge": policy}},
            "log": {"x-merge": "append"},
        },
    }


def with_member(patch: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """patch with `value` (null too) at path."""
    head, *rest = path
    return {**patch, head: with_member(patch.get(head, {}), tuple(rest), value) if rest else value}


@dataclass(frozen=True)
class Scenario:
    policy: str
    initial: dict[str, Any]
    setup: list[Write]
    """Committed one after another on head, before the concurrent writes."""
    writes: list[Write]
    """Concurrent: every arrival order is run."""
    deletions: bool

    @property
    def schema(self) -> dict[str, Any]:
        return schema_for(self.policy)

    @property
    def shared_base(self) -> bool:
        return len({w.base_revision for w in self.writes}) == 1


@st.composite
def scenarios(draw: st.DrawFn, policy: str, *, shared_base: bool | None = None) -> Scenario:
    """0-3 setup revisions, then 2-4 concurrent writes from distinct agents on bases anywhere in 0..setup
    (or all on one), each writing values or deletions to some of the targets, all to one of them (so that
    in every order a stale patch meets a policy), and maybe a key of its own."""
    values = POLICY_VALUES[policy]
    deletions = draw(st.booleans())
    member = st.one_of(values, st.none()) if deletions else values
    contended = draw(st.sampled_from(TARGETS))

    def patch(agent: str, must: tuple[tuple[str, ...], ...] = ()) -> dict[str, Any]:
        out: dict[str, Any] = {}
        drawn = draw(st.lists(st.sampled_from(TARGETS), min_size=1, max_size=3, unique=True))
        for path in dict.fromkeys([*must, *drawn]):
            out = with_member(out, path, draw(member))
        if draw(st.booleans()):
            out[f"own_{agent}"] = draw(NUMBERS)  # a disjoint key beside the contended ones
        return out

    initial: dict[str, Any] = {"n": {}, "p": {}}
    for path in TARGETS:
        if draw(st.booleans()):
            initial = with_member(initial, path, draw(values))
    setup = [Write(agent, i, patch(agent)) for i, agent in enumerate(SETUP_AGENTS[: draw(st.integers(0, 3))])]
    count = draw(st.integers(2, 4))
    shared = draw(st.booleans()) if shared_base is None else shared_base
    one_base = draw(st.integers(0, len(setup)))
    writes = [
        Write(agent, one_base if shared else draw(st.integers(0, len(setup))), patch(agent, (contended,)))
        for agent in AGENTS[:count]
    ]
    return Scenario(policy, initial, setup, writes, deletions)


def assert_step_agrees(step: Step, reference: ReferenceExecution, context: str) -> None:
    write = step.write
    verdict = reference.submit(write.agent_id, write.base_revision, write.patch)
    where = f"{context}\n  write {write}"
    if verdict.accepted:
        assert step.accepted, f"{where}: refused (conflicts {step.conflicts}), but the reference accepts it"
        assert canonical(step.state) == canonical(reference.state), (
            f"{where}: state {step.state}, expected {reference.state}"
        )
        assert sorted({r.path for r in step.resolutions}) == list(verdict.merged), (
            f"{where}: resolved {[r.path for r in step.resolutions]}, but the conflict points are {verdict.merged}"
        )
        return
    assert not step.accepted, f"{where}: accepted, but the reference refuses it ({verdict})"
    if verdict.wrong_types:  # the agent's own mistake, whatever its base
        assert step.invalid, f"{where}: {step}, expected INVALID_ARGUMENT for {verdict.wrong_types}"
    else:
        assert not step.invalid and step.conflicts == verdict.conflicts, (
            f"{where}: refused at {step.conflicts} (invalid: {step.invalid}), expected conflicts at {verdict.conflicts}"
        )
    if verdict.stale:
        event("a stale patch was refused")


def run_every_order(
    scenario: Scenario, orders: list[tuple[int, ...]] | None = None, config: EngineConfig = EngineConfig()
) -> dict[tuple[int, ...], dict[str, Any]]:
    """Each arrival order's final state (every order unless told); each step checked against the reference."""
    finals = {}
    for order in orders or list(itertools.permutations(range(len(scenario.writes)))):
        writes = [scenario.writes[i] for i in order]
        steps = run_each(scenario.schema, scenario.initial, writes, setup=scenario.setup, config=config)
        reference = ReferenceExecution(scenario.schema, scenario.initial)
        for write in scenario.setup:
            assert reference.submit(write.agent_id, write.base_revision, write.patch).accepted
        context = f"{scenario.policy}: initial {scenario.initial}, setup {scenario.setup}, order {writes}"
        for step in steps:
            assert_step_agrees(step, reference, context)
        met = [s for s in steps if s.resolutions or s.conflicts or s.invalid]
        assert met, f"{context}: no patch met a concurrent write: the example proves nothing"
        event(
            f"{scenario.policy}: patches that met a policy per order: {min(len(met), 3)}{'+' if len(met) > 2 else ''}"
        )
        finals[order] = steps[-1].state
    return finals


def assert_one_result(scenario: Scenario, finals: dict[tuple[int, ...], dict[str, Any]]) -> dict[str, Any]:
    outcomes = {canonical(state) for state in finals.values()}
    assert len(outcomes) == 1, f"{scenario.policy}: arrival order changed the result: {finals}"
    return next(iter(finals.values()))


def setup_state(scenario: Scenario) -> ReferenceExecution:
    reference = ReferenceExecution(scenario.schema, scenario.initial)
    for write in scenario.setup:
        reference.submit(write.agent_id, write.base_revision, write.patch)
    return reference


def written_since(scenario: Scenario, path: tuple[str, ...], base: int) -> bool:
    """Whether a setup revision after `base` wrote path."""
    return any(at(w.patch, path) is not ABSENT for w in scenario.setup[base:])


def members(writes: list[Write], path: tuple[str, ...]) -> list[Any]:
    return [at(w.patch, path) for w in writes if at(w.patch, path) is not ABSENT]


def assert_greatest_stamp_wins(scenario: Scenario, final: dict[str, Any]) -> None:
    start = merge_patch({}, scenario.initial)
    for path in TARGETS:
        writes = [((w.base_revision, w.agent_id), at(w.patch, path)) for w in [*scenario.setup, *scenario.writes]]
        expected = lww_fold(at(start, path), writes)
        assert same(at(final, path), expected), f"{path}: {final}, expected {expected} from {writes}"


@given(scenarios("lww"))
def test_lww_gives_the_greatest_stamps_write_in_every_order(scenario: Scenario) -> None:
    """With one shared base, every order ends in the initial value with every write applied in stamp order,
    nested ones too. Writers on different bases are checked against the reference, step by step."""
    finals = run_every_order(scenario)
    if scenario.shared_base:
        assert_greatest_stamp_wins(scenario, assert_one_result(scenario, finals))


@pytest.mark.parametrize(
    "config", [EngineConfig(), EngineConfig(max_loaded_executions=0, snapshot_every=2)], ids=["in-memory", "loaded"]
)
@given(scenario=scenarios("lww", shared_base=False))
@example(
    scenario=Scenario(  # bob's write loses to eve's greater stamp, which ada's base already holds
        "lww",
        {},
        [Write("eve", 0, {"v": {"x": 1, "y": 1}})],
        [Write("bob", 0, {"v": 0}), Write("ada", 1, {"v": {"x": None}})],
        deletions=True,
    )
)
@example(
    scenario=Scenario(  # eve's 5 covers v at a greater stamp than ada's x, and cal's object replaces it after
        "lww",
        {},
        [Write("eve", 0, {"v": 5}), Write("cal", 1, {"v": {"y": 1}})],
        [Write("ada", 0, {"v": {"x": 2}}), Write("bob", 2, {"v": {"y": 3}})],
        deletions=False,
    )
)
def test_lww_gives_the_greatest_stamps_write_whatever_the_bases(scenario: Scenario, config: EngineConfig) -> None:
    """A write already in a patch's base may carry a greater stamp than one committed after it: the result is
    still every write in stamp order, with the execution in memory throughout or loaded anew from its newest
    snapshot (every 2 revisions) for every call, the log read back for older bases."""
    assert_greatest_stamp_wins(scenario, assert_one_result(scenario, run_every_order(scenario, config=config)))


@given(st.sampled_from(["max", "min"]).flatmap(scenarios))
def test_max_and_min_keep_the_extreme_write(scenario: Scenario) -> None:
    """With one shared base and only numbers, every order ends in the extreme of the writes (and of head,
    where a setup revision wrote the path since the base). Other cases are checked against the reference."""
    finals = run_every_order(scenario)
    if not scenario.shared_base or scenario.deletions:
        return
    event("max/min: one base, numbers only")
    final = assert_one_result(scenario, finals)
    pick, base = (max if scenario.policy == "max" else min), scenario.writes[0].base_revision
    head = setup_state(scenario).state
    for path in TARGETS:
        values = members(scenario.writes, path)
        if values and written_since(scenario, path, base) and at(head, path) is not ABSENT:
            values.append(at(head, path))
        if values:
            assert same(at(final, path), extreme(pick, values)), f"{path}: {final}, from {values}"


def items_at(state: dict[str, Any], path: tuple[str, ...]) -> set[bytes]:
    value = at(state, path)
    return set_items(value) if isinstance(value, list) else set()


@given(scenarios("set"))
def test_set_keeps_every_item_added_and_not_removed(scenario: Scenario) -> None:
    """Every order ends in one state; with one shared base its items are head's, plus what any writer added,
    minus what any writer removed (an absent array is the empty set)."""
    finals = run_every_order(scenario)
    if not scenario.shared_base:
        return
    final = assert_one_result(scenario, finals)
    reference = setup_state(scenario)
    base, head = reference.revisions[scenario.writes[0].base_revision].state, reference.state
    for path in TARGETS:
        mine = [set_items(value or []) for value in members(scenario.writes, path)]
        if not mine:
            continue
        before = items_at(base, path)
        added = set().union(*(items - before for items in mine))
        removed = set().union(*(before - items for items in mine))
        assert items_at(final, path) == (items_at(head, path) - removed) | added, f"{path}: {final}"


def number_at(state: dict[str, Any], path: tuple[str, ...]) -> Any:
    value = at(state, path)
    return 0 if value is ABSENT else value


@given(scenarios("counter"))
def test_counter_sums_the_deltas_in_every_order(scenario: Scenario) -> None:
    """Every order ends in head plus each writer's change from its own base (absent counts as 0)."""
    finals = run_every_order(scenario)
    if scenario.deletions:
        return
    final = assert_one_result(scenario, finals)
    reference = setup_state(scenario)
    for path in TARGETS:
        deltas = [
            at(w.patch, path) - number_at(reference.revisions[w.base_revision].state, path)
            for w in scenario.writes
            if at(w.patch, path) is not ABSENT
        ]
        if deltas:
            expected = number_at(reference.state, path) + sum(deltas)
            assert at(final, path) == expected, f"{path}: {final}, deltas {deltas}"


@given(scenarios("append"), st.data())
def test_append_agrees_with_the_reference(scenario: Scenario, data: st.DataObject) -> None:
    """Commit order matters under append: one arrival order, checked step by step."""
    run_every_order(scenario, [tuple(data.draw(st.permutations(range(len(scenario.writes)))))])


@given(st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=3), min_size=2, max_size=4))
def test_append_keeps_every_concurrent_item_once_in_commit_order(appends: list[list[int]]) -> None:
    writes = [Write(AGENTS[i], 0, {"log": ["start", *items]}) for i, items in enumerate(appends)]
    final = json.loads(run(schema_for("append"), {"log": ["start"]}, writes).state_json)
    assert final["log"] == ["start", *itertools.chain.from_iterable(appends)]


@st.composite
def lww_ties(draw: st.DrawFn) -> Scenario:
    """Writes of which some share a stamp: one agent writing twice from one base."""
    scenario = draw(scenarios("lww", shared_base=True))
    writes = [Write(draw(st.sampled_from(AGENTS[:2])), w.base_revision, w.patch) for w in scenario.writes]
    return Scenario("lww", scenario.initial, scenario.setup, writes, scenario.deletions)


@given(lww_ties(), st.data())
def test_lww_ties_go_to_the_later_commit(scenario: Scenario, data: st.DataObject) -> None:
    """Of two writes with one stamp the later commit wins: two arrival orders, checked against the reference."""
    order = data.draw(st.permutations(range(len(scenario.writes))))
    run_every_order(scenario, [tuple(order), tuple(reversed(order))])
    stamps = [(w.base_revision, w.agent_id) for w in scenario.writes]
    event("lww: a tie" if len(set(stamps)) < len(stamps) else "lww: no tie")


def test_a_tie_between_two_commits_of_one_agent_goes_to_the_later_one() -> None:
    schema, first, second = schema_for("lww"), Write("ada", 0, {"v": 1}), Write("ada", 0, {"v": 2})
    assert json.loads(run(schema, {"v": 0}, [first, second]).state_json) == {"v": 2}
    assert json.loads(run(schema, {"v": 0}, [second, first]).state_json) == {"v": 1}


def test_concurrent_patches_of_one_agent_on_one_base_tie_to_the_later_commit() -> None:
    """Submitted at once, so each merges while the revisions before it still wait for their commit."""

    async def main() -> None:
        engine = StateEngine(MemoryRevisionLog(), EngineConfig())
        await engine.start()
        try:
            await engine.create_execution("x", json.dumps(schema_for("lww")), json.dumps({"v": 0}))
            results = await asyncio.gather(
                *(engine.submit_patch("x", "ada", 0, json.dumps({"v": {"k": value}})) for value in (1, 2, 3))
            )
            last = max(range(3), key=lambda i: results[i].revision)
            state = json.loads((await engine.get_state("x")).state_json)
            assert state == {"v": {"k": last + 1}}, f"revisions {[r.revision for r in results]}, state {state}"
        finally:
            await engine.close()

    asyncio.run(main())


TEXT_BASE = "abcdé😀 \n"
TEXT_ALPHABETS = {"ada": "ABÇ", "bob": "KL🙂", "cy": "0123", "dee": "wxyz"}
"""Each writer inserts only its own characters, never found in the original: a merge can be checked exactly."""


@st.composite
def text_edits(draw: st.DrawFn) -> tuple[dict[str, Any], list[Write], list[Write], str]:
    """(initial, setup, concurrent writes on one shared base, the string at that base)."""
    distinct = st.permutations(TEXT_BASE).flatmap(
        lambda chars: st.integers(0, len(chars)).map(lambda n: "".join(chars[:n]))
    )
    initial = {"v": draw(distinct)} if draw(st.booleans()) else {}
    setup_count = draw(st.integers(0, 2))
    base = draw(st.integers(0, setup_count))
    setup = [  # up to the shared base the string may change; after it only other members do
        Write(agent, i, {"v": draw(distinct)} if i < base and draw(st.booleans()) else {f"own_{agent}": i})
        for i, agent in enumerate(SETUP_AGENTS[:setup_count])
    ]
    original = ReferenceExecution(schema_for("text"), initial)
    for write in setup[:base]:
        original.submit(write.agent_id, write.base_revision, write.patch)
    text = at(original.state, ("v",))
    text = "" if text is ABSENT else text
    writes: list[Write] = []
    for agent in AGENTS[: draw(st.integers(2, 4))]:
        if writes and draw(st.integers(0, 4)) == 0:
            edit = draw(st.sampled_from(writes)).patch["v"]  # the same edit twice counts once
        else:
            deleted = draw(st.sets(st.sampled_from(range(len(text))))) if text else set()
            kept = [c for i, c in enumerate(text) if i not in deleted]
            inserts: list[list[str]] = [[] for _ in range(len(kept) + 1)]
            for c in draw(st.permutations(TEXT_ALPHABETS[agent]))[: draw(st.integers(0, 3))]:
                inserts[draw(st.integers(0, len(kept)))].append(c)
            edit = "".join("".join(run) + c for run, c in zip(inserts, [*kept, ""], strict=True))
        writes.append(Write(agent, base, {"v": edit}))
    return initial, setup, writes, text


def merge_every_order(initial: dict[str, Any], setup: list[Write], writes: list[Write]) -> str:
    """The one string every arrival order of the text writes ends in."""
    finals = {}
    for order in itertools.permutations(range(len(writes))):
        steps = run_each(schema_for("text"), initial, [writes[i] for i in order], setup=setup)
        assert all(step.accepted for step in steps), steps
        assert steps[1].resolutions, f"the second arrival was not merged: {steps}"
        finals[order] = steps[-1].state
    assert len({canonical(state) for state in finals.values()}) == 1, f"arrival order changed the result: {finals}"
    return next(iter(finals.values())).get("v", "")


@given(text_edits())
@example(({"v": "a"}, [], [Write("ada", 0, {"v": "aA"}), Write("bob", 0, {"v": "KaL"})], "a"))
@example(({"v": "a"}, [], [Write("ada", 0, {"v": ""}), Write("cy", 0, {"v": "0a1"})], "a"))
def test_text_merges_three_ways_in_every_order(case: tuple[dict[str, Any], list[Write], list[Write], str]) -> None:
    """Every order ends in one string: the original's characters no edit deleted, once each and in their
    order; every insertion once, in one piece, between the original characters around it in its edit;
    insertions at one position in stamp order.

    The examples are b26398c's regression (fixed by 026d89c): diff-match-patch's semantic cleanup diffed
    'a' -> 'KaL' as a replacement of 'a', so the kept 'a' was deleted and written again.
    """
    initial, setup, writes, original = case
    result = merge_every_order(initial, setup, writes)
    edits = [((w.base_revision, w.agent_id), w.patch["v"]) for w in writes]
    found = text_insertion_violations(original, edits, result) or text_three_way_violations(original, edits, result)
    assert found == [], f"{original!r} edited {edits}: {result!r}"


def test_regression_text_intent_equal_to_an_intermediate_merge() -> None:
    """Found by hypothesis: cy's intent equalled the merge of ada's and bob's, so it was skipped in one order."""
    writes = [Write("ada", 0, {"v": "a"}), Write("bob", 0, {"v": " "}), Write("cy", 0, {"v": "a "})]
    outcomes = {run(schema_for("text"), {"v": ""}, order).state_json for order in itertools.permutations(writes)}
    assert len(outcomes) == 1, outcomes


@st.composite
def wrong_typed_writes(draw: st.DrawFn) -> tuple[str, dict[str, Any], list[Write]]:
    """A value of the right type written on head, then a stale value of a type the policy cannot hold."""
    policy = draw(st.sampled_from(sorted(WRONG_VALUES)))
    path = draw(st.sampled_from(TARGETS))
    initial = with_member({"n": {}, "p": {}}, path, draw(POLICY_VALUES[policy]))
    good = Write("ada", 0, with_member({}, path, draw(POLICY_VALUES[policy])))
    wrong = Write("bob", 0, with_member({"own_bob": 1}, path, draw(WRONG_VALUES[policy])))
    return policy, initial, [good, wrong]


@given(wrong_typed_writes())
def test_a_wrong_typed_value_that_meets_a_concurrent_write_is_invalid(case: tuple[str, dict, list[Write]]) -> None:
    """INVALID_ARGUMENT, not ABORTED: no re-read makes it mergeable; nothing changes."""
    policy, initial, writes = case
    steps = run_each(schema_for(policy), initial, writes)
    reference = ReferenceExecution(schema_for(policy), initial)
    for step in steps:
        assert_step_agrees(step, reference, f"{policy}: initial {initial}, writes {writes}")
    assert steps[0].accepted and steps[1].invalid, steps


@pytest.mark.parametrize("policy", sorted(WRONG_VALUES))
def test_a_wrong_typed_value_is_invalid_whatever_its_base(policy: str) -> None:
    wrong = {"counter": "x", "max": True, "min": [1], "set": 3, "append": "x", "text": 5}[policy]
    on_head = run_each(schema_for(policy), {}, [Write("ada", 0, {"v": wrong})])
    untouched = run_each(schema_for(policy), {}, [Write("ada", 0, {"own": 1}), Write("bob", 0, {"v": wrong})])
    assert on_head[0].invalid and untouched[1].invalid, (on_head, untouched)


@st.composite
def rejecting_scenarios(draw: st.DrawFn) -> tuple[dict[str, Any], list[Write], list[Write]]:
    """Writes under `reject` on bases anywhere in the setup, often repeating what another wrote."""
    keys = st.sampled_from(["a", "b", "c"])
    small = st.integers(0, 2)
    inner = st.dictionaries(st.sampled_from(["x", "y"]), st.one_of(st.none(), small), max_size=2)
    initial = draw(st.dictionaries(keys, st.one_of(small, inner), max_size=3))
    fresh = st.dictionaries(keys, st.one_of(st.none(), small, inner), min_size=1, max_size=2)
    patches: list[dict[str, Any]] = []

    def patch() -> dict[str, Any]:
        drawn = draw(st.sampled_from(patches)) if patches and draw(st.booleans()) else draw(fresh)
        patches.append(drawn)
        return drawn

    setup = [Write(agent, i, patch()) for i, agent in enumerate(SETUP_AGENTS[: draw(st.integers(0, 2))])]
    writes = [Write(agent, draw(st.integers(0, len(setup))), patch()) for agent in AGENTS[: draw(st.integers(2, 4))]]
    return initial, setup, writes


@given(rejecting_scenarios())
@example(({"a": 1}, [], [Write("ada", 0, {"b": 1}), Write("bob", 0, {"c": 2})]))  # disjoint: both apply
@example(({"a": 1}, [], [Write("ada", 0, {"a": 2}), Write("bob", 0, {"a": 2})]))  # equal values: both apply
@example(({"a": {"x": 1}}, [], [Write("ada", 0, {"a": {"x": 2}}), Write("bob", 0, {"a": {"y": 2}})]))  # disjoint
@example(({"a": {"x": 1}}, [], [Write("ada", 0, {"a": None}), Write("bob", 0, {"a": {"y": 2}})]))  # a vs a/y
@example(({"a": 1}, [], [Write("ada", 0, {"a": None}), Write("bob", 0, {"a": None})]))  # both delete: applies
@example(({}, [Write("bea", 0, {"a": 1})], [Write("ada", 0, {"a": 1}), Write("bob", 1, {"a": 2})]))
def test_reject_refuses_exactly_the_conflicting_patches(case: tuple[dict[str, Any], list[Write], list[Write]]) -> None:
    """The reference says which stale patches must apply (disjoint paths, or the value head holds) and which
    must be refused, at which paths; the server must agree both ways, and end in a serial order of the
    accepted patches (a refused patch changes nothing)."""
    initial, setup, writes = case
    schema = {"type": "object"}
    steps = run_each(schema, initial, writes, setup=setup)
    reference = ReferenceExecution(schema, initial)
    for write in setup:
        assert reference.submit(write.agent_id, write.base_revision, write.patch).accepted
    for step in steps:
        stale = len(reference.revisions) - 1 > step.write.base_revision
        assert_step_agrees(step, reference, f"reject: initial {initial}, setup {setup}, writes {writes}")
        if stale:
            event(f"reject: a stale patch was {'accepted' if step.accepted else 'refused'}")
    serial = strip_nulls(initial)  # null means absent: the initial state is applied to {}
    for write in [*setup, *(step.write for step in steps if step.accepted)]:
        serial = apply(serial, write.patch)
    assert canonical(steps[-1].state) == canonical(serial)


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
    head = strip_nulls(initial)
    paths = PathIndex(0, lambda path: False)
    for revision, change in enumerate(changes, start=1):
        written = written_paths(head, change, change)
        paths.record(revision, (revision - 1, "other"), "", change, written, apply_in_place(head, change), durable=True)
    result = merge(
        head=head,
        head_revision=len(changes),
        paths=paths.root,
        patch=patch,
        stamp=(0, "me"),
        policies=PolicyMap(schema),
    )
    expected = effective(head, patch)
    assert result.applied_patch == ({} if expected is NO_CHANGE else expected)
    assert result.resolutions == []

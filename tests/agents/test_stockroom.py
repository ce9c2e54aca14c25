"""The stockroom: data that agents write at once, each key under its policy, checked against the world's own
books; a policy broken on purpose shows as drift (the scripted test policy, through a real server)."""

from __future__ import annotations

import os
from typing import Any

import pytest

os.environ["SKILLSTATE_OFFLINE"] = "1"

from skillstate.agents.envs.stockroom import PAIRS, StockEvent, Stockroom, believed, generate_stock_events
from skillstate.agents.envs.warehouse import EventKind
from skillstate.agents.scripted.stockroom import Books
from skillstate.agents.sims.concurrent import run_team

from .test_team import quick


def replay(events: list[StockEvent]) -> dict[str, int]:
    """Units per item after the events, in order: an independent ground truth for the generator."""
    units: dict[str, int] = {}
    for event in events:
        change = event.units if event.kind is EventKind.RECEIVE else -event.units
        units[event.item] = units.get(event.item, 0) + change
        assert units[event.item] >= 0, f"e{event.index} ships a unit that is not there"
    return units


@pytest.mark.parametrize("seed", range(5))
def test_every_event_is_valid_in_order_and_every_pair_in_either_order(seed: int) -> None:
    events = generate_stock_events(300, seed, contention=0.4)
    replay(events)
    for event in events:
        if event.partner is not None and event.partner > event.index:
            swapped = [*events[: event.index], events[event.partner], event, *events[event.partner + 1 :]]
            replay(swapped)
            assert event.item == events[event.partner].item and events[event.partner].partner == event.index
            kinds = "+".join(sorted((event.kind.value, events[event.partner].kind.value)))
            assert kinds in {"+".join(sorted(p.split("+"))) for p in PAIRS}


def test_contention_is_the_share_of_events_that_come_in_pairs() -> None:
    assert all(e.partner is None for e in generate_stock_events(500, 1, contention=0))
    for contention in (0.2, 0.5):
        events = [e for seed in range(4) for e in generate_stock_events(500, seed, contention)]
        paired = sum(e.partner is not None for e in events) / len(events)
        assert 0.8 * 2 * contention / (1 + contention) < paired < 1.2 * 2 * contention / (1 + contention), paired
    with pytest.raises(ValueError, match="contention"):
        generate_stock_events(10, 0, contention=1.5)


def test_the_world_refuses_what_it_cannot_do_and_changes_nothing() -> None:
    world = Stockroom()
    receive, order = StockEvent(0, EventKind.RECEIVE, "item_0", 2), StockEvent(1, EventKind.ORDER, "item_0", 1)
    world.alert(receive)
    for action, says in [
        ("Store item_0 3 shelf_1", "3 units of item_0 are not waiting at the dock"),
        ("Store item_0 two shelf_1", "two is not a number of units"),
        ("Store item_0 2 shelf_500", "shelf_500 is not a shelf"),
        ("Ship order_1 item_0 shelf_1", "order_1 is not an open order"),
        ("Fly item_0", "Unknown action 'Fly'"),
    ]:
        outcome = world.execute(action, None)
        assert outcome.status == "error" and says in outcome.result, (action, outcome)
    assert world.books() == {"stock": {}, "locations": {}, "shipped": []}
    assert world.execute("Store item_0 2 shelf_1", receive).handled
    world.alert(StockEvent(2, EventKind.RECEIVE, "item_1", 1))
    assert world.execute("Store item_1 1 shelf_1", None).result == "shelf_1 is kept for item_0."
    assert world.execute("Ship order_1 item_0 shelf_2", order).result == "shelf_2 holds no units of item_0."
    assert world.execute("Ship order_1 item_0 shelf_1", order).handled
    assert world.books() == {"stock": {"item_0": 1}, "locations": {"item_0": "shelf_1"}, "shipped": ["order_1"]}


def test_the_policy_writes_totals_and_takes_back_a_failed_action() -> None:
    """The test policy's patch (Books): the new totals it computed, only what changed; after a failure its
    own earlier change taken back before it answers again."""
    from skillstate.agents.scripted.stockroom import stockroom_answer

    state: dict[str, Any] = {"stock": {"item_0": 3}, "locations": {"item_0": "shelf_4"}, "shipped": ["order_1"]}
    _, patch, action = stockroom_answer("", "Event: Customer order_7 asks for 1 unit of item_0.", state)
    assert action == "Ship order_7 item_0 shelf_4"
    assert patch == {"stock": {"item_0": 2}, "shipped": ["order_1", "order_7"]}
    moved = {**state, "stock": {"item_0": 2}, "shipped": ["order_1", "order_7"], "locations": {"item_0": "shelf_9"}}
    failed = "Last action: Ship order_7 item_0 shelf_4\nStatus: error\nResult: shelf_4 holds no units of item_0."
    _, patch, action = stockroom_answer("", f"{failed}\nEvent: Customer order_7 asks for 1 unit of item_0.", moved)
    assert action == "Ship order_7 item_0 shelf_9" and patch == {}, "taken back and done again: no net change"
    assert Books.from_state(moved).patch() == {}


async def test_agents_writing_one_item_at_once_merge_and_agree_with_the_world(server_address: str) -> None:
    summary = (await run_team(server_address, quick(agents_per_skill=2, horizon=40, contention=0.6))).summary()
    assert summary["state_drift"] == [] and summary["dropped"] == 0 and summary["duplicate_actions"] == 0
    merged = summary["resolutions"]
    assert merged.get("counter", 0) > 0 and merged.get("set", 0) > 0 and merged.get("append", 0) > 0, merged
    assert "max" not in merged, "the clock's merges are the world's, not counted"
    assert summary["data_conflicts"] == {}, "every data key merges: nothing is refused"


async def test_faults_validation_catches_and_faulty_agents_leave_the_state_equal_to_the_world(
    server_address: str,
) -> None:
    """Malformed replies and refused patches (`faulty-0.3`) are asked again; a stalled, a dead and an
    early-finishing agent leave their events to the others: none of it reaches Σ."""
    config = quick(agents_per_skill=2, horizon=30, contention=0.5, model="skillstate/faulty-0.3",
                   faults=("stall", "die", "finish"), coordination="groups")  # fmt: skip
    result = await run_team(server_address, config)
    summary = result.summary()
    assert summary["state_drift"] == [], summary["state_drift"]
    assert any(r.outcome in ("invalid", "malformed") for r in result.records), "the faults happened"
    assert set(summary["agents_ended"].values()) >= {"stalled", "died"}


@pytest.mark.parametrize(
    ("policies", "drifting"),
    [({"stock": "lww"}, "/stock/"), ({"shipped": "lww"}, "/shipped"), ({"stock": "reject"}, "/stock/")],
)
async def test_a_policy_broken_on_purpose_shows_as_drift(
    server_address: str, policies: dict[str, str], drifting: str
) -> None:
    """Two orders for one item from one base: under `lww` one total overwrites the other, under `reject` the
    second equal total commits as no change; a set under `lww` keeps one shipper's orders."""
    config = quick(agents_per_skill=2, horizon=40, contention=0.6, policies=policies)
    summary = (await run_team(server_address, config)).summary()
    assert any(path.startswith(drifting) for path in summary["state_drift"]), summary["state_drift"]
    if "reject" in policies.values():
        assert summary["data_conflicts"].get("reject", 0) > 0, "refused on data, apart from claims"


def test_sigma_is_compared_with_the_books_in_their_shape() -> None:
    state = {"stock": {"item_0": 0, "item_1": 2}, "locations": {"item_0": "shelf_1"},
             "shipped": ["order_9", "order_10"], "audit": ["..."], "claims": {}}  # fmt: skip
    assert believed(state) == {"stock": {"item_1": 2}, "locations": {"item_0": "shelf_1"},
                               "shipped": ["order_10", "order_9"]}  # fmt: skip

"""The stockroom: data that agents write at once, each key under its policy, checked against the world's own
books; a policy broken on purpose shows as drift (the scripted test policy, through a real server)."""

from __future__ import annotations

import collections
import os
import random
from typing import Any

import pytest

os.environ["SKILLSTATE_OFFLINE"] = "1"

from skillstate.agents.envs.clock import Pace
from skillstate.agents.envs.stockroom import PAIRS, StockEvent, Stockroom, believed, generate_stock_events
from skillstate.agents.envs.timed import TimedStockroom
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
    maintenance = StockEvent(2, EventKind.MAINTENANCE, "item_0", 0)
    for action, event, says in [
        ("Store item_0 3 shelf_1", receive, "The shipment is 2 units of item_0, not 3 of item_0."),
        ("Store item_1 2 shelf_1", receive, "The shipment is 2 units of item_0, not 2 of item_1."),
        ("Store item_0 2 shelf_1", order, "No shipment waits to be stored for this event."),
        ("Store item_0 2 shelf_1", None, "No shipment waits to be stored for this event."),
        ("Store item_0 two shelf_1", receive, "two is not a number of units"),
        ("Store item_0 2 shelf_500", receive, "shelf_500 is not a shelf"),
        ("Ship order_1 item_0 shelf_1", None, "order_1 is not an open order"),
        ("Move item_0 shelf_1 shelf_2", receive, "No maintenance is due for this event."),
        ("Fly item_0", receive, "Unknown action 'Fly'"),
    ]:
        outcome = world.execute(action, event)
        assert outcome.status == "error" and says in outcome.result, (action, outcome)
    assert world.books() == {"stock": {}, "locations": {}, "shipped": []}
    assert world.execute("Store item_0 2 shelf_1", receive).handled
    other = StockEvent(3, EventKind.RECEIVE, "item_1", 1)
    assert world.execute("Store item_1 1 shelf_1", other).result == "shelf_1 is kept for item_0."
    assert world.execute("Ship order_1 item_0 shelf_2", order).result == "shelf_2 holds no units of item_0."
    assert world.execute("Move item_1 shelf_1 shelf_2", maintenance).result == (
        "The maintenance is due on item_0's shelf, not item_1's."
    )
    assert world.execute("Ship order_1 item_0 shelf_1", order).handled
    assert world.books() == {"stock": {"item_0": 1}, "locations": {"item_0": "shelf_1"}, "shipped": ["order_1"]}


class Solver:
    """Answers every announced event of a TimedStockroom correctly, from the world's own books."""

    def __init__(self, world: TimedStockroom, rng: random.Random) -> None:
        self.world, self.rng = world, rng

    def command(self, event: StockEvent) -> str:
        room = self.world.world
        if event.kind is EventKind.RECEIVE:
            free = [f"shelf_{n}" for n in range(room.shelves) if f"shelf_{n}" not in room.holder]
            return f"Store {event.item} {event.units} {room.shelf_of.get(event.item) or self.rng.choice(free)}"
        if event.kind is EventKind.ORDER:
            return f"Ship {event.order} {event.item} {room.shelf_of[event.item]}"
        free = [f"shelf_{n}" for n in range(room.shelves) if f"shelf_{n}" not in room.holder]
        return f"Move {event.item} {room.shelf_of[event.item]} {self.rng.choice(free)}"


@pytest.mark.parametrize("seed", range(4))
def test_open_orders_never_count_on_more_units_than_the_shelf_holds(seed: int) -> None:
    """Events answered in a random order as they open, every answer right: each action is valid when the
    world runs it, and at every tick the open orders of an item ask for no more units than its shelf holds."""
    rng = random.Random(seed)
    events = generate_stock_events(200, seed, contention=0.6)
    world = TimedStockroom(events, [i // 2 for i in range(200)], deadline=20)
    solver, by_id, open_ids = Solver(world, rng), {f"e{e.index}": e for e in events}, []
    for tick in range(10_000):
        open_ids += [arrival.event_id for arrival in world.due(tick)]
        ordered = collections.Counter(by_id[i].item for i in open_ids if by_id[i].kind is EventKind.ORDER)
        assert all(n <= world.world.units_on_shelf(item) for item, n in ordered.items()), (tick, ordered)
        for event_id in rng.sample(open_ids, k=min(len(open_ids), rng.randint(0, 3))):
            outcome = world.act(event_id, solver.command(by_id[event_id]))
            assert outcome.handled, (event_id, outcome)
            open_ids.remove(event_id)
        if not open_ids and not world.unannounced():
            break
    assert world.books()["shipped"] == sorted(e.order for e in events if e.kind is EventKind.ORDER)
    assert world.books()["stock"] == {item: n for item, n in replay(events).items() if n > 0}


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


def test_the_policy_takes_back_only_what_its_patches_wrote() -> None:
    """A failed Store's shelf is deleted when the patches on its event wrote it (a new item), kept when it was
    there before (the observation shows what they wrote: agents/teams/agent.py)."""
    from skillstate.agents.protocol.prompts import RECORDED_HEADER
    from skillstate.agents.scripted.stockroom import stockroom_answer

    failed = "Last action: Store item_2 2 shelf_3\nStatus: error\nResult: The shipment is 1 units of item_2, not 2."
    event = "Event: Shipment arrived containing 1 units of item_2."
    known = {"stock": {"item_2": 3}, "locations": {"item_2": "shelf_3"}, "shipped": []}
    observation = f'{failed}\n{RECORDED_HEADER} {{"stock":{{"item_2":3}}}}\n{event}'
    _, patch, action = stockroom_answer("", observation, known)
    assert (patch, action) == ({"stock": {"item_2": 2}}, "Store item_2 1 shelf_3"), "the old shelf kept"
    new = {"stock": {"item_2": 2}, "locations": {"item_2": "shelf_3"}, "shipped": []}
    recorded = '{"locations":{"item_2":"shelf_3"},"stock":{"item_2":2}}'
    observation = f"{failed}\n{RECORDED_HEADER} {recorded}\n{event}"
    _, patch, action = stockroom_answer("", observation, new)
    assert action.startswith("Store item_2 1 ") and action != "Store item_2 1 shelf_3", "a new shelf this time"
    assert patch == {"stock": {"item_2": 1}, "locations": {"item_2": action.split()[3]}}


def test_patches_compose_as_they_apply() -> None:
    from skillstate.agents.teams.actions import composed

    first = {"stock": {"item_1": 4}, "locations": {"item_1": "shelf_2"}, "shipped": ["order_3"]}
    then = {"stock": {"item_1": 3, "item_2": 1}, "locations": {"item_1": None}, "shipped": ["order_3", "order_5"]}
    assert composed(first, then) == {"stock": {"item_1": 3, "item_2": 1}, "locations": {"item_1": None},
                                     "shipped": ["order_3", "order_5"]}  # fmt: skip
    assert composed({}, then) == then and composed(first, {}) == first


@pytest.mark.parametrize("coordination", ["claims", "groups"])
async def test_an_agent_out_of_attempts_takes_back_its_record_and_hands_the_event_to_another(
    server_address: str, coordination: str
) -> None:
    """A receiving and a shipping agent that misread their events (`fumble`): the world refuses every action
    they take, they take back what they recorded, out of attempts they hand the event back, and the world
    announces it again for the other agent of the skill, which handles it."""
    config = quick(agents_per_skill=2, horizon=30, contention=0.4, faults=("fumble", "fumble"),
                   coordination=coordination, pace=Pace(tick_ms=50, rate=1.0, deadline=120))  # fmt: skip
    # a deadline long enough that the run, which ends once every event is handled, never drops one for time
    result = await run_team(server_address, config)
    summary = result.summary()
    assert summary["state_drift"] == [], summary["state_drift"]
    assert summary["dropped"] == 0 and summary["handed_back"] > 0, summary
    fumblers = {agent for agent, fault in config.faulty().items() if fault == "fumble"}
    refused = [r for r in result.records if r.agent in fumblers and r.outcome == "applied" and r.action != "Wait"]
    assert refused, "the fumblers acted (and the world refused them)"
    handlers = {e.handled_by for e in result.run.events.values()}
    assert not handlers & fumblers and {"stockroom-receiving-0", "stockroom-shipping-0"} <= handlers


@pytest.mark.parametrize("coordination", ["claims", "groups"])
async def test_an_event_no_agent_can_handle_is_handed_back_once_and_leaves_no_record(
    server_address: str, coordination: str
) -> None:
    """The only receiving agent misreads every shipment: each event it takes it tries, takes back, hands back
    once (announced again, nobody else takes it, so it does), tries again and lets go. No shipment is stored,
    so Σ must hold no stock and no shelf: every record its failed actions wrote was taken back, a new
    item's shelf included (only the observation's `Its state patches wrote` says it wrote one)."""
    config = quick(agents_per_skill=1, horizon=6, contention=0, faults=("fumble",), coordination=coordination,
                   pace=Pace(tick_ms=50, rate=1.0, deadline=60))  # fmt: skip
    summary = (await run_team(server_address, config)).summary()
    assert summary["state_drift"] == [], summary["state_drift"]
    receiving = [e for e in generate_stock_events(6, 0, 0) if e.kind is EventKind.RECEIVE]
    assert summary["handed_back"] == len(receiving) > 0, summary
    assert summary["dropped"] == summary["events"] == 6, "no shipment stored: no order or maintenance comes"
    counts = summary["coordination_counts"]
    assert counts["gave_up"] == 2 * len(receiving) and counts.get("records_left", 0) == 0, counts


async def test_a_slow_model_keeps_its_events_renewing_its_claims(server_address: str) -> None:
    """Each call takes over twice a lease: without renewal the other agent of the skill would take events
    over mid-call and its own late answer be refused."""
    config = quick(agents_per_skill=2, horizon=8, think_ms=700, hold_seconds=5)
    summary = (await run_team(server_address, config)).summary()
    counts = summary["coordination_counts"]
    assert summary["dropped"] == 0 and summary["duplicate_actions"] == 0, summary
    assert counts.get("takeovers", 0) == 0 and counts.get("abandoned", 0) == 0, counts


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

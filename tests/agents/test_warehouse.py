"""The warehouse environment: seeded events from a ground truth, validated actions, scoring by handled events."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from skillstate.agents.envs.warehouse import EventKind, Warehouse, generate_events, telemetry


@given(horizon=st.integers(0, 300), seed=st.integers(0, 2**32))
def test_events_repeat_for_a_seed_and_only_order_what_is_in_stock(horizon: int, seed: int) -> None:
    events = generate_events(horizon, seed)
    assert events == generate_events(horizon, seed) and len(events) == horizon
    stocked: set[str] = set()
    for event in events:
        if event.kind is EventKind.RECEIVE:
            assert event.item not in stocked
            stocked.add(event.item)
        else:
            assert event.item in stocked
            if event.kind is EventKind.ORDER:
                stocked.discard(event.item)


def test_a_perfect_agent_handles_every_event() -> None:
    world = Warehouse()
    events = generate_events(200, seed=7)
    handled = 0
    for event in events:
        text = world.alert(event)
        if event.kind is EventKind.RECEIVE:
            shelf = next(f"shelf_{n}" for n in range(world.shelves) if f"shelf_{n}" not in world.stock)
            outcome = world.execute(f"Store {event.item} {shelf}", event)
        elif event.kind is EventKind.ORDER:
            outcome = world.execute(f"Ship {event.item} {world.location(event.item)}", event)
        else:
            old = text.removeprefix("Maintenance required on ").rstrip(".")
            new = next(f"shelf_{n}" for n in range(world.shelves) if f"shelf_{n}" not in world.stock)
            outcome = world.execute(f"Move {event.item} {old} {new}", event)
        assert outcome.status == "ok", outcome
        handled += outcome.handled
    assert handled == len(events)


def test_invalid_actions_change_nothing_and_say_why() -> None:
    world = Warehouse(shelves=10)
    events = generate_events(1, seed=0)
    world.alert(events[0])
    world.execute(f"Store {events[0].item} shelf_1", events[0])
    before = dict(world.stock)
    for action, reason in [
        ("Fly item_0 shelf_1", "Unknown action 'Fly'"),
        ("Store item_0", "Store takes 2 arguments, got 1"),
        ("Store item_9 shelf_2", "item_9 is not waiting at the dock"),
        ("Ship item_0 shelf_12", "shelf_12 is not a shelf"),
        ("Ship item_0 shelf_01", "shelf_01 is not a shelf"),
        ("Ship item_0 shelf_2", "shelf_2 holds nothing, not item_0"),
        ("Move item_0 shelf_1 shelf_1", "shelf_1 is occupied by item_0"),
        ("", "Unknown action '(empty)'"),
    ]:
        outcome = world.execute(action, None)
        assert (outcome.status, outcome.handled) == ("error", False) and reason in outcome.result, outcome
    assert world.stock == before


def test_a_valid_action_for_another_event_does_not_count() -> None:
    world = Warehouse()
    first, second = [event for event in generate_events(50, seed=3) if event.kind is EventKind.RECEIVE][:2]
    world.alert(first)
    world.alert(second)
    late = world.execute(f"Store {first.item} shelf_3", second)
    waited = world.execute("Wait", second)
    assert (late.status, late.handled) == ("ok", False)
    assert (waited.status, waited.handled) == ("ok", False)


def test_telemetry_is_seeded_and_never_names_items_or_shelves() -> None:
    lines = telemetry(random.Random(5), 50)
    assert lines == telemetry(random.Random(5), 50) and len(lines) == 50
    assert not any("item_" in line or "shelf_" in line for line in lines)

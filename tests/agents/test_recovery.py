"""State recovery as the paper measures it: the world changed outside the agents, an alert says so, and the
hallucination lag counts the steps acted on the stale belief (0 for a perfect agent); and the errors no
validation catches show up as state drift."""

from __future__ import annotations

import os

import pytest

os.environ["SKILLSTATE_OFFLINE"] = "1"

from skillstate.agents.envs.base import Outcome
from skillstate.agents.envs.recovery import Recovery
from skillstate.agents.envs.warehouse import Event, EventKind, Warehouse, WarehouseEnvironment, generate_events
from skillstate.agents.sims.sequential import SimConfig, run_simulation


@pytest.mark.parametrize("scenario", ["secret-audit", "secret-barcode", "secret-move"])
async def test_the_scripted_policy_recovers_every_warehouse_change_with_no_lag(
    server_address: str, scenario: str
) -> None:
    result = await run_simulation(server_address, SimConfig(horizon=30, scenario=scenario))
    assert result.recovery == {"scenario": scenario, "recoverable": True, "recovered": True, "hallucination_lag": 0,
                               "recovery_steps": 2}  # fmt: skip
    assert result.state_drift == [] and result.score == 1.0


@pytest.mark.parametrize("scenario", ["force-push", "flaky-ci"])
async def test_the_scripted_policy_recovers_the_repository_with_no_lag(server_address: str, scenario: str) -> None:
    result = await run_simulation(server_address, SimConfig(env="repo", horizon=16, scenario=scenario))
    assert result.recovery is not None and result.recovery["recovered"] and result.recovery["hallucination_lag"] == 0
    assert result.state_drift == []


async def test_a_canceled_order_is_unrecoverable_and_said_so(server_address: str) -> None:
    result = await run_simulation(server_address, SimConfig(horizon=30, scenario="canceled-order"))
    assert result.recovery == {"scenario": "canceled-order", "recoverable": False, "recovered": False,
                               "hallucination_lag": None, "recovery_steps": None}  # fmt: skip


def test_acting_on_the_old_belief_counts_as_lag_until_the_follow_up_is_handled() -> None:
    """The judge alone: a stale Ship from the shelf the item left counts; the correct one ends the count."""
    world = Warehouse()
    world.stock = {"shelf_1": "item_1", "shelf_2": "item_2"}
    recovery = Recovery("secret-move", at=0, order=lambda item, shelf: Event(-1, EventKind.ORDER, item, shelf))
    alert, follow_up = recovery.notices(world, 0, None)
    new_shelf = world.location("item_1")
    assert alert.text == f"Alert: item_1 was moved from shelf_1 to {new_shelf} by the night shift."
    recovery.judge(alert, "Wait", Outcome("Wait", "ok", "Noted.", False))
    stale = world.execute("Ship item_1 shelf_1", follow_up.subject)
    recovery.judge(follow_up, "Ship item_1 shelf_1", stale)
    right = world.execute(f"Ship item_1 {new_shelf}", follow_up.subject)
    recovery.judge(follow_up, f"Ship item_1 {new_shelf}", right)
    assert recovery.result() == {"scenario": "secret-move", "recoverable": True, "recovered": True,
                                 "hallucination_lag": 1, "recovery_steps": 3}  # fmt: skip


def test_an_alert_asks_nothing_of_the_world_and_the_follow_up_counts_as_an_event() -> None:
    environment = WarehouseEnvironment(generate_events(9, seed=0), scenario="secret-audit")
    seen = []
    while (notice := environment.next_notice()) is not None:
        seen.append(notice)
        event = notice.subject
        arrived = event is not None and event.kind is EventKind.RECEIVE
        free = next(f"shelf_{n}" for n in range(500) if f"shelf_{n}" not in environment.world.stock)
        environment.act(notice, f"Store {event.item} {free}" if arrived else "Wait")
    alerts = [n for n in seen if n.subject is None]
    assert len(alerts) == 1 and alerts[0].text.startswith("Alert: an audit found")
    ordered = alerts[0].text.split()[-1].rstrip(".")  # the item the audit found elsewhere is ordered next
    follow_up = seen[seen.index(alerts[0]) + 1]
    assert follow_up.text == f"Customer ordered {ordered}." and follow_up.subject.index == -1
    later = [n for n in seen[seen.index(follow_up) + 1 :] if n.subject is not None]
    assert all(n.subject.item != ordered for n in later), "what was to happen to the shipped item cannot"
    assert environment.score()[1] == 1 + len([n for n in seen if n.subject is not None and n.subject.index >= 0])


async def test_errors_validation_cannot_catch_leak_into_the_state_and_are_reported(server_address: str) -> None:
    honest = await run_simulation(server_address, SimConfig(horizon=30))
    faulty = await run_simulation(server_address, SimConfig(horizon=30, model="skillstate/semantic-0.5"))
    assert honest.state_drift == []
    assert faulty.state_drift and all(path.startswith("/inventory/") for path in faulty.state_drift)
    assert faulty.retries()["invalid"] == 0, "schema-valid: the rollback never saw them"
    transcript = await run_simulation(server_address, SimConfig(horizon=10, runtime="react"))
    assert transcript.state_drift is None, "a runtime that keeps no shared state has no drift to report"

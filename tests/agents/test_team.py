"""Agents at once over one execution: claims in Σ, leases, consumer groups, faults that must not hang a run,
and state drift, through a real server (the scripted test policy, with a short think time)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

os.environ["SKILLSTATE_OFFLINE"] = "1"

from skillstate.agents.envs.clock import Pace, arrival_ticks
from skillstate.agents.envs.stockroom import StockEvent
from skillstate.agents.envs.timed import TimedStockroom
from skillstate.agents.envs.warehouse import EventKind
from skillstate.agents.runtime.contexts import SkillState
from skillstate.agents.runtime.records import Limits, Recorder
from skillstate.agents.sims.concurrent import run_team, team_initial, team_schema
from skillstate.agents.sims.drift import state_drift
from skillstate.agents.sims.team_setup import TeamConfig
from skillstate.agents.teams import claims
from skillstate.agents.teams.agent import AgentDied, Coordination, TeamAgent
from skillstate.agents.teams.claims import Standing
from skillstate.clients import ConflictError, StateClient

from ..waiting import eventually
from . import together

FAST = Pace(tick_ms=50, rate=1.0, deadline=40)
"""A quick world for tests: 20 ticks a second."""


def quick(**overrides: Any) -> TeamConfig:
    defaults = {"horizon": 12, "pace": FAST, "think_ms": 50, "lease_ticks": 6, "timeout": 60, "finish_wait": 5,
                "hold_seconds": 1}  # fmt: skip
    return TeamConfig(**defaults | overrides)


def test_where_an_event_stands_follows_its_claim_and_the_clock() -> None:
    state: dict[str, Any] = {"clock": 10, "claims": {"a": {"agent": "x", "until": 12}, "b": {"agent": "x", "until": 9},
                                                    "c": {"agent": "y", "until": 0, "done": True}}}  # fmt: skip
    assert claims.standing(state, "a", "x") is Standing.MINE
    assert claims.standing(state, "a", "y") is Standing.HELD
    assert claims.standing(state, "b", "y") is Standing.EXPIRED, "its lease ran out at tick 9"
    assert claims.standing(state, "c", "x") is Standing.DONE, "a done claim never expires"
    assert claims.standing(state, "d", "x") is Standing.FREE
    assert claims.visible(state | {"stock": {}}) == {"stock": {}}


def test_state_drift_names_every_path_where_the_state_and_the_world_disagree() -> None:
    world = {"inventory": {"shelf_1": "item_1", "shelf_2": "item_2", "shelf_3": "item_3"}}
    believed = {"inventory": {"shelf_1": "item_1", "shelf_2": "item_9", "shelf_4": "item_3"}, "claims": {"e": {}}}
    assert state_drift(believed, world) == ["/inventory/shelf_2", "/inventory/shelf_3", "/inventory/shelf_4"]
    assert state_drift(world, world) == []
    assert state_drift({}, {"inventory": {}}) == ["/inventory"]


def test_arrivals_come_from_the_seed_at_the_rate_asked() -> None:
    ticks = arrival_ticks(2000, 1.5, seed=7)
    assert ticks == arrival_ticks(2000, 1.5, seed=7) and ticks != arrival_ticks(2000, 1.5, seed=8)
    assert ticks == sorted(ticks) and ticks[0] >= 1
    assert 1.4 < len(ticks) / ticks[-1] < 1.6, "Poisson(1.5) a tick: 1.5 events a tick on average"


def test_orders_wait_for_free_units_and_a_maintenance_for_the_items_other_events() -> None:
    kinds = [(EventKind.RECEIVE, 1), (EventKind.ORDER, 1), (EventKind.RECEIVE, 2), (EventKind.ORDER, 1),
             (EventKind.MAINTENANCE, 0)]  # fmt: skip
    events = [StockEvent(i, kind, "item_0", units) for i, (kind, units) in enumerate(kinds)]
    world = TimedStockroom(events, [1] * len(events), deadline=5)
    assert [a.event_id for a in world.due(1)] == ["e0", "e2"], "shipments at once; no units on a shelf yet"
    assert world.act("e0", "Store item_0 1 shelf_4").handled
    assert [a.event_id for a in world.due(2)] == ["e1"], "one unit on the shelf, and e1 counts on it"
    assert world.act("e2", "Store item_0 2 shelf_4").handled
    assert [a.event_id for a in world.due(3)] == ["e3"]
    assert world.act("e1", "Ship order_1 item_0 shelf_4").handled and world.due(4) == []
    assert world.act("e3", "Ship order_3 item_0 shelf_4").handled
    assert [a.text for a in world.due(5)] == ["Maintenance due on shelf_4."]


def test_a_pair_of_events_about_one_item_is_announced_together() -> None:
    events = [
        StockEvent(0, EventKind.RECEIVE, "item_0", 2),
        StockEvent(1, EventKind.ORDER, "item_0", 1, partner=2),
        StockEvent(2, EventKind.ORDER, "item_0", 1, partner=1),
        StockEvent(3, EventKind.ORDER, "item_0", 1),
    ]
    world = TimedStockroom(events, [1, 2, 3, 3], deadline=5)
    assert [a.event_id for a in world.due(1)] == ["e0"]
    assert world.act("e0", "Store item_0 2 shelf_7").handled
    pair = world.due(3)
    assert [(a.event_id, a.tick) for a in pair] == [("e1", 2), ("e2", 2)], "the second arrives with the first"
    assert (
        world.act("e2", "Ship order_2 item_0 shelf_7").handled
        and world.act("e1", "Ship order_1 item_0 shelf_7").handled
    )
    assert world.books() == {"stock": {}, "locations": {"item_0": "shelf_7"}, "shipped": ["order_1", "order_2"]}


class ReadsTogether(together.ReadsTogether, TeamAgent):
    """Eight of these all claim on one revision."""


async def test_eight_agents_racing_for_one_event_exactly_one_acts_and_the_losers_spend_no_tokens(
    server_address: str,
) -> None:
    async with StateClient(server_address) as client:
        execution_id = (await client.create_execution(schema=team_schema(), initial_state=team_initial())).execution_id
        recorder, barrier = Recorder(), asyncio.Barrier(8)
        agents = []
        for i in range(8):
            agent = ReadsTogether(client, execution_id, f"stockroom-receiving-{i}", skills=["stockroom-receiving"],
                                  instructions="Store arrivals.", model="skillstate/scripted", context=SkillState(),
                                  recorder=recorder, limits=Limits(), coordination=Coordination())  # fmt: skip
            agent.barrier = barrier
            agents.append(agent)
        running = [asyncio.ensure_future(agent.run()) for agent in agents]
        for agent in agents:
            await client.publish_observation(execution_id, agent.agent_id, {}, kind="start")
        await asyncio.wait_for(asyncio.gather(*(a.ready.wait() for a in agents)), 10)
        event = {"event": "Shipment arrived containing 3 units of item_3.", "event_id": "e0", "tick": 0, "deadline": 9}
        await client.publish_observation(execution_id, "skill:stockroom-receiving", event, kind="event")
        history = client.watch(execution_id)
        acted = None
        async for revision in history:
            if isinstance(revision.action, dict):
                acted = revision
                break
        for agent in agents:
            await client.publish_observation(execution_id, agent.agent_id, {"done": True}, kind="done")
        await asyncio.wait_for(asyncio.gather(*running), 10)
        assert acted is not None and acted.action["event"] == "e0" and acted.action["do"].startswith("Store item_3 3 ")
        assert sum(a.counts["claims"] for a in agents) == 1 and sum(a.counts["claim_losses"] for a in agents) == 7
        assert [r.agent for r in recorder.records] == [acted.agent_id], "one model call, by the winner"
        state = (await client.get_state(execution_id)).state
        assert state["claims"] == {"e0": {"agent": acted.agent_id, "until": 10, "done": True}}
        with pytest.raises(ConflictError):  # a late claim on the revision before the action loses too
            await client.submit_patch(execution_id, claims.claim_patch("e0", "late", 99), agent_id="late",
                                      base_revision=acted.revision - 1)  # fmt: skip


async def test_four_agents_a_skill_keep_up_where_one_falls_behind(server_address: str) -> None:
    pace = Pace(tick_ms=50, rate=1.2, deadline=12)
    one = (await run_team(server_address, quick(agents_per_skill=1, horizon=40, pace=pace, think_ms=150))).summary()
    four = (await run_team(server_address, quick(agents_per_skill=4, horizon=40, pace=pace, think_ms=150))).summary()
    assert four["handled_on_time"] > one["handled_on_time"]
    assert four["handled_on_time"] >= 0.9 * 40 and one["handled_on_time"] < 0.8 * 40
    for run in (one, four):
        assert run["duplicate_actions"] == 0 and run["state_drift"] == [] and run["dropped"] == 0
    assert four["tokens_per_handled_event"] < 1.3 * one["tokens_per_handled_event"], "no per-agent transcript"


async def test_the_claim_of_an_agent_that_dies_is_taken_over_once_its_lease_runs_out(server_address: str) -> None:
    async with StateClient(server_address) as client:
        initial = team_initial()
        execution_id = (await client.create_execution(schema=team_schema(), initial_state=initial)).execution_id
        recorder = Recorder()
        common: dict[str, Any] = {"skills": ["stockroom-receiving"], "instructions": "Store arrivals.",
                                  "model": "skillstate/scripted", "context": SkillState(), "recorder": recorder,
                                  "limits": Limits()}  # fmt: skip
        dying = TeamAgent(client, execution_id, "stockroom-receiving-0", **common,
                          coordination=Coordination(lease_ticks=5, die_after=1))  # fmt: skip
        survivor = TeamAgent(client, execution_id, "stockroom-receiving-1", **common,
                             coordination=Coordination(lease_ticks=5, tick_ms=20))  # fmt: skip
        event = {"event": "Shipment arrived containing 3 units of item_3.", "event_id": "e0", "tick": 0, "deadline": 9}
        dies = asyncio.ensure_future(dying.run())
        await client.publish_observation(execution_id, dying.agent_id, event, kind="event")  # to it alone
        with pytest.raises(AgentDied):
            await asyncio.wait_for(dies, 10)
        assert claims.claim_of((await client.get_state(execution_id)).state, "e0") == claims.Claim(dying.agent_id, 5)
        running = asyncio.ensure_future(survivor.run())
        await client.publish_observation(execution_id, survivor.agent_id, event, kind="event")
        await eventually(lambda: survivor.counts["taken_up"] == 0 and bool(survivor._held))  # held: the lease is live
        head = (await client.get_state(execution_id)).revision
        await client.submit_patch(execution_id, {"clock": 6}, agent_id="environment", base_revision=head)
        await eventually(lambda: survivor.counts["takeovers"] == 1)  # it looks again as the lease may run out
        await eventually(lambda: bool(recorder.records))
        await client.publish_observation(execution_id, survivor.agent_id, {"done": True}, kind="done")
        await asyncio.wait_for(running, 10)
        state = (await client.get_state(execution_id)).state
        assert state["claims"]["e0"] == {"agent": survivor.agent_id, "until": 11, "done": True}
        assert state["stock"] == {"item_3": 3} and set(state["locations"]) == {"item_3"}
        assert [r.agent for r in recorder.records] == [survivor.agent_id]


@pytest.mark.parametrize("coordination", ["claims", "groups"])
async def test_a_run_with_an_agent_that_dies_handles_every_event_once(server_address: str, coordination: str) -> None:
    summary = (await run_team(server_address, quick(agents_per_skill=2, coordination=coordination,
                                                    faults=("die",)))).summary()  # fmt: skip
    assert summary["agents_ended"]["stockroom-receiving-1"] == "died"
    assert summary["dropped"] == 0 and summary["duplicate_actions"] == 0 and summary["state_drift"] == []
    if coordination == "groups":  # it was handed one of the first two arrivals, and claimed it: free then
        assert summary["coordination_counts"]["takeovers"] >= 1


async def test_stalled_dead_and_early_finishing_agents_do_not_hang_a_run(server_address: str) -> None:
    faults = ("stall", "die", "finish")  # through the groups, each faulty agent is handed work of its skill
    result = await run_team(server_address, quick(agents_per_skill=2, horizon=30, coordination="groups", faults=faults))
    summary = result.summary()
    assert summary["agents_ended"]["stockroom-receiving-1"] == "stalled"
    assert summary["agents_ended"]["stockroom-shipping-1"] == "died"
    assert summary["agents_ended"]["stockroom-maintenance-1"] == "finished_early"
    assert not summary["timed_out"] and summary["dropped"] == 0 and summary["duplicate_actions"] == 0, summary


async def test_a_policy_that_writes_wrong_state_shows_up_as_drift(server_address: str) -> None:
    honest = (await run_team(server_address, quick(agents_per_skill=1))).summary()
    corrupt = (await run_team(server_address, quick(agents_per_skill=1, faults=("corrupt",)))).summary()
    assert honest["state_drift"] == []
    assert any(path.startswith("/locations/item_") for path in corrupt["state_drift"]), corrupt["state_drift"]


async def test_seeded_runs_see_the_same_events_and_score_alike(server_address: str) -> None:
    """The events (items, kinds, ticks, deadlines) repeat exactly for a seed; which agent handles which
    event, and when within its deadline, depends on the interleaving and may differ."""
    runs = [await run_team(server_address, quick(agents_per_skill=3, seed=4)) for _ in range(2)]
    arrivals = [sorted((e.arrival.event_id, e.arrival.text, e.arrival.tick, e.arrival.deadline)
                       for e in run.run.events.values()) for run in runs]  # fmt: skip
    assert arrivals[0] == arrivals[1] and len(arrivals[0]) == 12
    assert [r.summary()["handled_on_time"] for r in runs] == [12, 12]


async def test_a_holder_slower_than_its_lease_never_acts_after_a_takeover(server_address: str) -> None:
    """Found in review: the late holder's patch wrote only `done`, an equal value to the taker's, so it
    committed and its action reached the world a second time. The done claim names its agent now: after a
    takeover that is a conflict, and the late action goes nowhere."""
    async with StateClient(server_address) as client:
        initial = team_initial()
        execution_id = (await client.create_execution(schema=team_schema(), initial_state=initial)).execution_id
        recorder = Recorder()
        lease = Coordination(lease_ticks=5, tick_ms=20)
        common: dict[str, Any] = {"skills": ["stockroom-receiving"], "instructions": "Store arrivals.",
                                  "model": "skillstate/scripted", "context": SkillState(), "recorder": recorder,
                                  "limits": Limits(), "coordination": lease}  # fmt: skip
        slow = TeamAgent(client, execution_id, "stockroom-receiving-0", **common, policy_options={"think_ms": 1500})
        quick_one = TeamAgent(client, execution_id, "stockroom-receiving-1", **common, policy_options={"think_ms": 10})
        event = {"event": "Shipment arrived containing 3 units of item_3.", "event_id": "e0", "tick": 0, "deadline": 9}
        running = [asyncio.ensure_future(agent.run()) for agent in (slow, quick_one)]
        await client.publish_observation(execution_id, slow.agent_id, event, kind="event")
        await eventually(lambda: slow.counts["claims"] == 1)  # it claimed, and asks its slow model
        head = (await client.get_state(execution_id)).revision
        await client.submit_patch(execution_id, {"clock": 6}, agent_id="environment", base_revision=head)
        await client.publish_observation(execution_id, quick_one.agent_id, event, kind="event")
        await eventually(lambda: quick_one.counts["takeovers"] == 1 and len(recorder.records) >= 1)
        await eventually(lambda: slow.counts["abandoned"] == 1, timeout=20)  # its model answered, too late
        for agent in (slow, quick_one):
            await client.publish_observation(execution_id, agent.agent_id, {"done": True}, kind="done")
        await asyncio.wait_for(asyncio.gather(*running), 10)
        actions = [r async for r in client.history(execution_id) if isinstance(r.action, dict)]
        assert [(r.agent_id, r.action["event"]) for r in actions] == [(quick_one.agent_id, "e0")]
        outcomes = [r.outcome for r in recorder.records if r.agent == slow.agent_id]
        assert outcomes == ["conflict", "abandoned"], "refused on its claim, then found the event taken over"


async def test_the_plot_shows_tokens_per_event_as_bars_for_one_team_size_and_as_lines_for_several(
    server_address: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from skillstate.agents.reports.team_results import tokens_per_event

    claims_1 = await run_team(server_address, quick(agents_per_skill=1))
    groups_1 = await run_team(server_address, quick(agents_per_skill=1, coordination="groups"))
    claims_2 = await run_team(server_address, quick(agents_per_skill=2))
    expected = {(r.config.coordination, r.config.agents_per_skill): r.summary()["tokens_per_handled_event"]
                for r in (claims_1, groups_1, claims_2)}  # fmt: skip
    figure, (one_size, sizes) = plt.subplots(1, 2)
    tokens_per_event(one_size, [claims_1, groups_1])
    bars = {
        tick.get_text(): bar.get_height()
        for tick, bar in zip(one_size.get_xticklabels(), one_size.patches, strict=True)
    }
    assert bars == {"skillstate (claims)": expected["claims", 1], "skillstate (groups)": expected["groups", 1]}
    assert one_size.get_xlabel() == "1 agent per skill"
    tokens_per_event(sizes, [claims_1, groups_1, claims_2])
    lines = {line.get_label(): list(zip(line.get_xdata(), line.get_ydata(), strict=True)) for line in sizes.get_lines()}
    assert lines == {
        "skillstate (claims)": [(1, expected["claims", 1]), (2, expected["claims", 2])],
        "skillstate (groups)": [(1, expected["groups", 1])],
    }
    plt.close(figure)

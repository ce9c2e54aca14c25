"""Agents reach the server over one session each (the default), or over unary calls for comparison: the
server's own metrics count which RPCs they made, and the transport changes nothing else of a run."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

os.environ["SKILLSTATE_OFFLINE"] = "1"

from skillstate.agents.sims.concurrent import run_team
from skillstate.agents.sims.sequential import SimConfig, run_simulation
from skillstate.server.engine.config import EngineConfig
from skillstate.server.rpc.app import RunningServer, start_server
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog
from skillstate.server.storage.skill_store.sqlite import SqliteSkillStore

from ..waiting import eventually
from .test_team import quick

AGENT_RPCS = ("Session", "StreamObservations", "SubmitPatch", "AckObservations")


@pytest.fixture
async def measured(db_path: Path) -> AsyncIterator[RunningServer]:
    running = await start_server(
        SqliteRevisionLog(db_path),
        "127.0.0.1:0",
        EngineConfig(),
        SqliteSkillStore(db_path),
        metrics_listen="127.0.0.1:0",
    )
    yield running
    await running.stop(grace=0)


async def calls(server: RunningServer) -> dict[str, int]:
    """How many calls of each RPC an agent may make the server finished, from its /metrics."""
    url = f"http://127.0.0.1:{server.metrics_port}/metrics"
    text = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read().decode())
    counts = {
        sample.labels.get("method"): int(sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "skillstate_rpc_seconds_count"
    }
    return {method: counts.get(method, 0) for method in AGENT_RPCS}


async def settled(server: RunningServer, before: dict[str, int], expected: dict[str, int]) -> dict[str, int]:
    """The calls made since `before`, once they are `expected` (a call is counted when the server ends it)."""

    async def made() -> dict[str, int] | None:
        now = await calls(server)
        delta = {method: now[method] - before[method] for method in AGENT_RPCS}
        return delta if delta == expected else None

    try:
        return await eventually(made, timeout=5)
    except AssertionError:
        now = await calls(server)
        return {method: now[method] - before[method] for method in AGENT_RPCS}


async def test_each_agent_runs_over_one_session_and_unary_calls_give_the_same_run(measured: RunningServer) -> None:
    address = f"127.0.0.1:{measured.port}"
    config = SimConfig(horizon=8, seed=4, model="skillstate/faulty-0.3")  # retries too: invalid, malformed
    start = await calls(measured)
    over_sessions = await run_simulation(address, config)
    sessions = {"Session": 3, "StreamObservations": 0, "SubmitPatch": 0, "AckObservations": 0}
    assert await settled(measured, start, sessions) == sessions, "one session per agent, nothing else"
    writes = sum(r.outcome in ("applied", "invalid", "conflict", "gave_up") for r in over_sessions.records)
    assert writes > 8 + 3 and any(r.outcome == "invalid" for r in over_sessions.records)

    start = await calls(measured)
    over_unary = await run_simulation(address, dataclasses.replace(config, transport="unary"))
    unary = {"Session": 0, "StreamObservations": 3, "SubmitPatch": writes, "AckObservations": 0}
    assert await settled(measured, start, unary) == unary
    assert over_unary.records == over_sessions.records
    assert (over_unary.score, over_unary.world) == (over_sessions.score, over_sessions.world)


@pytest.mark.parametrize(
    ("runtime", "coordination", "sessions"),
    [("skillstate", "groups", 6), ("groupchat", "claims", 7)],  # the group chat's floor reads on one of its own
)
async def test_agents_at_once_join_their_groups_and_ack_over_their_sessions(
    measured: RunningServer, runtime: str, coordination: str, sessions: int
) -> None:
    start = await calls(measured)
    config = quick(agents_per_skill=2, runtime=runtime, coordination=coordination)
    result = await run_team(f"127.0.0.1:{measured.port}", config)
    summary = result.summary()
    assert summary["dropped"] == 0 and summary["duplicate_actions"] == 0
    ticks = result.run.ticks  # the world writes its clock once a tick, by SubmitPatch; the agents never do
    expected = {"Session": sessions, "StreamObservations": 0, "SubmitPatch": ticks, "AckObservations": 0}
    assert await settled(measured, start, expected) == expected


def test_an_unknown_transport_is_refused() -> None:
    with pytest.raises(ValueError, match="transport: 'grpc' is not one of session, unary"):
        SimConfig(transport="grpc")

"""Prometheus metrics from a real server: what happened shows up at /metrics."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from skillstate.clients import ConflictError, NotFoundError, SkillRegistryClient, StateClient
from skillstate.server.rpc.app import RunningServer, start_server
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog

from ..waiting import eventually
from .test_skill_registry import package


@pytest.fixture
async def measured(db_path: Path) -> AsyncIterator[RunningServer]:
    running = await start_server(SqliteRevisionLog(db_path), "127.0.0.1:0", metrics_listen="127.0.0.1:0")
    yield running
    await running.stop(grace=0)


async def scrape(server: RunningServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    url = f"http://127.0.0.1:{server.metrics_port}/metrics"
    text = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read().decode())
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_what_the_server_did_is_in_its_metrics(measured: RunningServer) -> None:
    address = f"127.0.0.1:{measured.port}"
    schema = {"properties": {"n": {"type": "integer", "x-merge": "counter"}, "s": {"type": "string"}}}
    async with StateClient(address) as client, SkillRegistryClient(address) as registry:
        await client.create_execution("x", schema=schema, initial_state={"n": 0, "s": ""})
        await client.submit_patch("x", {"n": 1, "s": "a"}, agent_id="a", base_revision=0)
        await client.submit_patch("x", {"n": 1}, agent_id="b", base_revision=0)  # merged: counter combined
        with pytest.raises(ConflictError):
            await client.submit_patch("x", {"s": "b"}, agent_id="c", base_revision=0)  # reject
        with pytest.raises(NotFoundError):
            await client.get_state("missing")
        watching = asyncio.create_task(anext(client.watch("x", 2)))

        async def watched() -> bool:
            return (await scrape(measured))["skillstate_watchers", ()] == 1

        await eventually(watched)
        await registry.register_skill(package("ship-order"))
        await registry.hydrate("ship an order", budget_tokens=1000)
        metrics = await scrape(measured)
        watching.cancel()
    assert metrics["skillstate_commits_total", (("kind", "revision"),)] == 2
    assert metrics["skillstate_conflicts_total", (("policy", "reject"),)] == 1
    assert metrics["skillstate_resolutions_total", (("outcome", "combined"), ("policy", "counter"))] == 1
    assert metrics["skillstate_rpc_refused_total", (("method", "GetState"), ("status", "NOT_FOUND"))] == 1
    assert metrics["skillstate_rpc_refused_total", (("method", "SubmitPatch"), ("status", "ABORTED"))] == 1
    assert metrics["skillstate_rpc_seconds_count", (("method", "SubmitPatch"),)] == 3
    assert metrics["skillstate_hydration_seconds_count", ()] == 1
    assert metrics["skillstate_watchers", ()] == 1 and metrics["skillstate_executions_loaded", ()] == 1
    assert metrics["skillstate_commit_seconds_count", ()] >= 1


async def test_the_event_loop_lag_is_measured(measured: RunningServer) -> None:
    """The probe wakes every 0.1 s; holding the loop for 0.5 s (here, on purpose, with a blocking sleep)
    shows as a lag over 0.25 s (at least 0.4 s, wherever the probe was in its interval)."""

    async def probed() -> bool:
        return (await scrape(measured)).get(("skillstate_event_loop_lag_seconds_count", ()), 0) >= 1

    await eventually(probed)
    time.sleep(0.5)  # the stall under measurement: it must block the loop, so no asyncio here

    async def seen() -> bool:
        metrics = await scrape(measured)
        return (
            metrics["skillstate_event_loop_lag_seconds_bucket", (("le", "0.25"),)]
            < metrics["skillstate_event_loop_lag_seconds_count", ()]
        )

    await eventually(seen)


async def test_a_sessions_submits_are_measured_one_by_one(measured: RunningServer) -> None:
    address = f"127.0.0.1:{measured.port}"
    async with StateClient(address) as client:
        await client.create_execution("s", initial_state={"owner": ""})
        await client.submit_patch("s", {"owner": "b"}, agent_id="b", base_revision=0)
        async with client.session("s", agent_id="a") as session:
            for n in range(3):
                await session.submit({f"k{n}": n}, base_revision=1)
            with pytest.raises(ConflictError):
                await session.submit({"owner": "a"}, base_revision=0)
    samples = await scrape(measured)
    assert samples[("skillstate_rpc_seconds_count", (("method", "Session.submit"),))] == 4
    assert samples[("skillstate_rpc_refused_total", (("method", "Session.submit"), ("status", "ABORTED")))] == 1
    assert samples[("skillstate_rpc_seconds_count", (("method", "Session"),))] == 1

"""A server that keeps no idle execution in memory (`max_loaded_executions=0`), through the real client: every
answer is the one a server keeping them all would give, and nothing a stream follows is unloaded."""

from __future__ import annotations

import asyncio

import pytest

from skillstate.clients import StateClient
from skillstate.server.engine.config import EngineConfig


@pytest.fixture
def engine_config() -> EngineConfig:
    return EngineConfig(max_loaded_executions=0)


async def churn(client: StateClient, count: int) -> None:
    """Use other executions: under a cap of 0 each goes out of memory as soon as it is idle."""
    for _ in range(count):
        created = await client.create_execution()
        await client.get_state(created.execution_id)


async def test_a_retry_of_a_write_acknowledged_before_an_unload_is_recognized(client: StateClient) -> None:
    await client.create_execution("x", initial_state={"count": 0})
    first = await client.submit_patch("x", {"count": 1}, agent_id="ada", base_revision=0, client_patch_id="k1")
    await churn(client, 3)
    retried = await client.submit_patch("x", {"count": 1}, agent_id="ada", base_revision=0, client_patch_id="k1")
    assert retried.duplicate and (retried.revision, retried.state_hash) == (first.revision, first.state_hash)
    second = await client.submit_patch("x", {"count": 2}, agent_id="bob", base_revision=1, client_patch_id="k1")
    assert not second.duplicate and second.revision == 2  # the key is ada's: bob's is his own
    view = await client.get_state("x")
    assert (view.revision, view.state_hash, view.state) == (2, second.state_hash, {"count": 2})


async def test_streams_miss_nothing_while_other_executions_come_and_go(client: StateClient) -> None:
    await client.create_execution("x", initial_state={"n": 0})
    revisions: asyncio.Queue[int] = asyncio.Queue()
    observations: asyncio.Queue[int] = asyncio.Queue()

    async def watch() -> None:
        async for event in client.watch("x", resume=False):
            await revisions.put(event.revision)  # type: ignore[union-attr]

    async def observe() -> None:
        async for observation in client.observations("x", "ada", resume=False):
            await observations.put(observation.sequence)

    streams = [asyncio.create_task(watch()), asyncio.create_task(observe())]
    try:
        for n in range(1, 6):
            await client.submit_patch("x", {"n": n}, agent_id="ada", base_revision=n - 1)
            await client.publish_observation("x", "ada", {"n": n})
            assert await revisions.get() == n and await observations.get() == n
            await churn(client, 1)
    finally:
        for stream in streams:
            stream.cancel()
        await asyncio.gather(*streams, return_exceptions=True)

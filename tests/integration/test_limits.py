"""Quotas through the real server: the size of a state and the streams an execution may have."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from skillstate.clients import ResourceExhaustedError, StateClient
from skillstate.server.engine.config import EngineConfig
from skillstate.server.limits import Limits

from ..conftest import RestartableServer


@pytest.fixture
def engine_config() -> EngineConfig:
    return EngineConfig(limits=Limits(max_state_bytes=10_000), max_watchers=2)


async def test_a_patch_that_would_outgrow_the_state_limit_changes_nothing(client: StateClient) -> None:
    await client.create_execution("x", initial_state={"a": "x" * 4000})
    await client.submit_patch("x", {"b": "y" * 4000}, agent_id="a", base_revision=0)
    with pytest.raises(ResourceExhaustedError, match=r"state size: this patch would make the state 12,0.. bytes, "
                                                     "over the limit of 10,000"):  # fmt: skip
        await client.submit_patch("x", {"c": "z" * 4000}, agent_id="a", base_revision=1)
    state = await client.get_state("x")
    assert state.revision == 1 and set(state.state) == {"a", "b"}
    await client.submit_patch("x", {"a": None, "c": "z" * 4000}, agent_id="a", base_revision=1)  # room made first


async def test_the_state_size_is_known_again_after_a_restart(db_path: Path, engine_config: EngineConfig) -> None:
    server = RestartableServer(db_path, engine_config)
    await server.start()
    try:
        async with StateClient(server.address) as client:
            await client.create_execution("x", initial_state={"a": "x" * 4000})
            await client.submit_patch("x", {"b": "y" * 4000}, agent_id="a", base_revision=0)
        await server.stop()
        await server.start()
        async with StateClient(server.address) as client:
            with pytest.raises(ResourceExhaustedError, match="state size"):
                await client.submit_patch("x", {"c": "z" * 4000}, agent_id="a", base_revision=1)
    finally:
        await server.stop()


async def test_an_execution_has_at_most_its_watchers(client: StateClient) -> None:
    await client.create_execution("x")

    async def watch() -> None:
        async for _ in client.watch("x", resume=False):
            pass

    watchers = [asyncio.create_task(watch()) for _ in range(2)]
    await asyncio.sleep(0.2)
    with pytest.raises(ResourceExhaustedError, match="watchers: execution 'x' has 2, the limit is 2"):
        await watch()
    watchers[0].cancel()
    await asyncio.sleep(0.2)
    third = asyncio.create_task(watch())  # a place was freed
    await asyncio.sleep(0.2)
    assert not third.done()
    for task in (watchers[1], third):
        task.cancel()
    with pytest.raises(ResourceExhaustedError, match="observation streams: execution 'x' has 2"):
        streams = [client.observations("x", f"agent-{i}", resume=False) for i in range(3)]
        tasks = [asyncio.create_task(anext(stream)) for stream in streams[:2]]
        await asyncio.sleep(0.2)
        try:
            await anext(streams[2])
        finally:
            for task in tasks:
                task.cancel()

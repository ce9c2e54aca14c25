"""Quotas through the real server: the size of a state and the streams an execution may have."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from skillstate.clients import ResourceExhaustedError, StateClient
from skillstate.server.engine.config import EngineConfig
from skillstate.server.limits import Limits

from ..conftest import RestartableServer
from ..waiting import eventually


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
    await client.submit_patch("x", {"n": 1}, agent_id="a", base_revision=0)  # a watcher's first event

    async def watcher() -> asyncio.Task[None]:
        """A watcher of x, once the server holds it (it has had revision 1), or the server's refusal."""
        subscribed = asyncio.Event()

        async def watch() -> None:
            async for _ in client.watch("x", 0, resume=False):
                subscribed.set()

        task = asyncio.create_task(watch())
        waiting = asyncio.create_task(subscribed.wait())
        await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if task.done():
            await task  # raises the refusal
            raise AssertionError("the watch ended")
        return task

    async def admitted() -> asyncio.Task[None] | None:
        try:
            return await watcher()
        except ResourceExhaustedError:
            return None

    watchers = [await watcher(), await watcher()]
    with pytest.raises(ResourceExhaustedError, match="watchers: execution 'x' has 2, the limit is 2"):
        await watcher()
    watchers[0].cancel()
    third = await eventually(admitted)  # a place is freed once the server has seen the cancellation
    for task in (watchers[1], third):
        task.cancel()
    await client.publish_observation("x", "*", "first")  # a stream's first observation
    streams = [client.observations("x", f"agent-{i}", resume=False) for i in range(3)]
    try:
        for stream in streams[:2]:
            assert (await anext(stream)).payload == "first"  # the server holds the stream
        with pytest.raises(ResourceExhaustedError, match="observation streams: execution 'x' has 2"):
            await anext(streams[2])
    finally:
        for stream in streams:
            await stream.aclose()

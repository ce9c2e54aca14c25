"""Progress messages on Watch: a caught-up stream that has sent nothing for `progress_interval` seconds is sent
the head revision (etcd's progress notifications), never while revisions flow, and the SDK skips them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from skillstate.clients import RevisionEvent, StateClient
from skillstate.server.engine.config import EngineConfig
from skillstate.state.v1 import state_pb2 as pb
from skillstate.state.v1 import state_pb2_grpc as pb_grpc

from ..conftest import RestartableServer

INTERVAL = 0.2


@pytest.fixture
def engine_config() -> EngineConfig:
    return EngineConfig(progress_interval=INTERVAL)


@pytest.fixture
async def stub(server_address: str) -> AsyncIterator[pb_grpc.StateServiceStub]:
    async with grpc.aio.insecure_channel(server_address) as channel:
        yield pb_grpc.StateServiceStub(channel)


async def submit(client: StateClient, execution_id: str, key: str) -> int:
    return (await client.submit_patch(execution_id, {key: 1}, agent_id="a", base_revision=0)).revision


async def test_an_idle_watch_is_sent_the_head_after_the_interval(
    client: StateClient, stub: pb_grpc.StateServiceStub
) -> None:
    execution_id = (await client.create_execution()).execution_id
    for i in range(3):
        await submit(client, execution_id, f"k{i}")
    messages = aiter(stub.Watch(pb.WatchRequest(execution_id=execution_id, from_revision=0)))
    assert [(await anext(messages)).event.revision for _ in range(3)] == [1, 2, 3]
    caught_up = time.monotonic()
    idle = await asyncio.wait_for(anext(messages), 10)
    assert idle.WhichOneof("kind") == "progress" and idle.progress.head_revision == 3
    assert time.monotonic() - caught_up >= INTERVAL * 0.75  # not before the interval (less the reply's trip)
    again = await asyncio.wait_for(anext(messages), 10)  # and again after each interval of silence
    assert again.WhichOneof("kind") == "progress" and again.progress.head_revision == 3

    assert await submit(client, execution_id, "k3") == 4
    event = await asyncio.wait_for(anext(messages), 10)
    assert event.WhichOneof("kind") == "event" and event.event.revision == 4
    idle = await asyncio.wait_for(anext(messages), 10)
    assert idle.WhichOneof("kind") == "progress" and idle.progress.head_revision == 4


async def test_no_progress_between_back_to_back_events(client: StateClient, stub: pb_grpc.StateServiceStub) -> None:
    execution_id = (await client.create_execution()).execution_id
    messages = aiter(stub.Watch(pb.WatchRequest(execution_id=execution_id, from_revision=0)))
    first = await asyncio.wait_for(anext(messages), 10)  # an empty execution: progress, head 0
    assert first.WhichOneof("kind") == "progress" and first.progress.head_revision == 0
    await asyncio.gather(*(submit(client, execution_id, f"k{i}") for i in range(20)))
    kinds = [(await anext(messages)).WhichOneof("kind") for _ in range(20)]
    assert kinds == ["event"] * 20
    idle = await asyncio.wait_for(anext(messages), 10)
    assert idle.WhichOneof("kind") == "progress" and idle.progress.head_revision == 20


async def test_a_watch_ahead_of_the_head_is_told_the_head(client: StateClient, stub: pb_grpc.StateServiceStub) -> None:
    execution_id = (await client.create_execution()).execution_id
    await submit(client, execution_id, "k0")
    messages = aiter(stub.Watch(pb.WatchRequest(execution_id=execution_id, from_revision=5)))
    idle = await asyncio.wait_for(anext(messages), 10)
    assert idle.WhichOneof("kind") == "progress" and idle.progress.head_revision == 1


async def test_the_sdk_skips_progress_and_resumes_from_the_last_revision_it_yielded(tmp_path: Path) -> None:
    """A watch from ahead of the head hears progress with an older head: resuming from that head after a
    restart would yield revisions it never asked for."""
    restartable = RestartableServer(tmp_path / "state.db", EngineConfig(progress_interval=INTERVAL))
    await restartable.start()
    try:
        async with StateClient(restartable.address) as client:
            execution_id = (await client.create_execution()).execution_id
            await submit(client, execution_id, "k0")
            seen: list[object] = []
            subscribed = asyncio.Event()

            async def watch() -> None:
                async for item in client.watch(execution_id, from_revision=3):
                    seen.append(item)
                    if isinstance(item, RevisionEvent) and item.revision >= 5:
                        return

            async def progress_seen() -> None:  # a second watcher: the SDK's saw progress by the time this one has
                async with grpc.aio.insecure_channel(restartable.address) as channel:
                    stream = pb_grpc.StateServiceStub(channel).Watch(
                        pb.WatchRequest(execution_id=execution_id, from_revision=3)
                    )
                    async for message in stream:
                        assert message.WhichOneof("kind") == "progress" and message.progress.head_revision == 1
                        if subscribed.is_set():
                            return
                        subscribed.set()

            watcher = asyncio.create_task(watch())
            await asyncio.wait_for(progress_seen(), 10)
            await restartable.stop()  # cut the SDK's stream: it reopens from its own cursor (3), not from 1
            await restartable.start()
            for i in range(1, 5):
                await submit(client, execution_id, f"k{i}")
            await asyncio.wait_for(watcher, 10)
            assert [(type(item).__name__, getattr(item, "revision", None)) for item in seen] == [
                ("RevisionEvent", 4),
                ("RevisionEvent", 5),
            ]
    finally:
        await restartable.stop()

"""Watch streams: every committed revision exactly once and in order, across cuts and slow readers."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from skillstate.clients import RevisionEvent, StateClient
from skillstate.server.engine.config import EngineConfig
from skillstate.server.rpc.app import RunningServer
from skillstate.state.v1 import state_pb2 as pb
from skillstate.state.v1 import state_pb2_grpc as pb_grpc

from ..conftest import RestartableServer
from ..waiting import eventually


async def collect(
    client: StateClient,
    execution_id: str,
    until: int,
    from_revision: int = 0,
    events: list[RevisionEvent] | None = None,
) -> list[RevisionEvent]:
    """The revisions after from_revision through `until`, gathered into `events` (which others may watch)."""
    events = [] if events is None else events
    async for event in client.watch(execution_id, from_revision):
        assert isinstance(event, RevisionEvent)
        events.append(event)
        if event.revision >= until:
            return events
    raise AssertionError("watch ended early")


async def test_watchers_see_every_revision_once_in_order(client: StateClient) -> None:
    execution_id = (await client.create_execution()).execution_id

    async def agent(name: str, steps: range = range(6)) -> None:
        for i in steps:
            await client.submit_patch(execution_id, {f"{name}-{i}": i}, agent_id=name, base_revision=0)

    await agent("a0", range(1))  # revision 1
    seen_early: list[RevisionEvent] = []
    early = asyncio.create_task(collect(client, execution_id, 60, events=seen_early))
    await eventually(lambda: seen_early)  # it has had revision 1: subscribed, it gets the rest live
    writers = [asyncio.create_task(agent(f"a{n}", range(1 if n == 0 else 0, 6))) for n in range(10)]
    await eventually(lambda: len(seen_early) >= 20)
    late = asyncio.create_task(collect(client, execution_id, 60))  # joins mid-stream: history, then live
    await asyncio.gather(*writers)
    history = [e async for e in client.history(execution_id)]
    for watched in (await early, await late):
        assert [e.revision for e in watched] == list(range(1, 61))
        assert [e.state_hash for e in watched] == [e.state_hash for e in history]
    assert [e.revision for e in await collect(client, execution_id, 60, from_revision=55)] == [56, 57, 58, 59, 60]


async def test_history_pages_through_tokens(client: StateClient) -> None:
    execution_id = (await client.create_execution()).execution_id
    for i in range(10):
        await client.submit_patch(execution_id, {"n": i}, agent_id=f"a{i % 3}", base_revision=i, action=f"step {i}")
    page = await client.get_history(execution_id, 2, 9, page_size=3)
    pages = [[e.revision for e in page.revisions]]
    while page.next_page_token:
        page = await client.get_history(execution_id, 2, 9, page_size=3, page_token=page.next_page_token)
        pages.append([e.revision for e in page.revisions])
    assert pages == [[2, 3, 4], [5, 6, 7], [8, 9]]
    assert page.head_revision == 10 and page.compact_revision == 0
    events = [e async for e in client.history(execution_id, page_size=4)]
    assert [(e.revision, e.agent_id, e.action) for e in events][:2] == [(1, "a0", "step 0"), (2, "a1", "step 1")]
    assert len(events) == 10


async def test_watch_resumes_after_the_server_restarts(restartable: RestartableServer) -> None:
    async with StateClient(restartable.address) as client:
        execution_id = (await client.create_execution()).execution_id
        for i in range(5):
            await client.submit_patch(execution_id, {"n": i}, agent_id="a", base_revision=i)
        watched: list[int] = []

        async def watch() -> None:
            async for event in client.watch(execution_id):
                watched.append(event.revision)
                if event.revision == 10:
                    return

        watcher = asyncio.create_task(watch())
        await eventually(lambda: len(watched) == 5)
        await restartable.stop()  # the stream is cut
        await restartable.start()
        for i in range(5, 10):
            await client.submit_patch(execution_id, {"n": i}, agent_id="a", base_revision=i)
        await asyncio.wait_for(watcher, 20)
    assert watched == list(range(1, 11))


@pytest.fixture
def engine_config() -> EngineConfig:
    return EngineConfig(subscriber_queue=4)


async def test_a_watcher_that_falls_behind_is_told_where_to_resume(server: RunningServer, client: StateClient) -> None:
    execution_id = (await client.create_execution()).execution_id
    await client.submit_patch(execution_id, {"k": 0}, agent_id="a", base_revision=0)
    # a fixed 64 KiB stream window, so the server's sends block on this reader whatever gRPC would tune
    small_window = [("grpc.http2.lookahead_bytes", 65536), ("grpc.http2.bdp_probe", 0)]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}", options=small_window) as channel:
        stream = pb_grpc.StateServiceStub(channel).Watch(pb.WatchRequest(execution_id=execution_id))
        first = await stream.read()  # the watch is live; now stop reading while much is committed
        await asyncio.gather(
            *(
                client.submit_patch(execution_id, {f"k{i}": "x" * 4000}, agent_id="a", base_revision=1)
                for i in range(399)
            )
        )
        received = [first.event.revision]
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            while True:
                message = await stream.read()
                if message is grpc.aio.EOF:
                    break
                received.append(message.event.revision)
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert received == list(range(1, len(received) + 1)), "a slow watcher must never skip"
    assert f"resume with from_revision={received[-1]}" in caught.value.details()
    resumed = await collect(client, execution_id, 400, from_revision=received[-1])  # the SDK resumes by itself
    assert [e.revision for e in resumed] == list(range(received[-1] + 1, 401))

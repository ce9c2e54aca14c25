"""grpc.health.v1 follows what the server can do: NOT_SERVING as soon as a graceful stop begins (before the
port closes), and while its log refuses commits, SERVING again after the next commit succeeds; for the skill
registry, NOT_SERVING until its library is loaded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from skillstate.clients import RetryPolicy, StateClient, UnavailableError
from skillstate.server.errors import StorageError
from skillstate.server.rpc.app import HEALTH_NAMES, SERVICE_NAME, SKILLS_SERVICE_NAME, start_server
from skillstate.server.storage.records import Batch, SkillVersion
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog
from skillstate.server.storage.skill_store.memory import MemorySkillStore

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class FlakyLog(MemoryRevisionLog):
    """The in-memory log with a switch that makes commits fail, as a full or lost disk would."""

    failing = False

    async def commit(self, batch: Batch) -> None:
        if self.failing:
            raise StorageError("disk full (injected)")
        await super().commit(batch)


async def statuses(channel: grpc.aio.Channel, service: str = "") -> AsyncGenerator[int, None]:
    """The statuses Health.Watch sends; closing this ends the call."""
    call = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=service))
    try:
        async for reply in call:
            yield reply.status
    finally:
        call.cancel()


class GatedSkillStore(MemorySkillStore):
    """The in-memory skill store, whose listing of the library waits for the test (as a large library's
    loading takes its time), or fails, as a lost database would."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.failing = False

    async def current(self) -> list[SkillVersion]:
        await self.gate.wait()
        if self.failing:
            raise StorageError("skill store lost (injected)")
        return await super().current()


async def check(channel: grpc.aio.Channel, name: str) -> int:
    reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=name))
    return int(reply.status)


async def test_every_name_is_serving_once_the_skill_library_is_loaded() -> None:
    running = await start_server(MemoryRevisionLog(), "127.0.0.1:0")
    try:
        assert set(HEALTH_NAMES) == {"", SERVICE_NAME, SKILLS_SERVICE_NAME}
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            assert running.health is not None and await running.health.library_loaded()
            for name in HEALTH_NAMES:
                assert await check(channel, name) == SERVING
    finally:
        await running.stop(grace=0)


async def test_the_skill_registry_is_not_serving_while_its_library_loads_and_the_state_service_is() -> None:
    store = GatedSkillStore()
    running = await start_server(MemoryRevisionLog(), "127.0.0.1:0", skills=store)
    address = f"127.0.0.1:{running.port}"
    try:
        async with grpc.aio.insecure_channel(address) as channel, StateClient(address) as client:
            watched = aiter(statuses(channel, SKILLS_SERVICE_NAME))
            assert await anext(watched) == NOT_SERVING
            assert await check(channel, "") == SERVING
            assert await check(channel, SERVICE_NAME) == SERVING
            assert (await client.create_execution()).revision == 0  # the state service does not wait

            store.gate.set()
            assert await asyncio.wait_for(anext(watched), 10) == SERVING
            await watched.aclose()
    finally:
        await running.stop(grace=0)


async def test_a_library_that_failed_to_load_leaves_the_skill_registry_not_serving() -> None:
    store = GatedSkillStore()
    store.failing = True
    running = await start_server(MemoryRevisionLog(), "127.0.0.1:0", skills=store)
    try:
        store.gate.set()
        with pytest.raises(StorageError, match="skill store lost"):
            await running.registry.ready()
        assert running.health is not None and not await running.health.library_loaded()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            assert await check(channel, SKILLS_SERVICE_NAME) == NOT_SERVING
            assert await check(channel, SERVICE_NAME) == SERVING
    finally:
        await running.stop(grace=0)


@pytest.mark.parametrize("service", HEALTH_NAMES)
async def test_a_graceful_stop_reports_not_serving_before_the_port_closes(service: str) -> None:
    running = await start_server(MemoryRevisionLog(), "127.0.0.1:0")
    assert running.health is not None and await running.health.library_loaded()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        watched = aiter(statuses(channel, service))
        assert await anext(watched) == SERVING
        stopping = asyncio.create_task(running.stop(grace=30))  # the open health watch holds the grace period
        try:
            assert await asyncio.wait_for(anext(watched), 10) == NOT_SERVING
            assert not stopping.done()  # still in its grace period: the health stream is open
        finally:
            await watched.aclose()  # the last call ends: the stop need not wait out its grace
            await asyncio.wait_for(stopping, 30)


async def test_a_failed_commit_reports_not_serving_until_a_commit_succeeds() -> None:
    log = FlakyLog()
    running = await start_server(log, "127.0.0.1:0")
    address = f"127.0.0.1:{running.port}"
    assert running.health is not None and await running.health.library_loaded()
    try:
        async with (
            grpc.aio.insecure_channel(address) as channel,
            StateClient(address, retry=RetryPolicy(attempts=1)) as client,
        ):
            execution_id = (await client.create_execution()).execution_id
            watched = aiter(statuses(channel, SERVICE_NAME))
            assert await anext(watched) == SERVING

            log.failing = True
            with pytest.raises(UnavailableError, match="disk full"):
                await client.submit_patch(execution_id, {"a": 1}, agent_id="a", base_revision=0)
            assert await asyncio.wait_for(anext(watched), 10) == NOT_SERVING
            stub = health_pb2_grpc.HealthStub(channel)
            for name in HEALTH_NAMES:
                assert (await stub.Check(health_pb2.HealthCheckRequest(service=name))).status == NOT_SERVING
            assert (await client.get_state(execution_id)).revision == 0  # reads go on

            log.failing = False
            assert (await client.submit_patch(execution_id, {"a": 1}, agent_id="a", base_revision=0)).revision == 1
            assert await asyncio.wait_for(anext(watched), 10) == SERVING
            await watched.aclose()
            await running.health.library_loaded()  # (and the status update the commit started)
            for name in HEALTH_NAMES:
                assert await check(channel, name) == SERVING
    finally:
        await running.stop(grace=0)


async def test_a_stop_while_the_library_loads_ends_the_wait_for_it() -> None:
    store = GatedSkillStore()
    running = await start_server(MemoryRevisionLog(), "127.0.0.1:0", skills=store)
    assert running.health is not None
    waiting = asyncio.create_task(running.health.library_loaded())
    await running.stop(grace=0)
    assert not await asyncio.wait_for(waiting, 10)  # not loaded, and no CancelledError for a caller not cancelled


async def test_a_caller_that_stops_waiting_for_the_library_leaves_health_following_it() -> None:
    store = GatedSkillStore()
    running = await start_server(MemoryRevisionLog(), "127.0.0.1:0", skills=store)
    assert running.health is not None
    try:
        waiting = asyncio.create_task(running.health.library_loaded())
        await asyncio.sleep(0)  # (a yield: it waits now)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        store.gate.set()
        assert await running.health.library_loaded()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            assert await check(channel, SKILLS_SERVICE_NAME) == SERVING
    finally:
        await running.stop(grace=0)

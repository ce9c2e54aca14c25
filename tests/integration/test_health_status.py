"""grpc.health.v1 follows what the server can do: NOT_SERVING as soon as a graceful stop begins (before the
port closes), and while its log refuses commits, SERVING again after the next commit succeeds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from skillstate.clients import RetryPolicy, StateClient, UnavailableError
from skillstate.server.errors import StorageError
from skillstate.server.rpc.app import HEALTH_NAMES, SERVICE_NAME, SKILLS_SERVICE_NAME, start_server
from skillstate.server.storage.records import Batch
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog

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


async def test_every_name_is_serving_after_start() -> None:
    running = await start_server(MemoryRevisionLog(), "127.0.0.1:0")
    try:
        assert set(HEALTH_NAMES) == {"", SERVICE_NAME, SKILLS_SERVICE_NAME}
        async with grpc.aio.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            for name in HEALTH_NAMES:
                assert (await stub.Check(health_pb2.HealthCheckRequest(service=name))).status == SERVING
    finally:
        await running.stop(grace=0)


@pytest.mark.parametrize("service", ["", SERVICE_NAME])
async def test_a_graceful_stop_reports_not_serving_before_the_port_closes(service: str) -> None:
    running = await start_server(MemoryRevisionLog(), "127.0.0.1:0")
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
    finally:
        await running.stop(grace=0)

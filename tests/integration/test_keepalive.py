"""Keepalive: the server's ping policy is in force, and the SDK's pings stay within it."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from skillstate.clients import StateClient, open_channel
from skillstate.clients._channel import _CHANNEL_OPTIONS
from skillstate.server.rpc.app import KEEPALIVE_OPTIONS, RunningServer, start_server
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog
from skillstate.state.v1 import state_pb2 as pb
from skillstate.state.v1 import state_pb2_grpc as pb_grpc


def test_the_sdk_pings_less_often_than_the_server_allows() -> None:
    client, server = dict(_CHANNEL_OPTIONS), dict(KEEPALIVE_OPTIONS)
    assert client["grpc.keepalive_time_ms"] >= 2 * server["grpc.http2.min_ping_interval_without_data_ms"]
    assert server["grpc.keepalive_time_ms"] > 0 and server["grpc.keepalive_timeout_ms"] > 0


async def test_calls_work_with_the_default_keepalive_and_with_overrides(server: RunningServer) -> None:
    async with StateClient(f"127.0.0.1:{server.port}") as client:
        execution_id = (await client.create_execution()).execution_id
    faster = [("grpc.keepalive_time_ms", 15_000), ("grpc.keepalive_timeout_ms", 5_000)]
    channel = open_channel(f"127.0.0.1:{server.port}", options=faster)
    async with channel, StateClient(channel=channel) as client:
        assert (await client.get_state(execution_id)).revision == 0

    running = await start_server(MemoryRevisionLog(), "127.0.0.1:0", grpc_options=[("grpc.keepalive_time_ms", 5_000)])
    try:
        async with StateClient(f"127.0.0.1:{running.port}") as client:
            assert (await client.create_execution("x")).revision == 0
    finally:
        await running.stop(grace=0)


async def test_a_client_pinging_more_often_than_allowed_is_sent_away(server: RunningServer) -> None:
    """What the SDK's defaults avoid: gRPC closes the connection with GOAWAY too_many_pings."""
    eager = [
        ("grpc.keepalive_time_ms", 200),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}", options=eager) as channel:
        stub = pb_grpc.StateServiceStub(channel)
        await stub.CreateExecution(pb.CreateExecutionRequest(execution_id="idle"))
        watch = stub.Watch(pb.WatchRequest(execution_id="idle"))  # open, and silent for 10 s (progress_interval)
        with pytest.raises(grpc.aio.AioRpcError) as cut:
            await asyncio.wait_for(watch.read(), 9)
        assert cut.value.code() == grpc.StatusCode.UNAVAILABLE and "many pings" in (cut.value.details() or "")

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from skillstate.server.rpc.app import SERVICE_NAME, RunningServer, start_server
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog


async def test_a_second_server_cannot_take_a_bound_port(server: RunningServer, tmp_path: Path) -> None:
    """gRPC sets SO_REUSEPORT by default: two servers would silently share one address."""
    with pytest.raises(OSError, match="cannot listen"):
        await start_server(MemoryRevisionLog(), f"127.0.0.1:{server.port}")


async def test_health_reports_serving(server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for name in ("", SERVICE_NAME):
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=name))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_reflection_lists_the_state_service(server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        async for reply in stub.ServerReflectionInfo(iter([request])):
            names = {s.name for s in reply.list_services_response.service}
            break
    assert SERVICE_NAME in names and "grpc.health.v1.Health" in names

"""A full disk, simulated by capping the database: commits are refused RESOURCE_EXHAUSTED, no acknowledged
write is lost, the state never shows a refused one, and with room again the server goes on."""

from __future__ import annotations

import asyncio
from pathlib import Path

from skillstate.clients import ResourceExhaustedError, StateClient
from skillstate.server.rpc.app import start_server
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog

CAP = 256 << 10


async def test_a_full_database_refuses_commits_and_loses_nothing(db_path: Path) -> None:
    acknowledged: dict[str, int] = {}
    refused: list[str] = []
    running = await start_server(SqliteRevisionLog(db_path, max_bytes=CAP), "127.0.0.1:0")
    try:
        async with StateClient(f"127.0.0.1:{running.port}") as client:
            await client.create_execution("x")

            async def writer(w: int) -> None:
                for i in range(400):
                    key = f"w{w}-{i}"
                    try:
                        result = await client.submit_patch("x", {key: "v" * 500}, agent_id=f"w{w}", base_revision=0)
                    except ResourceExhaustedError as e:
                        assert "is full (its cap is 262,144 bytes): nothing of this commit was written" in e.message
                        refused.append(key)
                        continue
                    acknowledged[key] = result.revision

            await asyncio.gather(*(writer(w) for w in range(4)))
            head = await client.get_state("x")
        assert refused and acknowledged
        assert set(head.state) == set(acknowledged) and head.revision == max(acknowledged.values())
    finally:
        await running.stop(grace=0)

    running = await start_server(SqliteRevisionLog(db_path), "127.0.0.1:0")  # room again
    try:
        async with StateClient(f"127.0.0.1:{running.port}") as client:
            recovered = await client.get_state("x")
            assert recovered.state == head.state and recovered.state_hash == head.state_hash
            logged = {event.client_patch_id for event in [e async for e in client.history("x")]}
            assert len(logged) == len(acknowledged)
            more = await client.submit_patch("x", {"after": 1}, agent_id="w0", base_revision=recovered.revision)
            assert more.revision == recovered.revision + 1
    finally:
        await running.stop(grace=0)

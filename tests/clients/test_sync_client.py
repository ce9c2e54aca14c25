from __future__ import annotations

import asyncio
import itertools

import pytest

from skillstate.clients import ConflictError, SyncStateClient
from skillstate.server.rpc.app import RunningServer


async def test_sync_client_round_trip(server: RunningServer) -> None:
    def scenario() -> list[int]:
        with SyncStateClient(f"127.0.0.1:{server.port}") as client:
            created = client.create_execution("sync", initial_state={"a": 1})
            client.submit_patch("sync", {"b": 2}, agent_id="x", base_revision=created.revision)
            with pytest.raises(ConflictError):
                client.submit_patch("sync", {"b": 3}, agent_id="y", base_revision=0)
            assert client.get_state("sync").state == {"a": 1, "b": 2}
            assert client.publish_observation("sync", "*", {"n": 1}) == 1
            assert [o.payload for o in itertools.islice(client.observations("sync", "me"), 1)] == [{"n": 1}]
            for event in client.watch("sync"):  # leaving the loop early closes the stream
                assert event.revision == 1
                break
            return [e.revision for e in client.history("sync")]

    assert await asyncio.to_thread(scenario) == [1]

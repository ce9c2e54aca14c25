"""The client retries what a retry cannot duplicate, and only that."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from skillstate.clients import StateClient, UnavailableError
from skillstate.server.app import start_server
from skillstate.server.storage.sqlite import SqliteRevisionLog


async def test_a_submit_during_an_outage_applies_once_when_the_server_returns(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    first = await start_server(SqliteRevisionLog(db), "127.0.0.1:0")
    port = first.port
    async with StateClient(f"127.0.0.1:{port}") as client:
        execution_id = (await client.create_execution()).execution_id
        await first.stop(grace=0)

        with pytest.raises(UnavailableError):  # not retried: a lost reply would mean a second observation
            await client.publish_observation(execution_id, "*", "hello")

        submit = asyncio.create_task(client.submit_patch(execution_id, {"a": 1}, agent_id="x", base_revision=0))
        await asyncio.sleep(0.3)
        assert not submit.done(), "the submit should still be retrying"
        second = await start_server(SqliteRevisionLog(db), f"127.0.0.1:{port}")
        try:
            result = await asyncio.wait_for(submit, 15)
            assert result.revision == 1
            assert (await client.get_state(execution_id)).revision == 1
        finally:
            await second.stop(grace=0)

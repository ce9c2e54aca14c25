"""The client retries what a retry cannot duplicate, and only that."""

from __future__ import annotations

import asyncio

import pytest

from skillstate.clients import StateClient, UnavailableError

from ..conftest import RestartableServer


async def test_a_submit_during_an_outage_applies_once_when_the_server_returns(restartable: RestartableServer) -> None:
    async with StateClient(restartable.address) as client:
        execution_id = (await client.create_execution()).execution_id
        await restartable.stop()

        with pytest.raises(UnavailableError):  # not retried: a lost reply would mean a second observation
            await client.publish_observation(execution_id, "*", "hello")

        submit = asyncio.create_task(client.submit_patch(execution_id, {"a": 1}, agent_id="x", base_revision=0))
        await asyncio.sleep(0.3)  # not a wait for the server: an outage this long is what the submit must outlast
        assert not submit.done(), "the submit should still be retrying"
        await restartable.start()
        result = await asyncio.wait_for(submit, 15)
        assert result.revision == 1
        assert (await client.get_state(execution_id)).revision == 1

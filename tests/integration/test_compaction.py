"""Compact over gRPC: dropped history is unreadable, the rest is intact, watches start at the snapshot."""

from __future__ import annotations

import pytest

from skillstate.clients import NotFoundError, OutOfRangeError, Snapshot, StateClient
from skillstate.server.engine.config import EngineConfig


@pytest.fixture
def engine_config() -> EngineConfig:
    return EngineConfig(window=4, snapshot_every=5)


async def test_compact_drops_history_up_to_a_snapshot(client: StateClient) -> None:
    execution_id = (await client.create_execution()).execution_id
    for i in range(12):
        await client.submit_patch(execution_id, {f"k{i}": i}, agent_id="a", base_revision=i)
    at_ten = await client.get_state(execution_id, 10)

    assert await client.compact(execution_id, 11) == 10  # the newest snapshot at or before 11
    assert await client.compact(execution_id, 11) == 10  # again: nothing changes

    for revision in (3, 9):  # 9 is still in the server's memory: what is readable must not depend on it
        with pytest.raises(OutOfRangeError, match="compacted"):
            await client.get_state(execution_id, revision)
    assert await client.get_state(execution_id, 10) == at_ten
    events = []
    async for event in client.watch(execution_id, 0):
        events.append(event)
        if event.revision == 12:
            break
    assert isinstance(events[0], Snapshot) and events[0].revision == 10
    assert [e.revision for e in events[1:]] == [11, 12]
    page = await client.get_history(execution_id)
    assert page.compact_revision == 10 and [e.revision for e in page.revisions] == [11, 12]


async def test_compact_refuses_what_it_cannot_do(client: StateClient) -> None:
    execution_id = (await client.create_execution()).execution_id
    with pytest.raises(OutOfRangeError, match=r"up_to: 5 is outside 0\.\.0"):
        await client.compact(execution_id, 5)
    with pytest.raises(NotFoundError):
        await client.compact("no-such-execution", 0)
    assert await client.compact(execution_id, 0) == 0

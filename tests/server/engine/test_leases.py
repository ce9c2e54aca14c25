"""Two engines with leases on one PostgreSQL schema: a replica whose heartbeat expired (as the database sees
it) while it went on serving is fenced: the commits it makes after another replica took an execution over
fail and drop that execution, while the others of the same group commit are made."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from skillstate.server.engine.config import EngineConfig
from skillstate.server.engine.state_engine import StateEngine
from skillstate.server.errors import FencedError, NotOwnerError
from skillstate.server.storage.revision_log.postgres import PostgresRevisionLog

from ...postgres import postgres_schema  # noqa: F401 - a fixture

COUNTER = '{"type": "object", "properties": {"n": {"type": "integer", "x-merge": "counter"}}}'
LONG = EngineConfig(lease_seconds=600)
"""Leases no renewal comes to check during a test: a replica counts on its heartbeat all along."""


@pytest.fixture
async def engines(postgres_schema: tuple[str, str]) -> AsyncIterator[tuple[StateEngine, StateEngine]]:  # noqa: F811
    dsn, schema = postgres_schema
    a, b = (StateEngine(PostgresRevisionLog(dsn, schema=schema), LONG) for _ in range(2))
    await a.start("a:1")
    await b.start("b:1")
    yield a, b
    await a.close()
    await b.close()


async def expire_heartbeat(where: tuple[str, str], replica: str | None) -> None:
    """What the database sees of a replica that stalled past its lease."""
    dsn, schema = where
    connection = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    try:
        await connection.execute(
            "UPDATE replicas SET expires_at = now() - interval '1 second' WHERE owner = $1", replica
        )
    finally:
        await connection.close()


async def test_a_deposed_owner_is_fenced_for_the_execution_taken_and_commits_the_others(
    engines: tuple[StateEngine, StateEngine],
    postgres_schema: tuple[str, str],  # noqa: F811
) -> None:
    a, b = engines
    for execution_id in ("x", "y"):
        await a.create_execution(execution_id, COUNTER, '{"n": 0}')
    with pytest.raises(NotOwnerError, match="a:1"):
        await b.get_state("x")
    await expire_heartbeat(postgres_schema, a.replica_id)
    taken = await b.submit_patch("x", "w", 0, '{"n": 5}')  # b takes x over: its owner's heartbeat expired
    assert taken.revision == 1
    assert (await a.get_state("x")).revision == 0  # a, stalled, does not know yet (what leases prevent is writes)
    on_x, on_y = await asyncio.gather(
        a.submit_patch("x", "w", 0, '{"n": 1}'), a.submit_patch("y", "w", 0, '{"n": 1}'), return_exceptions=True
    )
    assert isinstance(on_x, FencedError) and on_x.execution_ids == ["x"]
    assert not isinstance(on_y, BaseException) and on_y.revision == 1  # y was not taken: committed
    with pytest.raises(NotOwnerError, match="b:1"):  # x was dropped: a now sends its callers to b
        await a.get_state("x")
    assert (await b.get_state("x")).state_json == '{"n":5}'


async def test_a_deposed_owner_cannot_delete_what_another_took_over(
    engines: tuple[StateEngine, StateEngine],
    postgres_schema: tuple[str, str],  # noqa: F811
) -> None:
    a, b = engines
    await a.create_execution("y", COUNTER, '{"n": 0}')
    await expire_heartbeat(postgres_schema, a.replica_id)
    await b.submit_patch("y", "w", 0, '{"n": 1}')  # b takes y over
    with pytest.raises(FencedError):
        await a.delete_execution("y")
    with pytest.raises(NotOwnerError):
        await a.get_state("y")
    assert (await b.get_state("y")).revision == 1

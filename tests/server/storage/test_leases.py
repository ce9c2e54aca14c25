"""Leases on PostgreSQL (server/storage/revision_log/leases.py), two replicas' logs on one schema: one owner
at a time, a take only once the owner's heartbeat expired or it left, and every commit, delete and compaction
fenced by the epoch it was made under, so a deposed owner writes nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest

from skillstate.server.errors import FencedError
from skillstate.server.storage.records import Batch, ExecutionRecord, RevisionRecord, SnapshotRecord
from skillstate.server.storage.revision_log.leases import LeaseTable
from skillstate.server.storage.revision_log.postgres import PostgresRevisionLog
from skillstate.server.storage.revision_log.postgres_leases import FENCE

from ...postgres import postgres_schema  # noqa: F401 - a fixture
from ...waiting import eventually

SHORT = 0.5
"""Seconds of a heartbeat that is let expire."""


@pytest.fixture
async def logs(postgres_schema: tuple[str, str]) -> AsyncIterator[tuple[PostgresRevisionLog, PostgresRevisionLog]]:  # noqa: F811
    dsn, schema = postgres_schema
    a, b = PostgresRevisionLog(dsn, schema=schema), PostgresRevisionLog(dsn, schema=schema)
    await a.open()
    await b.open()
    await a.create_execution(ExecutionRecord("x", "{}", 0.0), SnapshotRecord("x", 0, "{}", "h0"))
    yield a, b
    await a.close()
    await b.close()


def revision(number: int, hash_: str) -> RevisionRecord:
    return RevisionRecord("x", number, "w", number - 1, "{}", "{}", "", "", "[]", hash_, time.time())


def tables(a: PostgresRevisionLog, b: PostgresRevisionLog) -> tuple[LeaseTable, LeaseTable]:
    first, second = a.leases(), b.leases()
    assert first.owner != second.owner
    return first, second


async def test_one_owner_until_its_heartbeat_expires_then_the_next_takes_it_with_a_new_epoch(
    logs: tuple[PostgresRevisionLog, PostgresRevisionLog],
) -> None:
    a, b = tables(*logs)
    await a.join("a:1", SHORT)
    await b.join("b:1", 60)
    mine = await a.acquire("x")
    assert mine is not None and (mine.owner, mine.epoch) == (a.owner, 1)
    assert (await a.acquire("x")).epoch == 1  # type: ignore[union-attr]  # taken again by its owner: same epoch
    held = await b.acquire("x")
    assert held is not None and (held.owner, held.address, held.epoch) == (a.owner, "a:1", 1)
    assert 0 < held.expires_in <= SHORT
    taken = await eventually(lambda: _taken_by(b, "x"), timeout=10)
    assert taken.epoch == 2
    assert not await a.heartbeat(60)  # it had expired: a is told, and finds what it lost
    assert await a.held({"x": 1}) == set()
    assert await b.held({"x": 2}) == {"x"}
    assert await a.acquire("nobody") is None  # no such execution: no lease is made for it


async def test_a_deposed_owner_can_neither_commit_nor_delete(
    logs: tuple[PostgresRevisionLog, PostgresRevisionLog],
) -> None:
    log_a, log_b = logs
    a, b = tables(log_a, log_b)
    await a.join("a:1", SHORT)
    await b.join("b:1", 60)
    assert (await a.acquire("x")).epoch == 1  # type: ignore[union-attr]
    await log_a.commit(Batch(revisions=[revision(1, "h1")], fence={"x": 1}))
    await eventually(lambda: _taken_by(b, "x"), timeout=10)
    with pytest.raises(FencedError) as refused:
        await log_a.commit(Batch(revisions=[revision(2, "stale")], fence={"x": 1}))
    assert refused.value.execution_ids == ["x"]
    with pytest.raises(FencedError):
        await log_a.delete_execution("x", lease_epoch=1)
    with pytest.raises(FencedError):
        await log_a.compact("x", 0, lease_epoch=1)
    await log_b.commit(Batch(revisions=[revision(2, "h2")], fence={"x": 2}))
    assert [(r.revision, r.state_hash) for r in await log_b.read_revisions("x", after=0)] == [(1, "h1"), (2, "h2")]
    assert await log_a.delete_execution("x", lease_epoch=None) == 2  # unfenced (leases off): allowed


async def test_a_replica_that_leaves_hands_its_leases_over_at_once(
    logs: tuple[PostgresRevisionLog, PostgresRevisionLog],
) -> None:
    a, b = tables(*logs)
    await a.join("a:1", 600)
    await b.join("b:1", 600)
    assert (await a.acquire("x")).owner == a.owner  # type: ignore[union-attr]
    assert (await b.acquire("x")).owner == a.owner  # type: ignore[union-attr]
    await a.leave()
    taken = await b.acquire("x")
    assert taken is not None and (taken.owner, taken.epoch) == (b.owner, 2)


async def _taken_by(table: LeaseTable, execution_id: str) -> object:
    lease = await table.acquire(execution_id)
    return lease if lease is not None and lease.owner == table.owner else None


async def test_a_take_waiting_on_a_commit_sees_the_holder_renew_meanwhile(
    logs: tuple[PostgresRevisionLog, PostgresRevisionLog],
    postgres_schema: tuple[str, str],  # noqa: F811
) -> None:
    """A's commit holds x's lease while A's heartbeat has expired; B's take waits for the commit; A renews
    meanwhile. The take must judge A by its heartbeat after the wait, not before: A keeps x."""
    a, b = tables(*logs)
    await a.join("a:1", 60)
    await b.join("b:1", 60)
    assert (await a.acquire("x")).epoch == 1  # type: ignore[union-attr]
    dsn, schema = postgres_schema
    commit = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    try:
        in_flight = commit.transaction()
        await in_flight.start()
        await commit.fetch(FENCE, a.owner, ["x"], [1])  # A's commit of x, under way
        await commit_free(
            dsn, schema, "UPDATE replicas SET expires_at = now() - interval '1 second' WHERE owner = $1", a.owner
        )
        take = asyncio.create_task(b.acquire("x"))
        await eventually(lambda: waiting_on_a_lock(dsn), timeout=10)
        assert not await a.heartbeat(60)  # expired: A is alive again, and looks at what it holds
        await in_flight.commit()
        assert await a.held({"x": 1}) == {"x"}
        taken = await take
        assert taken is not None and (taken.owner, taken.epoch) == (a.owner, 1)
    finally:
        await commit.close()


async def commit_free(dsn: str, schema: str, sql: str, *args: object) -> None:
    connection = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    try:
        await connection.execute(sql, *args)
    finally:
        await connection.close()


async def waiting_on_a_lock(dsn: str) -> bool:
    connection = await asyncpg.connect(dsn)
    try:
        return bool(await connection.fetchval("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"))
    finally:
        await connection.close()

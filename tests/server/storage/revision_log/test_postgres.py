from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from skillstate.server.errors import StorageError
from skillstate.server.storage.records import Batch
from skillstate.server.storage.revision_log.base import RevisionLog

from ....postgres import postgres_schema  # noqa: F401 - a fixture
from .contract import RevisionLogContract, execution, revision


class TestPostgresRevisionLog(RevisionLogContract):
    @pytest.fixture
    async def log(self, postgres_schema: tuple[str, str]) -> AsyncIterator[RevisionLog]:  # noqa: F811
        from skillstate.server.storage.revision_log.postgres import PostgresRevisionLog

        backend = PostgresRevisionLog(postgres_schema[0], schema=postgres_schema[1])
        await backend.open()
        yield backend
        await backend.close()


async def test_servers_share_the_log_and_hear_of_each_others_commits(postgres_schema: tuple[str, str]) -> None:  # noqa: F811
    from skillstate.server.storage.revision_log.postgres import PostgresRevisionLog

    dsn, schema = postgres_schema
    first, second = PostgresRevisionLog(dsn, schema=schema), PostgresRevisionLog(dsn, schema=schema)
    await first.open()
    await second.open()
    heard_by_first, heard_by_second = first.changes(), second.changes()
    try:
        assert first.shared
        await listening(heard_by_first, second, "probe-by-second")
        await listening(heard_by_second, first, "probe-by-first")
        await first.create_execution(*execution())
        await first.commit(Batch(revisions=[revision(1), revision(2)]))
        assert (await heard_until(heard_by_second, "e1"))[-1] == "e1"
        # PostgreSQL delivers notifications in commit order: had first been told of its own commit, it would
        # hear of it before this later one of second's
        await second.create_execution(*execution("after-e1"))
        await second.commit(Batch(revisions=[revision(1, "after-e1")]))
        assert "e1" not in await heard_until(heard_by_first, "after-e1"), "a server is not told of its own commits"
        assert [r.revision for r in await second.read_revisions("e1", 0)] == [1, 2]
        await first.close()
        reopened = PostgresRevisionLog(dsn, schema=schema)
        await reopened.open()
        assert await reopened.head_revision("e1") == 2
        await reopened.close()
    finally:
        await heard_by_first.aclose()
        await heard_by_second.aclose()
        await first.close()
        await second.close()


async def listening(changes: AsyncIterator[str], other: RevisionLog, execution_id: str) -> None:
    """Commit to a new execution through `other` until `changes` reports it: the listener is then in place
    (it starts listening when first asked for a change, at an unknown moment after)."""
    await other.create_execution(*execution(execution_id))
    heard = asyncio.ensure_future(anext(changes))
    for n in range(1, 200):
        await other.commit(Batch(revisions=[revision(n, execution_id)]))
        done, _ = await asyncio.wait({heard}, timeout=0.05)
        if done:
            assert heard.result() == execution_id
            return
    heard.cancel()
    raise AssertionError(f"never heard of the commits to {execution_id}")


async def heard_until(changes: AsyncIterator[str], execution_id: str) -> list[str]:
    """What `changes` reports up to and including a commit to execution_id."""
    heard: list[str] = []
    while not heard or heard[-1] != execution_id:
        heard.append(await asyncio.wait_for(anext(changes), 10))
    return heard


async def test_an_unreachable_database_is_a_storage_error_without_its_password() -> None:
    from skillstate.server.storage.revision_log.postgres import PostgresRevisionLog

    with pytest.raises(StorageError, match=r"cannot open postgresql://u:\*\*\*@127\.0\.0\.1:1/db") as caught:
        await PostgresRevisionLog("postgresql://u:secret@127.0.0.1:1/db").open()
    assert "secret" not in str(caught.value)


async def test_a_version_1_schema_is_upgraded_with_the_agents_of_its_revisions(
    postgres_schema: tuple[str, str],  # noqa: F811
) -> None:
    import asyncpg

    from skillstate.server.storage.revision_log.postgres import PostgresRevisionLog

    dsn, schema = postgres_schema
    first = PostgresRevisionLog(dsn, schema=schema)
    await first.open()
    await first.create_execution(*execution())
    await first.commit(Batch(revisions=[revision(1, agent="b"), revision(2, agent="a"), revision(3, agent="b")]))
    await first.close()
    connection = await asyncpg.connect(dsn)
    try:  # as version 1 left it: no table of agents
        await connection.execute(
            f"DROP TABLE {schema}.execution_agents; "
            f"UPDATE {schema}.skillstate_meta SET value = '1' WHERE key = 'schema_version'"
        )
    finally:
        await connection.close()
    upgraded = PostgresRevisionLog(dsn, schema=schema)
    await upgraded.open()
    try:
        (listed,) = await upgraded.list_summaries("", "", 10)
        assert (listed.agents, listed.agent_count, listed.head_revision) == (("a", "b"), 2, 3)
    finally:
        await upgraded.close()


async def test_a_patch_is_found_by_its_key_through_the_index(postgres_schema: tuple[str, str]) -> None:  # noqa: F811
    """As on SQLite: the planner may use a partial index of the keys only if the query implies its condition;
    with the primary key the key would be a filter over every revision of the execution."""
    import asyncpg

    from skillstate.server.storage.revision_log.postgres import FIND_PATCH, PostgresRevisionLog

    dsn, schema = postgres_schema
    backend = PostgresRevisionLog(dsn, schema=schema)
    await backend.open()
    await backend.close()
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(f"SET search_path = {schema}; SET enable_seqscan = off")
        plan = [row[0] for row in await connection.fetch(f"EXPLAIN {FIND_PATCH}", "x", "agent", "key")]
        conditions = [line for line in plan if "Index Cond" in line]
        assert conditions and "client_patch_id = " in conditions[0], plan
    finally:
        await connection.close()

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from skillstate.server.errors import StorageError
from skillstate.server.storage.records import Batch
from skillstate.server.storage.revision_log.base import RevisionLog

from ...postgres import postgres_schema  # noqa: F401 - a fixture
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
    import asyncio

    from skillstate.server.storage.revision_log.postgres import PostgresRevisionLog

    dsn, schema = postgres_schema
    first, second = PostgresRevisionLog(dsn, schema=schema), PostgresRevisionLog(dsn, schema=schema)
    await first.open()
    await second.open()
    try:
        assert first.shared
        heard_by_second, heard_by_first = second.changes(), first.changes()
        listening = asyncio.ensure_future(anext(heard_by_second))
        own = asyncio.ensure_future(anext(heard_by_first))
        await asyncio.sleep(0.3)  # both are listening
        await first.create_execution(*execution())
        await first.commit(Batch(revisions=[revision(1), revision(2)]))
        assert await asyncio.wait_for(listening, 5) == "e1"
        await asyncio.sleep(0.3)
        assert not own.done(), "a server is not told of its own commits"
        own.cancel()
        assert [r.revision for r in await second.read_revisions("e1", 0)] == [1, 2]
        await first.close()
        reopened = PostgresRevisionLog(dsn, schema=schema)
        await reopened.open()
        assert await reopened.head_revision("e1") == 2
        await reopened.close()
    finally:
        await first.close()
        await second.close()


async def test_an_unreachable_database_is_a_storage_error_without_its_password() -> None:
    from skillstate.server.storage.revision_log.postgres import PostgresRevisionLog

    with pytest.raises(StorageError, match=r"cannot open postgresql://u:\*\*\*@127\.0\.0\.1:1/db") as caught:
        await PostgresRevisionLog("postgresql://u:secret@127.0.0.1:1/db").open()
    assert "secret" not in str(caught.value)

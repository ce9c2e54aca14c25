from __future__ import annotations

import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from skillstate.server.errors import StorageError
from skillstate.server.storage.records import Batch
from skillstate.server.storage.revision_log.base import RevisionLog
from skillstate.server.storage.revision_log.sqlite import SqliteRevisionLog

from .contract import RevisionLogContract, execution, revision


class TestSqliteRevisionLog(RevisionLogContract):
    @pytest.fixture
    async def log(self, tmp_path: Path) -> AsyncIterator[RevisionLog]:
        backend = SqliteRevisionLog(tmp_path / "log.db")
        await backend.open()
        yield backend
        await backend.close()


class TestSqliteRevisionLogCommittingInItsThread(RevisionLogContract):
    """The same contract with every group commit in the writer's thread (as after a slow one on the loop)."""

    @pytest.fixture
    async def log(self, tmp_path: Path) -> AsyncIterator[RevisionLog]:
        backend = SqliteRevisionLog(tmp_path / "log.db", inline_budget=0)
        await backend.open()
        yield backend
        await backend.close()


async def test_reopening_the_file_keeps_everything(tmp_path: Path) -> None:
    first = SqliteRevisionLog(tmp_path / "log.db")
    await first.open()
    await first.create_execution(*execution())
    await first.commit(Batch(revisions=[revision(1), revision(2)]))
    await first.close()
    second = SqliteRevisionLog(tmp_path / "log.db")
    await second.open()
    assert [r.revision for r in await second.read_revisions("e1", 0)] == [1, 2]
    await second.close()


async def test_one_log_is_opened_by_one_server_at_a_time(tmp_path: Path) -> None:
    first = SqliteRevisionLog(tmp_path / "log.db")
    await first.open()
    with pytest.raises(StorageError, match="in use by another skillstate server"):
        await SqliteRevisionLog(tmp_path / "log.db").open()
    await first.close()
    second = SqliteRevisionLog(tmp_path / "log.db")
    await second.open()  # released by close
    await second.close()


async def test_a_file_that_is_not_a_database_is_a_storage_error(tmp_path: Path) -> None:
    path = tmp_path / "log.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StorageError, match="cannot open"):
        await SqliteRevisionLog(path).open()
    # regression: a failed open left an aiosqlite worker thread waiting forever, so pytest hung at exit
    workers = [t for t in threading.enumerate() if any(n in t.name for n in ("connection_worker", "sqlite-writer"))]
    for worker in workers:
        worker.join(timeout=5)  # a closed connection's thread ends just after close() returns
    assert not [t for t in workers if t.is_alive()]


async def test_a_version_1_file_is_upgraded_with_the_agents_of_its_revisions(tmp_path: Path) -> None:
    first = SqliteRevisionLog(tmp_path / "log.db")
    await first.open()
    await first.create_execution(*execution())
    await first.commit(Batch(revisions=[revision(1, agent="b"), revision(2, agent="a"), revision(3, agent="b")]))
    await first.close()
    with sqlite3.connect(tmp_path / "log.db") as connection:  # as version 1 left it: no table of agents
        connection.executescript(
            "DROP TRIGGER revisions_name_their_agents; DROP TABLE execution_agents; PRAGMA user_version = 1;"
        )
    upgraded = SqliteRevisionLog(tmp_path / "log.db")
    await upgraded.open()
    try:
        (listed,) = await upgraded.list_summaries("", "", 10)
        assert (listed.agents, listed.agent_count, listed.head_revision) == (("a", "b"), 2, 3)
        await upgraded.commit(Batch(revisions=[revision(4, agent="c")]))  # and the trigger is back
        assert (await upgraded.list_summaries("", "", 10))[0].agents == ("a", "b", "c")
    finally:
        await upgraded.close()
    with sqlite3.connect(tmp_path / "log.db") as connection:
        assert connection.execute("PRAGMA user_version").fetchone() == (2,)


async def test_a_patch_is_found_by_its_key_through_the_index(tmp_path: Path) -> None:
    """Without `client_patch_id != ''` in the query, SQLite could not use the partial index of the keys and
    read every revision of the execution for each lookup: 85 commits/s after 100,000 revisions through the
    SDK (bench/merge_scaling.py), which looks a key up once memory holds 100,000 of them."""
    from skillstate.server.storage.revision_log.sqlite import FIND_PATCH

    backend = SqliteRevisionLog(tmp_path / "log.db")
    await backend.open()
    await backend.close()
    with sqlite3.connect(tmp_path / "log.db") as db:
        plan = db.execute(f"EXPLAIN QUERY PLAN {FIND_PATCH}", ("x", "agent", "key")).fetchall()
    assert [row[3] for row in plan] == [
        "SEARCH revisions USING INDEX revisions_by_patch_id (execution_id=? AND agent_id=? AND client_patch_id=?)"
    ]

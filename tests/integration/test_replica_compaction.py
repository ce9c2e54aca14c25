"""A replica far behind a log that another replica compacted starts over from the newest snapshot, instead
of taking the missing revisions for data loss; its watchers are cut and resume through the snapshot. (Leases
off: with them the replica behind would forward to the owner instead of serving.)"""

from __future__ import annotations

import asyncio

from skillstate.server.engine.config import EngineConfig
from skillstate.server.engine.results import WatchSnapshot
from skillstate.server.engine.state_engine import StateEngine
from skillstate.server.errors import WatcherTooSlowError

from ..postgres import postgres_schema  # noqa: F401 - a fixture
from ..waiting import eventually


async def test_a_replica_behind_a_compaction_restarts_from_the_snapshot(postgres_schema: tuple[str, str]) -> None:  # noqa: F811
    from skillstate.server.storage.revision_log.postgres import PostgresRevisionLog

    dsn, schema = postgres_schema
    compacting = StateEngine(
        PostgresRevisionLog(dsn, schema=schema), EngineConfig(snapshot_every=5, retain_revisions=2, lease_seconds=None)
    )
    behind = StateEngine(PostgresRevisionLog(dsn, schema=schema), EngineConfig(lease_seconds=None))
    await compacting.start()
    await behind.start()
    try:
        await compacting.create_execution("x", "", "")
        await compacting.submit_patch("x", "a", 0, '{"n": 1}')
        assert (await behind.get_state("x")).revision == 1  # loaded at revision 1
        watching = behind.watch("x", 0)
        assert (await anext(watching)).revision == 1  # the watcher is subscribed once it has had the history
        first = asyncio.ensure_future(anext(watching))  # waits for revision 2
        await behind._replicas.close()  # stop following: only a read catches up now
        for n in range(2, 23):
            await compacting.submit_patch("x", "a", n - 1, f'{{"n": {n}}}')

        async def compacted() -> bool:  # after each snapshot (5, 10, 15, 20), up to 2 revisions before it
            return (await compacting.history("x", 0, 0, 1)).compact_revision == 15

        await eventually(compacted)
        expected = await compacting.get_state("x")
        got = await behind.get_state("x")
        assert (got.revision, got.state_json, got.state_hash) == (22, expected.state_json, expected.state_hash)
        try:
            await asyncio.wait_for(first, 5)
            raise AssertionError("the watcher should have been cut")
        except WatcherTooSlowError as e:
            assert "restarted from a snapshot" in str(e) and "resume with from_revision=1" in str(e)
        resumed = [item async for item in _take(behind.watch("x", 1), 3)]
        assert isinstance(resumed[0], WatchSnapshot) and resumed[0].revision >= 15
        assert [r.revision for r in resumed[1:]] == [resumed[0].revision + 1, resumed[0].revision + 2]
    finally:
        await behind.close()
        await compacting.close()


async def _take(stream, count):  # type: ignore[no-untyped-def]
    async for item in stream:
        yield item
        count -= 1
        if count == 0:
            return

"""Deleting an execution in the engine: a stream that subscribes after the delete ended the others is
refused instead of waiting forever; a delete that fails lets writes in again, one whose caller goes away
still finishes; an execution never loaded is deleted without being recovered first."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from skillstate.server.engine.config import EngineConfig
from skillstate.server.engine.state_engine import StateEngine
from skillstate.server.errors import CorruptLogError, NotFoundError, StorageError
from skillstate.server.storage.records import RevisionRecord, SnapshotRecord
from skillstate.server.storage.revision_log.memory import MemoryRevisionLog

from ...postgres import postgres_schema  # noqa: F401 - a fixture
from ...waiting import eventually


class HeldReads(MemoryRevisionLog):
    """A shared log (as PostgreSQL is) whose reads of revisions, while `held` is clear, are answered late:
    what the log held when they were asked, as a query whose snapshot was taken before a delete."""

    shared = True

    def __init__(self) -> None:
        super().__init__()
        self.held = asyncio.Event()
        self.held.set()
        self.waiting = asyncio.Event()

    async def read_revisions(self, *args: object, **kwargs: object) -> list[RevisionRecord]:
        read = await super().read_revisions(*args, **kwargs)  # type: ignore[arg-type]
        if not self.held.is_set():
            self.waiting.set()
            await self.held.wait()
        return read


async def test_a_watch_that_subscribes_after_the_delete_is_refused_not_left_waiting() -> None:
    log = HeldReads()
    engine = StateEngine(log)
    await engine.start()
    try:
        await engine.create_execution("x", "", "")
        log.held.clear()  # the watch gets the execution, then waits in its catch-up with the log
        watching = asyncio.ensure_future(anext(engine.watch("x", 0)))
        await log.waiting.wait()
        await engine.delete_execution("x")  # ends the streams subscribed so far: none yet
        log.held.set()  # the catch-up is answered as of before the delete: the watch subscribes now
        with pytest.raises(NotFoundError, match="deleted"):
            await asyncio.wait_for(watching, 10)
    finally:
        await engine.close()


class FailingDelete(MemoryRevisionLog):
    async def delete_execution(self, execution_id: str, lease_epoch: int | None = None) -> int:
        raise StorageError("the database went away")


async def test_a_delete_that_fails_lets_writes_in_again() -> None:
    engine = StateEngine(FailingDelete())
    await engine.start()
    try:
        await engine.create_execution("x", "", "")
        with pytest.raises(StorageError):
            await engine.delete_execution("x")
        assert (await engine.submit_patch("x", "a", 0, '{"n": 1}')).revision == 1
    finally:
        await engine.close()


async def test_a_delete_whose_caller_goes_away_still_finishes() -> None:
    engine = StateEngine(MemoryRevisionLog())
    await engine.start()
    try:
        await engine.create_execution("x", "", "")
        await engine.submit_patch("x", "a", 0, '{"n": 1}')
        deleting = asyncio.ensure_future(engine.delete_execution("x"))
        await asyncio.sleep(0)  # started: it waits for the group commit's drain
        deleting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await deleting

        async def gone() -> bool:
            try:
                await engine.get_state("x")
            except NotFoundError:
                return True
            return False

        await eventually(gone)
        await engine.create_execution("x", "", "")  # and nothing is left half deleted
        assert (await engine.get_state("x")).revision == 0
    finally:
        await engine.close()


class CorruptSnapshots(MemoryRevisionLog):
    async def latest_snapshot(self, execution_id: str, at_most: int | None = None) -> SnapshotRecord | None:
        raise CorruptLogError(f"execution {execution_id!r}: its snapshots cannot be read")


async def test_an_execution_never_loaded_is_deleted_without_being_recovered() -> None:
    log = CorruptSnapshots()
    first = StateEngine(log)
    await first.start()
    await first.create_execution("broken", json.dumps({}), "{}")
    await first.close()
    engine = StateEngine(log)  # after a restart: it is listed, not loaded, and could not be recovered
    await engine.start()
    try:
        with pytest.raises(CorruptLogError):
            await engine.get_state("broken")
        assert await engine.delete_execution("broken") == 0
        with pytest.raises(NotFoundError):
            await engine.get_state("broken")
    finally:
        await engine.close()


async def test_a_write_on_a_replica_that_has_not_heard_of_the_delete_is_not_found(
    postgres_schema: tuple[str, str],  # noqa: F811
) -> None:
    """Another server deletes the execution; this one, which holds it and has not heard yet, takes a write:
    its commit finds no execution to refer to, loses the race, and its writer learns NOT_FOUND (not an
    INTERNAL error, and the server's storage stays healthy)."""
    from skillstate.server.storage.revision_log.postgres import PostgresRevisionLog

    class Deaf(PostgresRevisionLog):
        """Never hears of other servers' commits and deletes (its listening connection dropped)."""

        async def changes(self) -> AsyncIterator[str]:
            await asyncio.Event().wait()
            yield ""

    dsn, schema = postgres_schema
    racing = EngineConfig(lease_seconds=None)  # both serve it (with leases, the deleter would forward)
    holder = StateEngine(Deaf(dsn, schema=schema), racing)
    deleter = StateEngine(PostgresRevisionLog(dsn, schema=schema), racing)
    await holder.start()
    await deleter.start()
    try:
        await holder.create_execution("x", "", "")
        await holder.submit_patch("x", "a", 0, '{"n": 1}')
        health: list[bool] = []
        holder.on_storage_health(health.append)
        await deleter.delete_execution("x")
        with pytest.raises(NotFoundError):
            await holder.submit_patch("x", "a", 1, '{"n": 2}')  # on its copy, at its head: no catch-up first
        assert health == []
    finally:
        await holder.close()
        await deleter.close()
